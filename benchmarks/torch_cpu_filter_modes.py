"""The complete SNLI-shaped filter (Table 8 scaled to n) on the numpy CPU path and in every PyTorch device mode of
issue #31, run on the CPU (``device="torch-cpu"``): wall seconds, phases, and each kept set against the CPU's and the
classic torch path's. On one device the resident mode keeps the classic set bit for bit; the speeds are the CPU's
(the modes exist for a GPU, where they are not yet measured).

    python benchmarks/torch_cpu_filter_modes.py [N] [D] > out.json
"""

from __future__ import annotations

import json
import os
import sys

from aflitebench.bench_device import FILTER_MODES, device_benchmark

n = int(sys.argv[1]) if len(sys.argv) > 1 else 27_508
d = int(sys.argv[2]) if len(sys.argv) > 2 else 768
res = device_benchmark("torch-cpu", sections=("filter",), sizes={"filter_n": n, "filter_d": d,
                                                                 "filter_modes": tuple(FILTER_MODES)},
                       log=lambda m: print(m, file=sys.stderr, flush=True))
res["threads"] = os.environ.get("AFLITE_NUM_THREADS")
print(json.dumps(res, indent=2))
