"""A command registers once (aflite.rundir.commands): its CLI module's ``COMMAND`` declaration gives the CLI's
table, ``aflite report``'s lookup, the body a reader checks and its guide, and reading the declarations imports no
CLI module. Each command's own rules: tests/test_conformance.py; a new command, check and flag added as
CONTRIBUTING.md says: tests/test_contributing.py."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

from aflite.cli import COMMANDS
from aflite.rundir.commands import declarations

ROOT = Path(__file__).resolve().parents[1]


def test_the_command_table_the_pages_and_the_bodies_come_from_the_declarations() -> None:
    declared = declarations()
    assert COMMANDS == tuple(declared)  # each command's own rules: tests/test_conformance.py
    index = (ROOT / "docs" / "guide" / "README.md").read_text(encoding="utf-8")
    assert "`docs/guide/<command>.md`" in index
    listed = re.findall(r"^- \[[^]]+\]\(([\w./]+\.md)\)", index, flags=re.M)
    assert listed and not {Path(p).stem for p in listed} & set(declared)  # no command listed by hand


def test_the_declarations_are_read_without_importing_the_cli() -> None:
    code = ("import sys; from aflite.rundir.commands import declarations; declarations(); "
            "print(sorted(m for m in sys.modules if m.startswith('aflite.cli')))")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    importlib.import_module("aflite.cli")  # and the CLI's own table agrees (above)
