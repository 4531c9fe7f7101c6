"""The explorer page of an output folder (``report.html``): the rows of the dataset in a sortable, filterable,
paged table, and interactive plots (per-phase curve, label mix, data map, competency plot, accuracy bars) whose
clicks filter the table. One self-contained file: the data is embedded as JSON (gzip + base64 above
``PACK_ABOVE`` bytes), the script and plotly.js inline, nothing fetched when it is viewed.

:func:`render` lays out the :class:`~aflite.rundir.page.PageData` a command's Result built (in memory when the
command commits its folder, from the verified folder when ``aflite report DIR`` rebuilds it:
:mod:`aflite.commands.report`); it knows no command. :func:`write_html` writes the page atomically.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from aflite.atomic import write_text
from aflite.errors import InputError, OutputError
from aflite.report.audit import BODY_END, BODY_START
from aflite.report.frame import (
    esc,
    json_for_script,
    packed,
    page_head,
    plotly_js,
    script_text,
)
from aflite.report.rows import PageJson, PagePlots
from aflite.rundir.names import PAGE
from aflite.rundir.page import PageData
from aflite.rundir.schema import Document

PACK_ABOVE = 1_000_000  # bytes of JSON above which the columns are embedded gzip + base64

_CSS = """
#controls{display:flex;flex-wrap:wrap;gap:10px;align-items:center;margin:8px 0}
#controls label{font-size:.9em}#rows td.wide{max-width:380px;text-align:left;overflow-wrap:anywhere}
#rows{width:100%}#rows td{font-size:.88em}#pager{display:flex;gap:10px;align-items:center}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:12px}
"""


def _plot_divs(data: PageJson) -> str:
    plots = data.get("plots", PagePlots())
    cols = data.get("cols") or {}
    divs = []
    if plots.get("history"):
        divs.append("plot-phases")
    if plots.get("label_counts_before"):
        divs.append("plot-labels")
    if "conf" in cols and "var" in cols:
        divs.append("plot-datamap")
    tokens, accuracy = plots.get("tokens"), plots.get("accuracy")
    divs += [f"plot-comp-{name}" for name in ("full", "kept") if tokens is not None and name in tokens.get("sets", {})]
    if accuracy is not None and accuracy.get("bars"):
        divs.append("plot-accuracy")
    if accuracy is not None and accuracy.get("losses"):
        divs.append("plot-loss")
    if accuracy is not None and accuracy.get("lr_check"):
        divs.append("plot-lrcheck")
    if not divs:
        return ""
    if plotly_js() is None:
        return ("<p class=\"muted\">Interactive plots need plotly's bundled script, missing here: pip install plotly "
                "and run aflite report on this folder again.</p>")
    return "<h2>Plots</h2><div class=\"plots\">" + "".join(
        f'<div class="plot" id="{d}"></div>' for d in divs) + "</div>"


_ROWS_HTML = """<h2>Rows</h2>
<div id="controls">
<label>label <select id="f-label"><option value="">all</option></select></label>
<label id="f-status-wrap">status <select id="f-status"><option value="">all</option>
<option value="kept">kept</option><option value="removed">removed</option>
<option value="warmup">warm-up (trained Φ, not filtered)</option></select></label>
<label id="f-region-wrap" hidden>region <select id="f-region"><option value="">all</option></select></label>
<label>search <input id="f-search" type="search" placeholder="text, id or feature" size="28"></label>
<button id="clear-point" type="button" hidden>clear plot filter</button>
</div>
<div id="pager"><button id="prev" type="button">◀</button><span id="page-info"></span>
<button id="next" type="button">▶</button><span id="row-count" class="muted"></span></div>
<table id="rows"><thead id="rows-head"></thead><tbody id="rows-body"></tbody></table>
<p class="muted">Click a column to sort (again: reverse); 200 rows per page. Texts are cut to 400 characters.</p>
"""


def _summary_table(rows: list[tuple[str, Any]]) -> str:
    """The few figures a reader wants first (escaped)."""
    if not rows:
        return ""
    body = "".join(f'<tr><th class="l">{esc(k)}</th><td class="l">{esc(v)}</td></tr>' for k, v in rows)
    return f"<table>{body}</table>"


def _table(heading: str, header: list[str], rows: list[list[Any]], caption: str) -> str:
    """One of the page's further tables (a run's probe, its examples), every cell escaped (dataset text)."""
    head = "".join(f'<th class="l">{esc(h)}</th>' for h in header)
    body = "".join("<tr>" + "".join(f'<td class="l">{esc(c)}</td>' for c in row) + "</tr>" for row in rows)
    note = f'<p class="muted">{esc(caption)}</p>' if caption else ""
    return f"<h2>{esc(heading)}</h2><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


def render(page: PageData[PageJson], *, pack: bool | None = None) -> str:
    """A page as one HTML string (``pack``: gzip the data always / never / above PACK_ABOVE). The page knows no
    command: what it shows is the :class:`PageData` the command's Result built."""
    data = page.data
    raw = json_for_script(data)
    embed = json_for_script({"packed": packed(data)}) if (pack or (pack is None and len(raw) > PACK_ABOVE)) else raw
    out = page_head(page.title, esc(page.intro), page.notes, page.verdict, extra_css=_CSS)
    out.append(_summary_table(page.summary))
    out.extend(_table(*t) for t in page.tables)
    plots = _plot_divs(data)
    out.append(plots)
    if data.get("cols"):
        out.append(_ROWS_HTML)
    out.append(f'<script type="application/json" id="aflite-data">{embed}</script>')
    js = plotly_js()
    if js is not None and 'class="plot"' in plots:
        # not run while the page loads: the page's script runs it once the table is up (plotly.js takes a
        # second or two to start on a slow machine, and the rows should not wait for it)
        out.append(f'<script type="text/plain" id="aflite-plotly">{script_text(js)}</script>')
    script = resources.files("aflite.report").joinpath("explorer.js").read_text(encoding="utf-8")
    out.append(f"<script>{script_text(script)}</script>")
    out.append("</body></html>")
    return "\n".join(out)


