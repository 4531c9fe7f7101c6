"""Regions of the data map, the overlap table and cleanlab's label issues (aflite.explain.datamap)."""

from __future__ import annotations

import numpy as np
import pytest

from aflite.explain.datamap import label_issues, overlap_table, regions


def test_regions_follow_the_documented_rule():
    # variability 2/3 quantile of [0, .1, .2, .3, .4, .5] = 0.3333: rows 4, 5 ambiguous (row 3 at 0.3 is not);
    # confidence 1/3 quantile of [.9, .2, .8, .1, .5, .5] = 0.3667: rows 1 and 3 hard; rows 0, 2 easy
    conf = np.array([0.9, 0.2, 0.8, 0.1, 0.5, 0.5, np.nan])
    var = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, np.nan])
    assert regions(conf, var).tolist() == ["easy", "hard", "easy", "hard", "ambiguous", "ambiguous", "unscored"]


def test_overlap_table_shares():
    region = np.array(["easy", "easy", "hard", "ambiguous"])
    removed = np.array([True, True, False, True])
    issues = np.array([False, False, True, True])
    rows = {r["group"]: r for r in overlap_table(removed, region, issues)}
    assert rows["easy"]["removed"] == 2 and rows["easy"]["share_of_group_removed"] == 1.0
    assert rows["easy"]["share_of_removed_in_group"] == pytest.approx(2 / 3)
    assert rows["hard"]["removed"] == 0
    assert rows["label issue"]["size"] == 2 and rows["label issue"]["removed"] == 1
    assert "unscored" not in rows and rows["all rows"]["removed"] == 3


def test_label_issues_find_flipped_labels():
    pytest.importorskip("cleanlab")
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=600)
    P = np.full((600, 3), 0.05)
    P[np.arange(600), y] = 0.9
    flipped = rng.choice(600, 18, replace=False)
    y_noisy = y.copy()
    y_noisy[flipped] = (y[flipped] + 1) % 3
    res = label_issues(P, y_noisy)
    assert res.skipped is None
    assert res.flags is not None and set(np.flatnonzero(res.flags)) == set(flipped)


def test_label_issues_without_cleanlab(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_cleanlab(name, *a, **kw):
        if name.startswith("cleanlab"):
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_cleanlab)
    res = label_issues(np.full((4, 2), 0.5), np.array([0, 1, 0, 1]))
    assert res.flags is None and "cleanlab is not installed" in res.skipped
