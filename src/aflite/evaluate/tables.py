"""Scores into results: accuracy breakdowns, the aggregate over seeds and the Markdown tables (the chart:
:mod:`aflite.evaluate.chart`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeAlias

import numpy as np

from aflite.atomic import write_text
from aflite.evaluate.chart import plot_report
from aflite.evaluate.lr_check import describe
from aflite.evaluate.models import ModelSpec
from aflite.evaluate.sets import EvalSet, TrainingSet
from aflite.features.base import JsonValue
from aflite.report.explorer import render
from aflite.report.pages import evaluate_page
from aflite.rundir.evaluate_records import (
    Aggregate,
    AggregateEntry,
    EvalConfig,
    ExternalScore,
    MeanStd,
    NotTrained,
    ScoreRecord,
    SetInfo,
)
from aflite.rundir.page import PageData
from aflite.rundir.results import Result
from aflite.rundir.schema import Document, EvaluateBody
from aflite.verdict import MIN_SPREAD, SPREAD_FACTOR, markdown, number, points


@dataclass(repr=False)  # Result.__repr__: one line, not the arrays
class EvaluateResult(Result):
    """What :func:`aflite.evaluate.compare_runs` found: one record per (model, training set, seed), their
    aggregates, the training sets, the tables (Table 3 and Table 1 shapes), the configuration and the verdict;
    as a folder (``aflite evaluate``): tables.md and accuracy.png besides the last files."""

    command: ClassVar[str] = "evaluate"
    file_names: ClassVar[tuple[str, ...]] = ("tables.md", "accuracy.png")  # what write_files writes
    out: Path | None
    results: list[ScoreRecord]  # one per (model, training set, seed)
    aggregate: Aggregate
    training_sets: list[SetInfo]
    tables: str
    config: EvalConfig
    verdict: list[str] = field(default_factory=list)  # evaluate_verdict

    @property
    def seed(self) -> Any:
        return self.config["split_seed"]

    def to_json(self) -> dict[str, JsonValue]:
        """The body through :class:`EvaluateBody`, the type that reads it back: its fields are the keys."""
        return EvaluateBody(verdict=self.verdict, config=dict(self.config), aggregate=dict(self.aggregate),
                            training_sets=list(self.training_sets), runs=list(self.results)).to_json()

    def summary_md(self) -> str:
        tables = self.tables
        return markdown(self.verdict) + (tables if tables.endswith("\n") else tables + "\n")

    def page(self, document: Document) -> str | None:
        """The accuracy bars, losses and learning-rate check (:func:`aflite.report.pages.evaluate_page`)."""
        return None if self.out is None else render(evaluate_page(document, self.out))

    @classmethod
    def page_of(cls, folder: Path, document: Document) -> PageData:
        return evaluate_page(document, folder)

    def write_files(self, out: Path) -> None:
        tables, chart = self.file_names
        write_text(out / tables, self.tables)
        plot_report(self, out / chart)


Metric: TypeAlias = Literal["own_heldout", "original_heldout"]  # the held-out part a Table 3 reads
CHANCE_ROW = "Chance (majority class of the same rows)"


def _pct(x: float | None) -> str:
    return "–" if x is None or math.isnan(x) else f"{100 * x:.1f}"


def _pct_delta(x: float | None, y: float | None) -> str:
    return "–" if x is None or y is None or math.isnan(x) or math.isnan(y) else f"{100 * (x - y):+.1f}"


def _fmt_vs(ms: MeanStd | None, chance: float | None) -> str:
    """``acc ± std (+lead)``: the accuracy and, in brackets, its lead over chance on the same rows (points)."""
    s = _fmt(ms)
    mean = None if ms is None else ms["mean"]
    if s == "–" or chance is None or math.isnan(chance) or mean is None:
        return s
    return f"{s} ({100 * (mean - chance):+.1f})"


def _mean_of(m: MeanStd | None) -> float | None:
    return None if not m or m["mean"] is None else float(m["mean"])


def _external(entry: AggregateEntry | None, name: str) -> ExternalScore | None:
    return None if entry is None else entry["external"].get(name)


def _mark(entry: AggregateEntry | None) -> NotTrained | None:
    """The entry's ``not_trained`` mark (None when it trained, or is absent)."""
    return None if entry is None else entry.get("not_trained") or None


