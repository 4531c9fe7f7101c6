"""The shared solver: the fast solver's chunked own-row passes against the passes over all of S."""

from __future__ import annotations

import numpy as np
import pytest
from test_ensemble import anisotropic

from aflite.core import kernels
from aflite.core import solver as solver_module
from aflite.core.blocks import BlockTask, use_chunked_rows
from aflite.core.ensemble import FastLogisticEnsemble
from aflite.core.lbfgs import LbfgsState
from aflite.core.solver import _ChunkedOwnOps, _NumpyBlockOps, own_chunk_rows
from aflite.core.store import FeatureStore, fit_whitening
from aflite.errors import ParameterError
from aflite.splits import draw_partitions


def _task(mask, y, theta, reg, chunked):
    return BlockTask(np.arange(len(y)), y, mask, theta, reg, int(theta.shape[2]), False, 1e-4, 100, 5, chunked)


KERNELS = ["numba", "numpy"] if kernels.available() else ["numpy"]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("copy", [True, False])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_chunked_own_row_passes_compute_the_same_objective(copy, n_classes, kernel, monkeypatch):
    """Loss and gradient from each model's own rows, chunk by chunk, equal the weighted pass over all rows
    (whitened copy and streamed/folded store alike; compiled kernel and numpy alike); predictions equal the
    argmax of all K logits."""
    monkeypatch.setenv("AFLITE_KERNEL", kernel)
    X, y = anisotropic(7000, 9, n_classes, seed=11)
    wh = fit_whitening(X)
    store = FeatureStore(X, wh, copy=copy)
    mask = draw_partitions(len(y), 3, 900, np.random.default_rng(1))
    rng = np.random.default_rng(2)
    theta = 0.3 * rng.standard_normal((3, wh.dim + 1, n_classes))
    reg = np.abs(rng.standard_normal((3, wh.dim + 1))) * 1e-3
    full = _NumpyBlockOps(store, _task(mask, y, theta, reg, False))
    own = _ChunkedOwnOps(store, _task(mask, y, theta, reg, True))
    assert own.compiled == (kernel == "numba")
    own.step = 1000  # several chunks, some rows of each model in each
    own.starts = np.arange(0, len(y), own.step)
    own.cuts = np.stack([np.searchsorted(p, np.append(own.starts, len(y))) for p in own.pos])
    sel = np.array([0, 2])
    f_full, g_full = full.loss_grad(theta[sel], sel)
    f_own, g_own = own.loss_grad(theta[sel], sel)
    np.testing.assert_allclose(f_own, f_full, rtol=1e-5)
    np.testing.assert_allclose(g_own, g_full, rtol=1e-4, atol=1e-6)
    full.loss_grad(theta, np.arange(3))  # records the argmax of every row
    assert (own.predictions(theta) == full.predictions(theta)).mean() > 0.999


def test_fast_and_previous_solvers_find_the_same_models():
    X, y = anisotropic(6000, 20, 3, seed=12)
    rows = np.arange(len(y))
    assert use_chunked_rows(len(y), 1200)
    preds = {}
    for solver in ("fast", "previous"):
        ens = FastLogisticEnsemble(solver=solver)
        ens.prepare(X, y, 3)
        for phase in range(2):  # the second phase starts from the first one's curvature pairs (fast solver)
            mask = draw_partitions(len(y), 6, 1200, np.random.default_rng(phase))
            preds[solver, phase] = ens.fit_predict(rows, mask)
            assert ens.last_stats.converged == 6
        assert ("pairs_s" in ens.get_state()) == (solver == "fast")
    for phase in range(2):
        mask = draw_partitions(len(y), 6, 1200, np.random.default_rng(phase))
        held = ~mask
        assert (preds["fast", phase][held] == preds["previous", phase][held]).mean() > 0.995


