"""The checks of the label-leakage audit (:mod:`aflite.check`, scope ``"audit"``), one per measurement of a
single-sentence view, in the order they run: the biased (view-only) model, the accuracy-based leakage metrics,
PECO with its null, the t-SNE map of PECO's reduced embeddings, TRA (with the fine-tuned models) and the token
artifact table. Each returns its per-row values, its summary (its class in :mod:`aflite.audit.check_summaries`; its own
fields are its keys of the view's entry in results.json, its verdict sentences among the common ones) and, where it
has one, a section of summary.md (the built-in ones have none: the audit's own verdict and
summary lines reconcile their figures). :func:`audit_view` runs every registered audit check on one view."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from aflite.audit.check_summaries import (
    BiasedSummary,
    PecoSummary,
    TokenTableSummary,
    TraSummary,
    TsneSummary,
)
from aflite.audit.clusters import PecoExample, PecoResult, peco, peco_null
from aflite.audit.finetuned import embed_finetuned, tra
from aflite.audit.linear import cv_predict
from aflite.audit.metrics import LeakageMetrics
from aflite.audit.results import ViewAudit
from aflite.check import Check, CheckData, CheckResult, register, run_checks
from aflite.check.tokens import token_artifacts

__all__ = ["BiasedModel", "LeakageCheck", "Peco", "TIMING_KEYS", "TokenTable", "Tra", "TsneMap", "audit_view"]

# results.json's timings_s names of the built-in checks' time (a check not listed is timed under its own name)
TIMING_KEYS = {"biased_model": "biased_models", "leakage_metrics": "biased_models", "token_artifacts": "artifacts"}


def audit_view(data: CheckData, timings: dict[str, float], normal_pred: np.ndarray | None = None) -> ViewAudit:
    """Run every registered audit check on one view (``data.text_view``), each with its options
    (``config.checks``), and add their seconds to ``timings``."""
    config = data.context.config
    found = run_checks(data, scope="audit", options=getattr(config, "checks", None))
    for name, r in found.items():
        if r.seconds is not None:
            key = TIMING_KEYS.get(name, name)
            timings[key] = timings.get(key, 0.0) + r.seconds
    return ViewAudit(data.text_view, dict(found), normal_pred=normal_pred)


class AuditCheck(Check):
    scope: ClassVar[str] = "audit"


@register  # a built-in check: registered where it is defined
class BiasedModel(AuditCheck):
    """The biased condition: an L2 logistic regression that sees only the view, its out-of-fold predictions
    (``config.n_folds`` folds, groups never straddling a fold). Per row: flagged when the view alone gets the label
    right; its score is the biased accuracy, which results.json carries as ``leakage_metrics``'s ``biased_accuracy``
    (no key is written by two checks)."""

    name: ClassVar[str] = "biased_model"

    def find(self, data: CheckData) -> CheckResult:
        cfg = data.context.config
        pred = data.classes[cv_predict(data.X, data.labels, data.context.groups, cfg.n_folds, cfg.C, cfg.seed)]
        right = pred == data.labels
        return CheckResult(self.name, flags=right, summary=BiasedSummary(score=float(np.mean(right))), columns={},
                           detail=pred)


@register  # a built-in check: registered where it is defined
class LeakageCheck(AuditCheck):
    """Saxon et al.'s eqs. 3-8 from the biased model's and the normal model's (``context.normal_pred``)
    out-of-fold predictions: the normal accuracy, the majority rate, Δmaj, %R_R, NBA and NBR. Per row: flagged
    when the two models agree (NBA's rows)."""

    name: ClassVar[str] = "leakage_metrics"

    def find(self, data: CheckData) -> CheckResult:
        pred_b, pred_n = data.found["biased_model"].detail, data.context.normal_pred
        m = LeakageMetrics.compute(data.labels, pred_b, pred_n)
        return CheckResult(self.name, flags=pred_b == pred_n, summary=m, columns={}, detail=m)


@register  # a built-in check: registered where it is defined
class Peco(AuditCheck):
    """PECO (eqs. 11-12) on the view's embeddings (the frozen features, an image's embedding
    ``context.embeddings``, or the fine-tuned pair encoder's with ``peco_encoder="finetuned"``) next to its
    shuffled-label null, and the most divergent clusters' sentences. Per row: its cluster's s_i; flagged when the
    cluster is a biased region (L2 > ``config.bias_threshold``)."""

    name: ClassVar[str] = "peco"

    def find(self, data: CheckData) -> CheckResult:
        cfg, ft = data.context.config, data.context.finetuned
        if cfg.peco_encoder == "finetuned" and ft is not None:
            E = embed_finetuned(ft.models["pair"], data.texts or [], show_progress=cfg.show_progress)
        else:
            E = data.X if data.context.embeddings is None else data.context.embeddings
        pr = peco(E, data.labels, cfg.n_components, cfg.n_clusters, cfg.seed)
        null = peco_null(pr, data.labels, cfg.peco_shuffles, cfg.seed)
        texts = data.texts if data.texts is not None else [str(i) for i in data.ids]
        summary = PecoSummary(pr.score, null.mean, null.p95, null.excess, null.p_value, null.to_dict(),
                              pr.score_fraction20, pr.to_dict(), int(len(pr.biased_clusters())))
        cid = pr.cluster_ids
        return CheckResult(self.name, pr.divergences[cid], pr.l2[cid] > cfg.bias_threshold, summary, columns={},
                           detail={"peco": pr, "null": null, "examples": examples(pr, texts, data.labels, cfg)})


@register  # a built-in check: registered where it is defined
class TsneMap(AuditCheck):
    """2-D t-SNE coordinates of a seeded sample (``config.tsne_sample``) of PECO's reduced embeddings, for the
    report's map; no results.json keys."""

    name: ClassVar[str] = "tsne"

    def find(self, data: CheckData) -> CheckResult:
        xy, rows = tsne_map(data.found["peco"].detail["peco"], data.context.config)
        return CheckResult(self.name, summary=TsneSummary(), columns={}, detail=(xy, rows))


@register  # a built-in check: registered where it is defined
class Tra(AuditCheck):
    """TRA (eqs. 9-10) between the fine-tuned pair and view models (``context.finetuned``), and those models'
    own leakage figures on their held-out rows; only when the audit fine-tunes (``config.tra``)."""

    name: ClassVar[str] = "tra"

    def enabled(self, data: CheckData) -> bool:
        return bool(data.context.config.tra) and data.context.finetuned is not None

    def disabled(self, data: CheckData) -> CheckResult:
        return CheckResult(self.name, summary=TraSummary(None, None))

    def find(self, data: CheckData) -> CheckResult:
        cfg, ft, ds, view = data.context.config, data.context.finetuned, data.context.dataset, data.text_view
        m = LeakageMetrics.compute(data.labels[ft.eval_rows], ft.pred[view], ft.pred["pair"])
        finetuned = {**m.to_json(common=False), "n_eval": int(len(ft.eval_rows)), "n_train": int(len(ft.train)),
                     "steps": cfg.tra_steps, "batch_size": cfg.tra_batch_size}
        rows = ft.eval_rows[: min(cfg.tra_sample, len(ft.eval_rows))]
        res = tra(ft.models["pair"], ft.models[view], ds.texts_a, ds.texts_b, view, rows, cfg.show_progress)
        return CheckResult(self.name, summary=TraSummary(res.score, res.details(), finetuned),
                           columns={}, detail=res)


@register  # a built-in check: registered where it is defined
class TokenTable(AuditCheck):
    """The view's token artifact table (:func:`aflite.check.tokens.token_artifacts`, the one token analysis):
    per label, the tokens whose label rate stands furthest above the base rate; text only."""

    name: ClassVar[str] = "token_artifacts"

    def enabled(self, data: CheckData) -> bool:
        return data.texts is not None

    def disabled(self, data: CheckData) -> CheckResult:
        return CheckResult(self.name, summary=TokenTableSummary())

    def find(self, data: CheckData) -> CheckResult:
        cfg = data.context.config
        arts = token_artifacts(data.texts or [], data.labels, cfg.top_k_tokens, cfg.min_token_count)
        return CheckResult(self.name, summary=TokenTableSummary(arts), columns={}, detail=arts)


def tsne_map(pr: PecoResult, cfg: Any) -> tuple[np.ndarray | None, np.ndarray | None]:
    """t-SNE coordinates of a seeded sample of PECO's reduced embeddings and the sampled rows (None: no map)."""
    if pr.reduced is None or cfg.tsne_sample <= 0:
        return None, None
    from sklearn.manifold import TSNE

    n = len(pr.reduced)
    rng = np.random.default_rng(cfg.seed)
    rows = np.sort(rng.permutation(n)[: min(cfg.tsne_sample, n)])
    if len(rows) < 5:
        return None, None
    perplexity = float(min(30.0, (len(rows) - 1) / 3))
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):  # t-SNE's OpenMP threads thrash on small, shared CPUs (0.7 s vs 12 s)
        xy = TSNE(n_components=2, perplexity=perplexity, init="pca", max_iter=500,
                  random_state=cfg.seed).fit_transform(pr.reduced[rows])
    return np.asarray(xy), rows


def examples(pr: PecoResult, texts: Sequence[str], y: np.ndarray, cfg: Any, per: int = 3,
             n_clusters: int = 5) -> list[PecoExample]:
    """Sentences (an image audit: ids) from the most divergent clusters (for the report)."""
    out: list[PecoExample] = []
    for c in np.argsort(-pr.divergences)[:n_clusters]:
        members = np.flatnonzero(pr.cluster_ids == c)[:per]
        dist = {str(k): round(float(p), 3) for k, p in zip(pr.classes, pr.cluster_dists[c], strict=True)}
        out.append({
            "cluster": int(c), "size": int(pr.cluster_sizes[c]), "divergence": float(pr.divergences[c]),
            "l2": float(pr.l2[c]), "label_dist": dist,
            "sentences": [{"text": texts[i], "label": str(y[i])} for i in members],
        })
    return out
