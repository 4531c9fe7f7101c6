"""Sparse features (aflite.core.sparse; AFLite's sparse path in core/phase.py and core/filter.py), issue #49 item 3:
the pipeline a scikit-learn user writes first, TfidfVectorizer → AFLite → LogisticRegression, works, and the sparse
solver agrees with scikit-learn's LogisticRegression on the same partitions without densifying X."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from aflite import AFLite, predictability
from aflite.core.sparse import SparseLogisticEnsemble, lbfgs
from aflite.data import demo_dataset_path, load_dataset
from aflite.errors import InputError, ParameterError
from aflite.splits import draw_partitions

KW = dict(n_partitions=8, train_size=0.2, slice_size=0.05, target_size=0.7, random_state=0)


class NoDense(sp.csr_matrix):
    """A CSR matrix that refuses to be densified: the sparse path must never call toarray/todense."""

    def toarray(self, *a: object, **k: object) -> np.ndarray:
        raise AssertionError("densified")

    def todense(self, *a: object, **k: object) -> np.ndarray:
        raise AssertionError("densified")


@pytest.fixture(scope="module")
def snli() -> tuple[list[str], np.ndarray]:
    ds = load_dataset(demo_dataset_path())
    return list(ds.texts_b[:900]), np.asarray(ds.labels[:900])


def test_the_tfidf_aflite_logistic_pipeline_fits_and_predicts(snli: tuple[list[str], np.ndarray]) -> None:
    """On main: InputError "sparse features are not supported"."""
    from imblearn.pipeline import Pipeline

    texts, y = snli
    pipe = Pipeline([("tfidf", TfidfVectorizer()), ("aflite", AFLite(**KW)),
                     ("lr", LogisticRegression(max_iter=1000))])
    pipe.fit(texts, y)
    af = pipe.named_steps["aflite"]
    assert 0.6 * len(y) < af.keep_mask_.sum() < len(y)
    assert pipe.named_steps["lr"].n_features_in_ == af.n_features_in_ == len(pipe.named_steps["tfidf"].vocabulary_)
    assert pipe.predict(texts[:50]).shape == (50,)  # AFLite is skipped at predict: every row is predicted
    Xk, yk = AFLite(**KW).fit_resample(TfidfVectorizer().fit_transform(texts), y)
    assert sp.issparse(Xk) and Xk.shape[0] == len(yk) == af.keep_mask_.sum()


def test_sparse_x_is_never_densified_and_matches_its_csc_and_coo_forms(snli: tuple[list[str], np.ndarray]) -> None:
    texts, y = snli
    X = TfidfVectorizer().fit_transform(texts)
    af = AFLite(**KW).fit(NoDense(X), y)
    for other in (X.tocsc(), X.tocoo()):
        assert np.array_equal(AFLite(**KW).fit(other, y).keep_mask_, af.keep_mask_)
    assert af.first_phase_proba_ is not None and af.first_phase_coef_.shape == (3, X.shape[1])


def test_first_phase_agrees_with_scikit_learn_on_the_same_partitions(snli: tuple[list[str], np.ndarray]) -> None:
    """The same problem as LogisticRegression(C=1) fitted per partition: p̃ within the solvers' tolerance."""
    texts, y = snli
    X = TfidfVectorizer().fit_transform(texts)
    ours = predictability(X, y, n_partitions=8, train_size=0.3, random_state=0)
    ref = predictability(X, y, n_partitions=8, train_size=0.3, random_state=0, model="sklearn")
    ok = ~np.isnan(ours.predictability)
    assert np.array_equal(ok, ~np.isnan(ref.predictability))
    assert np.corrcoef(ours.predictability[ok], ref.predictability[ok])[0, 1] > 0.995
    assert np.mean(ours.n_correct == ref.n_correct) > 0.97


