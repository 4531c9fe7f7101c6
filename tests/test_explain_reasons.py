"""Why a row was easy (aflite.explain.reasons): the surrogate's terms and the nearest kept rows."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from aflite.explain.reasons import fit_surrogate, nearest_kept


def test_nearest_kept_by_hand():
    X = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [0.7, 0.7]])
    keep = np.array([False, True, False, True, True])
    near = nearest_kept(X, keep, k=2)
    assert near[0] == [1, 4]  # cosine: (0.9, 0.1) first, then the diagonal
    assert near[2] == [3, 4]
    assert near[1] == [] and near[3] == [] and near[4] == []


def test_surrogate_finds_the_token_that_makes_rows_predictable():
    rng = np.random.default_rng(0)
    n, V = 2000, 30
    B = (rng.random((n, V)) < 0.1).astype(float)
    y = rng.integers(0, 3, size=n)
    # rows of label 2 that contain token 7 are predicted right far more often
    target = np.clip(0.3 + 0.6 * (B[:, 7] * (y == 2)) + 0.05 * rng.normal(size=n), 0, 1)
    target[:5] = np.nan  # never held out: left out of the fit
    names = [f"t{j}" for j in range(V)]
    sur = fit_surrogate(sp.csr_matrix(B), names, y, ["a", "b", "c"], target)
    assert (sur.terms[0]["name"], sur.terms[0]["label"]) == ("t7", "c")
    assert sur.terms[0]["coef"] > 0.4 and sur.r2 > 0.5
    rows = np.flatnonzero((B[:, 7] == 1) & (y == 2))
    assert all(sur.top_features[i].split(";")[0].startswith("t7:+") for i in rows)
    other = np.flatnonzero((B[:, 7] == 1) & (y != 2))
    assert not any(sur.top_features[i].startswith("t7:") for i in other)


def test_dense_image_statistics_are_standardised():
    rng = np.random.default_rng(1)
    F = np.c_[rng.normal(size=500) * 1000.0, rng.normal(size=500)]  # a width in pixels next to a share
    y = rng.integers(0, 2, size=500)
    target = 0.5 + 0.2 * (F[:, 1] > 0) * (y == 0)
    sur = fit_surrogate(F, ["width", "hist_r3"], y, ["a", "b"], target)
    assert (sur.terms[0]["name"], sur.terms[0]["label"]) == ("hist_r3", "a")


def test_function_words_are_left_out_of_the_surrogate_inputs():
    from aflite.explain.reasons import FUNCTION_WORDS, text_inputs

    vocab = np.array(["a", "the", "is", "not", "nobody", "dog", "two", "rare"])
    B = sp.csr_matrix(np.ones((30, len(vocab))))
    B[:, 7] = 0  # "rare" is seen in no row: below min_count
    F, names = text_inputs(B.tocsr(), vocab, min_count=20)
    assert names.tolist() == ["not", "nobody", "dog", "two"] and F.shape == (30, 4)
    assert not {"not", "no", "nobody", "never", "two", "some"} & FUNCTION_WORDS  # artifacts stay