def _ood_summary(aggregate: Aggregate, specs: list[ModelSpec], cols: list[str],
                 deltas: list[tuple[str, str]], eval_sets: Sequence[EvalSet]) -> list[str]:
    """One table for every external set: rows = (set, model) with a chance row per set, columns = training sets."""
    head = ["Evaluation set", "Trained model"] + cols + ["Δ" if len(deltas) == 1 else f"Δ {f}" for f, _ in deltas]
    out = ["", "## Out of distribution at a glance", "",
           "Accuracy in % on each external set (bracketed: points over chance, the majority-class rate of the set's "
           "gold labels in its own label space); per-label and per-group detail follows.", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for es in eval_sets:
        first = aggregate[specs[0].key]
        ch: dict[str, float | None] = {}
        for c in cols:
            e0 = _external(first.get(c), es.name)
            ch[c] = None if e0 is None else _mean_of(e0["majority"])
        e_d = _external(first.get("D"), es.name)
        n = len(es) if e_d is None else e_d["n"]
        out.append("| " + " | ".join([f"{es.name} ({n} rows)", CHANCE_ROW] + [_pct(ch[c]) for c in cols]
                                     + [_pct_delta(ch[f], ch[b]) for f, b in deltas]) + " |")
        for spec in specs:
            a = aggregate[spec.key]
            ext = {c: _external(a.get(c), es.name) for c in cols}
            row = [es.name, spec.label]
            for c in cols:
                e = ext[c]
                if e is None:
                    row.append("–")
                    continue
                row.append(_fmt_vs(e["accuracy"], _mean_of(e["majority"])))
            for f, base in deltas:
                ef, eb = ext[f], ext[base]
                x = None if ef is None else ef["accuracy"]["mean"]
                y = None if eb is None else eb["accuracy"]["mean"]
                row.append("–" if x is None or y is None else f"{100 * (x - y):+.1f}")
            out.append("| " + " | ".join(row) + " |")
    return out


def _fmt(ms: MeanStd | None) -> str:
    mean = None if not ms else ms.get("mean")
    if not ms or mean is None:
        return "–"
    s = f"{100 * mean:.1f}"
    return s + (f" ± {100 * (ms['std'] or 0.0):.1f}" if ms["n"] > 1 else "")


def _columns(sets: list[TrainingSet]) -> tuple[list[str], list[tuple[str, str]]]:
    """Table 3 column order (D, random, label-matched random, single-iteration, D(Φ) per run) and the (D(Φ), D)
    pairs for Δ."""
    names = ["D"]
    deltas = []
    runs = list(dict.fromkeys(ts.run for ts in sets if ts.run))
    for r in runs:
        mine = [ts for ts in sets if ts.run == r]
        for kind in ("random", "matched", "single", "filtered"):
            for ts in mine:
                if ts.kind == kind and ts.name not in names:
                    names.append(ts.name)
        deltas.append(next(ts.name for ts in mine if ts.kind == "filtered"))
    return names, [(f, "D") for f in deltas]


def _loss_table(aggregate: Aggregate, specs: list[ModelSpec], cols: list[str]) -> list[str]:
    """Fine-tuned models: training loss at the start → at the end (each the mean of a few steps) and the steps
    run, per training set, so that a set the model did not fit shows as such next to its accuracy."""
    rows = []
    for spec in specs:
        a = aggregate[spec.key]
        losses = {c: None if (e := a.get(c)) is None else e.get("training_loss") for c in cols}
        if not any(losses.values()):
            continue
        row = [spec.label]
        for c in cols:
            tl = losses[c]
            start, end = (None, None) if not tl else (tl["start"]["mean"], tl["end"]["mean"])
            if not tl or start is None or end is None:
                row.append("–")
                continue
            row.append(f"{start:.3f} → {end:.3f} ({tl['steps']} steps)")
        rows.append("| " + " | ".join(row) + " |")
    if not rows:
        return []
    head = ["Model"] + cols
    return ["", "## Fine-tuning: training loss per training set", "",
            "Mean training loss over the first → the last few steps (a tenth of the steps, 1 to 10), mean over "
            "seeds; the curves are in report.html.", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *rows]


def render_tables(aggregate: Aggregate, specs: list[ModelSpec], sets: list[TrainingSet],
                  set_info: list[SetInfo], eval_sets: Sequence[EvalSet], config: EvalConfig,
                  tests: Sequence[EvalSet] = ()) -> str:
    """Markdown: Table 3-shaped (rows = models, columns = training sets, Δ last) on the own held-out part, on
    the original held-out part (when D was split) and on each separate test set (with its majority rate);
    Table 1-shaped tables (rows = training sets) per external set and model."""
    cols, deltas = _columns(sets)
    sizes: dict[str, list[int]] = {}
    for si in set_info:
        sizes.setdefault(si["name"], []).append(si["train"])
    t3 = _Table3(aggregate, specs, cols, deltas, sizes)
    lines = _header(config)
    if config.get("split", True):
        lines += t3.lines("own_heldout", "Table 3 shape: each benchmark's own held-out part")
        lines += t3.lines("original_heldout", "The original (unfiltered) held-out part of D")
    for es in tests:
        tinfo = next(t for t in config.get("tests", []) if t["name"] == es.name)
        lines += t3.lines(None, f"Table 3 shape: test set {es.name} ({tinfo['size']} rows; majority class "
                              f"{100 * tinfo['majority']:.1f} %)", test=es.name)
    lines += _training_notes(aggregate, specs, cols)
    noted = [f"- {si['name']}: {note}" for si in set_info if (note := (si.get("info") or {}).get("note"))]
    lines += ["", "**Notes on the training sets:**", "", *noted] if noted else []
    if eval_sets:
        lines += _ood_summary(aggregate, specs, cols, deltas, eval_sets)
    for es in eval_sets:
        for spec in specs:
            lines += _table1(aggregate[spec.key], spec, cols, es)
    lines += ["", "## Training sets", "", "| set | seed | size | train part | held-out part | labels |",
              "|---|---|---|---|---|---|"]
    for si in set_info:
        lines.append(f"| {si['name']} | {'' if si['seed'] is None else si['seed']} | {si['size']} | {si['train']} | "
                     f"{si['heldout']} | {', '.join(f'{k} {v}' for k, v in si['label_counts'].items())} |")
    lines += ["", f"Wall time: {config['wall_seconds']} s."]
    return "\n".join(lines) + "\n"


def _header(config: EvalConfig) -> list[str]:
    """The title and how to read the tables: the seeds, chance, the held-out part, warm-up rows, fine-tuning."""
    lines = [f"# aflite evaluate: {config['dataset']}", "",
             f"Accuracy in %, mean ± std over seeds {config['seeds']}"
             + (f" (stochastic models on D, single-iteration and D(Φ): seeds {config['model_seeds']})"
                if config.get("model_seeds") not in (None, config["seeds"]) else "")
             + " (no ± where the model and the set are "
             f"deterministic); in brackets, points over chance (the majority-class rate of the same rows, "
             f"each table's '{CHANCE_ROW}' row). " + (f"Held-out part: {config['heldout_rows']} rows of D "
             f"({100 * config['heldout']:.0f} % of premise groups, split seed {config['split_seed']})."
                                    if config.get("split", True) else
                                    "D was not split: every training set is used whole; scores are on the test "
                                    "sets.")]
    if config.get("excluded_warmup_rows"):
        lines.append(f"{config['excluded_warmup_rows']} rows of D formed a run's warm-up slice (they trained Φ) and "
                     "are left out of D, every D(Φ), the random subsets and the single-iteration sets.")
    f = config.get("finetune")
    if f:
        how = {"given": "given", "default": "the default, no check"}.get(str(f.get("lr_source") or ""), "")
        if isinstance(check := f.get("lr_check"), dict) and check:
            how = describe(check)
        lines.append(f"Fine-tuning: {f['device']}, lr {f['lr']:g}" + (f" ({how})" if how else "")
                     + f", the same for every training set; {f['epochs']} epochs, batch {f['batch_size']}, "
                     f"training rows capped at {f['train_cap_used']}, external sets capped at {f['eval_cap_used']} "
                     "(stratified sample).")
    return lines


class _Table3:
    """Table 3's shape: a row per model (and chance, and the training sizes), a column per training set, Δ last."""

    def __init__(self, aggregate: Aggregate, specs: list[ModelSpec], cols: list[str],
                 deltas: list[tuple[str, str]], sizes: dict[str, list[int]]) -> None:
        self.aggregate, self.specs, self.cols, self.deltas, self.sizes = aggregate, specs, cols, deltas, sizes
        self.dname = "Δ" if len(deltas) == 1 else "Δ {}"

    @staticmethod
    def score(entry: AggregateEntry | None, metric: Metric | None,
              test: str | None) -> tuple[MeanStd | None, float | None]:
        """The entry's accuracy on the held-out part ``metric`` or the test set ``test``, and chance there."""
        if entry is None:
            return None, None
        if test is not None:
            t = entry["tests"].get(test)
            return (None, None) if t is None else (t["accuracy"], float(t["majority"]))
        if metric is None:
            return None, None
        chance: Literal["own_heldout_majority", "original_heldout_majority"] = (
            "own_heldout_majority" if metric == "own_heldout" else "original_heldout_majority")
        return entry.get(metric), _mean_of(entry.get(chance))

    def delta(self, a: dict[str, AggregateEntry], f: str, base: str, metric: Metric | None,
              test: str | None) -> str:
        ef, eb = a.get(f), a.get(base)
        (xs, cf), (ys, cb) = self.score(ef, metric, test), self.score(eb, metric, test)
        if _mark(ef) or _mark(eb):
            return "–"
        x, y = _mean_of(xs), _mean_of(ys)
        if x is None or y is None:
            return "–"
        cell = f"{100 * (x - y):+.1f}"
        if cf is not None and cb is not None and abs(cf - cb) >= 0.0005:
            # chance moved (filtering changed the label mix): say how the lead over chance moved too
            cell += f" (lead {100 * ((x - cf) - (y - cb)):+.1f})"
        return cell

    def lines(self, metric: Metric | None, title: str, test: str | None = None) -> list[str]:
        cols, deltas = self.cols, self.deltas
        head = ["Model"] + cols + [self.dname.format(f) for f, _ in deltas]
        out = ["", f"## {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        first = self.aggregate[self.specs[0].key]
        ch = {c: self.score(first.get(c), metric, test)[1] for c in cols}
        row = [CHANCE_ROW] + [_pct(ch[c]) for c in cols] + [_pct_delta(ch[f], ch[b]) for f, b in deltas]
        out.append("| " + " | ".join(row) + " |")
        for spec in self.specs:
            a = self.aggregate[spec.key]
            row = [spec.label]
            row += ["not trained" if _mark(a.get(c)) else _fmt_vs(*self.score(a.get(c), metric, test)) for c in cols]
            row += [self.delta(a, f, base, metric, test) for f, base in deltas]
            out.append("| " + " | ".join(row) + " |")
        size_row = ["Training set size"] + [str(int(np.mean(self.sizes[c]))) for c in cols]
        size_row += [f"{int(np.mean(self.sizes[f])) - int(np.mean(self.sizes[b])):+d}" for f, b in deltas]
        out.append("| " + " | ".join(size_row) + " |")
        return out


def _training_notes(aggregate: Aggregate, specs: list[ModelSpec], cols: list[str]) -> list[str]:
    """The models that did not train (and why), and those trained on a capped sample."""
    lines: list[str] = []
    untrained = [(spec, c, m) for spec in specs for c in cols if (m := _mark(aggregate[spec.key].get(c)))]
    if untrained:
        lines += ["", "**Not trained** (shown as such above, not as results; aflite.evaluate.degenerate):"]
        lines += [f"- {spec.label} on {c} (seed(s) {', '.join(map(str, m['seeds_not_trained']))} of {m['seeds']}): "
                  f"{m['reason']}; {m['budget_note']}" for spec, c, m in untrained]
    lines += _loss_table(aggregate, specs, cols)
    def rows(k: str, c: str, part: Literal["train_rows", "train_used"]) -> int | None:
        e = aggregate[k].get(c)
        return None if e is None else e[part]

    used = {spec.key: {c: rows(spec.key, c, "train_used") for c in cols} for spec in specs}
    capped = [k for k, v in used.items() if any(v[c] != rows(k, c, "train_rows") for c in cols)]
    for k in capped:
        lines.append(f"\n{k}: trained on a capped sample: " + ", ".join(f"{c} {used[k][c]}" for c in cols))
    return lines


def _table1(a: dict[str, AggregateEntry], spec: ModelSpec, cols: list[str], es: EvalSet) -> list[str]:
    """Table 1's shape for one external set and model: a row per training set, accuracy per group and gold label."""
    first = a["D"]["external"][es.name]
    labs = list(first["per_label"])
    first_groups = first.get("per_group") or {}
    groups = list(first_groups)
    head = ["Train data"] + [f"{g}: gold {lab}" for g in groups for lab in labs if lab in first_groups[g]]
    head += [f"all: gold {lab}" for lab in labs] + ["all rows"]
    lines = ["", f"## Table 1 shape: {es.name} ({first['n']} rows), {spec.label}", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cols:
        e = _external(a.get(c), es.name)
        if e is None:
            continue
        label_c = f"{c} (not trained)" if _mark(a.get(c)) else c
        per_group = e.get("per_group") or {}
        row = [label_c] + [_fmt(per_group[g][lab]) for g in groups for lab in labs if lab in first_groups[g]]
        row += [_fmt(e["per_label"][lab]) for lab in labs]
        row += [_fmt_vs(e["accuracy"], _mean_of(e["majority"]))]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def evaluate_verdict(training_sets: Sequence[SetInfo], aggregate: Aggregate) -> list[str]:
    """``aflite evaluate``: per model, accuracy after training on D(Φ) against same-size random subsets of D (the
    baseline), on D's held-out part (or the first test set), judged against the random subsets' seed spread.
    Models marked ``not_trained`` are left out and counted."""
    sets = training_sets
    filtered = [s["name"] for s in sets if s.get("kind") == "filtered"]
    out: list[str] = []
    skipped = sorted({m for m, per in aggregate.items() for e in per.values() if e.get("not_trained")})
    for fname in filtered[:2]:
        run = next((s.get("run") for s in sets if s["name"] == fname), None)
        rname = next((s["name"] for s in sets if s.get("kind") == "random" and s.get("run") == run), None)
        if rname is None:
            continue
        lower = within = higher = 0
        diffs: list[float] = []
        where = ""
        for model, per in aggregate.items():
            if model in skipped:
                continue
            e_f, e_r = per.get(fname), per.get(rname)
            if not e_f or not e_r:
                continue
            a_f, a_r, where = _score(e_f), _score(e_r), _where(e_f)
            if a_f is None or a_r is None:
                continue
            diff = a_f[0] - a_r[0]
            spread = max(a_r[1], MIN_SPREAD)
            diffs.append(diff)
            if diff < -SPREAD_FACTOR * spread:
                lower += 1
            elif diff > SPREAD_FACTOR * spread:
                higher += 1
            else:
                within += 1
        if not diffs:
            continue
        n = len(diffs)
        out.append(f"Trained on {fname} instead of same-size random subsets of D, {n} model(s) changed accuracy on "
                   f"{where} by {points(min(diffs))} to {points(max(diffs))} points: {lower} lower beyond the random "
                   f"subsets' seed spread, {within} within it, {higher} higher.")
    if out:
        out.append("Lower means the filter removed instances these models relied on; within the spread means no "
                   "measurable effect on them.")
    if skipped:
        out.append(f"Not counted: {', '.join(skipped)} (not trained: see the tables).")
    return out


def _where(entry: AggregateEntry) -> str:
    if "original_heldout" in entry:
        return "D's held-out part"
    tests = entry.get("tests") or {}
    return f"the test set {next(iter(tests))}" if tests else "the held-out part"


def _score(entry: AggregateEntry) -> tuple[float, float] | None:
    """(mean, std) accuracy on D's held-out part, else on the first separate test set."""
    acc = entry.get("original_heldout")
    if acc is None:
        first = next(iter((entry.get("tests") or {}).values()), None)
        acc = None if first is None else first.get("accuracy")
    if not isinstance(acc, dict):
        return None
    mean, std = number(acc.get("mean")), number(acc.get("std")) or 0.0
    return None if mean is None else (mean, std)
