"""The command line parser as the site shows it: aflite's own (aflite.cli.build_parser), with help texts made
safe for reStructuredText, which sphinx-argparse parses them as."""

from __future__ import annotations

import argparse
import re

from aflite.cli import build_parser

_SIZE = re.compile(r"(?<![\\`\w])\|([A-Za-z][\w()Φ]{0,8})\|(?![\w`])")


def rst_text(text: str | None) -> str | None:
    """|D|, |S|, |D(Φ)| as text (not substitutions)."""
    return None if text is None else _SIZE.sub(r"\\|\1\\|", text)


def _escape(parser: argparse.ArgumentParser) -> None:
    parser.description = rst_text(parser.description)
    parser.epilog = rst_text(parser.epilog)
    for group in parser._action_groups:  # noqa: SLF001
        group.description = rst_text(group.description)
    for action in parser._actions:  # noqa: SLF001
        if action.help not in (None, argparse.SUPPRESS):
            action.help = rst_text(action.help)
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for choice in action._choices_actions:  # noqa: SLF001  (the commands' one-line help)
                choice.help = rst_text(choice.help)
            for sub in action.choices.values():
                _escape(sub)


def parser() -> argparse.ArgumentParser:
    """aflite's parser, its help texts escaped for the site."""
    p = build_parser()
    _escape(p)
    return p
