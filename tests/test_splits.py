"""Tests of aflite.splits: no group straddles a split, sizes are as documented, and one seed gives one split."""

from __future__ import annotations

import numpy as np
import pytest

from aflite.errors import ParameterError
from aflite.splits import (
    draw_partitions,
    fold_assignment,
    holdout_groups,
    split_heldout,
    stratified_mask,
    stratified_sample,
)

RNG = np.random.default_rng(0)
GROUPS = RNG.integers(0, 40, 300)
Y = RNG.integers(0, 3, 300)


def _no_group_straddles(side: np.ndarray, groups: np.ndarray) -> bool:
    return all(len(set(side[groups == g].tolist())) == 1 for g in np.unique(groups))


def test_partitions_keep_groups_whole_and_follow_the_seed() -> None:
    mask = draw_partitions(300, 6, 100, np.random.default_rng(3), GROUPS)
    assert all(_no_group_straddles(mask[:, b], GROUPS) for b in range(6))
    assert all(0 < mask[:, b].sum() < 300 for b in range(6))
    assert np.array_equal(mask, draw_partitions(300, 6, 100, np.random.default_rng(3), GROUPS))
    assert not np.array_equal(mask, draw_partitions(300, 6, 100, np.random.default_rng(4), GROUPS))
    plain = draw_partitions(300, 4, 100, np.random.default_rng(3))
    assert (plain.sum(0) == 100).all()


def test_split_heldout_takes_whole_groups_near_the_fraction() -> None:
    held = split_heldout(300, GROUPS, 0.2, 1)
    assert _no_group_straddles(held, GROUPS)
    assert 0.2 * 300 <= held.sum() < 0.2 * 300 + np.bincount(GROUPS).max() + 1
    assert np.array_equal(held, split_heldout(300, GROUPS, 0.2, 1))
    assert not np.array_equal(held, split_heldout(300, GROUPS, 0.2, 2))
    with pytest.raises(ParameterError, match="heldout must be a fraction"):
        split_heldout(300, GROUPS, 1.0, 0)


def test_holdout_groups_counts_groups() -> None:
    train, test = holdout_groups(300, GROUPS, 0.25, 0)
    assert len(np.intersect1d(train, test)) == 0 and len(train) + len(test) == 300
    assert len(np.unique(GROUPS[test])) == round(0.25 * len(np.unique(GROUPS)))
    assert not set(GROUPS[test].tolist()) & set(GROUPS[train].tolist())
    assert len(holdout_groups(10, None, 0.01, 0)[1]) == 1  # at least one group is held out


def test_fold_assignment_grouped_stratified_and_plain() -> None:
    grouped = fold_assignment(Y, GROUPS, 5, 0)
    assert set(grouped.tolist()) == set(range(5)) and _no_group_straddles(grouped, GROUPS)
    strat = fold_assignment(Y, None, 5, 0)
    for f in range(5):  # stratified: every class in every fold
        assert set(Y[strat == f].tolist()) == {0, 1, 2}
    assert not np.array_equal(strat, fold_assignment(Y, None, 5, 1))
    rare = np.array([0] * 10 + [1] * 2)  # a class with fewer rows than folds: plain k-fold
    assert sorted(np.bincount(fold_assignment(rare, None, 5, 0)).tolist()) == [2, 2, 2, 3, 3]


def test_stratified_sample_is_exact_and_proportional() -> None:
    rows = stratified_sample(Y, GROUPS, 50, 0)
    assert len(rows) == 50 and len(np.unique(rows)) == 50 and np.all(np.diff(rows) > 0)
    assert np.array_equal(stratified_sample(Y, None, 300, 0), np.arange(300))
    counts = np.bincount(Y[stratified_sample(Y, None, 90, 0)], minlength=3)
    assert np.all(np.abs(counts - 90 * np.bincount(Y) / 300) < 1)


def test_stratified_mask_per_class() -> None:
    dev = stratified_mask(Y, 0.2, np.random.default_rng(0))
    for c in range(3):
        assert dev[Y == c].sum() == round(0.2 * (Y == c).sum())
