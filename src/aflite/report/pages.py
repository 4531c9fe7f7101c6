"""The data of the explorer pages of run, explain and evaluate folders, as :class:`aflite.rundir.page.PageData`.

Each command's Result calls its builder here with what it holds: its results.json, typed (a
:class:`aflite.rundir.schema.Document`: the builders read its body's fields), its per-row table as columns of
strings (:class:`Rows`), the dataset in memory, its token test; ``aflite report`` calls the same builder with the
same things read back from the verified folder (``Result.page_of``). So the page a command writes and the page
``aflite report`` rebuilds are one function's output, and nothing here guesses which command wrote a folder.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aflite.report import rows as report_rows
from aflite.report import thumbs
from aflite.report.rows import WARMUP, PageColumns, PageJson, PagePlots
from aflite.rundir.page import PageData
from aflite.rundir.schema import Document, EvaluateBody, ExplainBody, ProbeRecord, RunBody
from aflite.verdict import phases_text

__all__ = ["EVALUATE_INTRO", "EXPLAIN_INTRO", "PROBE_HEADER", "RUN_INTRO", "Rows", "evaluate_page", "explain_page",
           "pick_examples", "probe_rows", "run_page"]

RUN_INTRO = ("An AFLite run: every row of the filtered set with its predictability p̃ (the share of held-out models "
             "that predicted its label) and the phase that removed it, or kept. Filter and sort the rows; click a "
             "plot to filter the table.")
EXPLAIN_INTRO = ("What AFLite found: the rows with the data map (confidence and variability of the first phase's "
                 "out-of-sample predictions), label-issue candidates and each row's top features; the competency "
                 "plot of token artifacts before and after filtering.")
EVALUATE_INTRO = ("Accuracy of each model trained on D, D(Φ) and the comparison sets, on held-out rows, next to "
                  "chance (the majority-class rate); for fine-tuned models, the training loss of every training "
                  "set and the learning-rate check that chose their rate.")


@dataclass
class Rows:
    """What a page's rows table is made of: the per-row table as columns of strings (as its CSV holds them),
    the command's own columns the page leaves out (``known``; any other column the page does not draw itself
    is shown as it is), the dataset whose texts the rows show (None: read again from the file results.json
    records), the warm-up slice's ids, each row's image path (an image run; None: text) and the rows' soft
    weights (explain)."""

    columns: dict[str, list[str]]
    where: Any  # names the table in errors (its file, or the command's result)
    known: Sequence[str] = ()
    dataset: Any = None
    warmup_ids: list[str] | None = None
    image_paths: list[str | None] | None = None
    image_files: tuple[list[str], list[str]] | None = None  # kept.csv's and removed.csv's paths (from a folder)
    images: bool = False
    weights: list[str] | None = None
    weights_file: Path | None = None  # explain's weights.csv, matched by id (the page rebuilt from a folder)


def summary_rows(run: RunBody | None) -> list[tuple[str, Any]]:
    """The figures a reader of a run wants first: sizes, phases, stop reason, parameters, Φ (None: no run)."""
    if run is None:
        return []
    p = run.parameters
    rows: list[tuple[str, Any]] = [
        ("|D| filtered", f"{run.size_before:,}"), ("|D(Φ)| kept", f"{run.size_after:,}"),
        ("phases", phases_text(run.n_iterations)), ("stopped because", run.stop_reason),
        ("parameters", ", ".join(f"{k}={getattr(p, k)}" for k in ("n_partitions", "train_size", "slice_size",
                                                                   "target_size", "threshold")))]
    feat = run.featurizer
    if feat is not None:
        rows.append(("Φ", f"{feat.name} ({feat.dim} dims), view {feat.view}"))
    return rows


def _title(command: str, dataset: str | None, folder: Path, name: str | None = None) -> str:
    return f"aflite {command}: {name or Path(str(dataset or folder)).name}"


def pick_examples(labels: np.ndarray, keep: np.ndarray, p: np.ndarray,
                  per_label: int = 2) -> tuple[list[int], list[int]]:
    """The rows a run's examples show (as the paper's Table 9), per label in sorted order: the most predictable
    removed rows and the least predictable kept ones, ties broken by a seeded draw. p̃ is compared to 3 decimals,
    as the page holds it, so that summary.md (in the terminal) and the page pick the same rows."""
    p = np.round(np.asarray(p, dtype=np.float64), 3)
    rng = np.random.default_rng(0)
    labels = np.asarray(labels).astype(str)
    removed: list[int] = []
    kept: list[int] = []
    for lab in sorted(set(labels.tolist())):
        is_lab = labels == lab
        rem = np.flatnonzero(~keep & is_lab)
        kep = np.flatnonzero(keep & is_lab & ~np.isnan(p))
        if len(rem):
            removed += rem[np.lexsort((rng.random(len(rem)), -p[rem]))][:per_label].tolist()
        if len(kep):
            kept += kep[np.lexsort((rng.random(len(kep)), p[kep]))][:per_label].tolist()
    return removed, kept


PROBE_HEADER = ["training set", "size", "accuracy %", "majority rate % (same rows)", "Δ over majority (points)"]


def probe_rows(probe: ProbeRecord) -> list[list[str]]:
    """The hypothesis-only probe's rows as summary.md and the page show them (percent, Δ over the majority rate)."""
    rows = []
    for r in probe.results:
        if r.skipped or r.accuracy is None or r.accuracy_std is None:
            rows.append([r.name, f"{r.size:,}", f"not probed: {r.skipped}", f"{100 * r.majority:.1f}", "–"])
        else:
            rows.append([r.name, f"{r.size:,}", f"{100 * r.accuracy:.1f} ± {100 * r.accuracy_std:.1f}",
                         f"{100 * r.majority:.1f}", f"{100 * (r.accuracy - r.majority):+.1f}"])
    if probe.skipped:
        rows.append(["–", "–", f"not probed: {probe.skipped}", "–", "–"])
    return rows


