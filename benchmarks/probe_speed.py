"""The hypothesis-only probe (compare_partial_input), old and new side by side in one process (#57).

"old": scikit-learn's StratifiedGroupKFold for the grouped folds and SAG at tol 1e-3 (the probe before #57);
"new folds": this tree's compiled folds (aflite.group_folds) with SAG at tol 1e-3, whose figures must be bit-identical;
"new": this tree as it runs (its folds, PROBE_SOLVER and PROBE_TOL). Also the folds of D alone, old against new.

Usage: ``PYTHONPATH=$PWD/src python benchmarks/probe_speed.py DATA RUN_FOLDER`` (RUN_FOLDER: a finished run's
kept_ids.txt and removed_ids.txt). Prints JSON: CPU-s and wall s of each, the figures, the ratios to old, and whether
the folds and figures are identical to old's.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

import aflite.evaluate.probe as probe
from aflite import load_dataset
from aflite.splits import probe_folds


def sklearn_probe_folds(y: Any, groups: Any, folds: int, seed: int) -> list[tuple[Any, Any]]:
    """The grouped probe folds as they were drawn before #57: scikit-learn's StratifiedGroupKFold."""
    from sklearn.model_selection import StratifiedGroupKFold

    k = min(folds, len(np.unique(groups)))
    splitter = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros((len(y), 1)), y, groups))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("run", type=Path)
    a = ap.parse_args()
    ds = load_dataset(a.data)
    kept = set((a.run / "kept_ids.txt").read_text().split())
    removed = set((a.run / "removed_ids.txt").read_text().split())
    ids = np.asarray(ds.ids).astype(str)
    rows = np.flatnonzero([i in kept or i in removed for i in ids])
    keep = np.asarray([ids[i] in kept for i in rows])
    texts = [ds.texts_b[i] if ds.texts_b is not None else ds.texts_a[i] for i in rows]
    y, groups = np.asarray(ds.labels)[rows], np.asarray(ds.groups)[rows]
    probe_folds(y[:50], groups[:50], 2, 0)  # load the compiled loop outside the timings
    out: dict[str, Any] = {"rows": len(y), "groups": len(np.unique(groups))}
    c0 = time.process_time()
    old_folds = sklearn_probe_folds(y, groups, 5, 0)
    c1 = time.process_time()
    new_folds = probe_folds(y, groups, 5, 0)
    c2 = time.process_time()
    out["folds_of_D"] = {"old_cpu_s": round(c1 - c0, 3), "new_cpu_s": round(c2 - c1, 3),
                         "identical": all(np.array_equal(p, q) and np.array_equal(r, s)
                                          for (p, r), (q, s) in zip(old_folds, new_folds, strict=True))}
    new_tol, new_pf, new_solver = probe.PROBE_TOL, probe.probe_folds, probe.PROBE_SOLVER
    figures: dict[str, list[tuple[float, float]]] = {}
    for name, pf, solver, tol in (("old", sklearn_probe_folds, "sag", 1e-3), ("new folds", new_pf, "sag", 1e-3),
                                  ("new", new_pf, new_solver, new_tol)):
        probe.probe_folds, probe.PROBE_SOLVER, probe.PROBE_TOL = pf, solver, tol  # type: ignore[assignment]
        t0, c0 = time.perf_counter(), time.process_time()
        res = probe.compare_partial_input(texts, y, keep, random_state=0, groups=groups)
        figures[name] = [(r.accuracy, r.accuracy_std) for r in res]
        out[name] = {"solver": solver, "tol": tol, "cpu_s": round(time.process_time() - c0, 2),
                     "wall_s": round(time.perf_counter() - t0, 2),
                     "figures": {r.name: f"{r.accuracy:.4f}±{r.accuracy_std:.4f}" for r in res}}
    probe.probe_folds, probe.PROBE_SOLVER, probe.PROBE_TOL = new_pf, new_solver, new_tol
    for name in ("new folds", "new"):
        out[name]["cpu_ratio_old_to_this"] = round(out["old"]["cpu_s"] / out[name]["cpu_s"], 2)
        out[name]["identical_to_old"] = figures[name] == figures["old"]
        pairs = zip(figures[name], figures["old"], strict=True)
        out[name]["max_abs_accuracy_change"] = max(abs(p[0] - q[0]) for p, q in pairs)
    print(json.dumps(out, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
