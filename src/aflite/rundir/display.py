"""How a command's :class:`aflite.rundir.results.Result` shows itself where its user looks: one short line of text
(``repr``: the command, the sizes, the verdict's first sentence, the folder) and, in a notebook, HTML
(``_repr_html_``: the verdict, the label shift and the first plots of the folder's page).

The HTML is built from the pages' frame and plotly bundle, which live in :mod:`aflite.report`, a layer above this
one. So this module holds only the hook: :mod:`aflite.report.inline` registers its builder with
:func:`register_html` when it is imported, and every command that returns a Result imports it (the commands'
folders write report.html through :mod:`aflite.report`). Without a builder, :func:`html_of` returns None and a
notebook shows the text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["GUIDE", "describe", "first_sentence", "html_of", "register_html", "sizes"]

GUIDE = "docs/guide/python.md"  # where the repr points for filtered, scores and the rest of a result
_HTML: list[Callable[[Any], str]] = []  # the one registered builder (a list: no global statement needed)


def register_html(build: Callable[[Any], str]) -> None:
    """Make ``build(result) -> str`` the HTML of every Result in a notebook (the last registration wins)."""
    _HTML[:] = [build]


def html_of(result: Any) -> str | None:
    """The result's HTML: its own (``html_view``, a result that shows itself otherwise: a card), the registered
    builder's, or None when no builder is registered (the notebook then shows the repr)."""
    own_html = getattr(result, "html_view", None)
    if callable(own_html):
        return str(own_html())
    return _HTML[0](result) if _HTML else None


def first_sentence(text: str, limit: int = 160) -> str:
    """The first sentence of ``text`` (up to its first ". "), cut to ``limit`` characters."""
    head = text.split(". ", 1)[0].rstrip()
    head = head if head.endswith((".", "!", "?")) or len(head) == len(text.rstrip()) else head + "."
    return head if len(head) <= limit else head[: limit - 1] + "…"


def sizes(body: dict[str, Any]) -> str:
    """The sizes a results.json body holds, in words: rows before and after a filter, an embedding's shape, the
    training sets of an evaluation; empty when it holds none of them."""
    if body.get("size_before") is not None and body.get("size_after") is not None:
        return f"|D| {int(body['size_before']):,} → |D(Φ)| {int(body['size_after']):,} rows"
    if body.get("rows") is not None and body.get("dim") is not None:
        return f"{int(body['rows']):,} rows × {int(body['dim']):,} dims"
    sets = body.get("training_sets")
    if isinstance(sets, list) and sets:
        return "training sets " + ", ".join(f"{s.get('name')} {int(s.get('size') or 0):,}" for s in sets
                                            if isinstance(s, dict))
    return ""


def describe(result: Any) -> str:
    """What ``repr`` shows: ``<aflite run: |D| 2,949 → |D(Φ)| 2,651 rows; “verdict…”; folder out; … see
    docs/guide/python.md>``. It never raises (a repr that fails hides the object): a result whose JSON cannot be
    built shows its command only."""
    command = getattr(result, "command", "") or type(result).__name__
    own_line = getattr(result, "repr_line", None)  # a result that says itself otherwise (a card: no sizes, no verdict)
    if callable(own_line):
        return str(own_line())
    try:
        body = result.to_json()
        verdict = [str(v) for v in (result.verdict_sentences() or [])]
    except Exception as exc:  # noqa: BLE001 - a repr must not fail
        return f"<aflite {command} result ({type(exc).__name__} building its summary)>"
    parts = [p for p in (sizes(body if isinstance(body, dict) else {}),
                         f"“{first_sentence(verdict[0])}”" if verdict else "") if p]
    out = getattr(result, "out", None)
    parts.append(f"folder {out}" if out is not None else "no folder (out=None)")
    what = "result.filtered, .scores, .verdict" if hasattr(type(result), "scores") else "its fields"
    return f"<aflite {command}: {'; '.join(parts)}; {what}: see {GUIDE}>"
