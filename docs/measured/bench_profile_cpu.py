"""The profile of `aflite bench --device torch-cpu --profile` at sizes a shared 2-core CPU finishes in minutes:
frozen MiniLM (the bundled all-MiniLM-L6-v2, float32 weights) on the first 2,000 SNLI train_100k pairs, token
budget 16,384, and the filter on SNLI-shaped features 27,508 x 768 (Table 8 scaled), classic and device L-BFGS
modes. Writes docs/measured/bench_profile_cpu.json. Run from the repository root with PYTHONPATH=src."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

from aflite.experiments.bench_device import device_benchmark

out = Path(__file__).with_suffix(".json")
sizes = {"profile_rows": 2000, "filter_n": 27_508, "filter_d": 768, "profile_filter_modes": ("classic", "device_lbfgs")}
res = device_benchmark("torch-cpu", sections=(), profile=True, sizes=sizes, out_json=out,
                       data_dir=sys.argv[1] if len(sys.argv) > 1 else None,
                       log=lambda m: print(m, file=sys.stderr, flush=True))
print(res["profile"].get("phi", {}).get("verdict"), platform.processor(), os.cpu_count())
