"""Single-sentence label-leakage audit (Saxon et al., "Examining Single Sentence Label Leakage in NLI Datasets").

For a sentence-pair dataset D and a *view* (``hypothesis`` = s2 only, ``premise`` = s1 only) this module measures

- biased-condition accuracy (a model that sees only the view), normal-condition accuracy (a model that sees the
  pair), majority-class accuracy, Δmaj = A_bias − A_maj (eq. 4) and %R_R = A_bias / A_normal (eq. 5);
- NBA, the share of instances on which the biased and normal models agree (eq. 7), and NBR, the share of those
  agreements that are correct (eq. 8);
- TRA (eqs. 9-10): cosine between per-token gradient-norm relevance vectors of a fine-tuned normal and a
  fine-tuned biased encoder, the biased vector zero-padded (prepended for the hypothesis, appended for the premise)
  to the length of the pair input;
- PECO (eqs. 11-12): embeddings of the view's sentence under the normal condition → PCA → k-means → per-cluster
  divergence s_i = (1/C) Σ_j (P(Y=j) − P(Y=j | cluster i))² → PECO = ∫ #{i : s_i > t} dt from t = 0
  (= Σ_i s_i; see :func:`peco_score` on eq. 12's printed lower limit), next to its permutation null (the same
  clusters with the labels shuffled, :func:`peco_null`) and the excess over it, the figure comparable across sizes;
- a token artifact table (PMI and z-statistic of each token's label rate against the base rate).

CPU defaults: the biased and normal models are L2 logistic regressions on frozen MiniLM embeddings (or the ngram
TF-IDF features) with k-fold out-of-fold predictions, so every instance gets an out-of-sample prediction; groups
(same premise) never straddle folds. TRA fine-tunes MiniLM for a capped number of steps; by default only on a
GPU (on a 2-core CPU its three fine-tunings alone take about half an hour or more). Every accuracy is reported
next to chance, the majority-class rate of the same rows.

Each measurement of a view is a check (:mod:`aflite.check`, scope ``"audit"``; registered once, as explain's are):
the built-in ones are in :mod:`~aflite.audit.checks`, and a registered audit check of one's own runs with them.

The modules: :mod:`~aflite.audit.runner` (:func:`audit`, features, samples), :mod:`~aflite.audit.checks` (the
audit's checks), :mod:`~aflite.audit.results` (config and results), :mod:`~aflite.audit.metrics`,
:mod:`~aflite.audit.clusters` (PECO),
the token table (:mod:`aflite.check.tokens`, the one token analysis),
:mod:`~aflite.audit.linear` (the cross-validated models), :mod:`~aflite.audit.finetuned`
(fine-tuning and TRA) and
:mod:`~aflite.audit.estimate` (device and time estimate). Every public name is importable from ``aflite.audit``.
"""

from __future__ import annotations

from aflite.audit.clusters import (
    PecoNull,
    PecoResult,
    cluster_divergences,
    peco,
    peco_curve,
    peco_fraction_steps,
    peco_from_clusters,
    peco_null,
    peco_score,
)
from aflite.audit.estimate import announce, estimate_seconds
from aflite.audit.finetuned import (
    FineTuned,
    TraResult,
    embed_finetuned,
    finetune,
    pad_relevance,
    predict,
    token_relevance,
    tra,
    tra_score,
)
from aflite.audit.linear import cv_predict
from aflite.audit.metrics import (
    AUDIT_VIEWS,
    BIAS_THRESHOLD,
    LeakageMetrics,
    majority_accuracy,
    nba_nbr,
)
from aflite.audit.results import AuditConfig, DatasetAudit, ViewAudit
from aflite.audit.runner import audit, compute_features, sample_rows, subset
from aflite.check.tokens import token_artifacts, tokenize

__all__ = [
    "AUDIT_VIEWS",
    "AuditConfig",
    "DatasetAudit",
    "BIAS_THRESHOLD",
    "FineTuned",
    "LeakageMetrics",
    "PecoNull",
    "PecoResult",
    "TraResult",
    "ViewAudit",
    "announce",
    "audit",
    "cluster_divergences",
    "compute_features",
    "cv_predict",
    "embed_finetuned",
    "estimate_seconds",
    "finetune",
    "majority_accuracy",
    "nba_nbr",
    "pad_relevance",
    "peco",
    "peco_curve",
    "peco_fraction_steps",
    "peco_from_clusters",
    "peco_null",
    "peco_score",
    "predict",
    "sample_rows",
    "subset",
    "token_artifacts",
    "token_relevance",
    "tokenize",
    "tra",
    "tra_score",
]
