"""The filter's kept-set noise floor (aflitebench.filter_agreement): each variant really changes only what it
says, on a small SNLI-shaped problem, and a device mode is compared against the same reference."""

from __future__ import annotations

import numpy as np
import pytest

from aflitebench.filter_agreement import KEPT_JACCARD_FLOOR, filter_agreement, kept_jaccard
from aflitebench.shapes import make_snli_like


def test_kept_jaccard_counts_the_kept_rows() -> None:
    a = np.array([1, 1, 0, 0], dtype=bool)
    assert kept_jaccard(a, a) == 1.0
    assert kept_jaccard(a, np.array([1, 0, 1, 0], dtype=bool)) == pytest.approx(1 / 3)
    assert kept_jaccard(~a & a, ~a & a) == 0.0  # nothing kept by either: no division by zero


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_noise_variants_and_a_device_mode_against_one_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("AFLITE_NUM_THREADS", "1")
    d = make_snli_like(1200, 48, random_state=3)
    res = filter_agreement(d.X, d.y, seed=2, modes={"onepass": {"device": "torch-cpu", "device_onepass": True}})
    v = res["variants"]
    assert set(v) == {"seed", "threads", "float64", "perturb"}
    assert v["threads"]["kept_jaccard"] == 1.0  # the result never depends on the thread count
    assert res["noise_floor"] == min(v[k]["kept_jaccard"] for k in ("threads", "float64", "perturb"))
    assert res["seed_floor"] == v["seed"]["kept_jaccard"] < 1.0  # another seed really draws other partitions
    assert all(0 < r["kept"] <= 1200 for r in (*v.values(), res["reference"]))
    assert 0 < res["modes"]["onepass"]["kept_jaccard"] <= 1
    assert 0.5 < KEPT_JACCARD_FLOOR < 1
