"""The PyTorch path of the ensemble, run on the CPU ("torch-cpu"): the same code a GPU runs."""

from __future__ import annotations

import copy

import numpy as np
import pytest

pytest.importorskip("torch")

from test_ensemble import anisotropic  # noqa: E402

from aflite.core.ensemble import FastLogisticEnsemble  # noqa: E402
from aflite.core.filter import AFLite  # noqa: E402
from aflite.device import resolve_device  # noqa: E402
from aflite.errors import ParameterError  # noqa: E402
from aflite.splits import draw_partitions  # noqa: E402


@pytest.mark.parametrize(("n_classes", "storage", "agree"), [(3, "float32", 0.999), (3, "bfloat16", 0.98),
                                                               (20, "float32", 0.995)])
def test_torch_path_agrees_with_the_numpy_path(n_classes, storage, agree):
    X, y = anisotropic(1500, 12, n_classes, seed=5)
    mask = draw_partitions(len(y), 4, 300, np.random.default_rng(5))
    rows = np.arange(len(y))
    cpu = FastLogisticEnsemble()
    cpu.prepare(X, y, n_classes)
    pc = cpu.fit_predict(rows, mask)
    gpu_like = FastLogisticEnsemble(device="torch-cpu", storage=storage)
    gpu_like.prepare(X, y, n_classes)
    pt = gpu_like.fit_predict(rows, mask)
    held = ~mask
    assert pt.dtype == pc.dtype
    assert (pt[held] == pc[held]).mean() >= agree
    # S shrinks: the device copy is compacted like the CPU one
    sub = rows[::2]
    ps = gpu_like.fit_predict(sub, mask[sub])
    assert ps.shape == (len(sub), 4)


def test_filter_on_the_torch_path_removes_nearly_the_same_set():
    X, y = anisotropic(1500, 8, 3, seed=6)
    kw = dict(n_partitions=8, train_size=0.3, slice_size=0.05, target_size=0.5, random_state=1)
    a = AFLite(**kw, device="cpu").fit(X, y)
    b = AFLite(**kw, device="torch-cpu").fit(X, y)
    removed_a, removed_b = ~a.keep_mask_, ~b.keep_mask_
    jaccard = (removed_a & removed_b).sum() / max(1, (removed_a | removed_b).sum())
    assert jaccard > 0.9


def test_device_names_are_checked():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") in ("cpu", "cuda")
    with pytest.raises(ParameterError, match="unknown device"):
        resolve_device("tpu")
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(ParameterError, match="sees no CUDA GPU"):
            resolve_device("cuda")
    with pytest.raises(ParameterError, match="storage"):
        FastLogisticEnsemble(device="torch-cpu", storage="int8").prepare(*anisotropic(50, 3, 2)[:2], 2)


# ---------------------------------------------------------------- the resident modes (issue #31), on torch-cpu
def _fit_twice(X, y, K, mask, **kw):
    """Two phases (all rows, then every other row: S shrinks), predictions and solutions after each."""
    ens = FastLogisticEnsemble(device="torch-cpu", **kw)
    ens.prepare(X, y, K)
    rows = np.arange(len(y))
    p1 = ens.fit_predict(rows, mask)
    c1 = ens._coefs.copy()
    p2 = ens.fit_predict(rows[::2], mask[::2])
    return p1, c1, p2, ens._coefs.copy(), ens.last_stats.iterations


