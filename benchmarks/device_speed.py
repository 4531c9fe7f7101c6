"""The profile and the Φ speed table of ``benchmarks/bench.py --device DEV --profile --sections phi --no-kept-sets`` at
sizes that leave a device call room for the ladder (benchmarks/device_check.sh): Φ profiled on the first
``--profile-rows`` SNLI pairs, the filter profiled in ``--filter-modes``, and every Φ mode of the speed table timed
on ``--phi-rows`` pairs (pairs/s barely depend on the count once the kernels are warm).

Usage: python benchmarks/device_speed.py --device cuda --data-dir carry/data --out OUT/device_bench.json
       [--model-path DIR] [--tiny] [--profile-rows 10000] [--phi-rows 20000] [--filter-modes device_lbfgs]
       [--no-profile --sections filter|warmup [--filter-n N] [--run-modes device_lbfgs,device_onepass]]
Writes the JSON after every section (a cut run keeps what it measured) and prints the report.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--model-path", default=None)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tiny", action="store_true", help="the bench's tiny sizes (a test of the script)")
    ap.add_argument("--profile-rows", type=int, default=10_000)
    ap.add_argument("--phi-rows", type=int, default=20_000)
    ap.add_argument("--filter-modes", default="device_lbfgs",
                    help="comma-separated FILTER_MODES names profiled on the SNLI-shaped filter")
    ap.add_argument("--sections", default="phi", help="sections after the profile (default phi)")
    ap.add_argument("--no-profile", action="store_true", help="only --sections (the filter or warm-up step)")
    ap.add_argument("--filter-n", type=int, default=None, help="rows of the filter section's SNLI-shaped features")
    ap.add_argument("--run-modes", default=None,
                    help="comma-separated FILTER_MODES names the filter section runs (default all)")
    args = ap.parse_args(argv)
    from aflitebench.bench_device import device_benchmark, format_device_report

    sizes: dict[str, object] = {"profile_filter_modes": tuple(m for m in args.filter_modes.split(",") if m)}
    if args.tiny:
        sizes |= {"filter_n": 600}  # the profiler's cost per operator makes the tiny filter slow on a CPU
    else:
        sizes |= {"profile_rows": args.profile_rows, "phi_rows": args.phi_rows}
    if args.filter_n is not None:
        sizes["filter_n"] = args.filter_n
    if args.run_modes is not None:
        sizes["filter_modes"] = tuple(m for m in args.run_modes.split(",") if m)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    res = device_benchmark(args.device, tiny=args.tiny, data_dir=args.data_dir, model_path=args.model_path,
                           sections=tuple(s for s in args.sections.split(",") if s), profile=not args.no_profile,
                           sizes=sizes,
                           kept_sets=False, out_json=args.out,
                           log=lambda m: print(f"[bench] {m}", file=sys.stderr, flush=True))
    print(format_device_report(res))
    return 1 if any("error" in res.get(k, {}) for k in ("profile", "phi", "filter", "warmup")) else 0


if __name__ == "__main__":
    sys.exit(main())
