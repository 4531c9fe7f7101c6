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


# The terms docs/glossary.md defines, each with its entry's anchor there: the first use of each on a page of the site
# links to it (the pages use them before, or without, any definition of their own).
GLOSSARY: tuple[tuple[str, str], ...] = (
    (r"D\(Φ\)", "d-phi"),
    (r"\bTable 8\b", "table-8"),
    (r"\b[Ss]ingle-iteration\b", "single-iteration"),
    (r"Δmaj\b", "majority-rate"),
    (r"%R_R\b", "r-r"),
    (r"\bNBA\b", "nba-nbr"),
    (r"\bNBR\b", "nba-nbr"),
    (r"\bTRA\b", "tra"),
    (r"\bPECO\b", "peco"),
)
_TERMS = re.compile("|".join(f"(?P<t{i}>{pattern})" for i, (pattern, _) in enumerate(GLOSSARY)))
# where a term stays as it is: code, links, headings, and what is not prose
_NOT_PROSE = (nodes.literal, nodes.literal_block, nodes.reference, nodes.title, nodes.raw, nodes.math,
              nodes.math_block, nodes.target, nodes.option_string,
              nodes.substitution_definition)  # rst_prolog's |D(Φ)|: text that no page shows


def first_uses(text: str, done: set[int]) -> list[tuple[int, int, int]]:
    """(start, end, term index) of the first use in ``text`` of each term not in ``done`` (which it updates)."""
    found = []
    for m in _TERMS.finditer(text):
        i = int(next(k for k, v in m.groupdict().items() if v is not None)[1:])
        if i not in done:
            done.add(i)
            found.append((m.start(), m.end(), i))
    return found


def link_glossary_terms(app: Any, doctree: nodes.document, docname: str) -> None:
    """``doctree-resolved``: the first use of each :data:`GLOSSARY` term in a page's prose becomes a link to its
    entry in the glossary page (the glossary itself excepted)."""
    if docname == "glossary" or "glossary" not in app.env.all_docs:
        return
    target = app.builder.get_relative_uri(docname, "glossary")
    done: set[int] = set()
    for node in list(doctree.findall(nodes.Text)):
        parent = node.parent
        # a comment is no prose, but autosummary's tables are a subclass of it: the type itself, not its kin
        if parent is None or any(isinstance(a, _NOT_PROSE) or type(a) is nodes.comment for a in _ancestors(node)):
            continue
        text = str(node)
        uses = first_uses(text, done)
        if not uses:
            continue
        parts: list[nodes.Node] = []
        at = 0
        for start, end, i in uses:
            parts += [nodes.Text(text[at:start]),
                      nodes.reference("", text[start:end], refuri=f"{target}#{GLOSSARY[i][1]}", internal=True,
                                      classes=["glossary-term"])]
            at = end
        parts.append(nodes.Text(text[at:]))
        parent.replace(node, [p for p in parts if not (isinstance(p, nodes.Text) and not str(p))])
        if len(done) == len(GLOSSARY):
            return


def _ancestors(node: nodes.Node) -> list[nodes.Node]:
    out = []
    parent = node.parent
    while parent is not None:
        out.append(parent)
        parent = parent.parent
    return out