@pytest.mark.parametrize("n_classes", [3, 20])  # passes over all of S; each model's own rows (wide softmax)
def test_resident_mode_is_the_classic_path_bit_for_bit(n_classes):
    X, y = anisotropic(1500, 12, n_classes, seed=5)
    mask = draw_partitions(len(y), 4, 300, np.random.default_rng(5))
    classic = _fit_twice(X, y, n_classes, mask)
    resident = _fit_twice(X, y, n_classes, mask, device_resident=True)
    for a, b in zip(classic, resident, strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("n_classes", [3, 20])
def test_lbfgs_on_the_device_agrees_within_the_optimiser_tolerance(n_classes):
    X, y = anisotropic(1500, 12, n_classes, seed=5)
    mask = draw_partitions(len(y), 4, 300, np.random.default_rng(5))
    classic = _fit_twice(X, y, n_classes, mask)
    device = _fit_twice(X, y, n_classes, mask, device_lbfgs=True)
    held = ~mask
    assert (classic[0][held] == device[0][held]).mean() >= 0.999
    assert (classic[2][held[::2]] == device[2][held[::2]]).mean() >= 0.999
    for a, b in ((classic[1], device[1]), (classic[3], device[3])):  # same algorithm: the same optimum
        assert np.abs(a - b).max() <= 1e-6 * max(1.0, np.abs(a).max())


@pytest.mark.parametrize("kw", [dict(device_resident=True), dict(device_lbfgs=True)])
def test_fit_score_counts_what_the_predictions_say(kw):
    X, y = anisotropic(1200, 10, 3, seed=7)
    mask = draw_partitions(len(y), 6, 250, np.random.default_rng(7))
    rows = np.arange(len(y))[::3]
    ens = FastLogisticEnsemble(device="torch-cpu", block_size=4, **kw)  # two blocks: counts added up
    ens.prepare(X, y, 3)
    counts = ens.fit_score(rows, mask[rows])
    assert counts is not None
    again = FastLogisticEnsemble(device="torch-cpu", block_size=4, **kw)
    again.prepare(X, y, 3)
    preds = again.fit_predict(rows, mask[rows])
    held = ~mask[rows]
    assert np.array_equal(counts[0], ((preds == y[rows][:, None]) & held).sum(1))
    assert np.array_equal(counts[1], held.sum(1))
    assert counts[0].dtype == counts[1].dtype == np.int32
    cpu = FastLogisticEnsemble()  # the numpy path has no device counts: None, and the phase counts its predictions
    cpu.prepare(X, y, 3)
    assert cpu.fit_score(rows, mask[rows]) is None


@pytest.mark.parametrize("kw", [dict(device_resident=True), dict(device_lbfgs=True)])
def test_filter_in_the_resident_modes_keeps_the_classic_set(kw):
    X, y = anisotropic(1500, 8, 3, seed=6)
    params = dict(n_partitions=8, train_size=0.3, slice_size=0.05, target_size=0.5, random_state=1)
    a = AFLite(**params, device="torch-cpu").fit(X, y)
    b = AFLite(**params, model=FastLogisticEnsemble(device="torch-cpu", **kw)).fit(X, y)
    if "device_resident" in kw:  # the same arithmetic: the same run
        assert np.array_equal(a.keep_mask_, b.keep_mask_)
        assert np.array_equal(a.predictability_, b.predictability_, equal_nan=True)
    else:
        removed_a, removed_b = ~a.keep_mask_, ~b.keep_mask_
        assert (removed_a & removed_b).sum() / (removed_a | removed_b).sum() >= 0.98
    assert np.array_equal(a.removed_at_ >= 0, ~a.keep_mask_)
    assert b.confidence_ is not None  # the first phase's data map still comes from the models


def test_larger_pass_chunks_agree_within_rounding():
    X, y = anisotropic(4000, 200, 3, seed=8)
    mask = draw_partitions(len(y), 4, 800, np.random.default_rng(8))
    rows = np.arange(len(y))
    out = []
    for mb in (None, 1):  # one chunk of 4,000 rows, or chunks of 1,310
        ens = FastLogisticEnsemble(device="torch-cpu", device_resident=True, device_pass_mb=mb)
        ens.prepare(X, y, 3)
        out.append((ens.fit_predict(rows, mask), ens._coefs))
    held = ~mask
    assert (out[0][0][held] == out[1][0][held]).mean() >= 0.999
    assert np.abs(out[0][1] - out[1][1]).max() <= 1e-4 * np.abs(out[0][1]).max()


@pytest.mark.parametrize("bad", [dict(device_pass_mb=0), dict(device_resident="yes"), dict(device_lbfgs=1),
                                 dict(device_onepass="no")])
def test_device_options_are_checked(bad):
    X, y = anisotropic(50, 3, 2)[:2]
    with pytest.raises(ParameterError, match=next(iter(bad))):
        FastLogisticEnsemble(device="torch-cpu", **bad).prepare(X, y, 2)


# ------------------------------------------------------------------------- on a GPU (skipped without CUDA)
@pytest.mark.gpu
@pytest.mark.parametrize("kw", [{}, dict(device_resident=True), dict(device_lbfgs=True),
                                dict(device_resident=True, device_pass_mb=1024)])
@pytest.mark.parametrize("n_classes", [3, 20])
def test_gpu_modes_agree_with_torch_cpu(kw, n_classes):
    X, y = anisotropic(3000, 24, n_classes, seed=9)
    mask = draw_partitions(len(y), 8, 600, np.random.default_rng(9))
    rows = np.arange(len(y))
    ref = FastLogisticEnsemble(device="torch-cpu")
    ref.prepare(X, y, n_classes)
    pr = ref.fit_predict(rows, mask)
    gpu = FastLogisticEnsemble(device="cuda", **kw)
    gpu.prepare(X, y, n_classes)
    pg = gpu.fit_predict(rows, mask)
    held = ~mask
    assert pg.dtype == pr.dtype
    assert (pg[held] == pr[held]).mean() >= 0.999
    if kw:
        again = FastLogisticEnsemble(device="cuda", **kw)
        again.prepare(X, y, n_classes)
        correct, n_held = again.fit_score(rows, mask)
        assert np.array_equal(n_held, held.sum(1))
        assert np.array_equal(correct, ((pg == y[:, None]) & held).sum(1))  # one device: the same kernels


@pytest.mark.gpu
def test_gpu_filter_in_the_resident_mode_keeps_the_classic_set():
    X, y = anisotropic(3000, 16, 3, seed=10)
    params = dict(n_partitions=8, train_size=0.3, slice_size=0.05, target_size=0.5, random_state=2)
    a = AFLite(**params, device="cuda").fit(X, y)
    b = AFLite(**params, model=FastLogisticEnsemble(device="cuda", device_resident=True)).fit(X, y)
    assert np.array_equal(a.keep_mask_, b.keep_mask_)  # the same kernels in the same order on one device


def test_next_partitions_drawn_ahead_are_the_ones_drawn_in_line(monkeypatch):
    """A resident device ensemble lets the filter draw phase j+1's partitions while phase j fits: every phase after
    the first takes them, and the run is the classic run (resumed half-way too)."""
    from aflite.core import filter as F

    made = []
    real = F._NextPartitions

    class Spy(real):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(F, "_NextPartitions", Spy)
    X, y = anisotropic(600, 6, 3, seed=11)
    params = dict(n_partitions=4, train_size=0.3, slice_size=0.05, target_size=0.7, random_state=3)
    ref = AFLite(**params, device="torch-cpu").fit(X, y)
    assert not made  # the classic path: the host is busy with the phase itself
    b = AFLite(**params, model=FastLogisticEnsemble(device="torch-cpu", device_resident=True)).fit(X, y)
    assert len(made) == 1 and made[0].used == b.n_iterations_ - 1 >= 3
    same = ("iteration", "size_before", "n_removed", "n_eligible", "p_mean", "model_iterations")  # all but seconds
    assert np.array_equal(ref.keep_mask_, b.keep_mask_)
    assert [[getattr(r, k) for k in same] for r in ref.history_] == [[getattr(r, k) for k in same] for r in b.history_]
    states = []
    AFLite(**params, max_iterations=2, model=FastLogisticEnsemble(device="torch-cpu", device_resident=True)).fit(
        X, y, callback=lambda rec, st: states.append(copy.deepcopy(st)))  # as a checkpoint would save it
    resumed = AFLite(**params, model=FastLogisticEnsemble(device="torch-cpu", device_resident=True)).fit(
        X, y, resume=states[-1])
    assert np.array_equal(resumed.keep_mask_, ref.keep_mask_)


# ---------------------------------------------------------------- the one-pass ensemble (issue #43), on torch-cpu
@pytest.mark.parametrize("n_classes", [3, 20])
def test_onepass_ensemble_follows_the_device_lbfgs(n_classes):
    """Per model the same trial points as the lockstep device L-BFGS: the same optimum, the same predictions."""
    X, y = anisotropic(1500, 12, n_classes, seed=5)
    mask = draw_partitions(len(y), 4, 300, np.random.default_rng(5))
    lockstep = _fit_twice(X, y, n_classes, mask, device_lbfgs=True)
    onepass = _fit_twice(X, y, n_classes, mask, device_onepass=True)
    held = ~mask
    assert (lockstep[0][held] == onepass[0][held]).mean() >= 0.999
    assert (lockstep[2][held[::2]] == onepass[2][held[::2]]).mean() >= 0.999
    for a, b in ((lockstep[1], onepass[1]), (lockstep[3], onepass[3])):
        assert np.abs(a - b).max() <= 1e-6 * max(1.0, np.abs(a).max())
    assert lockstep[4] == onepass[4]  # the same steps per model


def test_onepass_filter_keeps_the_cpu_set_and_repeats_itself():
    X, y = anisotropic(1500, 8, 3, seed=6)
    params = dict(n_partitions=8, train_size=0.3, slice_size=0.05, target_size=0.5, random_state=1)
    cpu = AFLite(**params, device="cpu").fit(X, y)
    runs = [AFLite(**params, model=FastLogisticEnsemble(device="torch-cpu", device_onepass=True)).fit(X, y)
            for _ in range(2)]
    assert np.array_equal(runs[0].keep_mask_, runs[1].keep_mask_)  # one seed, one result
    removed_a, removed_b = ~cpu.keep_mask_, ~runs[0].keep_mask_
    assert (removed_a & removed_b).sum() / (removed_a | removed_b).sum() >= 0.98
    counts = FastLogisticEnsemble(device="torch-cpu", device_onepass=True)
    counts.prepare(X, y, 3)
    assert counts.fit_score(np.arange(len(y)), draw_partitions(len(y), 4, 300, np.random.default_rng(2))) is not None
