"""``aflite card RUN_DIR --out DIR``: the dataset card (README.md + manifest.json) of a run's filtered release."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from aflite.rundir.commands import Command

# this command, declared once (aflite.rundir.commands): the CLI's table, aflite report and the readers use it
COMMAND = Command("card", library="aflite.card:write_card", result="aflite.card.write:CardResult", page="card.md",
                  order=8)

# the library calls whose keywords this command's flags are (tests/test_cli_keywords.py reads them)
LIBRARY = ("aflite.card:write_card",)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "card",
        help="write a Hugging Face-style dataset card (README.md + manifest.json) for a run's filtered data",
        description="Writes DIR/README.md, a dataset card with YAML front matter (license, task_categories, "
        "size_categories, pretty_name, source_datasets, configs pointing at the filtered file) and a body that "
        "says how D(Φ) was made (Φ and its model, parameters, seed, versions, the input's sha256), |D| → |D(Φ)|, "
        "the label shift, the run's probe, the evaluate and explain figures when their folders are given, and the "
        "known limits; and DIR/manifest.json, the same facts machine-readable (with the sha256 of kept_ids.txt and "
        "of the filtered file). Every figure is copied from the folders' results.json; the same inputs give the "
        "same bytes. The run folder is not changed.",
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the --out folder of aflite run (or demo)")
    p.add_argument("--out", required=True, type=Path,
                   help="the card's folder (README.md, manifest.json); not the run folder or inside it")
    p.add_argument("--evaluate", type=Path, default=None, metavar="DIR",
                   help="an aflite evaluate folder made from this run: its figures go on the card")
    p.add_argument("--explain", type=Path, default=None, metavar="DIR",
                   help="an aflite explain folder made from this run: its figures go on the card")
    p.add_argument("--license", default=None, metavar="ID",
                   help="the license as a Hub identifier (cc-by-4.0, mit, other, ...), when aflite does not know the "
                   "input's own (it knows the bundled sample's); default: the input's, else unknown")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a README.md or manifest.json in --out that aflite card did not write")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from aflite.card import write_card

    res = write_card(args.run_dir, args.out, evaluate=args.evaluate, explain=args.explain, license=args.license,
                     overwrite=args.overwrite)
    m = res.manifest
    print(f"card: {res.readme}\nmanifest: {res.manifest_path}")
    print(f"{m['name']}: {m['filter']['size_before']:,} → {m['filter']['size_after']:,} rows; license "
          f"{res.license}; data file {m['output']['file']} (copy it beside README.md to publish)")
    for note in res.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0
