"""``aflite demo``: the whole pipeline on the bundled real SNLI sample (2,949 pairs), no download."""

from __future__ import annotations

import argparse
from typing import Any

from aflite.cli.flags import FEATURIZER_OPTIONS, LOADERS, add_out
from aflite.cli.run import CLI_ONLY as CLI_ONLY  # run's flags, the same
from aflite.cli.run import add_pipeline_options, pipeline_kwargs, report
from aflite.rundir.commands import COMMANDS

# this command's entry in the one table of commands (aflite.rundir.commands.COMMANDS)
COMMAND = COMMANDS["demo"]

# the library calls whose keywords this command's flags are (tests/test_cli_keywords.py reads them)
LIBRARY = (COMMAND.library, "aflite.core.filter:AFLite", *LOADERS, *FEATURIZER_OPTIONS)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="run the whole pipeline on a bundled sample of real SNLI (CC BY-SA 4.0)",
        description="Filters the first 1,000 premise groups of SNLI dev (2,949 pairs, shipped in the package) with "
        "a frozen all-MiniLM-L6-v2 Φ (needs the [text] extra; chosen because it fits the demo's time on a CPU: "
        "the paper's warm-up Φ, MiniLM fine-tuned on a t-row slice, is --featurizer warmup, and on this sample "
        "its 268-row slice gives 27 fine-tuning steps) and reports sizes, label shift, a hypothesis-only probe "
        "on D / D(Φ) / random subsets, the verdict, and examples.",
    )
    add_out(p, default="aflite-demo", what="run directory")
    add_pipeline_options(p, DEMO_FEATURIZER)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from aflite.commands.run import run as run_pipeline
    from aflite.data import demo_dataset_path
    from aflite.rundir.lock import clear_own_folder

    if not args.resume:
        # start over on every call, but only in a folder that the demo itself created and marked (claimed and
        # locked by the CLI before this runs); anyone else's folder is never emptied
        clear_own_folder(args.out, "demo")
    with pipeline_kwargs(args) as kwargs:
        res = run_pipeline(demo_dataset_path(), args.out_folder, title=DEMO_TITLE, **kwargs)
    if args.featurizer == DEMO_FEATURIZER:
        print("Φ: frozen all-MiniLM-L6-v2, the demo's default because it fits the demo's time on a CPU; the "
              "paper's warm-up Φ (fine-tuned on a slice of t rows, then discarded): aflite demo --featurizer warmup")
    report(res)  # sizes, shares, probe and verdict once; then only what summary.md adds: the examples
    md = (args.out / "summary.md").read_text(encoding="utf-8")
    cut = md.find("\n## ")
    if cut >= 0:
        print(md[cut + 1:])
    return 0


DEMO_FEATURIZER = "minilm"
DEMO_TITLE = "the bundled SNLI sample (first 1,000 premise groups of SNLI 1.0 dev, 2,949 pairs)"