@pytest.mark.skipif(not kernels.available(), reason="numba not installed")
def test_compiled_passes_give_the_same_bits_for_any_threads_and_blocks(monkeypatch: pytest.MonkeyPatch):
    """With the compiled kernel a model's result depends only on its own rows: the threads that share a
    pass's chunks and the block a model sits in change no bits (chunk sums are added in chunk order)."""
    X, y = anisotropic(12000, 400, 3, seed=14)
    rows = np.arange(len(y))
    monkeypatch.setattr(solver_module, "COMPILED_CHUNK_MB", 1)  # small chunks: many per pass on small data
    assert len(y) > 8 * own_chunk_rows(400, compiled=True)  # several chunks per pass, shared by the threads
    mask = draw_partitions(len(y), 6, 2000, np.random.default_rng(3))
    out = []
    for n_jobs, block_size in [(1, None), (2, None), (3, None), (1, 2), (2, 4)]:
        ens = FastLogisticEnsemble(n_jobs=n_jobs, block_size=block_size)
        ens.prepare(X, y, 3)
        out.append((ens.fit_predict(rows, mask), ens._coefs))
    for preds, coefs in out[1:]:
        assert np.array_equal(preds, out[0][0])
        assert np.array_equal(coefs, out[0][1])


def test_resumed_fast_solver_continues_exactly():
    """The carried curvature pairs are part of the ensemble's state: a resumed run gives the same bits."""
    X, y = anisotropic(4000, 12, 3, seed=13)
    rows = np.arange(len(y))
    masks = [draw_partitions(len(y), 4, 800, np.random.default_rng(s)) for s in range(2)]
    a = FastLogisticEnsemble()
    a.prepare(X, y, 3)
    a.fit_predict(rows, masks[0])
    state = a.get_state()
    second = a.fit_predict(rows, masks[1])
    b = FastLogisticEnsemble()
    b.prepare(X, y, 3)
    b.set_state(state)
    assert np.array_equal(b.fit_predict(rows, masks[1]), second)
    c = FastLogisticEnsemble()  # without the pairs: a different path to (nearly) the same models
    c.prepare(X, y, 3)
    c.set_state({k: v for k, v in state.items() if not k.startswith("pairs")})
    assert (c.fit_predict(rows, masks[1])[~masks[1]] == second[~masks[1]]).mean() > 0.99


def test_seeded_pairs_are_shared_by_every_model():
    st = LbfgsState(m=3, P=4, memory=2)
    S = np.eye(4)[:3]
    Y = 2.0 * S
    st.seed(S, Y)  # three pairs, memory two: the newest two are kept
    assert st.count.tolist() == [2, 2, 2]
    s_new, y_new = st.newest_pairs(1)
    np.testing.assert_array_equal(s_new, S[1:])
    np.testing.assert_array_equal(y_new, Y[1:])
    d = st.direction(np.arange(3), np.ones((3, 4)), np.ones((3, 4)))
    np.testing.assert_allclose(d[:, 1:3], 0.5)  # curvature 2 along the seeded directions


def test_parameters_are_checked_when_fitting_starts():
    X, y = anisotropic(100, 3, 2)
    ens = FastLogisticEnsemble(C=0, solver="nope")  # stored as given
    assert ens.C == 0 and ens.solver == "nope"
    with pytest.raises(ParameterError, match="C must be"):
        ens.prepare(X, y, 2)
    with pytest.raises(ParameterError, match="solver must be one of"):
        FastLogisticEnsemble(solver="nope").prepare(X, y, 2)
    with pytest.raises(ParameterError, match="block_size"):
        FastLogisticEnsemble(block_size=0).prepare(X, y, 2)
    with pytest.raises(ParameterError, match="max_iter"):
        FastLogisticEnsemble(max_iter=2.5).prepare(X, y, 2)


