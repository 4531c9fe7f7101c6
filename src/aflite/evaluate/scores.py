"""Scores into records: one job's accuracy breakdowns (:func:`_breakdown`) and their aggregate over seeds
(:func:`_aggregate`), in the shapes of :mod:`aflite.rundir.evaluate_records`."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.evaluate.degenerate import merge
from aflite.evaluate.models import ModelSpec
from aflite.evaluate.sets import EvalSet, TrainingSet
from aflite.rundir.evaluate_records import Aggregate, AggregateEntry, Breakdown, ExternalScore, MeanStd, ScoreRecord


def _majority(labels: NDArray[Any]) -> float:
    """Share of the most frequent gold label: the accuracy of always answering it (nan when empty)."""
    if len(labels) == 0:
        return float("nan")
    return float(Counter(np.asarray(labels).astype(str).tolist()).most_common(1)[0][1] / len(labels))


def _acc(pred: NDArray[Any], gold: NDArray[Any]) -> float:
    return float(np.mean(pred == gold)) if len(gold) else float("nan")


def _breakdown(pred: NDArray[Any], gold: NDArray[Any], groups: NDArray[Any] | None) -> Breakdown:
    acc, maj = _acc(pred, gold), _majority(gold)
    res: Breakdown = {
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


def _mean_std(values: list[float]) -> MeanStd:
    v = [x for x in values if not (isinstance(x, float) and math.isnan(x))]
    if not v:
        return {"mean": None, "std": None, "n": 0}
    return {"mean": float(np.mean(v)), "std": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, "n": len(v)}


def _aggregate(results: list[ScoreRecord], specs: list[ModelSpec], sets: list[TrainingSet],
               eval_sets: Sequence[EvalSet], tests: Sequence[EvalSet] = ()) -> Aggregate:
    """{model: {set name: {metric: mean/std/n}}} over seeds (random subsets: over their per-seed draws)."""
    agg: Aggregate = {}
    names = list(dict.fromkeys(ts.name for ts in sets))
    for spec in specs:
        per: dict[str, AggregateEntry] = {}
        for nm in names:
            rs = [r for r in results if r["model"] == spec.key and r["train_set"] == nm]
            if not rs:
                continue
            entry: AggregateEntry = {
                "train_rows": int(np.mean([r["train_rows"] for r in rs])),
                "train_used": int(np.mean([r["train_used"] for r in rs])),
                "tests": {},
                "external": {},
            }
            if "own_heldout" in rs[0]:
                own, orig = [r["own_heldout"] for r in rs], [r["original_heldout"] for r in rs]
                entry["own_heldout"] = _mean_std([x["accuracy"] for x in own])
                entry["original_heldout"] = _mean_std([x["accuracy"] for x in orig])
                entry["own_heldout_majority"] = _mean_std([x["majority"] for x in own])
                entry["own_heldout_delta_majority"] = _mean_std([x["delta_majority"] for x in own])
                entry["original_heldout_majority"] = _mean_std([x["majority"] for x in orig])
                entry["original_heldout_delta_majority"] = _mean_std([x["delta_majority"] for x in orig])
            for es in tests:
                tx = [r["tests"][es.name] for r in rs]
                entry["tests"][es.name] = {
                    "accuracy": _mean_std([x["accuracy"] for x in tx]), "n": tx[0]["n"],
                    "majority": tx[0]["majority"],
                    "per_label": {lab: _mean_std([x["per_label"].get(lab, float("nan")) for x in tx])
                                  for lab in tx[0]["per_label"]}}
            for es in eval_sets:
                ext = [r["external"][es.name] for r in rs]
                e: ExternalScore = {"accuracy": _mean_std([x["accuracy"] for x in ext]), "n": ext[0]["n"],
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
                    "start": _mean_std([v0 for c in curves if (v0 := c.get("start")) is not None]),
                    "end": _mean_std([v1 for c in curves if (v1 := c.get("end")) is not None]),
                    "steps": int(np.mean([r.get("steps") or 0 for r in rs])),
                    "lr": rs[0].get("lr")}

            mark = merge(rs)
            if mark is not None:
                entry["not_trained"] = mark
            per[nm] = entry
        agg[spec.key] = per
    return agg
