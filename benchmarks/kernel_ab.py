"""The fast solver's two kernels side by side in one run: compiled (numba) against numpy, on one phase.

Same features, same partitions, alternating runs; prints CPU seconds, the time in own-row passes, and the
agreement of held-out predictions. Usage: ``python benchmarks/kernel_ab.py [N] [REPEATS] [THREADS]``
(default 200,000 rows × 768, t/N as in Table 8's SNLI setting, 2 repeats, 1 thread).
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from aflite.core.ensemble import FastLogisticEnsemble
from aflite.splits import draw_partitions


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    d, k, m = 768, 3, 64
    t = int(n * 50_000 / 550_152)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d), dtype=np.float32) / np.arange(1, d + 1, dtype=np.float32) ** 0.5
    y = rng.integers(0, k, n)
    biased = n * 3 // 10
    X[:biased, :k] += 0.5 * np.eye(k, dtype=np.float32)[y[:biased]]
    mask = draw_partitions(n, m, t, rng)
    rows = np.arange(n)
    out: dict[str, list[dict[str, float]]] = {"numba": [], "numpy": []}
    preds = {}
    for _ in range(repeats):
        for kernel in out:
            os.environ["AFLITE_KERNEL"] = kernel
            ens = FastLogisticEnsemble(n_jobs=threads)
            ens.prepare(X, y, k)
            c0, w0 = time.process_time(), time.perf_counter()
            preds[kernel] = ens.fit_predict(rows, mask)
            out[kernel].append({"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - w0,
                                "passes_s": ens.last_stats.parts.get("passes", 0.0)})
    held = ~mask
    agree = float((preds["numba"][held] == preds["numpy"][held]).mean())
    print(json.dumps({"n": n, "d": d, "t": t, "m": m, "threads": threads, "runs": out,
                      "heldout_prediction_agreement": agree, "load_average": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
