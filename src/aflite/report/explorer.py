"""The explorer page of an output folder (``report.html``): the rows of the dataset in a sortable, filterable,
paged table, and interactive plots (per-phase curve, label mix, data map, competency plot, accuracy bars) whose
clicks filter the table. One self-contained file: the data is embedded as JSON (gzip + base64 above
``PACK_ABOVE`` bytes), the script and plotly.js inline, nothing fetched when it is viewed.

:func:`write_page` is what ``aflite run``/``evaluate``/``audit``/``explain`` call once their outputs are written,
and what ``aflite report DIR`` runs again.
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
from aflite.report import folder as F
from aflite.report import thumbs
from aflite.report.audit import BODY_END, BODY_START
from aflite.report.frame import (
    esc,
    json_for_script,
    packed,
    page_head,
    plotly_js,
    script_text,
    verdict_of,
)
from aflite.rundir.manifest import recommit
from aflite.rundir.names import INSTANCES, PAGE, RUN_COMMANDS, TOKENS, WARMUP_IDS, WEIGHTS
from aflite.rundir.read import detect_kind, read_id_list, read_results, read_run
from aflite.verdict import phases_text

PACK_ABOVE = 1_000_000  # bytes of JSON above which the columns are embedded gzip + base64

_CSS = """
#controls{display:flex;flex-wrap:wrap;gap:10px;align-items:center;margin:8px 0}
#controls label{font-size:.9em}#rows td.wide{max-width:380px;text-align:left;overflow-wrap:anywhere}
#rows{width:100%}#rows td{font-size:.88em}#pager{display:flex;gap:10px;align-items:center}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:12px}
"""


def _plot_divs(kind: str, data: dict[str, Any]) -> str:
    plots = data.get("plots", {})
    cols = data.get("cols") or {}
    divs = []
    if plots.get("history"):
        divs.append("plot-phases")
    if plots.get("label_counts_before"):
        divs.append("plot-labels")
    if "conf" in cols and "var" in cols:
        divs.append("plot-datamap")
    tokens = plots.get("tokens") or {}
    for name in ("full", "kept"):
        if name in tokens.get("sets", {}):
            divs.append(f"plot-comp-{name}")
    if plots.get("accuracy", {}).get("bars"):
        divs.append("plot-accuracy")
    if plots.get("accuracy", {}).get("losses"):
        divs.append("plot-loss")
    if plots.get("accuracy", {}).get("lr_check"):
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


def _summary_table(kind: str, res: dict[str, Any]) -> str:
    """The few figures a reader wants first (escaped): sizes, phases, stop reason, parameters."""
    rows: list[tuple[str, Any]] = []
    if kind in ("run", "explain") and res.get("size_before") is not None:
        p = res.get("parameters") or {}
        rows += [("|D| filtered", f"{res['size_before']:,}"), ("|D(Φ)| kept", f"{res.get('size_after', 0):,}"),
                 ("phases", phases_text(res.get("n_iterations"))), ("stopped because", res.get("stop_reason")),
                 ("parameters", ", ".join(f"{k}={p[k]}" for k in ("n_partitions", "train_size", "slice_size",
                                                                    "target_size", "threshold") if k in p))]
        feat = res.get("featurizer")
        if isinstance(feat, dict):
            rows.append(("Φ", f"{feat.get('name')} ({feat.get('dim')} dims), view {feat.get('view')}"))
    if kind == "evaluate":
        for si in res.get("training_sets", []):
            rows.append((f"training set {si.get('name')}", f"{si.get('size', 0):,} rows"))
        ft = (res.get("config") or {}).get("finetune") or {}
        if ft.get("lr") is not None:
            source = {"check": "chosen by the learning-rate check", "given": "given (--lr)",
                      "default": "the default"}.get(str(ft.get("lr_source")), "")
            rows.append(("fine-tuning learning rate", f"{ft['lr']:g}" + (f", {source}" if source else "")
                         + ", the same for every training set"))
    if not rows:
        return ""
    body = "".join(f'<tr><th class="l">{esc(k)}</th><td class="l">{esc(v)}</td></tr>' for k, v in rows)
    return f"<table>{body}</table>"


def _script() -> str:
    return resources.files("aflite.report").joinpath("explorer.js").read_text(encoding="utf-8")


def page_data(folder: str | Path, kind: str | None = None, *, dataset: Any = None,
              results: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """What the page of FOLDER shows: (data embedded in the page, the folder's results, notes for the reader).
    ``results``: the folder's results.json as the command is writing it (read from the folder, verified, when not
    given)."""
    p = Path(folder)
    kind = kind or detect_kind(p)
    results = results if results is not None else read_results(p, skip=(PAGE,))
    notes: list[str] = []
    data: dict[str, Any] = {"kind": kind, "plots": {}}
    run_res, run_dir = results, None
    if kind == "explain":
        run_res, run_dir = _explained_run(p, results, notes)
        tokens = F.read_tokens(p / TOKENS, float(results.get("alpha", 0.01)))
        if tokens is not None:
            data["plots"]["tokens"] = tokens
    if kind in ("run", "explain"):
        data["cols"] = _rows(p, kind, run_res, results, dataset, notes, run_dir)
        data["plots"]["history"] = run_res.get("iterations") or []
        if run_res.get("label_counts_before"):
            data["plots"]["label_counts_before"] = run_res["label_counts_before"]
            data["plots"]["label_counts_after"] = run_res.get("label_counts_after") or {}
    if kind == "evaluate":
        data["plots"]["accuracy"] = F.read_evaluate(results)
    return data, run_res if kind in ("run", "explain") else results, notes


def _explained_run(p: Path, results: dict[str, Any], notes: list[str]) -> tuple[dict[str, Any], Path | None]:
    """The results of the run an explain folder explains and where that run is from here (its folder named in
    results.json, located from the explain folder as recorded), read and verified."""
    run = results.get("run")
    run_dir = results.get("run_dir") or (run.get("folder") if isinstance(run, dict) else None)
    found = F.locate(p, str(run_dir), results.get("run_dir_relative")) if run_dir else None
    run_res = read_run(found).summary if found is not None and found.is_dir() else {}
    if not run_res:
        notes.append("The run's phases and label counts are not shown: results.json does not name a run "
                     "folder that is readable from here.")
    return run_res, (found if run_res else None)


def _rows(p: Path, kind: str, run_res: dict[str, Any], results: dict[str, Any], dataset: Any,
          notes: list[str], run_dir: Path | None = None) -> dict[str, Any]:
    """The table's columns: the per-row file, the texts (or thumbnails) from the dataset, warm-up rows, weights."""
    if not (p / INSTANCES).is_file():
        raise InputError(f"{p / INSTANCES}: not found (is {p} a complete run folder?)")
    cols = F.read_instances(p / INSTANCES)
    # the data file, located from the folder that recorded it (never against the current directory alone)
    path, opts = F.dataset_of(run_res if kind == "run" else {**run_res, **results}, p)
    if kind == "explain" and run_dir and (not path or not Path(path).exists()) and run_res.get("dataset"):
        path, opts = F.dataset_of(run_res, run_dir)
    if kind == "run" and thumbs.is_image_run(p):
        refs = thumbs.image_refs(p, path, cols["phase"])
        if refs is None:
            notes.append("Images not shown: kept.csv and removed.csv do not line up with instances.csv.")
        else:
            cols["ta"] = [r or "" for r in refs]
            made = thumbs.add_thumbnails(cols, refs)
            notes.append(f"Thumbnails: {made:,} rows (the first rows and the most predictable removed ones); "
                         "text is each image's file.")
    else:
        ds = F.load_rows_dataset(dataset, path, opts, notes, run_res.get("dataset_fingerprint"))
        if ds is not None and kind == "run":
            warm = read_id_list(p / WARMUP_IDS)  # written by this run (verified when the page is rebuilt)
            if warm:
                F.add_warmup(cols, ds, warm)
        F.attach_texts(cols, ds, notes, path or "the dataset")
    if kind == "explain":
        F.add_weights(cols, p / WEIGHTS, notes)
    return cols