def test_one_models_coefficients_are_scikit_learns(snli: tuple[list[str], np.ndarray]) -> None:
    texts, y = snli
    X = TfidfVectorizer().fit_transform(texts)
    codes = np.unique(y, return_inverse=True)[1]
    for k in (3, 2):  # the softmax, and the binary model (one logit) as scikit-learn fits two classes
        keep = codes < k
        ens = SparseLogisticEnsemble(tol=1e-8)
        ens.prepare(X[keep], codes[keep], k)
        ens.fit_predict(np.arange(keep.sum()), np.ones((keep.sum(), 1), dtype=bool))
        W, b = ens.raw_coefficients()
        ref = LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000).fit(X[keep], codes[keep])
        ours = W[:, 0, :].T - W[:, 0, :].T.mean(0) if k > 2 else (W[:, 0, 1] - W[:, 0, 0])[None, :]
        theirs = ref.coef_ - ref.coef_.mean(0) if k > 2 else ref.coef_
        assert np.abs(ours - theirs).max() < 1e-4


def test_lbfgs_minimises_a_quadratic() -> None:
    A = np.diag(np.arange(1.0, 51.0))
    x, nit = lbfgs(lambda v: (0.5 * v @ A @ v - v.sum(), A @ v - 1.0), np.zeros(50), 1e-7, 500)
    assert np.allclose(x, 1.0 / np.arange(1.0, 51.0), atol=1e-7) and nit < 200


def test_bad_sparse_input_is_named_and_a_device_is_refused(snli: tuple[list[str], np.ndarray]) -> None:
    texts, y = snli
    X = TfidfVectorizer().fit_transform(texts).tolil()
    X[5, 3] = np.nan
    with pytest.raises(InputError, match="features contain NaN at row 5, column 3"):
        AFLite(**KW).fit(X.tocsr(), y)
    with pytest.raises(InputError, match="0 feature"):
        AFLite(**KW).fit(sp.csr_matrix((len(y), 0)), y)
    with pytest.raises(ParameterError, match="sparse features are fitted on the CPU"):
        AFLite(**KW, device="cuda").fit(TfidfVectorizer().fit_transform(texts), y)


def test_partitions_are_the_dense_paths() -> None:
    """The sparse path draws the same partitions as the dense one (one seed): only the solver differs."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 6))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)
    dense = predictability(X, y, n_partitions=4, train_size=0.5, random_state=1)
    sparse = predictability(sp.csr_matrix(X), y, n_partitions=4, train_size=0.5, random_state=1)
    assert np.array_equal(dense.n_heldout, sparse.n_heldout)
    assert np.mean(dense.n_correct == sparse.n_correct) > 0.95
    mask = draw_partitions(200, 4, 100, np.random.default_rng([1, 0]))
    assert np.array_equal(dense.n_heldout, (~mask).sum(1))


def test_sparse_x_of_2_31_columns_is_refused_in_one_line_not_a_memory_error() -> None:
    """Issue #55 item 6: a real CSR matrix of 2^31 (and more) columns and a few non-zeros. On main the fit allocated
    dense weights of columns × models (1 TiB at 64 partitions) and raised MemoryError; now a ParameterError names the
    limit before any copy of X, from AFLite.fit and from predictability alike."""
    rng = np.random.default_rng(0)
    n = 120
    y = np.arange(n) % 2
    for width in (2**31, 2**31 + 12345):
        cols = rng.integers(0, width, size=3 * n)
        X = sp.csr_matrix((np.ones(3 * n, np.float32), (np.repeat(np.arange(n), 3), cols)), shape=(n, width))
        assert X.shape == (n, width) and X.nnz <= 3 * n
        with pytest.raises(ParameterError) as fitted:
            AFLite(**{**KW, "n_partitions": 64}).fit(X, y)
        with pytest.raises(ParameterError) as scored:
            predictability(X, y, n_partitions=64, train_size=0.5, random_state=0)
        for msg in (str(fitted.value), str(scored.value)):
            assert "\n" not in msg and f"{width:,} columns" in msg and "at most 2^31 - 1 = 2,147,483,647" in msg
