"""``AFLite.fit_resample``: imbalanced-learn's sampler contract, so that AFLite is a step of an
``imblearn.pipeline.Pipeline`` (filtering the training rows at fit, skipped at predict) and of a cross-validation."""

from __future__ import annotations

import numpy as np
import pytest

from aflite.core.filter import AFLite
from aflite.errors import ParameterError

imblearn_pipeline = pytest.importorskip("imblearn.pipeline")
pd = pytest.importorskip("pandas")

import sklearn  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GroupKFold, KFold, cross_val_score  # noqa: E402


def shortcut_data(n: int = 240, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two classes; a third of the rows carry their label in feature 0 (a shortcut AFLite removes); groups of 4."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = rng.standard_normal((n, 6))
    X[:, 1] += 0.5 * (2 * y - 1)  # a weak real signal everywhere
    easy = rng.random(n) < 1 / 3
    X[easy, 0] = 4.0 * (2 * y[easy] - 1)
    return X, y, np.arange(n) // 4


def sampler() -> AFLite:
    return AFLite(target_size=0.6, n_partitions=16, train_size=0.3, slice_size=0.1, random_state=0)


def test_fit_resample_returns_the_kept_rows_in_their_own_types() -> None:
    X, y, _ = shortcut_data()
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(6)], index=np.arange(1000, 1000 + len(y)))
    series = pd.Series(y, index=frame.index, name="label")
    af = sampler()
    Xr, yr = af.fit_resample(frame, series)
    keep = af.keep_mask_
    assert 0 < keep.sum() < len(y)
    assert isinstance(Xr, pd.DataFrame) and isinstance(yr, pd.Series)
    assert list(Xr.index) == list(frame.index[keep]) == list(yr.index)
    np.testing.assert_array_equal(Xr.to_numpy(), X[keep])
    Xa, ya = sampler().fit_resample(X, list(y))  # arrays and lists: arrays of the kept rows, the same rows
    np.testing.assert_array_equal(Xa, X[keep])
    np.testing.assert_array_equal(ya, y[keep])


def test_in_an_imblearn_pipeline_the_classifier_trains_on_the_kept_rows_and_predicts_every_row() -> None:
    X, y, _ = shortcut_data()
    pipe = imblearn_pipeline.Pipeline([("aflite", sampler()), ("clf", LogisticRegression())]).fit(X, y)
    keep = pipe.named_steps["aflite"].keep_mask_
    assert 0 < keep.sum() < len(y)
    # the shortcut rows are the ones removed: most of the easy rows (|feature 0| = 4) are gone
    easy = np.abs(X[:, 0]) == 4.0
    assert (~keep[easy]).mean() > 0.5 > (~keep[~easy]).mean()
    alone = LogisticRegression().fit(X[keep], y[keep])
    np.testing.assert_allclose(pipe.named_steps["clf"].coef_, alone.coef_)
    assert pipe.predict(X).shape == (len(y),)  # the sampler is skipped at predict: every row gets a prediction
    np.testing.assert_array_equal(pipe.predict(X), alone.predict(X))


def test_groups_pass_through_the_pipeline_to_the_filter() -> None:
    """With scikit-learn's metadata routing on, ``pipe.fit(X, y, groups=g)`` reaches AFLite (which requests
    groups by default); imbalanced-learn passes a sampler no fit parameter without it."""
    X, y, groups = shortcut_data()
    pipe = imblearn_pipeline.Pipeline([("aflite", sampler()), ("clf", LogisticRegression())])
    with sklearn.config_context(enable_metadata_routing=True):
        pipe.fit(X, y, groups=groups)
    direct = sampler().fit(X, y, groups)
    np.testing.assert_array_equal(pipe.named_steps["aflite"].keep_mask_, direct.keep_mask_)
    ungrouped = sampler().fit(X, y)
    assert not np.array_equal(direct.keep_mask_, ungrouped.keep_mask_)  # the groups changed the partitions


def test_cross_validation_filters_each_training_fold_only() -> None:
    X, y, _ = shortcut_data()
    pipe = imblearn_pipeline.Pipeline([("aflite", sampler()), ("clf", LogisticRegression())])
    cv = KFold(3, shuffle=True, random_state=0)
    scores = cross_val_score(pipe, X, y, cv=cv)
    expected = []
    for train, test in cv.split(X):
        keep = sampler().fit(X[train], y[train]).keep_mask_
        clf = LogisticRegression().fit(X[train][keep], y[train][keep])
        expected.append(clf.score(X[test], y[test]))  # scored on every row of the test fold, unfiltered
    np.testing.assert_allclose(scores, expected)


def test_an_unknown_fit_parameter_is_refused() -> None:
    X, y, _ = shortcut_data()
    with pytest.raises(ParameterError, match="sample_weight"):
        sampler().fit_resample(X, y, sample_weight=np.ones(len(y)))


def test_cross_validation_by_groups_routes_the_groups_to_the_splitter_and_the_filter() -> None:
    X, y, groups = shortcut_data()
    pipe = imblearn_pipeline.Pipeline([("aflite", sampler()), ("clf", LogisticRegression())])
    cv = GroupKFold(3)
    with sklearn.config_context(enable_metadata_routing=True):
        scores = cross_val_score(pipe, X, y, cv=cv, params={"groups": groups})
    expected = []
    for train, test in cv.split(X, y, groups):
        assert not set(groups[train]) & set(groups[test])
        keep = sampler().fit(X[train], y[train], groups[train]).keep_mask_
        clf = LogisticRegression().fit(X[train][keep], y[train][keep])
        expected.append(clf.score(X[test], y[test]))
    np.testing.assert_allclose(scores, expected)


def test_a_missing_or_mixed_label_is_refused_in_one_line() -> None:
    """#50: a None label gave a TypeError from inside numpy's sort; a NaN label made a class of missing values. Each
    is an InputError naming the row, from fit_resample and fit alike, before any work."""
    from aflite.errors import InputError

    X, y, _ = shortcut_data(60)
    labels = np.asarray(["ab"[v] for v in y], dtype=object)
    cases = []
    for bad in (None, float("nan")):
        obj = labels.copy()
        obj[7] = bad
        cases.append((obj, r"missing value \((None|nan)\) at row 7"))
    floats = y.astype(float)
    floats[9] = np.nan
    cases.append((floats, r"missing value \(NaN\) at row 9"))
    cases.append((pd.Series(labels).where(np.arange(60) != 4, None), r"missing value \((None|nan)\) at row 4"))
    strings = pd.Series(labels, dtype="string").where(np.arange(60) != 8, pd.NA)
    cases.append((strings, r"missing value \(<NA>\) at row 8"))
    blank = labels.astype(str)
    blank[2] = " "
    cases.append((blank, r"missing value \(' '\) at row 2"))
    mixed = labels.copy()
    mixed[11] = 1
    cases.append((mixed, r"labels mix types .* \(str\) at row 0 and 1 \(int\) at row 11"))
    for target, match in cases:
        with pytest.raises(InputError, match=match) as err:
            sampler().fit_resample(X, target)
        assert "\n" not in str(err.value)
        with pytest.raises(InputError, match=match):
            sampler().fit(X, target)
