"""The first phase's data map and soft weights (aflite.core.heldout) and AFLite's fitted attributes."""

from __future__ import annotations

import numpy as np
import pytest

from aflite import AFLite
from aflite.core.ensemble import FastLogisticEnsemble
from aflite.core.heldout import heldout_map, soft_weights


def test_confidence_and_variability_by_hand():
    # 2 rows, 3 models, 2 classes; row 0 (gold 1) held out by models 0 and 2, row 1 (gold 0) by no model
    P = np.array([[[0.2, 0.8], [0.5, 0.5], [0.6, 0.4]],
                  [[0.9, 0.1], [0.9, 0.1], [0.9, 0.1]]])
    train = np.array([[False, True, False], [True, True, True]])
    hm = heldout_map(lambda pos: P[pos], np.array([1, 0]), train, 2)
    # gold probabilities held out: 0.8 and 0.4 -> mean 0.6, population std 0.2; arg-max right once of twice
    assert hm.confidence[0] == pytest.approx(0.6)
    assert hm.variability[0] == pytest.approx(0.2)
    assert hm.correctness[0] == pytest.approx(0.5)
    assert np.allclose(hm.proba[0], [0.4, 0.6])
    assert hm.n_heldout.tolist() == [2, 0]
    assert np.isnan(hm.confidence[1]) and np.isnan(hm.variability[1]) and np.isnan(hm.proba[1]).all()


def test_soft_weights_by_hand():
    # class a: 3 of 3 right -> 1 - 4/5 = 0.2; 1 of 3 right -> 1 - 2/5 = 0.6; rescaled to mean 1: 0.5, 1.5
    w = soft_weights(np.array([3, 1, 2, 0]), np.array([3, 3, 2, 0]), np.array(["a", "a", "b", "b"]))
    assert w[:2] == pytest.approx([0.5, 1.5])
    assert w[2] == pytest.approx(1.0)  # the only scored row of b
    assert w[3] == 1.0  # never held out: neutral


@pytest.mark.parametrize("model", ["logistic", "sklearn"])
def test_fitted_attributes_agree_with_p_tilde(model):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    y = (X[:, 0] + 0.7 * rng.normal(size=400) > 0).astype(int)
    af = AFLite(n_partitions=12, train_size=150, slice_size=40, target_size=200, model=model).fit(X, y)
    assert af.first_phase_proba_.shape == (400, 2)
    scored = ~np.isnan(af.first_phase_predictability_)
    # p̃ counts hard predictions right; correctness counts arg-max of the probabilities right: the same models
    assert np.allclose(af.correctness_[scored], af.first_phase_predictability_[scored])
    assert np.all((af.variability_[scored] >= 0) & (af.confidence_[scored] <= 1))
    removed0 = af.removed_at_ == 0
    assert np.array_equal(af.first_phase_predictability_[removed0], af.predictability_[removed0])
    for label in (0, 1):
        assert af.weights_[y == label].mean() == pytest.approx(1.0)


def test_fast_and_reference_probabilities_agree():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4))
    y = rng.integers(0, 3, size=300)
    y[X[:, 0] > 0.8] = 2
    kw = dict(n_partitions=8, train_size=120, slice_size=30, target_size=150, max_iterations=1)
    # both fitted tightly, so that the difference measures the data map's computation, not the solvers' tolerances
    # (at the fast solver's default tol=1e-3 the two differ by ~1e-3 in confidence)
    fast = AFLite(**kw, model=FastLogisticEnsemble(tol=1e-5)).fit(X, y)
    ref = AFLite(**kw, model="sklearn").fit(X, y)
    assert np.nanmax(np.abs(fast.confidence_ - ref.confidence_)) < 1e-3


def test_first_phase_coef_points_along_the_signal():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 3))
    y = (X[:, 1] + 0.3 * rng.normal(size=400) > 0).astype(int)
    af = AFLite(n_partitions=8, train_size=150, slice_size=40, target_size=200, max_iterations=1).fit(X, y)
    coef = af.first_phase_coef_
    assert coef.shape == (2, 3)
    assert np.allclose(coef.sum(0), 0)  # centred over classes
    assert coef[1, 1] > 1.0 and abs(coef[1, 0]) < 0.5 * coef[1, 1]
    assert AFLite(n_partitions=4, train_size=150, slice_size=40, target_size=200, max_iterations=1,
                  model="sklearn").fit(X, y).first_phase_coef_ is None