def reframe_audit(folder: Path, document: Document) -> str:
    """An audit's page on a fresh frame (with the verdict of its results.json, ``document``): the audit's own
    content is taken from the report.html it wrote, between its markers, since its t-SNE maps and clusters live
    only in that page."""
    path = folder / PAGE
    text = path.read_text(encoding="utf-8")
    start, end = text.find(BODY_START), text.find(BODY_END)
    if start < 0 or end < start:
        raise InputError(f"{path}: not the page aflite audit wrote (no content markers); run aflite audit again")
    m = re.search(r"<title>(.*?)</title>", text, flags=re.S)

    title = html.unescape(m.group(1)) if m else "Label-leakage audit"
    head = page_head(title, "", (), list(document.body.verdict or []))
    return "\n".join([*head, text[start:end + len(BODY_END)], "</body></html>"])


def write_html(folder: str | Path, html_text: str, *, keep_better: bool = False) -> Path:
    """Write FOLDER/report.html atomically (a kill leaves the old page or the new one, never a part);
    ``keep_better``: refuse to replace a page that shows the rows' texts with one that cannot (``aflite
    report``). The page is not listed in the folder's manifest (docs/architecture.md): it is rebuilt from the
    files that are."""
    target = Path(folder) / PAGE
    if target.is_dir() or target.is_symlink():
        raise OutputError(f"{target}: is a {'folder' if target.is_dir() else 'link'}, not the page; move it away "
                          f"and run again")
    if keep_better:
        _keep_the_better_page(target, html_text)
    write_text(target, html_text)
    return target


def _has_texts(page: str) -> bool:
    try:
        return "ta" in (embedded_data(page).get("cols") or {})
    except (InputError, ValueError):
        return False


def _keep_the_better_page(target: Path, new: str) -> None:
    """Refuse to replace a page that shows the rows' texts with one that cannot (the dataset file is not found
    from here, or is not the run's): that page is never lost silently."""
    if _has_texts(new) or not target.is_file():
        return
    try:
        old = target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    if _has_texts(old):

        why = html.unescape(next((n for n in notes_of(new) if n.startswith("Texts not shown: ")), "Texts not shown: "
                                 "the dataset is not readable from here")).removeprefix("Texts not shown: ").rstrip(".")
        advice = ("only the page the run wrote can show them: keep it" if "in-memory " in why
                  else "run aflite report where the dataset path resolves")
        raise OutputError(f"{target}: shows the rows' texts and the page rebuilt from here would not ({why}); "
                          f"{advice}, or remove report.html to write the page without texts")


def notes_of(page: str) -> Sequence[str]:
    """The notes a page shows (for tests and the CLI): paragraphs of the muted class right after the intro."""
    return re.findall(r'<p class="muted">([^<]*)</p>', page)


def embedded_data(page: str) -> dict[str, Any]:
    """The data a page embeds, decoded as the browser does (for tests and measurements)."""
    m = re.search(r'<script type="application/json" id="aflite-data">(.*?)</script>', page, flags=re.S)
    if m is None:
        raise InputError("no embedded data in this page")
    obj = json.loads(m.group(1))
    if "packed" in obj:

        obj = json.loads(gzip.decompress(base64.b64decode(obj["packed"])).decode("utf-8"))
    return dict(obj)
