"""``aflite report DIR``: (re)build DIR/report.html, the self-contained explorer page of an output folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from aflite.rundir.commands import COMMANDS

# this command's entry in the one table of commands (aflite.rundir.commands.COMMANDS)
COMMAND = COMMANDS["report"]

# the library calls whose keywords this command's flags are (tests/test_cli_keywords.py reads them)
LIBRARY = (COMMAND.library,)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="rebuild the explorer page (report.html) of a run, explain, evaluate or audit folder",
        description="Writes DIR/report.html from the files in DIR: the rows (texts from the dataset file the run "
        "names), sortable and filterable, and interactive plots. The page is one file that opens offline.",
    )
    p.add_argument("folder", type=Path, metavar="DIR", help="the --out folder of aflite run/explain/evaluate/audit")
    p.add_argument("--open", action="store_true", help="open the page in the default browser afterwards")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from aflite.commands.report import write_page

    path = write_page(args.folder)
    print(path)
    if args.open:
        import webbrowser

        if not webbrowser.open(path.resolve().as_uri()):
            print(f"could not open a browser; open {path} yourself", file=sys.stderr)
    return 0
