"""``aflite card RUN_DIR --out DIR``: a run's filtered release, ready to publish (README.md, the data file,
manifest.json)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from aflite.cli.flags import out_path
from aflite.rundir.commands import COMMANDS

# this command's entry in the one table of commands (aflite.rundir.commands.COMMANDS)
COMMAND = COMMANDS["card"]

# the library calls whose keywords this command's flags are (tests/test_cli_keywords.py reads them)
LIBRARY = (COMMAND.library,)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "card",
        help="write a run's filtered data as a folder ready to publish: dataset card, data file, manifest",
        description="Writes a folder that datasets.load_dataset(DIR) reads as it is: DIR/README.md, a dataset card "
        "with YAML front matter (license, task_categories, size_categories, pretty_name, source_datasets, configs "
        "pointing at the data file) and a body that "
        "says how D(Φ) was made (Φ and its model, parameters, seed, versions, the input's sha256), |D| → |D(Φ)|, "
        "the label shift, the run's probe, the evaluate and explain figures when their folders are given, and the "
        "known limits; the run's filtered rows as data/train-00000-of-00001.parquet (each value as written: "
        "every column of a CSV, TSV or JSONL input a string); and, written last, DIR/manifest.json, the same facts "
        "machine-readable with every file's sha256 (aflite verify DIR checks a downloaded copy against it). Every "
        "figure is copied from the folders' results.json; the same inputs give the same bytes. The run folder is "
        "not changed, and a file in DIR that aflite card did not write is never replaced.",
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the --out folder of aflite run (or demo)")
    p.add_argument("--out", required=True, type=out_path,
                   help="the card's folder (README.md, the data file, manifest.json); not the run folder or inside it")
    p.add_argument("--evaluate", type=Path, default=None, metavar="DIR",
                   help="an aflite evaluate folder made from this run: its figures go on the card")
    p.add_argument("--explain", type=Path, default=None, metavar="DIR",
                   help="an aflite explain folder made from this run: its figures go on the card")
    p.add_argument("--license", default=None, metavar="ID",
                   help="the license as a Hub identifier (cc-by-4.0, mit, other, ...), when aflite does not know the "
                   "input's own (it knows the bundled sample's); default: the input's, else unknown")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from aflite.card import write_card

    res = write_card(args.run_dir, args.out, evaluate=args.evaluate, explain=args.explain, license=args.license)
    m = res.manifest
    print(f"card: {res.readme}\nmanifest: {res.manifest_path}")
    print(f"{m['name']}: {m['filter']['size_before']:,} → {m['filter']['size_after']:,} rows; license "
          f"{res.license}; data file {res.out / m['output']['data']['file']} (publish the folder as it is; aflite "
          f"verify {res.out} checks a copy)")
    for note in res.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0