_INTRO = {
    "run": "An AFLite run: every row of the filtered set with its predictability p̃ (the share of held-out "
           "models that predicted its label) and the phase that removed it, or kept. Filter and sort the rows; "
           "click a plot to filter the table.",
    "explain": "What AFLite found: the rows with the data map (confidence and variability of the first phase's "
               "out-of-sample predictions), label-issue candidates and each row's top features; the competency "
               "plot of token artifacts before and after filtering.",
    "evaluate": "Accuracy of each model trained on D, D(Φ) and the comparison sets, on held-out rows, next to "
                "chance (the majority-class rate); for fine-tuned models, the training loss of every training set "
                "and the learning-rate check that chose their rate.",
}


def render_page(folder: str | Path, *, dataset: Any = None, pack: bool | None = None,
                title: str | None = None, results: dict[str, Any] | None = None) -> str:
    """The page of FOLDER as one HTML string (``pack``: gzip the data always / never / above PACK_ABOVE;
    ``results``: its results.json as the command is writing it, which says the command; else the folder's,
    read and verified)."""
    p = Path(folder)
    if results is None:
        kind = detect_kind(p)
        results = read_results(p, skip=(PAGE,))
    else:
        kind = "run" if results.get("command") in RUN_COMMANDS else str(results.get("command"))
    if kind == "audit":
        return reframe_audit(p, results)
    data, res, notes = page_data(p, kind, dataset=dataset, results=results)
    title = title or f"aflite {kind}: {Path(str(res.get('dataset') or p)).name}"
    raw = json_for_script(data)
    embed = json_for_script({"packed": packed(data)}) if (pack or (pack is None and len(raw) > PACK_ABOVE)) else raw
    out = page_head(title, esc(_INTRO[kind]), notes, verdict_of(results), extra_css=_CSS)
    out.append(_summary_table(kind, res))
    plots = _plot_divs(kind, data)
    out.append(plots)
    if data.get("cols"):
        out.append(_ROWS_HTML)
    out.append(f'<script type="application/json" id="aflite-data">{embed}</script>')
    js = plotly_js()
    if js is not None and 'class="plot"' in plots:
        # not run while the page loads: the page's script runs it once the table is up (plotly.js takes a
        # second or two to start on a slow machine, and the rows should not wait for it)
        out.append(f'<script type="text/plain" id="aflite-plotly">{script_text(js)}</script>')
    out.append(f"<script>{script_text(_script())}</script>")
    out.append("</body></html>")
    return "\n".join(out)


