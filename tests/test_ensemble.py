"""The fast batched logistic ensemble against scikit-learn's LogisticRegression on the same partitions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from aflite.core.ensemble import FastLogisticEnsemble, SklearnEnsemble, make_ensemble
from aflite.splits import draw_partitions


def anisotropic(n: int, d: int, n_classes: int, seed: int = 0):
    """Features with a decaying spectrum, a rotation and a mean offset, like sentence embeddings."""
    rng = np.random.default_rng(seed)
    spec = np.exp(-np.arange(d) / 6.0)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    X = (rng.standard_normal((n, d)) * spec) @ q.T + 0.7
    w = rng.standard_normal((d, n_classes)) * 4
    y = np.argmax(X @ w + rng.gumbel(size=(n, n_classes)), 1)
    return X.astype(np.float32), y.astype(np.int64)


@pytest.mark.parametrize("n_classes", [2, 3, 5])
def test_fast_path_predicts_like_scikit_learn(n_classes):
    X, y = anisotropic(3000, 24, n_classes)
    mask = draw_partitions(len(y), 6, 800, np.random.default_rng(0))
    rows = np.arange(len(y))
    fast = FastLogisticEnsemble()
    fast.prepare(X, y, n_classes)
    pf = fast.fit_predict(rows, mask)
    ref = SklearnEnsemble(LogisticRegression(C=1.0, max_iter=10_000, tol=1e-8))
    ref.prepare(X, y, n_classes)
    pr = ref.fit_predict(rows, mask)
    held = ~mask
    assert (pf[held] == pr[held]).mean() >= 0.995
    assert fast.last_stats.converged == 6


def test_refitting_a_subset_of_partitions_matches_a_full_fit():
    X, y = anisotropic(1500, 10, 3, seed=1)
    mask = draw_partitions(len(y), 5, 300, np.random.default_rng(1))
    rows = np.arange(len(y))
    a = FastLogisticEnsemble(tol=1e-7)
    a.prepare(X, y, 3)
    full = a.fit_predict(rows, mask)
    sub = a.fit_predict(rows, mask, models=np.array([1, 3]))
    assert sub.shape == (len(y), 2)
    held = ~mask[:, [1, 3]]
    assert (sub[held] == full[:, [1, 3]][held]).mean() > 0.999


def test_rows_must_shrink_in_order():
    X, y = anisotropic(200, 5, 2)
    f = FastLogisticEnsemble()
    f.prepare(X, y, 2)
    mask = draw_partitions(150, 2, 50, np.random.default_rng(0))
    f.fit_predict(np.arange(150), mask)
    with pytest.raises(ValueError, match="sorted subset"):
        f.fit_predict(np.arange(50, 200), mask)


def test_constant_and_duplicate_columns_are_harmless():
    X, y = anisotropic(600, 6, 3)
    X = np.hstack([X, np.ones((600, 1), np.float32), X[:, :1]])  # a constant and a copied column
    mask = draw_partitions(600, 3, 200, np.random.default_rng(0))
    f = FastLogisticEnsemble()
    f.prepare(X, y, 3)
    p = f.fit_predict(np.arange(600), mask)
    assert ((p == y[:, None]) & ~mask).sum() / (~mask).sum() > 0.5


def test_make_ensemble_resolves_names_and_estimators():
    assert isinstance(make_ensemble("logistic"), FastLogisticEnsemble)
    assert isinstance(make_ensemble("sklearn"), SklearnEnsemble)
    assert isinstance(make_ensemble(LogisticRegression()), SklearnEnsemble)
    with pytest.raises(ValueError, match="unknown model"):
        make_ensemble("forest")


def _fit(ens, X, y, K, mask, rows=None):
    ens.prepare(X, y, K)
    return ens.fit_predict(np.arange(len(y)) if rows is None else rows, mask)


def test_threads_and_block_order_do_not_change_the_result():
    """Blocks are fitted with one BLAS thread each, so running them in parallel gives the same bits."""
    X, y = anisotropic(4000, 16, 3, seed=2)
    mask = draw_partitions(len(y), 8, 600, np.random.default_rng(2))
    a, b = FastLogisticEnsemble(n_jobs=1, block_size=2), FastLogisticEnsemble(n_jobs=2, block_size=2)
    pa = _fit(a, X, y, 3, mask)
    # force the thread pool even for this small problem
    b.prepare(X, y, 3)
    tasks_run = b._run_local
    b._run_local = lambda tasks, n: tasks_run(tasks, 10**9)  # type: ignore[method-assign]
    pb = b.fit_predict(np.arange(len(y)), mask)
    assert np.array_equal(pa, pb)
    assert np.array_equal(a.get_state()["coefs"], b.get_state()["coefs"])


def test_streaming_from_a_memory_map_agrees_with_the_whitened_copy(tmp_path):
    X, y = anisotropic(3000, 20, 3, seed=3)
    path = tmp_path / "X.npy"
    np.save(path, X)
    Xm = np.load(path, mmap_mode="r")
    mask = draw_partitions(len(y), 6, 700, np.random.default_rng(3))
    pc = _fit(FastLogisticEnsemble(), X, y, 3, mask)
    stream = FastLogisticEnsemble(max_copy_gb=0)  # never copy: read the memory map chunk by chunk
    ps = _fit(stream, Xm, y, 3, mask)
    assert not stream._store.copy
    held = ~mask
    assert (pc[held] == ps[held]).mean() > 0.999
    rows = np.arange(0, len(y), 3)  # S shrinks: both stores follow
    held2 = ~mask[rows]
    assert (stream.fit_predict(rows, mask[rows])[held2] == ps[rows][held2]).mean() > 0.99


def test_many_classes_train_on_their_own_rows_like_scikit_learn():
    """Wide softmax and t << |S|: each model is trained on its gathered rows, predictions in a final pass."""
    from aflite.core.blocks import use_own_rows

    X, y = anisotropic(6000, 12, 20, seed=4)
    mask = draw_partitions(len(y), 3, 1200, np.random.default_rng(4))
    assert use_own_rows(len(y), 1200, 20)
    for ens in (FastLogisticEnsemble(), FastLogisticEnsemble(max_copy_gb=0)):
        pf = _fit(ens, X, y, 20, mask)
        ref = SklearnEnsemble(LogisticRegression(C=1.0, max_iter=10_000, tol=1e-8))
        pr = _fit(ref, X, y, 20, mask)
        held = ~mask
        assert (pf[held] == pr[held]).mean() >= 0.995
        assert ens.last_stats.converged == 3
