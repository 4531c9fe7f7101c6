"""``aflite demo``: the whole pipeline on the bundled real SNLI sample (2,949 pairs), no download."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from aflite.cli.run import add_pipeline_options, pipeline_kwargs, report


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="run the whole pipeline on a bundled sample of real SNLI (CC BY-SA 4.0)",
        description="Filters the first 1,000 premise groups of SNLI dev (2,949 pairs, shipped in the package) with "
        "the paper's warm-up Φ (all-MiniLM-L6-v2 fine-tuned on a t-row slice; needs the [text] extra) and "
        "reports sizes, label shift, a hypothesis-only probe on D / D(Φ) / a random subset, and examples.",
    )
    p.add_argument("--out", type=Path, default=Path("aflite-demo"), help="run directory (default ./aflite-demo)")
    add_pipeline_options(p, "warmup")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from aflite.data import demo_dataset_path
    from aflite.pipeline import run as run_pipeline

    kwargs = pipeline_kwargs(args)
    if args.out.exists() and (args.out / "summary.json").exists() and not args.resume:
        import shutil

        shutil.rmtree(args.out)  # the demo's own folder: start over on every call
    res = run_pipeline(demo_dataset_path(), args.out, **kwargs)
    report(res)
    print((args.out / "summary.md").read_text())
    return 0
