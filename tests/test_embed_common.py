"""The agreement part shared by the embed benches (aflitebench.embed_common)."""

from __future__ import annotations

import numpy as np

from aflitebench.embed_common import agreement_passes, kept_set_agreement


def test_kept_set_agreement_compares_every_backend_with_torch():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    X = rng.standard_normal((600, 8)).astype(np.float32)
    X[:, 0] += 3.0 * y  # a planted cue, so that the filter removes rows
    phis = {"torch": X, "same": X.copy(), "other": rng.standard_normal((600, 8)).astype(np.float32)}
    said: list[str] = []
    out = kept_set_agreement(list(phis), phis.__getitem__, y, 0,
                             lambda a, b: (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1),
                             "600 rows", said.append, rows="all rows")
    ks = out["kept_set"]
    assert ks["n"] == 600 and ks["rows"] == "all rows" and ks["size"]["torch"] < 600  # the cue was filtered
    assert ks["size"]["same"] == ks["size"]["torch"] and out["kept_jaccard"]["same"] == 1.0
    assert out["kept_jaccard"]["other"] < 1.0 and "torch" not in out["kept_jaccard"]
    assert ks["cosine_all_rows"]["same"] == {"min": 1.0, "mean": 1.0}
    assert ks["cosine_all_rows"]["other"]["mean"] < 0.5
    assert said == [f"kept set: {be} Φ of 600 rows" for be in phis]
    res = {"mean_cosine": {"same": 1.0, "other": 0.1}, **out}
    assert agreement_passes(res, list(phis)) == {"same": True, "other": False}
    # without a kept set the cosine alone decides
    assert agreement_passes({"mean_cosine": {"a": 0.995, "b": 0.98}}, ["torch", "a", "b"]) == {"a": True, "b": False}
