"""The hypothesis-only probe tokenizes once (issue #57): every fold's TF-IDF matrices, column selections of one
count matrix, are the ones ``TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)`` fitted on the fold
makes (up to the order of the columns), and the probe's accuracy is the scikit-learn pipeline's."""

from __future__ import annotations

import numpy as np
import pytest


def _texts(n: int) -> tuple[list[str], np.ndarray]:
    from aflite.data import load_dataset
    from aflite.data.text import demo_dataset_path

    ds = load_dataset(demo_dataset_path())
    assert ds.texts_b is not None
    return list(ds.texts_b[:n]), np.asarray(ds.labels[:n])


def test_fold_tfidf_equals_scikit_learns_up_to_column_order() -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer

    from aflite.evaluate.probe import _tfidf_fold, word_counts

    texts, _ = _texts(600)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(texts))
    tr, te = np.sort(order[:450]), np.sort(order[450:])
    x_tr, x_te = _tfidf_fold(word_counts(texts), tr, te)
    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    r_tr = vec.fit_transform([texts[i] for i in tr])
    r_te = vec.transform([texts[i] for i in te])
    assert x_tr.shape == r_tr.shape and x_te.shape == r_te.shape
    # column order differs (hash order, not alphabetical): compare what a linear model sees, the Gram matrices
    np.testing.assert_allclose((x_tr @ x_tr.T).toarray(), (r_tr @ r_tr.T).toarray(), atol=1e-12)
    np.testing.assert_allclose((x_te @ x_tr.T).toarray(), (r_te @ r_tr.T).toarray(), atol=1e-12)
    # and the sorted column norms agree column for column
    np.testing.assert_allclose(np.sort(np.asarray(x_tr.multiply(x_tr).sum(0)).ravel()),
                               np.sort(np.asarray(r_tr.multiply(r_tr).sum(0)).ravel()), atol=1e-12)


def test_probe_accuracy_matches_the_scikit_learn_pipeline() -> None:
    from sklearn.base import clone
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    from aflite.evaluate.probe import text_probe_accuracy
    from aflite.splits import probe_folds

    texts, y = _texts(900)
    acc, _ = text_probe_accuracy(texts, y, folds=5, random_state=1)
    model = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True),
                          LogisticRegression(C=1.0, max_iter=2000))
    x = np.asarray(texts, dtype=object)
    ref = np.mean([clone(model).fit(x[tr], y[tr]).score(x[te], y[te]) for tr, te in probe_folds(y, None, 5, 1)])
    assert acc == pytest.approx(ref, abs=0.004)  # the same objective; Newton-CG vs L-BFGS stop a hair apart
    assert text_probe_accuracy(texts, y, folds=5, random_state=1) == (acc, _)  # seeded: the same twice
