"""Scores into results: accuracy breakdowns, the aggregate over seeds and the Markdown tables (the chart:
:mod:`aflite.evaluate.chart`)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from aflite.atomic import write_text
from aflite.evaluate.chart import plot_report
from aflite.evaluate.degenerate import merge
from aflite.evaluate.lr_check import describe
from aflite.evaluate.models import ModelSpec
from aflite.evaluate.sets import EvalSet, TrainingSet
from aflite.report.explorer import render
from aflite.report.pages import evaluate_page
from aflite.rundir.bodies import Document
from aflite.rundir.page import PageData
from aflite.rundir.results import Result
from aflite.verdict import MIN_SPREAD, SPREAD_FACTOR, markdown, number, points


def _majority(labels: NDArray[Any]) -> float:
    """Share of the most frequent gold label: the accuracy of always answering it (nan when empty)."""
    if len(labels) == 0:
        return float("nan")
    return float(Counter(np.asarray(labels).astype(str).tolist()).most_common(1)[0][1] / len(labels))


def _acc(pred: NDArray[Any], gold: NDArray[Any]) -> float:
    return float(np.mean(pred == gold)) if len(gold) else float("nan")


def _breakdown(pred: NDArray[Any], gold: NDArray[Any], groups: NDArray[Any] | None) -> dict[str, Any]:
    acc, maj = _acc(pred, gold), _majority(gold)
    res: dict[str, Any] = {
        "accuracy": acc,
        "n": int(len(gold)),
        # chance: always answering the most frequent gold label of these same rows, and the accuracy's lead on it
        "majority": maj,
        "delta_majority": acc - maj,
        "per_label": {str(lab): _acc(pred[gold == lab], gold[gold == lab]) for lab in np.unique(gold)},
    }
    if groups is not None:
        res["per_group"] = {
            str(g): {str(lab): _acc(pred[(groups == g) & (gold == lab)], gold[(groups == g) & (gold == lab)])
                     for lab in np.unique(gold[groups == g])} | {"all": _acc(pred[groups == g], gold[groups == g])}
            for g in np.unique(groups)
        }
    return res


@dataclass(repr=False)  # Result.__repr__: one line, not the arrays
class EvaluateResult(Result):
    """What :func:`aflite.evaluate.compare_runs` found: one record per (model, training set, seed), their
    aggregates, the training sets, the tables (Table 3 and Table 1 shapes), the configuration and the verdict;
    as a folder (``aflite evaluate``): tables.md and accuracy.png besides the last files."""

    command: ClassVar[str] = "evaluate"
    out: Path | None
    results: list[dict[str, Any]]  # one per (model, training set, seed)
    aggregate: dict[str, Any]
    training_sets: list[dict[str, Any]]
    tables: str
    config: dict[str, Any]
    verdict: list[str] = field(default_factory=list)  # evaluate_verdict

    @property
    def seed(self) -> Any:
        return self.config["split_seed"]

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "config": self.config, "training_sets": self.training_sets,
                "aggregate": self.aggregate, "runs": self.results}

    def summary_md(self) -> str:
        tables = self.tables
        return markdown(self.verdict) + (tables if tables.endswith("\n") else tables + "\n")

    def page(self, document: dict[str, Any]) -> str | None:
        """The accuracy bars, losses and learning-rate check (:func:`aflite.report.pages.evaluate_page`)."""
        return None if self.out is None else render(evaluate_page(document, self.out))

    @classmethod
    def page_of(cls, folder: Path, document: Document) -> PageData:
        return evaluate_page(document.raw, folder)

    def write_files(self, out: Path) -> None:
        write_text(out / "tables.md", self.tables)
        plot_report(self, out / "accuracy.png")


def _mean_std(values: list[float]) -> dict[str, Any]:
    v = [x for x in values if not (isinstance(x, float) and math.isnan(x))]
    if not v:
        return {"mean": None, "std": None, "n": 0}
    return {"mean": float(np.mean(v)), "std": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, "n": len(v)}


CHANCE_ROW = "Chance (majority class of the same rows)"


def _pct(x: float | None) -> str:
    return "–" if x is None or math.isnan(x) else f"{100 * x:.1f}"


def _pct_delta(x: float | None, y: float | None) -> str:
    return "–" if x is None or y is None or math.isnan(x) or math.isnan(y) else f"{100 * (x - y):+.1f}"


def _fmt_vs(ms: dict[str, Any] | None, chance: float | None) -> str:
    """``acc ± std (+lead)``: the accuracy and, in brackets, its lead over chance on the same rows (points)."""
    s = _fmt(ms)
    if s == "–" or chance is None or math.isnan(chance) or ms is None:
        return s
    return f"{s} ({100 * (ms['mean'] - chance):+.1f})"


def _ood_summary(aggregate: dict[str, Any], specs: list[ModelSpec], cols: list[str],
                 deltas: list[tuple[str, str]], eval_sets: Sequence[EvalSet]) -> list[str]:
    """One table for every external set: rows = (set, model) with a chance row per set, columns = training sets."""
    head = ["Evaluation set", "Trained model"] + cols + ["Δ" if len(deltas) == 1 else f"Δ {f}" for f, _ in deltas]
    out = ["", "## Out of distribution at a glance", "",
           "Accuracy in % on each external set (bracketed: points over chance, the majority-class rate of the set's "
           "gold labels in its own label space); per-label and per-group detail follows.", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for es in eval_sets:
        first = aggregate[specs[0].key]
        ch = {}
        for c in cols:
            m = first.get(c, {}).get("external", {}).get(es.name, {}).get("majority")
            ch[c] = None if not m or m.get("mean") is None else float(m["mean"])
        n = first.get("D", {}).get("external", {}).get(es.name, {}).get("n", len(es))
        out.append("| " + " | ".join([f"{es.name} ({n} rows)", CHANCE_ROW] + [_pct(ch[c]) for c in cols]
                                     + [_pct_delta(ch[f], ch[b]) for f, b in deltas]) + " |")
        for spec in specs:
            a = aggregate[spec.key]
            ext = {c: a.get(c, {}).get("external", {}).get(es.name) for c in cols}
            row = [es.name, spec.label]
            for c in cols:
                e = ext[c]
                if e is None:
                    row.append("–")
                    continue
                m = e.get("majority")
                row.append(_fmt_vs(e["accuracy"], None if not m or m.get("mean") is None else float(m["mean"])))
            for f, base in deltas:
                x = (ext[f] or {}).get("accuracy")
                y = (ext[base] or {}).get("accuracy")
                row.append(f"{100 * (x['mean'] - y['mean']):+.1f}" if x and y and x["mean"] is not None
                           and y["mean"] is not None else "–")
            out.append("| " + " | ".join(row) + " |")
    return out


def _fmt(ms: dict[str, Any] | None) -> str:
    if not ms or ms.get("mean") is None:
        return "–"
    s = f"{100 * ms['mean']:.1f}"
    return s + (f" ± {100 * ms['std']:.1f}" if ms["n"] > 1 else "")


def _aggregate(results: list[dict[str, Any]], specs: list[ModelSpec], sets: list[TrainingSet],
               eval_sets: Sequence[EvalSet], tests: Sequence[EvalSet] = ()) -> dict[str, Any]:
    """{model: {set name: {metric: mean/std/n}}} over seeds (random subsets: over their per-seed draws)."""
    agg: dict[str, Any] = {}
    names = list(dict.fromkeys(ts.name for ts in sets))
    for spec in specs:
        per: dict[str, Any] = {}
        for nm in names:
            rs = [r for r in results if r["model"] == spec.key and r["train_set"] == nm]
            if not rs:
                continue
            entry: dict[str, Any] = {
                "train_rows": int(np.mean([r["train_rows"] for r in rs])),
                "train_used": int(np.mean([r["train_used"] for r in rs])),
                "tests": {},
                "external": {},
            }
            if "own_heldout" in rs[0]:
                entry["own_heldout"] = _mean_std([r["own_heldout"]["accuracy"] for r in rs])
                entry["original_heldout"] = _mean_std([r["original_heldout"]["accuracy"] for r in rs])
                for part in ("own_heldout", "original_heldout"):
                    entry[f"{part}_majority"] = _mean_std([r[part]["majority"] for r in rs])
                    entry[f"{part}_delta_majority"] = _mean_std([r[part]["delta_majority"] for r in rs])
            for es in tests:
                tx = [r["tests"][es.name] for r in rs]
                entry["tests"][es.name] = {
                    "accuracy": _mean_std([x["accuracy"] for x in tx]), "n": tx[0]["n"],
                    "majority": tx[0]["majority"],
                    "per_label": {lab: _mean_std([x["per_label"].get(lab, float("nan")) for x in tx])
                                  for lab in tx[0]["per_label"]}}
            for es in eval_sets:
                ext = [r["external"][es.name] for r in rs]
                e: dict[str, Any] = {"accuracy": _mean_std([x["accuracy"] for x in ext]), "n": ext[0]["n"],
                                     "majority": _mean_std([x["majority"] for x in ext]),
                                     "delta_majority": _mean_std([x["delta_majority"] for x in ext]),
                                     "per_label": {lab: _mean_std([x["per_label"].get(lab, float("nan")) for x in ext])
                                                   for lab in ext[0]["per_label"]}}
                if "per_group" in ext[0]:
                    e["per_group"] = {g: {lab: _mean_std([x["per_group"][g].get(lab, float("nan")) for x in ext])
                                          for lab in ext[0]["per_group"][g]} for g in ext[0]["per_group"]}
                entry["external"][es.name] = e
            curves = [r["loss_curve"] for r in rs if r.get("loss_curve")]
            if curves:  # fine-tuned models: the training loss at the start and end (means of a few steps)
                entry["training_loss"] = {
                    "start": _mean_std([c["start"] for c in curves if c.get("start") is not None]),
                    "end": _mean_std([c["end"] for c in curves if c.get("end") is not None]),
                    "steps": int(np.mean([r.get("steps") or 0 for r in rs])),
                    "lr": rs[0].get("lr")}

            mark = merge(rs)
            if mark is not None:
                entry["not_trained"] = mark
            per[nm] = entry
        agg[spec.key] = per
    return agg


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


def _loss_table(aggregate: dict[str, Any], specs: list[ModelSpec], cols: list[str]) -> list[str]:
    """Fine-tuned models: training loss at the start → at the end (each the mean of a few steps) and the steps
    run, per training set, so that a set the model did not fit shows as such next to its accuracy."""
    rows = []
    for spec in specs:
        a = aggregate[spec.key]
        if not any(a.get(c, {}).get("training_loss") for c in cols):
            continue
        row = [spec.label]
        for c in cols:
            tl = a.get(c, {}).get("training_loss")
            if not tl or tl["start"]["mean"] is None or tl["end"]["mean"] is None:
                row.append("–")
                continue
            row.append(f"{tl['start']['mean']:.3f} → {tl['end']['mean']:.3f} ({tl['steps']} steps)")
        rows.append("| " + " | ".join(row) + " |")
    if not rows:
        return []
    head = ["Model"] + cols
    return ["", "## Fine-tuning: training loss per training set", "",
            "Mean training loss over the first → the last few steps (a tenth of the steps, 1 to 10), mean over "
            "seeds; the curves are in report.html.", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *rows]


def render_tables(aggregate: dict[str, Any], specs: list[ModelSpec], sets: list[TrainingSet],
                  set_info: list[dict[str, Any]], eval_sets: Sequence[EvalSet], config: dict[str, Any],
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
        lines += t3.lines("", f"Table 3 shape: test set {es.name} ({tinfo['size']} rows; majority class "
                              f"{100 * tinfo['majority']:.1f} %)", test=es.name)
    lines += _training_notes(aggregate, specs, cols)
    noted = [f"- {si['name']}: {si['info']['note']}" for si in set_info if (si.get("info") or {}).get("note")]
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


def _header(config: dict[str, Any]) -> list[str]:
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
    if config.get("finetune"):
        f = config["finetune"]
        how = {"given": "given", "default": "the default, no check"}.get(f.get("lr_source") or "", "")
        if f.get("lr_check"):
            how = describe(f["lr_check"])
        lines.append(f"Fine-tuning: {f['device']}, lr {f['lr']:g}" + (f" ({how})" if how else "")
                     + f", the same for every training set; {f['epochs']} epochs, batch {f['batch_size']}, "
                     f"training rows capped at {f['train_cap_used']}, external sets capped at {f['eval_cap_used']} "
                     "(stratified sample).")
    return lines


class _Table3:
    """Table 3's shape: a row per model (and chance, and the training sizes), a column per training set, Δ last."""

    def __init__(self, aggregate: dict[str, Any], specs: list[ModelSpec], cols: list[str],
                 deltas: list[tuple[str, str]], sizes: dict[str, list[int]]) -> None:
        self.aggregate, self.specs, self.cols, self.deltas, self.sizes = aggregate, specs, cols, deltas, sizes
        self.dname = "Δ" if len(deltas) == 1 else "Δ {}"

    @staticmethod
    def score(entry: dict[str, Any], metric: str, test: str | None) -> Any:
        return entry.get(metric) if test is None else entry.get("tests", {}).get(test, {}).get("accuracy")

    @staticmethod
    def chance(entry: dict[str, Any], metric: str, test: str | None) -> float | None:
        if test is not None:
            m = entry.get("tests", {}).get(test, {}).get("majority")
            return None if m is None else float(m["mean"] if isinstance(m, dict) else m)
        m = entry.get(f"{metric}_majority")
        return None if not m or m.get("mean") is None else float(m["mean"])

    def delta(self, a: dict[str, Any], f: str, base: str, metric: str, test: str | None) -> str:
        x, y = self.score(a.get(f, {}), metric, test), self.score(a.get(base, {}), metric, test)
        if a.get(f, {}).get("not_trained") or a.get(base, {}).get("not_trained"):
            return "–"
        if not (x and y and x["mean"] is not None and y["mean"] is not None):
            return "–"
        cell = f"{100 * (x['mean'] - y['mean']):+.1f}"
        cf, cb = self.chance(a.get(f, {}), metric, test), self.chance(a.get(base, {}), metric, test)
        if cf is not None and cb is not None and abs(cf - cb) >= 0.0005:
            # chance moved (filtering changed the label mix): say how the lead over chance moved too
            cell += f" (lead {100 * ((x['mean'] - cf) - (y['mean'] - cb)):+.1f})"
        return cell

    def lines(self, metric: str, title: str, test: str | None = None) -> list[str]:
        cols, deltas = self.cols, self.deltas
        head = ["Model"] + cols + [self.dname.format(f) for f, _ in deltas]
        out = ["", f"## {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        first = self.aggregate[self.specs[0].key]
        ch = {c: self.chance(first.get(c, {}), metric, test) for c in cols}
        row = [CHANCE_ROW] + [_pct(ch[c]) for c in cols] + [_pct_delta(ch[f], ch[b]) for f, b in deltas]
        out.append("| " + " | ".join(row) + " |")
        for spec in self.specs:
            a = self.aggregate[spec.key]
            row = [spec.label]
            row += ["not trained" if a.get(c, {}).get("not_trained") else _fmt_vs(
                self.score(a.get(c, {}), metric, test), self.chance(a.get(c, {}), metric, test)) for c in cols]
            row += [self.delta(a, f, base, metric, test) for f, base in deltas]
            out.append("| " + " | ".join(row) + " |")
        size_row = ["Training set size"] + [str(int(np.mean(self.sizes[c]))) for c in cols]
        size_row += [f"{int(np.mean(self.sizes[f])) - int(np.mean(self.sizes[b])):+d}" for f, b in deltas]
        out.append("| " + " | ".join(size_row) + " |")
        return out


def _training_notes(aggregate: dict[str, Any], specs: list[ModelSpec], cols: list[str]) -> list[str]:
    """The models that did not train (and why), and those trained on a capped sample."""
    lines: list[str] = []
    untrained = [(spec, c, aggregate[spec.key][c]["not_trained"]) for spec in specs for c in cols
                 if aggregate[spec.key].get(c, {}).get("not_trained")]
    if untrained:
        lines += ["", "**Not trained** (shown as such above, not as results; aflite.evaluate.degenerate):"]
        lines += [f"- {spec.label} on {c} (seed(s) {', '.join(map(str, m['seeds_not_trained']))} of {m['seeds']}): "
                  f"{m['reason']}; {m['budget_note']}" for spec, c, m in untrained]
    lines += _loss_table(aggregate, specs, cols)
    used = {spec.key: {c: aggregate[spec.key].get(c, {}).get("train_used") for c in cols} for spec in specs}
    capped = [k for k, v in used.items() if any(v[c] != aggregate[k].get(c, {}).get("train_rows") for c in cols)]
    for k in capped:
        lines.append(f"\n{k}: trained on a capped sample: " + ", ".join(f"{c} {used[k][c]}" for c in cols))
    return lines


def _table1(a: dict[str, Any], spec: ModelSpec, cols: list[str], es: EvalSet) -> list[str]:
    """Table 1's shape for one external set and model: a row per training set, accuracy per group and gold label."""
    first = a["D"]["external"][es.name]
    labs = list(first["per_label"])
    groups = list(first.get("per_group", {}))
    head = ["Train data"] + [f"{g}: gold {lab}" for g in groups for lab in labs if lab in first["per_group"][g]]
    head += [f"all: gold {lab}" for lab in labs] + ["all rows"]
    lines = ["", f"## Table 1 shape: {es.name} ({first['n']} rows), {spec.label}", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cols:
        e = a.get(c, {}).get("external", {}).get(es.name)
        if e is None:
            continue
        label_c = f"{c} (not trained)" if a.get(c, {}).get("not_trained") else c
        row = [label_c] + [_fmt(e["per_group"][g][lab]) for g in groups for lab in labs
                           if lab in first["per_group"][g]]
        m = e.get("majority")
        row += [_fmt(e["per_label"][lab]) for lab in labs]
        row += [_fmt_vs(e["accuracy"], None if not m or m.get("mean") is None else float(m["mean"]))]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def evaluate_verdict(body: dict[str, Any]) -> list[str]:
    """``aflite evaluate``: per model, accuracy after training on D(Φ) against same-size random subsets of D (the
    baseline), on D's held-out part (or the first test set), judged against the random subsets' seed spread.
    Models marked ``not_trained`` are left out and counted."""
    sets = body.get("training_sets") or []
    agg = body.get("aggregate") or {}
    filtered = [s["name"] for s in sets if s.get("kind") == "filtered"]
    out: list[str] = []
    skipped = sorted({m for m, per in agg.items() for e in per.values() if isinstance(e, dict)
                      and e.get("not_trained")})
    for fname in filtered[:2]:
        run = next((s.get("run") for s in sets if s["name"] == fname), None)
        rname = next((s["name"] for s in sets if s.get("kind") == "random" and s.get("run") == run), None)
        if rname is None:
            continue
        lower = within = higher = 0
        diffs: list[float] = []
        where = ""
        for model, per in agg.items():
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



def _where(entry: dict[str, Any]) -> str:
    if "original_heldout" in entry:
        return "D's held-out part"
    tests = entry.get("tests") or {}
    return f"the test set {next(iter(tests))}" if tests else "the held-out part"



def _score(entry: dict[str, Any]) -> tuple[float, float] | None:
    """(mean, std) accuracy on D's held-out part, else on the first separate test set."""
    acc: Any = entry.get("original_heldout")
    if acc is None:
        tests: dict[str, Any] = entry.get("tests") or {}
        first: dict[str, Any] = next(iter(tests.values()), {})
        acc = first.get("accuracy")
    if not isinstance(acc, dict):
        return None
    mean, std = number(acc.get("mean")), number(acc.get("std")) or 0.0
    return None if mean is None else (mean, std)
