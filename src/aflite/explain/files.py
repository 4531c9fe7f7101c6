"""The files of an explain folder: CSVs, plots, results.json and summary.md (each written atomically).

Column contracts (another viewer reads them; keep names and order):

* ``tokens.csv`` — ``set,token,label,count,label_count,p_label,z,p_value,significant``; set ∈ full, kept, random;
  significant is 1/0; random rows are averages over the random subsets (see :func:`random_competency`).
* ``instances.csv`` — ``id,label,predictability,removed_at,confidence,variability,correctness,region,label_issue,
  top_features`` then ``kept,first_phase_predictability,weight,nearest_kept,stop_rule_removed_at,
  ensemble_features``; one row per filtered row, in the run's order; empty cells where a value is unknown (never a
  default). ``stop_rule_removed_at``: the phase in which the optional stop rule removed the row (empty when it did
  not or was off); ``ensemble_features`` (with ``--ngram-coefficients``): the row's tokens that the n-gram
  ensemble's own weights push most towards its label. A check of one's own adds its columns after these (its
  ``columns``, or ``<check>_score``/``<check>_flag``); results.json's ``checks[name]["columns"]`` names them.
* ``weights.csv`` — ``id,label,weight,first_phase_predictability``.
* results.json's ``checks`` — per check, in the order they ran: ``summary`` (``score``, ``flagged``, ``verdict``,
  then its own keys: :meth:`aflite.check.CheckSummary.to_json`), ``options`` (as it ran), ``columns`` (its per-row
  columns in instances.csv), ``files`` (the files it wrote here), ``ran``.
"""

from __future__ import annotations

import csv
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from aflite.atomic import JsonObject, atomic_open, write_text
from aflite.check import CheckData, CheckResult
from aflite.check.format import cell, md_cell, pct
from aflite.core.heldout import WEIGHT_RULE
from aflite.errors import InputError, ParameterError
from aflite.explain.plots import plot_competency, plot_datamap
from aflite.hashing import file_sha256
from aflite.report.explorer import render
from aflite.report.pages import Rows, explain_page
from aflite.report.rows import locate, table_columns
from aflite.rundir.names import INSTANCES, KEPT_IDS, RESULTS, SUMMARY_MD, TOKENS, WEIGHTS
from aflite.rundir.page import PageData
from aflite.rundir.read import Instances, RunRecord, read_columns, read_run
from aflite.rundir.results import Result, Table
from aflite.rundir.schema import CheckEntry, Document, ExplainBody, ExplainedRun, FirstPhase, RunBody
from aflite.verdict import markdown

__all__ = ["ExplainResult", "FILES", "INSTANCE_COLUMNS", "TOKEN_COLUMNS", "WEIGHT_COLUMNS", "check_columns",
           "explain_results"]

TOKEN_COLUMNS = ("set", "token", "label", "count", "label_count", "p_label", "z", "p_value", "significant")
INSTANCE_COLUMNS = ("id", "label", "predictability", "removed_at", "confidence", "variability", "correctness",
                    "region", "label_issue", "top_features", "kept", "first_phase_predictability", "weight",
                    "nearest_kept", "stop_rule_removed_at", "ensemble_features")
WEIGHT_COLUMNS = ("id", "label", "weight", "first_phase_predictability")

