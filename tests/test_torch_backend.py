"""The PyTorch path of the ensemble, run on the CPU ("torch-cpu"): the same code a GPU runs."""

from __future__ import annotations

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
