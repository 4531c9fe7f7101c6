"""The ``aflite`` command line: a thin layer over the library.

Each sub-command lives in its own module under :mod:`aflite.cli` and exposes ``register(subparsers)``;
modules are imported lazily-cheaply (only argparse set-up runs at start) so ``aflite --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from aflite.errors import AfliteError

# name of the module under aflite.cli for each sub-command, in --help order
COMMANDS: tuple[str, ...] = ("demo", "run", "embed", "filter", "evaluate", "audit", "synthetic", "bench")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the usage text is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from aflite import __version__

    parser = _Parser(
        prog="aflite",
        description="Find, measure and remove dataset artifacts (AFLite, Le Bras et al. 2020).",
    )
    parser.add_argument("--version", action="version", version=f"aflite {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"aflite.cli.{name.replace('-', '_')}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version or a usage error (already reported on one line)
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    try:
        code = args.handler(args)
    except AfliteError as exc:
        print(f"aflite {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"aflite {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
