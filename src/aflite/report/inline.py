"""A command's result in a notebook (``_repr_html_``): the command and sizes, the verdict, the label shift and the
first plots of the folder's page (a run's per-phase curve and label mix, an evaluation's accuracy bars, explain's
significant (token, label) pairs per set, the audit's biased-condition accuracy per set and view), drawn with
the plotly.js the explorer page ships, inline: nothing is fetched, so the output shows offline and in an HTML export.

:func:`result_html` builds it; importing this module registers it with :func:`aflite.rundir.display.register_html`
(the Result class lives in a lower layer and must not import this one). Dataset text is escaped; the data the
plots read is embedded as JSON the script parses.
"""

from __future__ import annotations

import uuid
from importlib import resources
from typing import Any, TypedDict

from aflite.check.token_summary import TokenSummary
from aflite.report.frame import esc, json_for_script, plotly_js, script_text, verdict_block
from aflite.report.rows import AccuracyPlot, read_evaluate
from aflite.rundir import display
from aflite.rundir.names import PAGE
from aflite.rundir.schema import EvaluateBody
from aflite.rundir.typed_json import build

__all__ = ["label_shift_table", "result_html"]

# scoped to the output (a notebook page holds many): the page frame's CSS, for this block only
_CSS = """
.aflite-inline{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;line-height:1.4;color:#222}
.aflite-inline table{border-collapse:collapse;margin:6px 0 10px 0;font-size:.9em}
.aflite-inline th,.aflite-inline td{border:1px solid #ccc;padding:3px 8px;text-align:right}
.aflite-inline th{background:#f2f2f2}.aflite-inline td.l,.aflite-inline th.l{text-align:left}
.aflite-inline .verdict{background:#fff8e1;border-left:4px solid #f0b400;padding:6px 12px;margin:8px 0}
.aflite-inline .muted{color:#666;font-size:.9em}
.aflite-inline .aflite-plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:8px}
"""


def label_shift_table(before: dict[str, int], after: dict[str, int]) -> str:
    """Per label: rows and shares before and after, and the move in points (every label escaped)."""
    nb, na = max(1, sum(before.values())), max(1, sum(after.values()))
    rows = []
    for k, v in before.items():
        a = after.get(k, 0)
        sb, sa = 100 * v / nb, 100 * a / na
        rows.append(f'<tr><td class="l">{esc(k)}</td><td>{v:,}</td><td>{a:,}</td><td>{sb:.1f}%</td>'
                    f"<td>{sa:.1f}%</td><td>{sa - sb:+.1f}</td></tr>")
    head = ('<tr><th class="l">label</th><th>D</th><th>D(Φ)</th><th>share in D</th><th>share in D(Φ)</th>'
            "<th>move (points)</th></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


class LeakagePoint(TypedDict):
    """One audited set and single-sentence view: the biased model's and the majority class's accuracy."""

    set: str
    view: str
    biased: float
    majority: float | None


class InlinePlots(TypedDict, total=False):
    """What the inline plots read: a run's phases and label mix, evaluate's accuracies, explain's significant
    token counts per set, the audit's biased-condition accuracies."""

    history: list[Any]  # the body's iterations, as results.json holds them
    label_counts_before: dict[str, int]
    label_counts_after: dict[str, int]
    accuracy: AccuracyPlot
    tokens: dict[str, float]
    leakage: list[LeakagePoint]


def _plot_data(body: dict[str, Any]) -> tuple[InlinePlots, list[str]]:
    """What the plots read and the divs they draw in (by suffix): the page's first plots for this result
    (``body``: the result's results.json body)."""
    data = InlinePlots()
    divs = []
    if body.get("iterations"):
        data["history"] = body["iterations"]
        divs.append("phases")
    if body.get("label_counts_before"):
        data["label_counts_before"] = body["label_counts_before"]
        data["label_counts_after"] = body.get("label_counts_after") or {}
        divs.append("labels")
    if body.get("aggregate") and body.get("training_sets"):
        data["accuracy"] = read_evaluate(build(EvaluateBody, body, "the result", EvaluateBody.required))
        if data["accuracy"]["bars"]:
            divs.append("accuracy")
    # explain: the competency test's count per set, in the tokens check's summary (typed back from its JSON)
    entry = ((body.get("checks") or {}).get("tokens") or {}).get("summary")
    tokens = TokenSummary.from_json(entry).significant_tokens if entry is not None else None
    if tokens is not None:
        data["tokens"] = {"D": tokens.full, "D(Φ)": tokens.kept, "random subsets": tokens.random}
        divs.append("tokens")
    leakage = _leakage(body.get("results"))  # the audit: biased-condition accuracy per set and view
    if leakage:
        data["leakage"] = leakage
        divs.append("leakage")
    return data, divs


def _leakage(sets: object) -> list[LeakagePoint]:
    """Per audited set and single-sentence view: the biased model's and the majority class's accuracy."""
    if not isinstance(sets, list):
        return []
    out: list[LeakagePoint] = []
    for s in sets:
        views = s.get("views") if isinstance(s, dict) else None
        if not isinstance(views, dict):
            continue
        out += [{"set": str(s.get("name", "")), "view": str(v), "biased": r["biased_accuracy"],
                 "majority": r.get("majority_accuracy")} for v, r in views.items()
                if isinstance(r, dict) and isinstance(r.get("biased_accuracy"), int | float)]
    return out


def result_html(result: Any) -> str:
    """The HTML a notebook shows for ``result`` (any :class:`aflite.rundir.results.Result`)."""
    body = result.to_json()
    body = body if isinstance(body, dict) else {}
    uid = f"aflite-{uuid.uuid4().hex}"  # an element id, unique on a page that keeps older outputs
    out = getattr(result, "out", None)
    sizes = display.sizes(body)
    head = f"<b>aflite {esc(result.command)}</b>" + (f" · {esc(sizes)}" if sizes else "") + " · " + (
        f"folder <code>{esc(out)}</code>" if out is not None else "no folder (out=None)")
    parts = [f'<div class="aflite-inline" id="{uid}"><style>{_CSS}</style><div>{head}</div>',
             verdict_block(result.verdict_sentences()).replace(' id="verdict"', "")]  # one page, many outputs
    if body.get("label_counts_before"):
        shift = body.get("label_shift") or {}
        parts.append("<div><b>Label shift</b>" + label_shift_table(body["label_counts_before"],
                                                                   body.get("label_counts_after") or {}) + "</div>")
        if shift.get("warning"):
            parts.append(f'<p class="muted">{esc(shift["warning"])}</p>')
    data, divs = _plot_data(body)
    js = plotly_js() if divs else None
    if divs and js is None:
        parts.append('<p class="muted">Plots need plotly (pip install plotly).</p>')
    elif divs:
        parts.append('<div class="aflite-plots">' + "".join(f'<div id="{uid}-{d}"></div>' for d in divs) + "</div>")
        parts.append(f'<script type="application/json" id="{uid}-data">{json_for_script(data)}</script>')
        parts.append(f'<script type="text/plain" class="aflite-plotly">{script_text(js or "")}</script>')
        script = resources.files("aflite.report").joinpath("inline.js").read_text(encoding="utf-8")
        parts.append(f'<script>{script_text(script)}("{uid}");</script>')
    where = (f"the whole page: <code>{esc(out)}/{PAGE}</code>; " if out is not None and result.has_page else "")
    parts.append(f'<p class="muted">{where}more of this result (filtered rows, per-row scores, every field): '
                 f"{esc(display.GUIDE)}</p></div>")
    return "\n".join(p for p in parts if p)


display.register_html(result_html)
