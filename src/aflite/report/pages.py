"""The data of the explorer pages of run, explain and evaluate folders, as :class:`aflite.rundir.page.PageData`.

Each command's Result calls its builder here with what it holds: its results.json, its per-row table as
columns of strings (:class:`Rows`), the dataset in memory, its token test; ``aflite report`` calls the same
builder with the same things read back from the verified folder (``Result.page_of``). So the page a command
writes and the page ``aflite report`` rebuilds are one function's output, and nothing here guesses which command
wrote a folder.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aflite.atomic import JSON
from aflite.report import folder as report_folder
from aflite.report import thumbs
from aflite.report.frame import verdict_of
from aflite.rundir.page import PageData
from aflite.verdict import phases_text

__all__ = ["EVALUATE_INTRO", "EXPLAIN_INTRO", "RUN_INTRO", "Rows", "evaluate_page", "explain_page", "run_page"]

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


def summary_rows(res: JSON) -> list[tuple[str, Any]]:
    """The figures a reader of a run wants first: sizes, phases, stop reason, parameters, Φ."""
    if res.get("size_before") is None:
        return []
    p = res.get("parameters") or {}
    rows: list[tuple[str, Any]] = [
        ("|D| filtered", f"{res['size_before']:,}"), ("|D(Φ)| kept", f"{res.get('size_after', 0):,}"),
        ("phases", phases_text(res.get("n_iterations"))), ("stopped because", res.get("stop_reason")),
        ("parameters", ", ".join(f"{k}={p[k]}" for k in ("n_partitions", "train_size", "slice_size", "target_size",
                                                          "threshold") if k in p))]
    feat = res.get("featurizer")
    if isinstance(feat, dict):
        rows.append(("Φ", f"{feat.get('name')} ({feat.get('dim')} dims), view {feat.get('view')}"))
    return rows


def _title(command: str, res: JSON, folder: Path) -> str:
    return f"aflite {command}: {Path(str(res.get('dataset') or folder)).name}"


def _history(data: JSON, run_res: JSON) -> None:
    data["plots"]["history"] = run_res.get("iterations") or []
    if run_res.get("label_counts_before"):
        data["plots"]["label_counts_before"] = run_res["label_counts_before"]
        data["plots"]["label_counts_after"] = run_res.get("label_counts_after") or {}


def run_page(results: JSON, folder: Path, rows: Rows) -> PageData:
    """A run's page (``aflite run``/``demo``/``filter``): its rows with texts (or thumbnails) and warm-up slice,
    the per-phase curve and the label mix."""
    notes: list[str] = []
    data: JSON = {"kind": "run", "plots": {}}
    cols = report_folder.instance_columns(rows.columns, rows.where, rows.known)
    path, opts = report_folder.dataset_of(results, folder)
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
        ds = report_folder.load_rows_dataset(rows.dataset, path, opts, notes, results.get("dataset_fingerprint"))
        if ds is not None and rows.warmup_ids:
            report_folder.add_warmup(cols, ds, rows.warmup_ids)
        report_folder.attach_texts(cols, ds, notes, path or "the dataset")
    data["cols"] = cols
    _history(data, results)
    return PageData(_title("run", results, folder), RUN_INTRO, data, summary_rows(results), notes,
                    verdict_of(results))


def explain_page(results: JSON, folder: Path, rows: Rows, run: JSON, run_dir: Path | None,
                 tokens: Iterable[dict[str, str]] | None, tokens_where: Any = None) -> PageData:
    """explain's page: the run's rows with the data map, label issues, top features, soft weights and the columns
    of its checks; the competency plot of its token test (``tokens``: its rows as tokens.csv holds them); the run's
    phases and label mix (``run``: the run's results.json, {} when the run is not readable from here)."""
    notes: list[str] = []
    data: JSON = {"kind": "explain", "plots": {}}
    if not run:
        notes.append("The run's phases and label counts are not shown: results.json does not name a run "
                     "folder that is readable from here.")
    if tokens is not None:
        data["plots"]["tokens"] = report_folder.token_plot(tokens, float(results.get("alpha", 0.01)), tokens_where)
    cols = report_folder.instance_columns(rows.columns, rows.where, rows.known)
    path, opts = report_folder.dataset_of({**run, **results}, folder)
    if run_dir and (not path or not Path(path).exists()) and run.get("dataset"):
        path, opts = report_folder.dataset_of(run, run_dir)
    ds = report_folder.load_rows_dataset(rows.dataset, path, opts, notes, run.get("dataset_fingerprint"))
    report_folder.attach_texts(cols, ds, notes, path or "the dataset")
    if rows.weights is not None:
        report_folder.weights_column(cols, rows.weights)
    elif rows.weights_file is not None:
        report_folder.add_weights(cols, rows.weights_file, notes)
    data["cols"] = cols
    _history(data, run)
    return PageData(_title("explain", run, folder), EXPLAIN_INTRO, data, summary_rows(run), notes,
                    verdict_of(results))


def evaluate_page(results: JSON, folder: Path) -> PageData:
    """evaluate's page: accuracy bars next to chance, training losses and the learning-rate check."""
    rows: list[tuple[str, Any]] = []
    for si in results.get("training_sets", []):
        rows.append((f"training set {si.get('name')}", f"{si.get('size', 0):,} rows"))
    ft = (results.get("config") or {}).get("finetune") or {}
    if ft.get("lr") is not None:
        source = {"check": "chosen by the learning-rate check", "given": "given (--lr)",
                  "default": "the default"}.get(str(ft.get("lr_source")), "")
        rows.append(("fine-tuning learning rate", f"{ft['lr']:g}" + (f", {source}" if source else "")
                     + ", the same for every training set"))
    data = {"kind": "evaluate", "plots": {"accuracy": report_folder.read_evaluate(results)}}
    return PageData(_title("evaluate", results, folder), EVALUATE_INTRO, data, rows, [], verdict_of(results))