def _run_tables(run: RunBody, cols: PageColumns) -> list[tuple[str, list[str], list[list[Any]], str]]:
    """What the terminal shows of a run besides its summary: the probe table and the examples."""
    tables: list[tuple[str, list[str], list[list[Any]], str]] = []
    probe = run.partial_input_probe
    if probe is not None:
        tables.append(("Partial-input probe", PROBE_HEADER, probe_rows(probe), f"{probe.model or ''}. {probe.meaning}"))
    if not cols.get("ta") or not cols.get("p") or not cols.get("phase"):
        return tables
    phase = np.asarray(cols["phase"])
    seen = np.flatnonzero(phase != WARMUP)  # the rows the filter saw, in its order (the warm-up slice comes last)
    p = np.asarray(cols["p"], dtype=np.float64)[seen]
    p[p < 0] = np.nan
    labels = np.asarray([cols["labels"][k] for k in np.asarray(cols["label"])[seen]])
    removed, kept = pick_examples(labels, phase[seen] < 0, p / 1000)
    tb = cols.get("tb")

    def rows(picks: list[int]) -> list[list[Any]]:
        return [[cols["ta"][seen[i]], tb[seen[i]] if tb else "", labels[i], f"{p[i] / 1000:.2f}"] for i in picks]

    header = ["premise", "hypothesis", "label", "p̃"] if tb else ["text", "", "label", "p̃"]
    tables.append(("Removed by AFLite (most predictable, per label)", header, rows(removed), ""))
    tables.append(("Retained by AFLite (least predictable, per label)", header, rows(kept), ""))
    return tables


def _history(plots: PagePlots, run: RunBody | None) -> None:
    plots["history"] = [it.to_dict() for it in run.iterations] if run is not None else []
    if run is not None and run.label_counts_before:
        plots["label_counts_before"] = run.label_counts_before
        plots["label_counts_after"] = run.label_counts_after or {}


def run_page(document: Document, folder: Path, rows: Rows) -> PageData[PageJson]:
    """A run's page (``aflite run``/``demo``/``filter``; ``document``: its results.json, typed): its rows with
    texts (or thumbnails) and warm-up slice, the per-phase curve and the label mix."""
    run = document.body
    if not isinstance(run, RunBody):
        raise TypeError(f"run_page: the results.json of aflite {document.command}, not of a run")
    notes: list[str] = []
    cols = report_rows.instance_columns(rows.columns, rows.where, rows.known)
    path, opts = report_rows.dataset_at(run.dataset, run.dataset_options, run.dataset_relative, folder)
    if rows.images:
        paths = rows.image_paths
        if paths is None and rows.image_files is not None:
            paths = thumbs.folder_paths(*rows.image_files, cols["phase"])
        refs = None if paths is None else thumbs.image_refs(paths, path, folder)
        if refs is None:
            notes.append("Images not shown: kept.csv and removed.csv do not line up with instances.csv.")
        else:
            cols["ta"] = [r or "" for r in refs]
            made = thumbs.add_thumbnails(cols, refs)
            notes.append(f"Thumbnails: {made:,} rows (the first rows and the most predictable removed ones); "
                         "text is each image's file.")
    else:
        ds = report_rows.load_rows_dataset(rows.dataset, path, opts, notes, run.dataset_fingerprint)
        if ds is not None and rows.warmup_ids:
            report_rows.add_warmup(cols, ds, rows.warmup_ids)
        report_rows.attach_texts(cols, ds, notes, path or "the dataset")
    data: PageJson = {"kind": "run", "plots": {}, "cols": cols}
    _history(data["plots"], run)
    # a demo's page says aflite demo, as its terminal did
    return PageData(_title(document.command, run.dataset, folder, run.title), RUN_INTRO, data, summary_rows(run),
                    notes, list(document.body.verdict or []), _run_tables(run, cols))