def test_backends_import_the_solver_not_each_other():
    """No import cycle: the solver imports neither backend, and the PyTorch backend not the numpy one."""
    import ast
    from pathlib import Path

    import aflite

    root = Path(aflite.__file__).parent

    def imported(name: str) -> set[str]:
        tree = ast.parse((root / f"{name}.py").read_text())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | {
            a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}

    assert not imported("core/solver") & {"aflite.core.ensemble", "aflite.core.backends.torch"}
    assert "aflite.core.ensemble" not in imported("core/backends/torch")
    assert "aflite.core.solver" in imported("core/backends/torch") and "aflite.core.solver" in imported("core/ensemble")


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dead_column", [False, True])
def test_whitening_in_place_gives_the_bits_of_a_copy(kernel, dead_column, monkeypatch):
    """``copy_X=False`` whitens X in its own memory (repacking rows when a zero-variance direction is dropped)
    and the filter's phases, S shrinking between them (in-place compaction, compiled or numpy), give the same
    bits as with a whitened copy; X is given up."""
    monkeypatch.setenv("AFLITE_KERNEL", kernel)
    X, y = anisotropic(9000, 24, 3, seed=21)
    if dead_column:
        X[:, 5] = 1.0  # no variance: the whitening drops it, so d' < d
    X = np.ascontiguousarray(X, dtype=np.float32)
    rows = [np.arange(len(y)), np.arange(0, len(y), 2)[5:], np.arange(0, len(y), 6)[5:]]
    out = []
    for copy_X in (True, False):
        Xc = X.copy()
        ens = FastLogisticEnsemble(copy_X=copy_X)
        ens.prepare(Xc, y, 3)
        assert ens._store.whitening.dim == (23 if dead_column else 24)
        assert np.shares_memory(ens._store._data, Xc) == (not copy_X)
        preds = []
        for phase, r in enumerate(rows):
            mask = draw_partitions(len(r), 5, len(r) // 5, np.random.default_rng(phase))
            preds.append(ens.fit_predict(r, mask))
        out.append((preds, ens._coefs))
    for a, b in zip(out[0][0], out[1][0], strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(out[0][1], out[1][1])


def test_compiled_three_class_kernel_matches_the_generic_loop():
    """The three-class loop (classes inside the feature loop) sums the same terms as the generic one."""
    if not kernels.available():
        pytest.skip("numba not installed")
    import numba

    generic = numba.njit(fastmath=True)(kernels._own_rows_pass)
    rng = np.random.default_rng(5)
    R, d, nm = 700, 37, 4
    A = rng.standard_normal((R, d)).astype(np.float32)
    pos, lo, hi = [], [], []
    for _ in range(nm):  # each model's sorted rows, some groups not a multiple of four
        lo.append(len(pos))
        pos.extend(np.flatnonzero(rng.random(R) < 0.3))
        hi.append(len(pos))
    args = [np.array(pos, np.int64), np.array(lo, np.int64), np.array(hi, np.int64),
            rng.integers(0, 3, R).astype(np.int64), (0.2 * rng.standard_normal((nm, 3, d))).astype(np.float32),
            rng.standard_normal((nm, 3)), np.full(nm, 1.0 / 200)]
    outs = []
    for run in (lambda *a: generic(*a, 64), kernels.own_rows_pass):
        loss, G, Gb = np.zeros(nm), np.zeros((nm, 3, d)), np.zeros((nm, 3))
        run(A, 0, *args, loss, G, Gb)
        outs.append((loss, G, Gb))
    for a, b in zip(*outs, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not kernels.available(), reason="numba not installed")
@pytest.mark.parametrize("removed", ["spread", "early", "late", "none"])
def test_two_thread_compaction_moves_the_same_rows_as_a_gather(removed: str):
    """Large compactions run on two threads (the first half's late sources set aside): same bytes as data[pos]."""
    rng = np.random.default_rng(5)
    n = 2 * kernels.COMPACT_TWO_THREADS_ROWS + 123
    data = rng.standard_normal((n, 7)).astype(np.float32)
    keep = np.ones(n, dtype=bool)
    if removed == "spread":
        keep[rng.choice(n, 9000, replace=False)] = False
    elif removed == "early":
        keep[:5000] = False  # every source of the first half lies past the middle: all set aside
    elif removed == "late":
        keep[-5000:] = False  # nothing to set aside
    pos = np.flatnonzero(keep)
    expected = data[pos].copy()
    assert kernels.compact_rows(data, pos)
    assert np.array_equal(data[: len(pos)], expected)
