"""aflite.group_folds gives scikit-learn's StratifiedGroupKFold folds exactly (the probe's folds), compiled or not."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.model_selection import StratifiedGroupKFold

from aflite.errors import ParameterError
from aflite.group_folds import _assign, stratified_group_folds, stratified_group_splits


def _sklearn_folds(y: np.ndarray, groups: np.ndarray, k: int, seed: int | None, shuffle: bool = True) -> np.ndarray:
    fold = np.full(len(y), -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "the least populated class has fewer members than n_splits"
        splitter = StratifiedGroupKFold(k, shuffle=shuffle, random_state=seed if shuffle else None)
        for i, (_, te) in enumerate(splitter.split(np.zeros(len(y)), y, groups)):
            fold[te] = i
    return fold


def _cases(n_cases: int, seed: int) -> list[tuple[np.ndarray, np.ndarray, int, int]]:
    """Random labels and groups of many shapes: 2-11 classes, few to one-row groups, string labels, and groups
    of equal size and make-up (ties in the visiting order and between folds)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n_cases:
        n = int(rng.integers(10, 300))
        n_classes = int(rng.integers(2, 12))
        y: np.ndarray = rng.integers(0, n_classes, n)
        groups = rng.integers(0, int(rng.integers(2, n + 1)), n)
        k = int(rng.integers(2, 9))
        kind = len(out) % 4
        if kind == 1:
            y = rng.choice(np.array(["entailment", "neutral", "contradiction"]), n)
        elif kind == 2:  # pairs of rows: many groups with the same class counts
            groups = np.repeat(np.arange(n // 2 + 1), 2)[:n]
        elif kind == 3:  # one row per group and balanced labels: ties everywhere
            groups, y = np.arange(n), np.arange(n) % 3
        if len(np.unique(groups)) >= k and not np.all(k > np.unique(y, return_counts=True)[1]):
            out.append((y, groups, k, int(rng.integers(0, 10_000))))
    return out


@pytest.mark.parametrize("case", _cases(150, 0))
def test_the_folds_are_scikit_learns(case: tuple[np.ndarray, np.ndarray, int, int]) -> None:
    y, groups, k, seed = case
    assert np.array_equal(stratified_group_folds(y, groups, k, seed), _sklearn_folds(y, groups, k, seed))


@pytest.mark.parametrize("case", _cases(12, 1))
def test_unshuffled_and_the_plain_python_loop_agree_too(case: tuple[np.ndarray, np.ndarray, int, int]) -> None:
    y, groups, k, seed = case
    assert np.array_equal(stratified_group_folds(y, groups, k, None, shuffle=False),
                          _sklearn_folds(y, groups, k, None, shuffle=False))
    assert np.array_equal(stratified_group_folds(y, groups, k, seed, kernel=_assign),
                          stratified_group_folds(y, groups, k, seed))


def test_many_classes_sum_in_numpys_pairwise_order() -> None:
    """Over 8 classes numpy's mean adds pairwise, over 128 in halves: the fold choices still match."""
    rng = np.random.default_rng(5)
    for n_classes in (9, 40, 140):
        y, groups = rng.integers(0, n_classes, 2000), rng.integers(0, 300, 2000)
        assert np.array_equal(stratified_group_folds(y, groups, 5, 7), _sklearn_folds(y, groups, 5, 7))


def test_the_demo_datas_premise_folds_are_scikit_learns() -> None:
    from aflite.data import demo_dataset_path, load_dataset

    ds = load_dataset(demo_dataset_path())
    y, groups = np.asarray(ds.labels), np.asarray(ds.groups)
    for seed in (0, 1, 2):
        assert np.array_equal(stratified_group_folds(y, groups, 5, seed), _sklearn_folds(y, groups, 5, seed))
    splits = stratified_group_splits(y, groups, 5, 0)
    ref = list(StratifiedGroupKFold(5, shuffle=True, random_state=0).split(np.zeros(len(y)), y, groups))
    assert all(np.array_equal(a, c) and np.array_equal(b, d) for (a, b), (c, d) in zip(splits, ref, strict=True))


def test_a_group_is_never_split_and_the_seed_decides() -> None:
    rng = np.random.default_rng(3)
    y, groups = rng.integers(0, 3, 500), rng.integers(0, 90, 500)
    fold = stratified_group_folds(y, groups, 5, 11)
    assert all(len(set(fold[groups == g].tolist())) == 1 for g in np.unique(groups))
    assert set(fold.tolist()) == set(range(5))
    assert not np.array_equal(fold, stratified_group_folds(y, groups, 5, 12))


def test_impossible_folds_are_refused_in_one_line() -> None:
    y = np.array([0, 1, 0, 1, 0, 1])
    with pytest.raises(ParameterError, match="number of groups"):
        stratified_group_folds(y, np.array([0, 0, 0, 1, 1, 1]), 3, 0)
    with pytest.raises(ParameterError, match="members in each class"):
        stratified_group_folds(y, np.arange(6), 4, 0)
    with pytest.raises(ParameterError, match="one per row"):
        stratified_group_folds(y, np.arange(5), 2, 0)
