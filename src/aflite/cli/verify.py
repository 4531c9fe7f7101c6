"""``aflite verify DIR``: check a downloaded card (or an aflite output folder) against its manifest."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from aflite.rundir.commands import COMMANDS

# this command's entry in the one table of commands (aflite.rundir.commands.COMMANDS)
COMMAND = COMMANDS["verify"]

# the library calls whose keywords this command's flags are (tests/test_cli_keywords.py reads them)
LIBRARY = (COMMAND.library,)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "verify",
        help="check every file of a card (or an aflite output folder) against its manifest",
        description="Checks every file that DIR/manifest.json (a folder written by aflite card) or DIR/results.json "
        "(an output folder of another aflite command) lists: present, of the listed size and sha256, and the "
        "manifest itself as written. Prints one line per problem (a missing or changed file, a file inside the "
        "card's data folder that the manifest does not list, a card that was never committed) and exits 1; "
        "exits 0 when every file is the one that was written, 2 when DIR is neither a card nor an aflite folder. "
        "Run it on a downloaded copy, in any path; nothing is written.",
    )
    p.add_argument("folder", type=Path, metavar="DIR", help="a folder written by aflite card (or another command)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from aflite.card.verify import verify_folder

    res = verify_folder(args.folder)
    for line in res.problems:
        print(line)
    if res.problems:
        return 1
    what = "card" if res.kind == "card" else f"aflite {res.kind} folder"
    print(f"{res.folder}: the {what} verifies: {res.checked:,} file(s), each the one its manifest lists")
    return 0
