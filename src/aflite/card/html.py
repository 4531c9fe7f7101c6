"""A card in a notebook: its one-line ``repr`` and its rich display, README.md rendered as HTML.

The front matter (the Hub's metadata) is shown as a table of its keys, the body as the Hub would show it: the
CommonMark of README.md with GitHub's tables, rendered by markdown-it-py with raw HTML turned off, so a label or a
title that holds HTML shows as text (dataset text is escaped, never interpreted); links are markdown-it's
validated ones (no ``javascript:``).
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

__all__ = ["card_html", "card_text", "markdown_html", "split_front_matter"]

_CSS = """
.aflite-card{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;line-height:1.45;color:#222}
.aflite-card table{border-collapse:collapse;margin:6px 0 10px 0;font-size:.9em}
.aflite-card th,.aflite-card td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
.aflite-card th{background:#f2f2f2}.aflite-card code{background:#f4f4f4;padding:0 3px;border-radius:3px}
.aflite-card blockquote{background:#fff8e1;border-left:4px solid #f0b400;margin:8px 0;padding:4px 12px}
.aflite-card .muted{color:#666}.aflite-card h1{font-size:1.4em}.aflite-card h2{font-size:1.2em}
.aflite-card h3{font-size:1.05em}
"""


def card_text(card: Any) -> str:
    """``repr`` of a :class:`aflite.card.CardResult`: its folder, license and notes on one line."""
    notes = "; ".join(str(n) for n in card.notes)
    return (f"<aflite card: {card.readme} and {card.manifest_path.name}, license {card.license}"
            + (f"; {notes}" if notes else "") + ">")


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """README.md's YAML front matter (a mapping; {} when there is none or it does not parse) and its body."""
    import yaml

    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end != -1:
            try:
                meta = yaml.safe_load(text[4:end + 1])
            except yaml.YAMLError:
                meta = None
            return (meta if isinstance(meta, dict) else {}), text[end + 5:]
    return {}, text


def markdown_html(body: str) -> str:
    """CommonMark with GitHub's tables as HTML; raw HTML in the text is escaped, not passed through."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table").render(body)


def _cell(value: Any) -> str:
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(f"<code>{escape(str(v))}</code>" for v in value)
    if isinstance(value, dict | list):
        return f"<code>{escape(json.dumps(value, ensure_ascii=False))}</code>"
    return f"<code>{escape(str(value))}</code>"


def card_html(card: Any) -> str:
    """A card in a notebook: where it is, its license and notes, the front matter as a table and README.md's
    body rendered (escaped)."""
    try:
        text = card.readme.read_text(encoding="utf-8")
    except OSError as exc:
        text = f"(README.md not readable: {exc})"
    meta, body = split_front_matter(text)
    notes = "".join(f'<p class="muted">{escape(str(n))}</p>' for n in card.notes)
    rows = "".join(f"<tr><th>{escape(str(k))}</th><td>{_cell(v)}</td></tr>" for k, v in meta.items())
    table = (f"<details open><summary>front matter (the Hub's metadata)</summary><table>{rows}</table></details>"
             if rows else "")
    return (f'<div class="aflite-card"><style>{_CSS}</style><div><b>aflite card</b> · <code>'
            f"{escape(str(card.readme))}</code> and {escape(card.manifest_path.name)} · license "
            f"{escape(str(card.license))}</div>{notes}{table}<details open><summary>README.md</summary>"
            f"{markdown_html(body)}</details></div>")