FILES = {
    TOKENS: "one row per tested (token, label) pair and set (full D, kept D(Φ), random same-size subsets): "
                  "count of texts with the token, how many carry the label, p̂(label | token), Gardner et al.'s z "
                  "against the label's base rate in that set, its one-sided p-value, and whether it passes the "
                  "Bonferroni-corrected test (1/0). Random rows are means over the subsets; significant = in at "
                  "least half of them.",
    "competency.png": "count (log x) against p̂(label | token) for full D and D(Φ): dots above a label's dashed "
                      "curve are significant artifacts; the most significant are named.",
    "instances.csv": "per row: the run's last p̃ and removal phase (-1 = kept), the first phase's data map "
                     "(confidence, variability, correctness, region), cleanlab's label-issue flag, the surrogate's "
                     "top terms for the row (name:+contribution) and, for removed rows, the ids of the nearest kept "
                     "rows in Φ.",
    "datamap.png": "variability against confidence of the first phase, colour = correctness, removed rows as red "
                   "crosses.",
    WEIGHTS: "soft training weights for users who reweight instead of dropping (rule in results.json).",
    RESULTS: "every number above in one place (significant counts, Bonferroni thresholds, top artifacts, "
                    "overlap table, surrogate terms, rules used, timings).",
    SUMMARY_MD: "this summary.",
}


def _token_rows(name: str, st: Any) -> Any:
    integral = name != "random"
    for i in range(len(st.token)):
        yield [name, st.token[i], st.label[i],
               int(st.count[i]) if integral else f"{st.count[i]:.2f}",
               int(st.label_count[i]) if integral else f"{st.label_count[i]:.2f}",
               cell(st.p_label[i]), cell(st.z[i]), cell(st.p_value[i], 4), int(bool(st.significant[i]))]


# the columns explain writes itself, before the checks' (a check's column of the same name is refused)
BASE_COLUMNS = ("id", "label", "predictability", "removed_at", "kept", "first_phase_predictability", "weight")


def check_columns(found: dict[str, CheckResult], rows: int) -> dict[str, str]:
    """The per-row columns the checks add to instances.csv (column → the check adding it), refused in one line when
    one is explain's own, is added by two checks, or has not one cell per row (``rows``)."""
    owner: dict[str, str] = {}
    for name, r in found.items():
        sizes = r.columns if r.columns is not None else {f"{name}_score": r.scores, f"{name}_flag": r.flags}
        for col, cells in sizes.items():
            if cells is not None and len(cells) != rows:
                raise ParameterError(f"check {name!r} adds a column {col!r} of {len(cells):,} cells to "
                                     f"instances.csv, which has {rows:,} rows")
        for col in r.column_names():
            if col in BASE_COLUMNS:
                raise ParameterError(f"check {name!r} adds a column {col!r} to instances.csv, which explain writes "
                                     f"itself")
            if col in owner:
                raise ParameterError(f"checks {owner[col]!r} and {name!r} both add a column {col!r} to "
                                     f"instances.csv")
            owner[col] = name
    return owner


def check_entry(r: CheckResult) -> CheckEntry:
    """A check's entry in results.json's ``checks``: its summary (its verdict sentences among the summary's common
    keys, their one place), options, columns, files, whether it ran."""
    return CheckEntry(r.summary.to_json(), dict(r.options), r.column_names(), sorted(r.files), r.seconds is not None)


def explain_results(found: dict[str, CheckResult], run: RunRecord, inst: Instances, data_path: str, seed: int,
                    agreement: float, timings: dict[str, float], out: Path, in_memory: bool = False) -> ExplainBody:
    """results.json's body: the verdict, each check's entry under ``checks`` (in registry order), the run explained,
    the first phase and the soft weights' rule. ``in_memory``: ``data_path`` names in-memory data (no file to
    locate)."""
    keep = np.asarray(inst.kept, dtype=bool)
    fz = run.body.featurizer
    files = dict(FILES)
    for name, r in found.items():
        files.update({file: f"written by the check {name!r}" for file in sorted(r.files)})
    dataset = data_path if in_memory else str(Path(data_path).resolve())
    kept_ids = run.path / KEPT_IDS
    return ExplainBody(
        verdict=[s for r in found.values() for s in r.summary.verdict],
        checks={name: check_entry(r) for name, r in found.items()},
        run_dir=str(run.path.resolve()), dataset=dataset,
        run_dir_relative=os.path.relpath(run.path.resolve(), out.resolve()),
        dataset_relative=None if in_memory else os.path.relpath(Path(data_path).resolve(), out.resolve()),
        # which run and data this explains (a dataset card ties this folder to its run by them)
        run=ExplainedRun(str(run.path.resolve()), dataset, int(len(keep)), int(keep.sum()), run.body.stop_reason,
                         fz.name if fz else None, fz.view if fz else None, run.body.dataset_fingerprint,
                         file_sha256(kept_ids) if kept_ids.is_file() else None),
        first_phase=FirstPhase("recomputed from the run's Φ, parameters and seed (phase 0 of AFLite.fit)", seed,
                               agreement, "share of rows removed in phase 0 whose recomputed p̃ equals the p̃ the run "
                                          "recorded"),
        weights={"rule": WEIGHT_RULE}, files=files, timings=dict(timings))


