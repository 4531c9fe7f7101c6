"""``aflite bench``: fast path vs scikit-learn reference, and a complete SNLI-sized run."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark the fast ensemble against scikit-learn (not a test: it reports what it measures)",
        description="Builds SNLI-shaped features (550,152 x 768, 3 classes, a planted bias, anisotropic "
        "spectrum) or takes --features/--labels, runs one filtering phase (m=64, t=50,000) on the fast path "
        "and on scikit-learn's LogisticRegression over the same partitions, and then the complete filter "
        "(k=10,000, tau=0.75, n=92,000) with wall time and peak memory.",
    )
    p.add_argument("--n", type=int, default=550_152, help="rows of synthetic features (default 550,152)")
    p.add_argument("--dim", type=int, default=768, help="feature dimension (default 768)")
    p.add_argument("--reference-partitions", type=int, default=8,
                   help="partitions the scikit-learn reference runs; its time is scaled to 64 (default 8)")
    p.add_argument("--no-complete", action="store_true", help="skip the complete filter run")
    p.add_argument("--features", default=None, help="real features instead of synthetic ones")
    p.add_argument("--labels", default=None, help="labels for --features")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from aflite.bench import format_report, run_benchmark
    from aflite.errors import ParameterError

    if args.reference_partitions < 1:
        raise ParameterError("--reference-partitions must be at least 1")
    if (args.features is None) != (args.labels is None):
        raise ParameterError("--features and --labels go together")

    def log(msg: str) -> None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)

    res = run_benchmark(
        n=args.n, d=args.dim, reference_partitions=args.reference_partitions, complete=not args.no_complete,
        features=args.features, labels=args.labels, seed=args.seed, log=log,
    )
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print(format_report(res))
    return 0