def reframe_audit(folder: Path, results: dict[str, Any]) -> str:
    """An audit's page on a fresh frame (with results.json's verdict): the audit's own content is taken from the
    report.html it wrote, between its markers, since its t-SNE maps and clusters live only in that page."""
    path = folder / PAGE
    text = path.read_text(encoding="utf-8")
    start, end = text.find(BODY_START), text.find(BODY_END)
    if start < 0 or end < start:
        raise InputError(f"{path}: not the page aflite audit wrote (no content markers); run aflite audit again")
    m = re.search(r"<title>(.*?)</title>", text, flags=re.S)

    title = html.unescape(m.group(1)) if m else "Label-leakage audit"
    head = page_head(title, "", (), verdict_of(results))
    return "\n".join([*head, text[start:end + len(BODY_END)], "</body></html>"])


def write_page(folder: str | Path, *, dataset: Any = None, pack: bool | None = None,
               results: dict[str, Any] | None = None) -> Path:
    """Write FOLDER/report.html (atomically) for whatever command's output FOLDER is: ``run`` (also
    ``filter``/``demo``), ``explain``, ``evaluate`` or ``audit`` (see :func:`aflite.rundir.read.detect_kind`).
    ``dataset``: the run's loaded dataset, to skip reading the file again; ``results``: its results.json as just
    written (:meth:`aflite.runs.folder.RunFolder.finish`, which commits the folder after the page). Without
    ``results`` (``aflite report``) the folder is read and verified first, and the new page's line of the manifest
    is committed after it. Returns the path."""
    p = Path(folder)
    target = p / PAGE
    if target.is_dir() or target.is_symlink():
        raise OutputError(f"{target}: is a {'folder' if target.is_dir() else 'link'}, not the page; move it away "
                          f"and run again")
    html_text = render_page(p, dataset=dataset, pack=pack, results=results)
    _keep_the_better_page(target, html_text)
    write_text(target, html_text)
    if results is None:  # a committed folder: its manifest lists the new page
        recommit(p, PAGE)
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
