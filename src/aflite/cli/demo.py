"""``aflite demo``: the whole pipeline on the bundled real SNLI sample (2,949 pairs), no download."""

from __future__ import annotations

import argparse
from typing import Any

from aflite.cli.options import add_out, write_results
from aflite.cli.run import add_pipeline_options, pipeline_kwargs, report


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="run the whole pipeline on a bundled sample of real SNLI (CC BY-SA 4.0)",
        description="Filters the first 1,000 premise groups of SNLI dev (2,949 pairs, shipped in the package) with "
        "the paper's warm-up Φ (all-MiniLM-L6-v2 fine-tuned on a t-row slice; needs the [text] extra) and "
        "reports sizes, label shift, a hypothesis-only probe on D / D(Φ) / a random subset, and examples.",
    )
    add_out(p, default="aflite-demo", what="run directory")
    add_pipeline_options(p, "warmup")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from aflite.data import demo_dataset_path
    from aflite.pipeline import run as run_pipeline
    from aflite.rundir import clear_own_folder

    kwargs = pipeline_kwargs(args)
    if not args.resume:
        # start over on every call, but only in a folder that the demo itself created and marked (claimed and
        # locked by the CLI before this runs); anyone else's folder is never emptied
        clear_own_folder(args.out, "demo")
    res = run_pipeline(demo_dataset_path(), args.out, **kwargs)
    write_results(args.out, args, res.summary, seed=res.summary.get("seed"))
    from aflite.report import write_page  # report.html: the explorer page of this run

    write_page(args.out)
    report(res)
    print((args.out / "summary.md").read_text())
    return 0
