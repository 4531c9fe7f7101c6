"""Peak memory of the complete SNLI-shaped filter, run directly (no benchmark parent): make the synthetic features,
then ``AFLite(...).fit`` with Table 8's parameters, printing the resident memory after each phase.

    python benchmarks/filter_peak_memory.py 550152 100          # default ensemble (whitened copy of X)
    python benchmarks/filter_peak_memory.py 550152 100 inplace  # FastLogisticEnsemble(copy_X=False)

Run it under ``/usr/bin/time -v`` for the kernel's own figure ("Maximum resident set size").
"""

from __future__ import annotations

import resource
import sys
import time

from aflite.core.ensemble import FastLogisticEnsemble
from aflite.core.filter import AFLite
from aflitebench.shapes import SNLI_N, make_snli_like


def rss() -> str:
    with open("/proc/self/statm") as fh:
        cur = int(fh.read().split()[1]) * 4096 / 2**30
    return f"cur {cur:.2f} peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB"


def main() -> None:
    n, phases = int(sys.argv[1]), int(sys.argv[2])
    scale = min(1.0, n / SNLI_N)
    t0 = time.perf_counter()
    b = make_snli_like(n, 768, random_state=0)
    X, y = b.X, b.y
    del b
    print("data", round(time.perf_counter() - t0, 1), rss(), flush=True)
    model = FastLogisticEnsemble(copy_X=False) if len(sys.argv) > 3 else "logistic"
    af = AFLite(target_size=int(92_000 * scale), n_partitions=64, train_size=int(round(50_000 * scale)),
                slice_size=int(round(10_000 * scale)), threshold=0.75, random_state=0, max_iterations=phases,
                model=model)
    t0 = time.perf_counter()
    af.fit(X, y, callback=lambda r, s: print("phase", r.iteration, round(r.seconds, 2), rss(), flush=True))
    print("fit", round(time.perf_counter() - t0, 1), int(af.keep_mask_.sum()), rss())


if __name__ == "__main__":
    main()
