"""How far the fast solver's stopping tolerance can be loosened: steps per model and agreement with a tight fit.

One process: SNLI-shaped features (``make_snli_like``), whitened once; for each phase, the same partitions are
fitted by one ensemble per tolerance (sharing the whitened store), each warm-started from its own previous phase,
and a reference fitted to tol 1e-5. Reports L-BFGS steps per model, CPU seconds and the agreement of held-out
predictions (and Pearson p̃) with the reference; S then shrinks by the reference's top-k slice (p̃ ≥ 0.75).

    python benchmarks/lbfgs_tolerance.py N PHASES TOL[,TOL...]     # e.g. 200000 4 1e-4,2e-4,3e-4,5e-4
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time

import numpy as np

from aflite.core.ensemble import FastLogisticEnsemble
from aflite.core.phase import scores_from_predictions
from aflite.splits import draw_partitions
from aflitebench.shapes import SNLI_N, make_snli_like


def main() -> None:
    n, phases = int(sys.argv[1]), int(sys.argv[2])
    tols = [float(v) for v in sys.argv[3].split(",")]
    scale = n / SNLI_N
    t, k = max(10, int(round(50_000 * scale))), max(1, int(round(10_000 * scale)))
    b = make_snli_like(n, 768, random_state=0)
    _, codes = np.unique(b.y, return_inverse=True)
    base = FastLogisticEnsemble(copy_X=False)
    base.prepare(b.X, codes.astype(np.int64), 3)
    del b
    ens = {}
    for name, tol in [("tight", 1e-5)] + [(f"tol{v:g}", v) for v in tols]:
        ens[name] = copy.copy(base)  # shares the whitened store; each keeps its own warm start
        ens[name].tol = tol
    rows = np.arange(n)
    for ph in range(phases):
        rng = np.random.default_rng([0, ph])
        mask = draw_partitions(len(rows), 64, t, rng)
        held = ~mask
        y = codes[rows]
        res, preds = {}, {}
        for name, e in ens.items():
            c0 = time.process_time()
            preds[name] = e.fit_predict(rows, mask)
            it = np.array(e.last_stats.iterations)
            res[name] = {"cpu_seconds": round(time.process_time() - c0, 2), "steps_mean": float(it.mean()),
                         "steps_max": int(it.max())}
        p_ref, _, _ = scores_from_predictions(preds["tight"], y, mask)
        for name in ens:
            p, _, _ = scores_from_predictions(preds[name], y, mask)
            ok = ~np.isnan(p) & ~np.isnan(p_ref)
            res[name]["agreement_with_tight"] = float((preds[name][held] == preds["tight"][held]).mean())
            res[name]["pearson_with_tight"] = float(np.corrcoef(p[ok], p_ref[ok])[0, 1])
        elig = np.flatnonzero(~np.isnan(p_ref) & (p_ref >= 0.75))
        tie = rng.random(len(p_ref))
        keep = np.ones(len(rows), dtype=bool)
        keep[elig[np.lexsort((tie[elig], -p_ref[elig]))[:k]]] = False
        print(json.dumps({"phase": ph, "size": len(rows), "load": os.getloadavg(), **res}), flush=True)
        rows = rows[keep]


if __name__ == "__main__":
    main()
