"""The ``aflite`` command line: a thin layer over the library.

Each sub-command lives in its own module under :mod:`aflite.cli` and exposes ``register(subparsers)``: it
declares its options (the shared ones come from :mod:`aflite.cli.options`, so each name means one thing in
every command), and its handler parses them and calls the library. Modules are imported cheaply (only argparse
set-up runs at start) so ``aflite --help`` stays fast. ``main`` turns an :class:`aflite.errors.AfliteError` into
one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from aflite.cli.options import add_groups_option, add_overwrite_option  # noqa: F401 - the shared options' home
from aflite.errors import AfliteError

# name of the module under aflite.cli for each sub-command, in --help order
COMMANDS: tuple[str, ...] = ("demo", "run", "embed", "filter", "evaluate", "audit", "report", "synthetic", "bench")


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
    from aflite.cli.options import add_threads

    for command_parser in sub.choices.values():  # one thread policy for every command (aflite.threads)
        if "--threads" not in command_parser._option_string_actions:
            add_threads(command_parser)
    return parser


def _claim_output(args: argparse.Namespace) -> contextlib.AbstractContextManager[object]:
    """Claim --out (checked, marked, locked) before the command computes anything; see aflite.rundir."""
    kind = getattr(args, "output", None)
    out = getattr(args, "out", None)
    if kind != "folder" or out is None:
        return contextlib.nullcontext()
    from aflite.rundir import claim_output

    return claim_output(out, args.command, overwrite=getattr(args, "overwrite", False),
                        resume=getattr(args, "resume", False))


def main(argv: Sequence[str] | None = None) -> int:
    from aflite.threads import prepare_process

    prepare_process()  # before build_parser loads numpy and scikit-learn (aflite.threads)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version or a usage error (already reported on one line)
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    args.argv = list(argv) if argv is not None else sys.argv[1:]  # recorded in OUT/results.json
    from aflite.data import option_names

    token = option_names(True)  # error messages name --text-a, --label, ... rather than keywords
    try:
        validate = getattr(args, "validate", None)
        if validate is not None:  # checks that need neither data nor the output folder
            validate(args)
        from aflite.threads import thread_policy

        with thread_policy(getattr(args, "threads", None)), _claim_output(args):
            code = args.handler(args)
    except AfliteError as exc:
        print(f"aflite {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"aflite {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        token.var.reset(token)
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