def explain_page(document: Document, folder: Path, rows: Rows, run: RunBody | None, run_dir: Path | None,
                 tokens: Iterable[dict[str, str]] | None, tokens_where: Any = None) -> PageData[PageJson]:
    """explain's page (``document``: its results.json, typed): the run's rows with the data map, label issues,
    top features, soft weights and the columns of its checks; the competency plot of its token test (``tokens``:
    its rows as tokens.csv holds them); the run's phases and label mix (``run``: the run's results.json body,
    None when the run is not readable from here)."""
    body = document.body
    if not isinstance(body, ExplainBody):
        raise TypeError(f"explain_page: the results.json of aflite {document.command}, not of explain")
    notes: list[str] = []
    data: PageJson = {"kind": "explain", "plots": {}}
    if run is None:
        notes.append("The run's phases and label counts are not shown: results.json does not name a run "
                     "folder that is readable from here.")
    if tokens is not None:
        data["plots"]["tokens"] = report_rows.token_plot(tokens, _alpha(body), tokens_where)
    cols = report_rows.instance_columns(rows.columns, rows.where, rows.known)
    run_data, run_options, run_relative = ((run.dataset, run.dataset_options, run.dataset_relative)
                                           if run is not None else (None, None, None))
    path, opts = report_rows.dataset_at(body.dataset or run_data, run_options,
                                          body.dataset_relative or run_relative, folder)
    if run_dir and (not path or not Path(path).exists()) and run_data:
        path, opts = report_rows.dataset_at(run_data, run_options, run_relative, run_dir)
    ds = report_rows.load_rows_dataset(rows.dataset, path, opts, notes,
                                         run.dataset_fingerprint if run is not None else None)
    report_rows.attach_texts(cols, ds, notes, path or "the dataset")
    if rows.weights is not None:
        report_rows.weights_column(cols, rows.weights)
    elif rows.weights_file is not None:
        report_rows.add_weights(cols, rows.weights_file, notes)
    data["cols"] = cols
    _history(data["plots"], run)
    return PageData(_title("explain", run.dataset if run is not None else None, folder), EXPLAIN_INTRO, data,
                    summary_rows(run), notes, list(document.body.verdict or []))


def _alpha(body: ExplainBody) -> float:
    """The family-wise α the token check ran with (its options), for the competency plot's significance."""
    entry = body.checks.get("tokens")
    alpha = entry.options.get("alpha") if entry is not None else None
    return float(alpha) if isinstance(alpha, int | float) and not isinstance(alpha, bool) else 0.01


def evaluate_page(document: Document, folder: Path) -> PageData[PageJson]:
    """evaluate's page (``document``: its results.json, typed): accuracy bars next to chance, training losses and
    the learning-rate check."""
    body = document.body
    if not isinstance(body, EvaluateBody):
        raise TypeError(f"evaluate_page: the results.json of aflite {document.command}, not of evaluate")
    rows: list[tuple[str, Any]] = []
    for si in body.training_sets:
        rows.append((f"training set {si.get('name')}", f"{si.get('size', 0):,} rows"))
    ft = body.config.get("finetune") or {}
    if ft.get("lr") is not None:
        source = {"check": "chosen by the learning-rate check", "given": "given (--lr)",
                  "default": "the default"}.get(str(ft.get("lr_source")), "")
        rows.append(("fine-tuning learning rate", f"{ft['lr']:g}" + (f", {source}" if source else "")
                     + ", the same for every training set"))
    data: PageJson = {"kind": "evaluate", "plots": {"accuracy": report_rows.read_evaluate(body)}}
    return PageData(_title("evaluate", None, folder), EVALUATE_INTRO, data, rows, [], list(document.body.verdict or []))