def _write_check_file(path: Path, content: Any) -> None:
    """One file a check returned: bytes as they are, text as UTF-8, rows (a list of sequences, the header first) as
    CSV; atomically."""
    if isinstance(content, bytes):
        with atomic_open(path, "wb", encoding=None) as fh:
            fh.write(content)
    elif isinstance(content, str):
        write_text(path, content)
    else:
        with atomic_open(path) as fh:
            csv.writer(fh, lineterminator="\n").writerows(content)


@dataclass(repr=False)  # Result.__repr__: one line, not the arrays
class ExplainResult(Result):
    """What :func:`aflite.commands.explain.explain` found: results.json's body (``body``), the checks' results
    (``checks``) and what they read (``data``); written by :meth:`aflite.rundir.folder.RunFolder.finish`."""

    command: ClassVar[str] = "explain"
    out: Path
    body: ExplainBody
    data: CheckData | None = None
    checks: dict[str, CheckResult] | None = None
    dataset: Any = None
    t_start: float = 0.0
    run_body: RunBody | None = None  # the run's results.json, typed, for the page (its phases, label mix, data)

    @property
    def seed(self) -> int | None:
        return self.body.first_phase.seed if self.body.first_phase is not None else None

    def to_json(self) -> JsonObject:
        return self.body.to_json()

    def table(self) -> Table | None:
        """instances.csv: the run's columns, the first phase's, and every check's per-row values (its own cells, or
        ``<check>_score``/``<check>_flag``)."""
        data, checks = self.data, self.checks
        if data is None or checks is None or data.predictability is None or data.removed_at is None:
            return None  # explain's data always hold the run's; the check only narrows the types
        af = data.phase
        cols: dict[str, list[Any]] = {
            "id": list(data.ids), "label": list(data.labels), "predictability": [cell(v) for v in data.predictability],
            "removed_at": [int(v) for v in data.removed_at], "kept": [int(k) for k in data.kept()],
            "first_phase_predictability": [cell(v) for v in af.first_phase_predictability_],
            "weight": [cell(v) for v in af.weights_]}
        for r in checks.values():
            cols.update(r.row_columns())
        names = [c for c in INSTANCE_COLUMNS if c in cols] + [c for c in cols if c not in INSTANCE_COLUMNS]
        return Table(names, zip(*(cols[c] for c in names), strict=True))

    def page(self, document: Document) -> str | None:
        """explain's page from the result in memory (:func:`aflite.report.pages.explain_page`): its per-row table
        (every column beyond explain's own, a check's, shown as it is), the token test and the run it read."""
        table, data = self.table(), self.data
        if table is None or data is None:
            return None
        cols = table_columns(table.columns, table.rows)
        rows = Rows(cols, self.out / INSTANCES, known=INSTANCE_COLUMNS, dataset=self.dataset, weights=cols["weight"])
        tokens = (self.checks or {}).get("tokens")
        sets = tokens.detail if tokens is not None and tokens.detail else {}
        records = [dict(zip(TOKEN_COLUMNS, map(str, row), strict=True)) for name in ("full", "kept", "random")
                   for row in _token_rows(name, sets[name])] if sets else None
        return render(explain_page(document, self.out, rows, self.run_body, Path(str(self.body.run_dir)),
                                   records, self.out / TOKENS))

    @classmethod
    def page_of(cls, folder: Path, document: Document) -> PageData:
        """The same page from a verified explain folder: instances.csv, tokens.csv, weights.csv and the run it
        explains (located as recorded, read and verified)."""
        body = document.body
        assert isinstance(body, ExplainBody)  # the reader built the body of explain's command
        if not (folder / INSTANCES).is_file():
            raise InputError(f"{folder / INSTANCES}: not found (is {folder} a complete run folder?)")
        run_dir = body.run_dir or (body.run.folder if body.run is not None else None)
        found = locate(folder, str(run_dir), body.run_dir_relative) if run_dir else None
        run_body = read_run(found).body if found is not None and found.is_dir() else None
        records = None
        if (folder / TOKENS).is_file():
            with (folder / TOKENS).open(encoding="utf-8", newline="") as fh:
                records = list(csv.DictReader(fh))
        rows = Rows(read_columns(folder / INSTANCES), folder / INSTANCES, known=INSTANCE_COLUMNS,
                    weights_file=folder / WEIGHTS)
        return explain_page(document, folder, rows, run_body, found if run_body is not None else None, records,
                            folder / TOKENS)

    def write_files(self, out: Path) -> None:
        """tokens.csv and the competency plot (text), weights.csv and the data map, and the files the checks return
        (their names checked by :func:`aflite.check.check_files` before the folder was begun); the write time goes
        into results.json's timings."""
        t0 = time.perf_counter()
        data, checks = self.data, self.checks
        assert data is not None and checks is not None
        tokens = checks.get("tokens")
        sets = tokens.detail if tokens is not None and tokens.detail else {}
        if sets:
            with atomic_open(out / TOKENS) as fh:
                w = csv.writer(fh, lineterminator="\n")
                w.writerow(TOKEN_COLUMNS)
                for name in ("full", "kept", "random"):
                    w.writerows(_token_rows(name, sets[name]))
            plot_competency([("full D", sets["full"]), ("kept D(Φ)", sets["kept"])], out / "competency.png")
        af = data.phase
        with atomic_open(out / WEIGHTS) as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(WEIGHT_COLUMNS)
            for i in range(len(data)):
                w.writerow([data.ids[i], data.labels[i], cell(af.weights_[i]), cell(af.first_phase_predictability_[i])])
        plot_datamap(af.variability_, af.confidence_, af.correctness_, ~data.kept(), out / "datamap.png",
                     seed=data.seed)
        for r in checks.values():
            for file, content in r.files.items():
                _write_check_file(out / file, content)
        self.body.timings["total_seconds"] = time.perf_counter() - self.t_start
        self.body.timings["write_seconds"] = time.perf_counter() - t0

    def summary_md(self) -> str:
        """The readable summary: the verdict, each check's section, the first phase and soft weights, the files."""
        body, run, first = self.body, self.body.run, self.body.first_phase
        assert run is not None and first is not None  # explain_results builds both
        lines = [f"# aflite explain: {md_cell(run.dataset)}", "",
                 *([markdown(body.verdict).rstrip("\n"), ""] if body.verdict else []),
                 f"Run `{md_cell(run.folder)}` (Φ = {run.featurizer}, view {run.view}): "
                 f"|D| = {run.size_before:,} → |D(Φ)| = {run.size_after:,}; "
                 f"stopped: {md_cell(run.stop_reason)}.", ""]
        for r in (self.checks or {}).values():
            lines += r.markdown
        lines += [f"First phase: {first.source}; agreement with the run's recorded p̃ of its phase-0 "
                  f"removals: {pct(first.agreement_with_run)}.", "",
                  f"Soft weights: {body.weights['rule']}.", "", "## Files", ""]
        lines += [f"- `{name}` — {text}" for name, text in body.files.items() if name != SUMMARY_MD]
        return "\n".join(lines) + "\n"
