"""One model trained on one training set with one seed, and scored (what :func:`aflite.evaluate.compare_runs` runs
for every model, set and seed): its cache key, the model (fitted, or a fine-tuned one loaded from the cache), its
predictions (cached as plain .npy), its accuracies on the held-out part and the separate sets, and whether it
trained at all (:mod:`aflite.evaluate.degenerate`)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.atomic import load_cached_npy, write_json, write_npy
from aflite.encoders.training import loss_summary
from aflite.evaluate.degenerate import not_trained
from aflite.evaluate.models import (
    FEATURE_MODELS,
    LR_CHECK_FIELDS,
    FinetuneOptions,
    ModelSpec,
    _Corpus,
    _feature_classifier,
    _FeatureStore,
    _FineTuned,
    _MaxPPMI,
    _NgramLR,
)
from aflite.evaluate.scores import _breakdown, _majority
from aflite.evaluate.sets import EvalSet, TrainingSet
from aflite.features.base import JsonValue
from aflite.hashing import hash_parts as _hash
from aflite.rundir.evaluate_records import Breakdown, NotTrained, ScoreRecord, TrainMeta
from aflite.splits import stratified_sample as _stratified_sample

__all__ = ["Job", "JobContext", "train_meta"]

_CACHE_FORMAT = 1


@dataclass
class JobContext:
    """What every job of one evaluation shares: D, its labels and split, the separate sets, the feature store, the
    cache and the fine-tuning options with their caps."""

    ds: Any
    y_all: NDArray[np.int64]
    classes: NDArray[Any]
    is_held: NDArray[np.bool_]
    held_rows: NDArray[np.intp]
    corpora: list[tuple[EvalSet, _Corpus]]
    tests: Sequence[tuple[EvalSet, _Corpus]]
    store: _FeatureStore
    cache: Path
    ft: FinetuneOptions
    ft_train_cap: int | None
    ft_eval_cap: int | None
    show_progress: bool
    ft_device: str | None = None  # where fine-tuning runs (None: no fine-tuned model)
    lr_source: str | None = None  # where the fine-tuning rate came from: given, check or default


class Job:
    """``spec`` trained on the training part of ``ts`` with ``seed``: :meth:`run` returns its record."""

    def __init__(self, ctx: JobContext, spec: ModelSpec, ts: TrainingSet, seed: int) -> None:
        self.ctx, self.spec, self.ts, self.seed = ctx, spec, ts, seed
        self.tr = ts.rows[~ctx.is_held[ts.rows]]
        self.used = self.tr
        if spec.kind == "finetune" and ctx.ft_train_cap is not None and len(self.tr) > ctx.ft_train_cap:
            self.used = np.sort(np.random.default_rng([seed, 13]).choice(self.tr, size=ctx.ft_train_cap,
                                                                          replace=False))
        self.key = self._key()
        self.meta_path = ctx.cache / "models" / f"{spec.kind}-{self.key}.json"
        self._model: Any = None

    def _key(self) -> str:
        """The model's identity: its spec, the fine-tuning options that change it, D, the rows, labels and seed."""
        spec, ctx = self.spec, self.ctx
        opts: dict[str, JsonValue] = {"spec": spec.key, "format": _CACHE_FORMAT}
        if spec.kind == "finetune":
            ft = ctx.ft
            opts["finetune"] = {k: v for k, v in asdict(ft).items() if k not in (
                "eval_max", "cpu_eval_max", "device", "num_threads", *LR_CHECK_FIELDS)
                and not (k.startswith("image_") and ft.image_model is None)}  # text keys unchanged
        keyed = ctx.store.keyed_options(spec.featurizer)
        if keyed is not None:
            assert spec.featurizer is not None
            opts[spec.featurizer] = {**keyed}  # as JSON values (a dict is invariant)
        return _hash(opts, ctx.store.d.fingerprint, ctx.classes.tolist(), self.used.astype(np.int64),
                     ctx.y_all[self.used], self.seed if spec.stochastic else None)[:24]

    def model(self) -> Any:
        """The trained model: fitted here (scikit-learn models are never written to disk: loading them would mean
        unpickling files from a user-given cache folder; their predictions are cached and they are cheap to
        refit), or a fine-tuned one, loaded from the cache when an identical one was trained before."""
        if self._model is not None:
            return self._model
        spec, ctx = self.spec, self.ctx
        d, y, used, k = ctx.store.d, ctx.y_all, self.used, len(ctx.classes)
        m: Any
        if spec.kind == "finetune":
            path = ctx.cache / "models" / f"{spec.kind}-{self.key}.pt"
            m = _FineTuned(ctx.ft, self.seed, ctx.show_progress)
            if path.is_file():
                m.load(path, k)
            else:
                m.fit(*d.view(spec.view, used), y[used], k)
                m.save(path)
                write_json(self.meta_path, train_meta(m, ctx.ft))
        elif spec.kind in FEATURE_MODELS:
            assert spec.featurizer is not None
            X = ctx.store.get(spec.featurizer, spec.view, d)
            m = _feature_classifier(spec.kind, self.seed).fit(X[used], y[used])
        else:
            m = (_NgramLR() if spec.kind == "ngram" else _MaxPPMI()).fit(*d.view(spec.view, used), y[used], k)
        self._model = m
        return m

    def predict(self, corpus: _Corpus, rows: NDArray[np.intp]) -> NDArray[np.int64]:
        """Label codes of ``rows`` of ``corpus`` (cached by the model's key, the corpus and the rows)."""
        spec, ctx = self.spec, self.ctx
        path = ctx.cache / "predictions" / f"{self.key}-{_hash(corpus.fingerprint, rows.astype(np.int64))[:16]}.npy"
        cached = load_cached_npy(path, len(rows))
        if cached is not None:
            return cached
        m = self.model()
        if spec.kind in FEATURE_MODELS:
            assert spec.featurizer is not None
            p = np.asarray(m.predict(ctx.store.get(spec.featurizer, spec.view, corpus)[rows]), dtype=np.int64)
        else:
            p = np.asarray(m.predict(*corpus.view(spec.view, rows)), dtype=np.int64)
        write_npy(path, p)
        return p

    def eval_rows(self, es: EvalSet) -> NDArray[np.intp]:
        """The rows of a separate set a model is scored on: all, or a stratified sample for a fine-tuned model
        under the evaluation cap."""
        if self.spec.kind == "finetune" and self.ctx.ft_eval_cap is not None:
            return _stratified_sample(es.labels, es.groups, self.ctx.ft_eval_cap, 0)
        return np.arange(len(es))

    def score(self, es: EvalSet, corpus: _Corpus, by_group: bool) -> Breakdown:
        """Accuracy (with its majority rate) on one separate evaluation set, in the set's own label space."""
        rows = self.eval_rows(es)
        raw = self.ctx.classes[self.predict(corpus, rows)]
        mapped = np.asarray([es.pred_map.get(str(c), str(c)) for c in raw])
        groups = es.groups[rows] if by_group and es.groups is not None else None
        return _breakdown(mapped, es.labels[rows], groups)

    def run(self) -> ScoreRecord:
        """The record: accuracies on the own and the whole held-out part, on each test and external set, the
        training log of a fine-tuned model, and a ``not_trained`` mark for a model that never learned."""
        t0 = time.perf_counter()
        ctx, held = self.ctx, self.ctx.held_rows
        rec: ScoreRecord = {
            "model": self.spec.key, "model_label": self.spec.label, "train_set": self.ts.name, "kind": self.ts.kind,
            "seed": self.seed, "train_rows": int(len(self.tr)), "train_used": int(len(self.used)),
        }
        check: tuple[NDArray[Any], NDArray[Any]] | None = None
        if len(held):
            pred_held = ctx.classes[self.predict(ctx.store.d, held)]
            gold_held = ctx.ds.labels[held].astype(str)
            own = np.isin(held, self.ts.rows)
            rec["own_heldout"] = _breakdown(pred_held[own], gold_held[own], None)
            rec["original_heldout"] = _breakdown(pred_held, gold_held, None)
            rec["majority_own_heldout"] = _majority(gold_held[own])
            check = (pred_held, gold_held)
        rec["tests"] = {es.name: self.score(es, corpus, by_group=False) for es, corpus in ctx.tests}
        rec["external"] = {es.name: self.score(es, corpus, by_group=True) for es, corpus in ctx.corpora}
        if self.meta_path.is_file():
            rec.update(json.loads(self.meta_path.read_text(encoding="utf-8")))
            if self.spec.kind == "finetune" and "loss_curve" not in rec and self._model is not None:
                rec.update(train_meta(self._model, ctx.ft))  # cached before the curve was kept: from the checkpoint
        first = next(iter(ctx.tests), None)
        if check is None and first is not None:
            rows_t = self.eval_rows(first[0])
            check = (ctx.classes[self.predict(first[1], rows_t)], first[0].labels[rows_t])
        if check is not None:  # a model that answers one class everywhere is no finding
            mark = self._not_trained(rec, *check)
            if mark is not None:
                rec["not_trained"] = mark
        rec["seconds"] = round(time.perf_counter() - t0, 2)
        return rec

    def _not_trained(self, rec: ScoreRecord, pred: NDArray[Any], gold: NDArray[Any]) -> NotTrained | None:
        """:func:`aflite.evaluate.degenerate.not_trained` with what this job knows of its training: the loss curve,
        the rate and where it came from, the device, and what stopped it (``--max-steps`` or ``--epochs``)."""
        ft, fine = self.ctx.ft, self.spec.kind == "finetune"
        curve, steps = rec.get("loss_curve"), rec.get("steps")
        first, final = rec.get("first_loss"), rec.get("final_loss")
        if curve:
            first, final = curve.get("start", first), curve.get("end", final)
        stopped_by = None
        if fine and steps is not None:
            stopped_by = "--max-steps" if ft.max_steps is not None and steps >= ft.max_steps else "--epochs"
        return not_trained(pred, gold, steps=steps, first_loss=first, final_loss=final, train_rows=int(len(self.used)),
                           batch_size=ft.batch_size if fine else None, device=self.ctx.ft_device if fine else None,
                           lr=ft.lr if fine else None, lr_source=self.ctx.lr_source if fine else None,
                           stopped_by=stopped_by, available_rows=int(len(self.tr)) if fine else None)


def train_meta(model: _FineTuned, ft: FinetuneOptions) -> TrainMeta:
    """What a fine-tuned model's cache entry keeps beside its weights: steps, losses, the loss curve, the rate."""
    return {"steps": model.steps_, "final_loss": model.final_loss_, "first_loss": model.first_loss_, "lr": ft.lr,
            "loss_curve": loss_summary(model.losses_)}
