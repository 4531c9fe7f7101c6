"""The optional stop rule (aflite.explain.stoprule): which condition ends it, and what it removes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from aflite.errors import ParameterError
from aflite.explain.stoprule import continue_until_clean
from aflite.rundir.schema import RunParameters

PARAMS = RunParameters(dataset_size=400, target_size=200, n_partitions=8, train_size=100, slice_size=40, threshold=0.5,
                       strategy="slicing", model="logistic", C=1.0)


def data(signal: float = 3.0, n: int = 400):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, size=n)
    X = rng.normal(size=(n, 4))
    X[:, 0] += signal * y
    return X, y.astype(str)


def test_stops_when_nothing_is_significant():
    X, y = data()
    keep = np.ones(len(y), dtype=bool)
    res = continue_until_clean(X, y, None, PARAMS, 0, keep, 0, lambda rows: max(0, len(rows) - 370))
    assert res.stopped_by == "no significant artifact"
    assert res.slice_size == 10  # k // 4
    assert [s["size"] for s in res.trajectory] == [400, 390, 380, 370]
    assert res.extra_removed == 30
    assert sorted(set(res.removed_at[res.removed_at >= 0])) == [0, 1, 2]
    again = continue_until_clean(X, y, None, PARAMS, 0, keep, 0, lambda rows: max(0, len(rows) - 370))
    assert np.array_equal(res.removed_at, again.removed_at)  # deterministic from the seed


def test_floor_and_tau_end_it_too():
    X, y = data()
    keep = np.ones(len(y), dtype=bool)
    res = continue_until_clean(X, y, None, PARAMS, 0, keep, 0, lambda rows: 1, floor=385)
    assert res.stopped_by == "floor reached" and res.trajectory[-1]["size"] <= 385
    Xn, yn = data(signal=0.0)
    strict = dataclasses.replace(PARAMS, threshold=1.0, n_partitions=64)  # no noise row right in ~48 of 48 tries
    res = continue_until_clean(Xn, yn, None, strict, 0, keep, 0, lambda rows: 1)
    assert res.stopped_by == "no row reaches τ" and res.extra_removed == 0
    res = continue_until_clean(X, y, None, PARAMS, 0, keep, 0, lambda rows: 1, max_phases=2)
    assert res.stopped_by == "phase cap" and len(res.trajectory) == 3
    with pytest.raises(ParameterError):
        continue_until_clean(X, y, None, PARAMS, 0, keep, 0, lambda rows: 1, floor=50)
