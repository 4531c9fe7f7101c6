"""The command line parser as the site shows it: aflite's own (aflite.cli.build_parser), with help texts made
safe for reStructuredText, which sphinx-argparse parses them as; and the section ids of its pages made valid CSS
identifiers (sphinx-argparse makes them from group titles, parentheses and quotes included, and the theme's
scroll-spy passes them to ``querySelector``, which throws on them)."""

from __future__ import annotations

import argparse
import re
from typing import Any

from docutils import nodes

from aflite.cli import build_parser

_SIZE = re.compile(r"(?<![\\`\w])\|([A-Za-z][\w()Φ]{0,8})\|(?![\w`])")


def rst_text(text: str | None) -> str | None:
    """|D|, |S|, |D(Φ)| as text (not substitutions)."""
    return None if text is None else _SIZE.sub(r"\\|\1\\|", text)


# an address with a scheme, in a help text: an example (tcp://host:8786), not a page, so code rather than the
# hyperlink that reStructuredText would make of it
_URI = re.compile(r"(?<![`\w])([a-z][a-z0-9+.-]*://[^\s()`,;]+)")


def help_text(text: str | None) -> str | None:
    """A help text as reStructuredText: sizes as text (:func:`rst_text`) and addresses as literals."""
    text = rst_text(text)
    return None if text is None else _URI.sub(r"``\1``", text)


def _escape(parser: argparse.ArgumentParser) -> None:
    parser.description = help_text(parser.description)
    parser.epilog = help_text(parser.epilog)
    for group in parser._action_groups:  # noqa: SLF001
        group.description = help_text(group.description)
    for action in parser._actions:  # noqa: SLF001
        if action.help not in (None, argparse.SUPPRESS):
            action.help = help_text(action.help)
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for choice in action._choices_actions:  # noqa: SLF001  (the commands' one-line help)
                choice.help = help_text(choice.help)
            for sub in action.choices.values():
                _escape(sub)


def parser() -> argparse.ArgumentParser:
    """aflite's parser, its help texts escaped for the site."""
    p = build_parser()
    _escape(p)
    return p


_CSS_ID = re.compile(r"[A-Za-z][\w-]*\Z")


def css_safe_ids(app: Any, doctree: nodes.document) -> None:
    """``doctree-read`` (before Sphinx collects the page's table of contents): a section id that is not a plain CSS
    identifier (``columns-(generic-tables)``) becomes one (``columns-generic-tables``, numbered when taken), and
    the references to it follow."""
    taken = set(doctree.ids)
    renamed: dict[str, str] = {}
    for section in doctree.findall(nodes.section):
        for i, old in enumerate(section["ids"]):
            if _CSS_ID.match(old):
                continue
            base = nodes.make_id(old) or "section"
            new, n = base, 1
            while new in taken:
                n += 1
                new = f"{base}-{n}"
            taken.add(new)
            renamed[old] = new
            section["ids"][i] = new
            if old in doctree.ids:
                doctree.ids[new] = doctree.ids.pop(old)
    if renamed:
        for node in doctree.findall(nodes.Element):
            if node.get("refid") in renamed:
                node["refid"] = renamed[node["refid"]]
