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
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aflite.errors import InputError, ParameterError
from aflite.hashing import data_fingerprint
from aflite.splits import fold_assignment
from aflite.splits import holdout_groups as _holdout_split
from aflite.threads import limited

log = logging.getLogger(__name__)

AUDIT_VIEWS = ("hypothesis", "premise")
BIAS_THRESHOLD = 0.2
_TOKEN_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)?|n't")


# ----------------------------------------------------------------------------------------------------------
# accuracy-based metrics (eqs. 3-8)
# ----------------------------------------------------------------------------------------------------------


def _as_1d(x: Any, what: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise InputError(f"{what} must be a 1-d vector, got shape {arr.shape}")
    return arr


def _check_same_length(**vectors: np.ndarray) -> int:
    lengths = {k: len(v) for k, v in vectors.items()}
    if len(set(lengths.values())) != 1:
        raise InputError("length mismatch: " + ", ".join(f"{k}={n}" for k, n in lengths.items()))
    n = next(iter(lengths.values()))
    if n == 0:
        raise InputError("no instances")
    return n


def majority_accuracy(y: Sequence[Any] | np.ndarray) -> float:
    """Accuracy of always guessing the most frequent label, P(Y_maj = Y)."""
    arr = _as_1d(y, "labels")
    if len(arr) == 0:
        raise InputError("no instances")
    _, counts = np.unique(arr, return_counts=True)
    return float(counts.max() / len(arr))


def nba_nbr(pred_bias: Any, pred_normal: Any, y: Any) -> tuple[float, float]:
    """Normal-Bias Agreement (eq. 7) and Normal-Bias Recovery (eq. 8).

    NBA = share of instances where the biased and normal predictions agree; NBR = share of those agreements where
    both are also correct (NaN when the models never agree).
    """
    pb, pn, yy = _as_1d(pred_bias, "pred_bias"), _as_1d(pred_normal, "pred_normal"), _as_1d(y, "labels")
    n = _check_same_length(pred_bias=pb, pred_normal=pn, labels=yy)
    agree = pb == pn
    n_agree = int(agree.sum())
    nba = n_agree / n
    nbr = float((agree & (pb == yy)).sum() / n_agree) if n_agree else float("nan")
    return float(nba), nbr


def leakage_metrics(y: Any, pred_bias: Any, pred_normal: Any) -> dict[str, float]:
    """Accuracies (fractions), Δmaj (fraction points), %R_R (fraction), NBA, NBR for one view.

    ``majority_accuracy`` is the majority-class rate of the *same* rows, so that every accuracy is read against
    chance: ``delta_maj`` (eq. 4) for the biased model, ``normal_delta_maj`` for the normal one.
    """
    yy, pb, pn = _as_1d(y, "labels"), _as_1d(pred_bias, "pred_bias"), _as_1d(pred_normal, "pred_normal")
    _check_same_length(labels=yy, pred_bias=pb, pred_normal=pn)
    acc_b = float(np.mean(pb == yy))
    acc_n = float(np.mean(pn == yy))
    maj = majority_accuracy(yy)
    nba, nbr = nba_nbr(pb, pn, yy)
    return {
        "biased_accuracy": acc_b,
        "normal_accuracy": acc_n,
        "majority_accuracy": maj,
        "delta_maj": acc_b - maj,
        "normal_delta_maj": acc_n - maj,
        "pct_rr": acc_b / acc_n if acc_n > 0 else float("nan"),
        "nba": nba,
        "nbr": nbr,
    }


# ----------------------------------------------------------------------------------------------------------
# PECO (eqs. 11-12)
# ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class PecoResult:
    """PECO and what it was computed from.

    ``divergences[i]`` is s_i (eq. 11) of cluster i, ``l2[i]`` the Euclidean distance ‖P(Y|i) − P(Y)‖₂ (used for the
    biased-region highlight), ``cluster_ids[r]`` the cluster of row r, ``curve_t`` / ``curve_count`` the step curve
    #{i : s_i > t} whose area from 0 is ``score`` (see :func:`peco_score` for ``score_min`` and
    :func:`peco_fraction_steps` for ``score_fraction20``).
    """

    score: float
    score_min: float
    score_fraction20: float
    divergences: np.ndarray
    l2: np.ndarray
    cluster_ids: np.ndarray
    cluster_sizes: np.ndarray
    cluster_dists: np.ndarray
    global_dist: np.ndarray
    classes: np.ndarray
    curve_t: np.ndarray
    curve_count: np.ndarray
    reduced: np.ndarray | None = None
    n_components: int = 0
    n_clusters: int = 0

    def biased_clusters(self, threshold: float = BIAS_THRESHOLD) -> np.ndarray:
        """Clusters whose label distribution is at L2 distance > threshold from the global one."""
        return np.flatnonzero(self.l2 > threshold)

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "score_min_lower_limit": self.score_min,
            "score_fraction20": self.score_fraction20,
            "n_components": self.n_components,
            "n_clusters": self.n_clusters,
            "classes": [str(c) for c in self.classes],
            "global_dist": self.global_dist.round(6).tolist(),
            "divergences": self.divergences.round(8).tolist(),
            "l2": self.l2.round(6).tolist(),
            "cluster_sizes": self.cluster_sizes.tolist(),
            "mean_divergence": float(self.divergences.mean()),
            "max_divergence": float(self.divergences.max()),
        }


def cluster_divergences(
    cluster_ids: Any, labels: Any, n_clusters: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-cluster label distributions and s_i = mean_j (P(Y=j) − P(Y=j|i))² (eq. 11, any number of classes).

    Returns (divergences, cluster_dists, global_dist, sizes, classes); empty clusters are dropped.
    """
    cid = _as_1d(cluster_ids, "cluster_ids").astype(np.int64)
    lab = _as_1d(labels, "labels")
    _check_same_length(cluster_ids=cid, labels=lab)
    classes, y = np.unique(lab, return_inverse=True)
    k = int(cid.max()) + 1 if n_clusters is None else int(n_clusters)
    counts = np.zeros((k, len(classes)), dtype=np.float64)
    np.add.at(counts, (cid, y), 1.0)
    sizes = counts.sum(axis=1)
    keep = sizes > 0
    counts, sizes = counts[keep], sizes[keep]
    dists = counts / sizes[:, None]
    glob = np.bincount(y, minlength=len(classes)) / len(y)
    div = ((dists - glob[None, :]) ** 2).mean(axis=1)
    return div, dists, glob, sizes.astype(np.int64), classes


def peco_score(divergences: Any, lower: str = "zero") -> float:
    """Eq. 12, the area under t ↦ #{i : s_i > t}, computed exactly.

    ``lower="zero"`` (default) integrates from t = 0: the area is Σ_i s_i, 0 exactly when every cluster has the
    global label distribution and largest when clusters are label-pure. ``lower="min"`` takes eq. 12's printed
    lower limit min(s): Σ_i (s_i − min s), which measures only the spread of the s_i (it is 0 when *all* clusters
    are equally pure), so it is reported alongside, not as the score.
    """
    s = np.asarray(divergences, dtype=np.float64)
    if s.size == 0:
        raise InputError("no cluster divergences")
    if lower == "zero":
        return float(s.sum())
    if lower == "min":
        return float(np.sum(s - s.min()))
    raise ParameterError(f"lower must be 'zero' or 'min', got {lower!r}")


def peco_fraction_steps(divergences: Any, n_classes: int, n_steps: int = 20) -> float:
    """A variant on the scale of the paper's Table 4: per-cluster divergence as the *sum* (not the mean) of
    squared differences, the *share* (not the count) of clusters above t, averaged over the left Riemann grid
    t = 0, 1/n_steps, ..., (n_steps − 1)/n_steps. This is how we read the authors' released implementation;
    it is ≥ 1/n_steps whenever any cluster deviates at all."""
    s = np.asarray(divergences, dtype=np.float64) * n_classes
    t = np.arange(n_steps) / n_steps
    return float((s[None, :] > t[:, None]).mean(axis=1).mean())


def peco_curve(divergences: Any, n_points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """The count-above-threshold curve on [0, max s] (what eq. 12 integrates)."""
    s = np.asarray(divergences, dtype=np.float64)
    t = np.linspace(0.0, max(float(s.max()), 1e-12), n_points)
    return t, (s[None, :] > t[:, None]).sum(axis=1)


def peco(
    embeddings: Any,
    labels: Any,
    n_components: int = 30,
    n_clusters: int = 50,
    random_state: int = 0,
) -> PecoResult:
    """PCA (n_components) → k-means (n_clusters) → s_i → PECO. Sizes shrink to fit tiny inputs."""
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA

    X = np.asarray(embeddings, dtype=np.float64)
    lab = _as_1d(labels, "labels")
    if X.ndim != 2:
        raise InputError(f"embeddings must be a 2-d matrix, got shape {X.shape}")
    n = _check_same_length(embeddings=X, labels=lab)
    if n_components < 1 or n_clusters < 1:
        raise ParameterError("n_components and n_clusters must be >= 1")
    if not np.all(np.isfinite(X)):
        raise InputError("embeddings contain NaN or infinity")
    from threadpoolctl import threadpool_limits

    nc = min(n_components, X.shape[1], n)
    k = min(n_clusters, n)
    # one thread: k-means / PCA on a shared 2-core machine ran 3x faster than with the default thread pool
    with threadpool_limits(limits=1):
        Z = PCA(n_components=nc, random_state=random_state).fit_transform(X) if nc < X.shape[1] else X - X.mean(0)
        # three k-means++ restarts on small sets; one on large ones (each pass is linear in n)
        cid = KMeans(n_clusters=k, n_init=3 if n <= 50_000 else 1, random_state=random_state).fit_predict(Z)
    return peco_from_clusters(cid, lab, n_clusters=k, reduced=Z, n_components=nc)


def peco_from_clusters(
    cluster_ids: Any, labels: Any, n_clusters: int | None = None, reduced: np.ndarray | None = None,
    n_components: int = 0,
) -> PecoResult:
    """PECO from a given clustering (rows' cluster ids and labels)."""
    cid = _as_1d(cluster_ids, "cluster_ids").astype(np.int64)
    div, dists, glob, sizes, classes = cluster_divergences(cid, labels, n_clusters)
    # re-index so that cluster_ids point into the non-empty clusters
    present = np.unique(cid)
    remap = np.full(int(cid.max()) + 1, -1, dtype=np.int64)
    remap[present] = np.arange(len(present))
    t, c = peco_curve(div)
    return PecoResult(
        score=peco_score(div),
        score_min=peco_score(div, "min"),
        score_fraction20=peco_fraction_steps(div, len(classes)),
        divergences=div,
        l2=np.sqrt(((dists - glob[None, :]) ** 2).sum(axis=1)),
        cluster_ids=remap[cid],
        cluster_sizes=sizes,
        cluster_dists=dists,
        global_dist=glob,
        classes=classes,
        curve_t=t,
        curve_count=c,
        reduced=reduced,
        n_components=n_components,
        n_clusters=len(present),
    )


@dataclasses.dataclass
class PecoNull:
    """PECO of one clustering next to its value with the labels shuffled (a permutation null).

    A raw PECO cannot be read on its own: a cluster of n_i rows drawn at random still has a label distribution
    that differs from the global one by sampling noise, E[s_i] ≈ (1/C) Σ_j p_j (1 − p_j) / n_i, so the same data
    scores higher on fewer rows (k clusters of N/k rows: PECO grows like k² / N). Shuffling the labels over the
    *same* clusters (k-means never sees the labels) measures that noise for exactly these cluster sizes.

    ``excess`` = observed − mean of the shuffles is the size-normalised form: the noise term cancels, leaving an
    estimate of Σ_i of the population divergence of the clusters, which does not depend on N (up to O(k/N)).
    That is why it, not a fixed-size subsample, is the comparable figure: it uses every row. ``p_value`` is the
    permutation p-value (1 + #{null ≥ observed}) / (1 + shuffles); ``z`` the excess in null standard deviations.
    With fine-tuned (label-trained) embeddings the clusters depend on the labels, so this null is conditional on
    the embedding and understates what a model trained on shuffled labels would give.
    """

    observed: float
    null: np.ndarray
    observed_fraction20: float
    null_fraction20: np.ndarray
    n_rows: int
    seed: int

    @property
    def mean(self) -> float:
        return float(self.null.mean())

    @property
    def std(self) -> float:
        return float(self.null.std(ddof=1)) if len(self.null) > 1 else 0.0

    @property
    def p95(self) -> float:
        return float(np.percentile(self.null, 95))

    @property
    def excess(self) -> float:
        return self.observed - self.mean

    @property
    def z(self) -> float:
        return self.excess / self.std if self.std > 0 else float("nan")

    @property
    def p_value(self) -> float:
        return float((1 + int(np.sum(self.null >= self.observed))) / (1 + len(self.null)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "shuffles": int(len(self.null)), "seed": self.seed, "n_rows": self.n_rows,
            "null_mean": self.mean, "null_std": self.std, "null_p95": self.p95,
            "null_min": float(self.null.min()), "null_max": float(self.null.max()),
            "excess": self.excess, "z": self.z, "p_value": self.p_value,
            "fraction20_null_mean": float(self.null_fraction20.mean()),
            "fraction20_null_p95": float(np.percentile(self.null_fraction20, 95)),
            "fraction20_excess": self.observed_fraction20 - float(self.null_fraction20.mean()),
        }


def peco_null(pr: PecoResult, labels: Any, n_shuffles: int = 30, seed: int = 0) -> PecoNull:
    """PECO (and its Table-4-scale variant) of ``pr``'s clusters with ``labels`` permuted ``n_shuffles`` times
    (seeded); see :class:`PecoNull` for how to read it."""
    if n_shuffles < 2:
        raise ParameterError(f"the PECO null needs at least 2 shuffles, got {n_shuffles}")
    lab = _as_1d(labels, "labels")
    cid = np.asarray(pr.cluster_ids, dtype=np.int64)
    _check_same_length(cluster_ids=cid, labels=lab)
    classes, y = np.unique(lab, return_inverse=True)
    k, c = int(cid.max()) + 1, len(classes)
    sizes = np.bincount(cid, minlength=k).astype(np.float64)
    glob = np.bincount(y, minlength=c) / len(y)
    rng = np.random.default_rng([seed, 12])
    null = np.empty(n_shuffles)
    null20 = np.empty(n_shuffles)
    for s in range(n_shuffles):
        counts = np.bincount(cid * c + rng.permutation(y), minlength=k * c).reshape(k, c)
        div = ((counts / sizes[:, None] - glob[None, :]) ** 2).mean(axis=1)
        null[s] = div.sum()
        null20[s] = peco_fraction_steps(div, c)
    return PecoNull(pr.score, null, pr.score_fraction20, null20, len(y), seed)


# ----------------------------------------------------------------------------------------------------------
# token artifacts (Gururangan et al. 2018; Gardner et al. 2021)
# ----------------------------------------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (letters/digits, inner apostrophes kept: "isn't", "man's")."""
    return _TOKEN_RE.findall(text.lower())


def token_artifacts(
    texts: Sequence[str],
    labels: Any,
    top_k: int = 10,
    min_count: int | None = None,
    smoothing: float = 1.0,
    rank_by: str = "pmi",
) -> dict[str, list[dict[str, Any]]]:
    """For each label, the tokens most associated with it.

    Counts are per sentence (a token counted once per sentence). For token w seen in n_w sentences, c_wl of them
    labelled l, and base rate p_l: PMI = log2(((c_wl + α) / (n_w + α·C)) / p_l) with add-α smoothing; z = (c_wl −
    n_w p_l) / sqrt(n_w p_l (1 − p_l)), the z-statistic of the token's label rate against the base rate. Tokens
    seen in fewer than ``min_count`` sentences are skipped (default max(5, 0.2% of the rows)).
    """
    if rank_by not in ("pmi", "z"):
        raise ParameterError(f"rank_by must be 'pmi' or 'z', got {rank_by!r}")
    lab = _as_1d(labels, "labels")
    if len(texts) != len(lab):
        raise InputError(f"{len(texts)} texts but {len(lab)} labels")
    if len(lab) == 0:
        raise InputError("no instances")
    classes, y = np.unique(lab, return_inverse=True)
    C = len(classes)
    n = len(lab)
    if min_count is None:
        min_count = max(5, math.ceil(0.002 * n))
    vocab: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for r, text in enumerate(texts):
        for tok in set(tokenize(text)):
            j = vocab.setdefault(tok, len(vocab))
            rows.append(r)
            cols.append(j)
    counts = np.zeros((len(vocab), C), dtype=np.int64)
    if rows:
        np.add.at(counts, (np.asarray(cols), y[np.asarray(rows)]), 1)
    words = np.array(list(vocab), dtype=object)
    n_w = counts.sum(axis=1)
    base = np.bincount(y, minlength=C) / n
    ok = n_w >= min_count
    out: dict[str, list[dict[str, Any]]] = {}
    for li, cls in enumerate(classes):
        c = counts[ok, li].astype(np.float64)
        nw = n_w[ok].astype(np.float64)
        p = base[li]
        with np.errstate(divide="ignore"):
            pmi = np.log2(((c + smoothing) / (nw + smoothing * C)) / p)
        z = (c - nw * p) / np.sqrt(np.maximum(nw * p * (1 - p), 1e-12))
        key = pmi if rank_by == "pmi" else z
        order = np.lexsort((words[ok].astype(str), -z, -key))
        order = order[z[order] > 0][:top_k]  # only tokens over-represented with the label
        out[str(cls)] = [
            {
                "token": str(words[ok][i]),
                "pmi": float(pmi[i]),
                "z": float(z[i]),
                "count": int(c[i]),
                "total": int(nw[i]),
                "label_rate": float(c[i] / nw[i]),
                "base_rate": float(p),
            }
            for i in order
        ]
    return out


# ----------------------------------------------------------------------------------------------------------
# cross-validated linear models
# ----------------------------------------------------------------------------------------------------------


def cv_predict(
    X: Any, y: Any, groups: Any = None, n_folds: int = 5, C: float = 1.0, seed: int = 0, max_iter: int = 500
) -> np.ndarray:
    """Out-of-fold class-index predictions of an L2 logistic regression (every row predicted exactly once).

    All folds are fitted at once by the batched, whitened L-BFGS of :class:`aflite.ensemble.FastLogisticEnsemble`
    (scikit-learn's objective; sparse input falls back to scikit-learn). Rows sharing a group never straddle a
    fold boundary. Returns indices into ``np.unique(y)``.
    """
    from sklearn.linear_model import LogisticRegression

    yy = _as_1d(y, "labels")
    n = len(yy)
    classes, yi = np.unique(yy, return_inverse=True)
    if len(classes) < 2:
        raise InputError("the audit needs at least 2 label classes")
    folds = min(n_folds, n)
    if folds < 2:
        raise ParameterError(f"need at least 2 folds and 2 rows, got folds={n_folds}, rows={n}")
    fold = fold_assignment(yi, groups, folds, seed)
    n_f = int(fold.max()) + 1
    train_mask = fold[:, None] != np.arange(n_f)[None, :]
    pred = np.empty(n, dtype=np.int64)
    if hasattr(X, "tocsr"):  # sparse: scikit-learn, one fold at a time
        for f in range(n_f):
            tr, te = np.flatnonzero(train_mask[:, f]), np.flatnonzero(~train_mask[:, f])
            if len(np.unique(yi[tr])) < 2:
                pred[te] = yi[tr][0]
                continue
            model = LogisticRegression(C=C, max_iter=max_iter).fit(X[tr], yi[tr])
            pred[te] = np.asarray(model.predict(X[te]), dtype=np.int64)
        return pred
    from aflite.ensemble import FastLogisticEnsemble

    ens = FastLogisticEnsemble(C=C, max_iter=max_iter)
    ens.prepare(np.asarray(X, dtype=np.float32), yi.astype(np.int64), len(classes))
    P = np.asarray(ens.fit_predict(np.arange(n), train_mask))
    pred[:] = P[np.arange(n), fold]
    return pred


# ----------------------------------------------------------------------------------------------------------
# fine-tuned encoder, gradient-norm relevance and TRA (eqs. 9-10)
# ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class FineTuned:
    """A fine-tuned encoder with a linear head over the mean-pooled last hidden state."""

    tokenizer: Any
    encoder: Any
    head: Any
    classes: np.ndarray
    steps: int
    losses: list[float]
    max_length: int = 128


def _torch() -> tuple[Any, Any]:
    from aflite.features import _import_torch

    return _import_torch()


def _model_path(model_path: str | Path | None) -> Path:
    from aflite.features import _resolve_model_path

    return _resolve_model_path(model_path)


def _batch(tok: Any, a: list[str], b: list[str] | None, max_length: int, device: str) -> dict[str, Any]:
    enc = tok(a, b, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
    return {k: v.to(device) for k, v in enc.items()}


def _pool(hidden: Any, mask: Any) -> Any:
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)


def finetune(
    texts_a: Sequence[str],
    texts_b: Sequence[str] | None,
    y: Any,
    *,
    model_path: str | Path | None = None,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 5e-5,
    max_length: int = 128,
    seed: int = 0,
    device: str | None = None,
    cache_file: Path | None = None,
    show_progress: bool = True,
    desc: str = "fine-tuning",
) -> FineTuned:
    """Fine-tune the encoder (default the bundled MiniLM) + linear head for ``steps`` AdamW steps (linear decay):
    the one trainer, :func:`aflite.training.fit_classifier` with the ``AUDIT`` preset.

    With ``cache_file`` an identical earlier run's weights are loaded instead of training again.
    """
    from aflite import training
    from aflite.encoders import TextEncoder

    path = _model_path(model_path)
    yy = _as_1d(y, "labels")
    classes, yi = np.unique(yy, return_inverse=True)
    if len(classes) < 2:
        raise InputError("fine-tuning needs at least 2 label classes")
    a = list(texts_a)
    b = None if texts_b is None else list(texts_b)
    cfg = training.AUDIT.replace(max_steps=steps, batch_size=batch_size, lr=lr, seed=seed, shuffle_seed=(seed,),
                                 device=device)
    training.seeded(seed)
    enc = TextEncoder(path, device=device, max_length=max_length)
    if cache_file is not None and cache_file.is_file():
        head = training.make_head(enc.torch, enc.dim, len(classes), cfg.head_dropout, enc.device)
        _, res = training.load_checkpoint(cache_file, enc, head)
        return FineTuned(enc.tokenizer, enc.module, head, classes, res.steps, res.losses, max_length)
    head, res = training.fit_classifier(enc, enc.prepare_pairs(a, b, max_length), yi, len(classes), cfg, desc=desc,
                                        show_progress=show_progress)
    if cache_file is not None:
        training.save_checkpoint(cache_file, enc, head, classes, res)
    return FineTuned(enc.tokenizer, enc.module, head, classes, res.steps, res.losses, max_length)


def predict(model: FineTuned, texts_a: Sequence[str], texts_b: Sequence[str] | None = None,
            batch_size: int = 64) -> np.ndarray:
    """Predicted labels (from ``model.classes``)."""
    torch, _ = _torch()
    dev = str(next(model.encoder.parameters()).device)
    a = list(texts_a)
    b = None if texts_b is None else list(texts_b)
    out = np.empty(len(a), dtype=np.int64)
    with torch.inference_mode():
        for s in range(0, len(a), batch_size):
            batch = _batch(model.tokenizer, a[s : s + batch_size], None if b is None else b[s : s + batch_size],
                           model.max_length, dev)
            logits = model.head(_pool(model.encoder(**batch).last_hidden_state, batch["attention_mask"]))
            out[s : s + batch_size] = logits.argmax(dim=1).cpu().numpy()
    return model.classes[out]


def embed(model: FineTuned, texts: Sequence[str], batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
    """Mean-pooled last hidden states of the fine-tuned encoder (what its head reads) for single texts."""
    torch, _ = _torch()
    from tqdm import tqdm

    dev = str(next(model.encoder.parameters()).device)
    t = list(texts)
    order = np.argsort([len(x) for x in t], kind="stable")
    out = np.empty((len(t), int(model.encoder.config.hidden_size)), dtype=np.float32)
    with torch.inference_mode():
        for s in tqdm(range(0, len(t), batch_size), desc="embedding (fine-tuned)", disable=not show_progress):
            idx = order[s : s + batch_size]
            batch = _batch(model.tokenizer, [t[i] for i in idx], None, model.max_length, dev)
            out[idx] = _pool(model.encoder(**batch).last_hidden_state, batch["attention_mask"]).float().cpu().numpy()
    return out


def token_relevance(model: FineTuned, text_a: str, text_b: str | None = None) -> np.ndarray:
    """Eq. 9: ‖∂ f_ŷ / ∂ emb(w_j)‖₂ over the input tokens (special tokens included), normalised to sum to 1.

    f_ŷ is the logit of the model's predicted class; emb(w_j) the input word embedding of token j.
    """
    torch, _ = _torch()
    dev = str(next(model.encoder.parameters()).device)
    batch = _batch(model.tokenizer, [text_a], None if text_b is None else [text_b], model.max_length, dev)
    ids = batch.pop("input_ids")
    emb = model.encoder.get_input_embeddings()(ids).detach().requires_grad_(True)
    hidden = model.encoder(inputs_embeds=emb, **batch).last_hidden_state
    logits = model.head(_pool(hidden, batch["attention_mask"]))[0]
    logits[int(logits.argmax())].backward()
    g = emb.grad[0].norm(dim=1).detach().cpu().numpy().astype(np.float64)
    total = g.sum()
    return g / total if total > 0 else g


def pad_relevance(m_bias: Any, length: int, view: str) -> np.ndarray:
    """Zero-pad the biased model's relevance vector to ``length``: prepended for the hypothesis, appended for the
    premise (so that the sentence's tokens line up with its tokens at the end / start of the pair input)."""
    m = np.asarray(m_bias, dtype=np.float64)
    if len(m) > length:
        raise InputError(f"biased relevance vector ({len(m)}) is longer than the pair's ({length})")
    pad = np.zeros(length - len(m))
    if view == "hypothesis":
        return np.concatenate([pad, m])
    if view == "premise":
        return np.concatenate([m, pad])
    raise ParameterError(f"view must be 'hypothesis' or 'premise', got {view!r}")


def tra_score(m_normal: Any, m_bias: Any, view: str) -> float:
    """Eq. 10: cosine between the normal relevance vector and the zero-padded biased one."""
    mn = np.asarray(m_normal, dtype=np.float64)
    mb = pad_relevance(m_bias, len(mn), view)
    den = float(np.linalg.norm(mn) * np.linalg.norm(mb))
    return float(mn @ mb / den) if den > 0 else float("nan")


@dataclasses.dataclass
class TraResult:
    score: float
    per_sample: np.ndarray
    rows: np.ndarray

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "n": len(self.rows), "std": float(np.nanstd(self.per_sample))}


def tra(
    normal: FineTuned, biased: FineTuned, premises: Sequence[str], hypotheses: Sequence[str], view: str,
    rows: Any = None, show_progress: bool = False,
) -> TraResult:
    """Dataset-level TRA: mean over ``rows`` (default all) of eq. 10."""
    from tqdm import tqdm

    r = np.arange(len(premises)) if rows is None else np.asarray(rows, dtype=np.int64)
    vals = np.empty(len(r))
    for j, i in enumerate(tqdm(r, desc=f"TRA ({view})", disable=not show_progress)):
        mn = token_relevance(normal, premises[i], hypotheses[i])
        single = hypotheses[i] if view == "hypothesis" else premises[i]
        mb = token_relevance(biased, single)
        if len(mb) > len(mn):  # pair input truncated harder than the single sentence
            mb = mb[-len(mn):] if view == "hypothesis" else mb[: len(mn)]
        vals[j] = tra_score(mn, mb, view)
    return TraResult(float(np.nanmean(vals)) if len(vals) else float("nan"), vals, r)


# ----------------------------------------------------------------------------------------------------------
# the audit
# ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class AuditConfig:
    """Models, sizes and stages of :func:`audit`.

    ``tra=None`` (default) fine-tunes the TRA models only when the device is a GPU: on a 2-core CPU the three
    300-step fine-tunings take about half an hour to hours, which no default should cost. ``peco_shuffles`` label
    shuffles give PECO's permutation null (:class:`PecoNull`).
    """

    views: tuple[str, ...] = AUDIT_VIEWS
    featurizer: str = "minilm"
    n_folds: int = 5
    C: float = 1.0
    n_components: int = 30
    n_clusters: int = 50
    bias_threshold: float = BIAS_THRESHOLD
    tsne_sample: int = 2000
    top_k_tokens: int = 10
    min_token_count: int | None = None
    tra: bool | None = None
    peco_shuffles: int = 30
    peco_encoder: str = "frozen"  # or "finetuned" (needs tra)
    tra_steps: int = 300
    tra_batch_size: int = 32
    tra_lr: float = 5e-5
    tra_sample: int = 200
    tra_eval: int = 1000
    tra_holdout: float = 0.2
    model_path: str | None = None
    device: str | None = None
    seed: int = 0
    cache_dir: str | None = None
    show_progress: bool = True

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["views"] = list(self.views)
        return d


@dataclasses.dataclass
class ViewAudit:
    """One single-sentence condition's audit. Dataset-level figures in ``metrics``, ``peco``, ``peco_null``,
    ``tra``; per-row ones (like a cleanlab issue manager's scores) in ``biased_pred`` / ``normal_pred`` (the
    out-of-fold predictions), ``peco.cluster_ids`` and :meth:`AuditResult.row_scores`."""

    view: str
    metrics: dict[str, float]
    peco: PecoResult
    tsne: np.ndarray | None
    tsne_rows: np.ndarray | None
    artifacts: dict[str, list[dict[str, Any]]]
    tra: TraResult | None = None
    finetuned: dict[str, float] = dataclasses.field(default_factory=dict)
    examples: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    peco_null: PecoNull | None = None
    biased_pred: np.ndarray | None = dataclasses.field(default=None, repr=False)
    normal_pred: np.ndarray | None = dataclasses.field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        null = self.peco_null
        return {
            "view": self.view,
            "condition": "s2" if self.view == "hypothesis" else "s1",
            **self.metrics,
            "peco": self.peco.score,
            "peco_null_mean": None if null is None else null.mean,
            "peco_null_p95": None if null is None else null.p95,
            "peco_excess": None if null is None else null.excess,
            "peco_p_value": None if null is None else null.p_value,
            "peco_null": None if null is None else null.to_dict(),
            "peco_fraction20": self.peco.score_fraction20,
            "peco_details": self.peco.to_dict(),
            "biased_clusters": int(len(self.peco.biased_clusters())),
            "tra": None if self.tra is None else self.tra.score,
            "tra_details": None if self.tra is None else self.tra.to_dict(),
            "finetuned": self.finetuned,
            "token_artifacts": self.artifacts,
        }


@dataclasses.dataclass
class AuditResult:
    name: str
    n: int
    label_counts: dict[str, int]
    views: dict[str, ViewAudit]
    config: AuditConfig
    timings: dict[str, float]
    labels: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, dtype=str), repr=False)
    ids: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, dtype=str), repr=False)
    normal_input: str = "pair"

    def add_time(self, key: str, seconds: float) -> None:
        """Charge work done outside :func:`audit` (e.g. featurization shared by several audits) to this result."""
        self.timings[key] = self.timings.get(key, 0.0) + float(seconds)
        self.timings["total"] = sum(t for k, t in self.timings.items() if k != "total")

    def row_scores(self, view: str) -> dict[str, np.ndarray]:
        """Per-row scores of one view, row-aligned with the dataset: out-of-fold predictions of the biased and
        normal models and whether each is right, the row's PECO cluster, that cluster's s_i and L2 distance, and
        whether the cluster is a biased region (L2 > ``config.bias_threshold``)."""
        va = self.views[view]
        if va.biased_pred is None or va.normal_pred is None:
            raise ParameterError(f"view {view!r} has no per-row predictions (made by an older version?)")
        cid = va.peco.cluster_ids
        return {
            "id": np.asarray(self.ids).astype(str) if len(self.ids) else np.arange(self.n).astype(str),
            "label": np.asarray(self.labels).astype(str),
            "biased_pred": va.biased_pred,
            "biased_correct": va.biased_pred == self.labels,
            "normal_pred": va.normal_pred,
            "normal_correct": va.normal_pred == self.labels,
            "cluster": cid,
            "cluster_divergence": va.peco.divergences[cid],
            "cluster_l2": va.peco.l2[cid],
            "biased_region": va.peco.l2[cid] > self.config.bias_threshold,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "n": self.n,
            "label_counts": self.label_counts,
            "normal_input": self.normal_input,
            "views": {v: a.to_dict() for v, a in self.views.items()},
            "timings_s": {k: round(t, 2) for k, t in self.timings.items()},
            "config": self.config.to_dict(),
        }


def sample_rows(dataset: Any, n: int, seed: int = 0) -> Any:
    """A seeded random sample of ``n`` rows (file order kept); the dataset itself when it has at most n rows."""
    if n < 1:
        raise ParameterError(f"sample size must be >= 1, got {n}")
    if len(dataset) <= n:
        return dataset
    rows = np.sort(np.random.default_rng(seed).permutation(len(dataset))[:n])
    return subset(dataset, np.asarray(dataset.ids)[rows])


def subset(dataset: Any, keep_ids: Sequence[Any] | np.ndarray) -> Any:
    """The rows of ``dataset`` whose id is in ``keep_ids`` (file order kept)."""
    ids = np.asarray(dataset.ids).astype(str)
    want = {str(i) for i in keep_ids}
    mask = np.fromiter((i in want for i in ids), dtype=bool, count=len(ids))
    missing = len(want) - int(mask.sum())
    if missing > 0:
        raise InputError(f"{missing} of {len(want)} kept ids are not in the dataset (was the run made on it?)")
    rows = np.flatnonzero(mask)
    return dataclasses.replace(
        dataset,
        texts_a=[dataset.texts_a[i] for i in rows],
        texts_b=None if dataset.texts_b is None else [dataset.texts_b[i] for i in rows],
        labels=np.asarray(dataset.labels)[rows],
        ids=np.asarray(dataset.ids)[rows],
        groups=None if dataset.groups is None else np.asarray(dataset.groups)[rows],
    )


def _features(dataset: Any, view: str, cfg: AuditConfig) -> np.ndarray:
    from aflite.features import featurize

    opts: dict[str, Any] = {}
    if cfg.featurizer == "minilm":
        if cfg.model_path is not None:
            opts["model_path"] = cfg.model_path
        if cfg.device is not None:
            opts["device"] = cfg.device
    feats = featurize(
        dataset.texts_a, dataset.texts_b, featurizer=cfg.featurizer, view=view, cache_dir=cfg.cache_dir,
        show_progress=cfg.show_progress, **opts,
    )
    X = feats.X
    return X.toarray() if hasattr(X, "toarray") else np.asarray(X)


@limited  # one thread policy (aflite.threads)
def compute_features(dataset: Any, cfg: AuditConfig) -> dict[str, np.ndarray]:
    """The frozen feature matrices the linear models use: ``pair`` and each single-sentence view in
    ``cfg.views`` (``--views hypothesis`` never embeds the premises on their own). ngram builds its pair matrix
    from both single-field matrices, so it always has both (n-grams are cheap)."""
    need = AUDIT_VIEWS if cfg.featurizer == "ngram" else tuple(cfg.views)
    single: dict[str, np.ndarray] = {v: _features(dataset, v, cfg) for v in AUDIT_VIEWS if v in need}
    # ngram featurizes each field on its own, so its pair matrix is the two single-field matrices side by side
    pair = np.hstack([single["premise"], single["hypothesis"]]) if cfg.featurizer == "ngram" else _features(
        dataset, "pair", cfg)
    return {**single, "pair": pair}


def _normal_features(single: dict[str, np.ndarray], pair: np.ndarray) -> tuple[np.ndarray, str]:
    """Normal-condition input and its name: the pair encoding plus InferSent-style [u, v, |u − v|, u ⊙ v] of
    the two sides when both single-sentence matrices exist, else the pair encoding alone."""
    u, v = single.get("premise"), single.get("hypothesis")
    if u is None or v is None or u.shape != v.shape:
        return pair, "pair"
    return np.hstack([pair, u, v, np.abs(u - v), u * v]).astype(np.float32), "pair+infersent"


def resolve_device(device: str | None) -> str:
    """The torch device the audit would use: ``device`` if given, else cuda when torch sees a GPU, else cpu."""
    from aflite.device import torch_device

    return torch_device(device)


# Throughputs measured with OMP_NUM_THREADS=1 on a shared 2-core CPU (docs/measured, notes) and on one H100;
# they only decide which stages get announced, so a factor of two either way is fine.
_RATES = {
    "cpu": {"embed_pair": 200.0, "embed_single": 450.0, "ft_step": 1.7, "tra_row": 0.15, "lr_rows": 2500.0},
    "cuda": {"embed_pair": 4000.0, "embed_single": 8000.0, "ft_step": 0.06, "tra_row": 0.02, "lr_rows": 2500.0},
}


def _cpu_slowdown() -> float:
    """How much slower than on an idle machine CPU work will run now: the 1-minute load average per core (≥ 1).
    On a shared machine this is the difference between a 3-minute and a 20-minute embedding."""
    import os

    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every platform
        return 1.0
    return max(1.0, load / max(1, os.cpu_count() or 1))


def estimate_seconds(n: int, cfg: AuditConfig, device: str | None = None) -> dict[str, float]:
    """Rough seconds per stage for ``n`` pairs (embedding counts as if nothing were cached); on a CPU scaled by
    the current load (:func:`_cpu_slowdown`)."""
    dev = device if device is not None else resolve_device(cfg.device)
    gpu = dev.startswith("cuda")
    slow = 1.0 if gpu else _cpu_slowdown()
    # throughputs (per second) fall and per-item costs (seconds) grow with the slowdown
    r = {k: v * slow if k in ("ft_step", "tra_row") else v / slow for k, v in _RATES["cuda" if gpu else "cpu"].items()}
    est: dict[str, float] = {}
    if cfg.featurizer == "minilm":
        est["MiniLM embedding"] = n / r["embed_pair"] + len(cfg.views) * n / r["embed_single"]
    est["cross-validated linear models"] = (1 + len(cfg.views)) * n / r["lr_rows"]
    tra = cfg.tra if cfg.tra is not None else dev.startswith("cuda")
    if tra:
        est["fine-tuning (TRA)"] = (1 + len(cfg.views)) * cfg.tra_steps * r["ft_step"]
        est["TRA relevance"] = len(cfg.views) * min(cfg.tra_sample, cfg.tra_eval) * r["tra_row"]
    return est


def announce(est: dict[str, float], min_seconds: float = 60.0, file: Any = None) -> list[str]:
    """Print (to stderr) one line per stage expected to take more than ``min_seconds``; returns the lines."""
    import sys

    lines = [f"estimate: {stage} ~{_duration(sec)} (before any cache)" for stage, sec in est.items()
             if sec > min_seconds]
    for line in lines:
        print(line, file=file if file is not None else sys.stderr, flush=True)
    return lines


def _duration(sec: float) -> str:
    return f"{sec:.0f} s" if sec < 120 else f"{sec / 60:.0f} min"


def _ft_cache(cfg: AuditConfig, a: Sequence[str], b: Sequence[str] | None, y: np.ndarray, tag: str) -> Path | None:
    if cfg.cache_dir is None:
        return None
    key = data_fingerprint(
        list(a), None if b is None else list(b),
        {"y": data_fingerprint([str(v) for v in y.tolist()], None), "steps": cfg.tra_steps, "lr": cfg.tra_lr,
         "bs": cfg.tra_batch_size, "seed": cfg.seed, "model": str(_model_path(cfg.model_path)), "tag": tag},
    )
    return Path(cfg.cache_dir) / f"audit-ft-{tag}-{key[:20]}.pt"


@limited  # one thread policy (aflite.threads)
def audit(
    dataset: Any,
    views: Sequence[str] | None = None,
    config: AuditConfig | None = None,
    name: str = "D",
    features: dict[str, np.ndarray] | None = None,
    **overrides: Any,
) -> AuditResult:
    """Audit a sentence-pair dataset (``aflite.data.TextDataset``) for single-sentence label leakage.

    ``config`` (or keyword overrides of :class:`AuditConfig` fields) sets the models and sizes; ``views`` picks
    the single-sentence conditions (default ``config.views``; giving both with different views is an error, not
    a silent override). ``features`` (``pair`` and each view's matrix, row-aligned with the dataset, e.g. rows
    sliced from :func:`compute_features` of a superset) skips featurization. A single-text dataset has no normal
    condition, so it is refused here. ``config.tra=None`` resolves to whether the device is a GPU; the result's
    config records the choice.
    """
    base = config or AuditConfig()
    if views is not None:
        want = tuple(views)
        if config is not None and tuple(config.views) != want:
            raise ParameterError(f"views={list(want)} disagrees with config.views={list(config.views)}; give one")
        base = dataclasses.replace(base, views=want)
    cfg = dataclasses.replace(base, **overrides)
    if len(set(cfg.views)) != len(cfg.views):
        raise ParameterError(f"a view is listed twice: {list(cfg.views)}")
    for v in cfg.views:
        if v not in AUDIT_VIEWS:
            raise ParameterError(f"unknown audit view {v!r}; choose from {', '.join(AUDIT_VIEWS)}")
    if not cfg.views:
        raise ParameterError("no views to audit")
    if cfg.featurizer not in ("minilm", "ngram"):
        raise ParameterError(f"featurizer must be 'minilm' or 'ngram', got {cfg.featurizer!r}")
    if cfg.peco_encoder not in ("frozen", "finetuned"):
        raise ParameterError("peco_encoder must be 'frozen' or 'finetuned'")
    if cfg.peco_shuffles < 2:
        raise ParameterError(f"peco_shuffles must be >= 2, got {cfg.peco_shuffles}")
    if cfg.tra is None:
        cfg = dataclasses.replace(cfg, tra=resolve_device(cfg.device).startswith("cuda"))
    if cfg.peco_encoder == "finetuned" and not cfg.tra:
        raise ParameterError("peco_encoder='finetuned' needs the fine-tuned models (tra=True)")
    if dataset.texts_b is None:
        raise InputError("the audit needs sentence pairs (premise and hypothesis columns)")
    y = np.asarray(dataset.labels).astype(str)
    n = len(y)
    if n < 10:
        raise InputError(f"too few rows to audit ({n}); need at least 10")
    classes, counts = np.unique(y, return_counts=True)
    if len(classes) < 2:
        raise InputError("the audit needs at least 2 label classes")
    groups = None if dataset.groups is None else np.asarray(dataset.groups)
    timings: dict[str, float] = {}

    def tick(key: str, t0: float) -> float:
        timings[key] = timings.get(key, 0.0) + time.perf_counter() - t0
        return time.perf_counter()

    t = time.perf_counter()
    if features is None and cfg.show_progress:
        announce(estimate_seconds(n, cfg))
    feats = compute_features(dataset, cfg) if features is None else features
    for key in ("pair", *cfg.views):
        if key not in feats or len(feats[key]) != n:
            raise InputError(f"features[{key!r}] is missing or not row-aligned with the dataset ({n} rows)")
    single: dict[str, np.ndarray] = {v: feats[v] for v in AUDIT_VIEWS if v in feats}
    pair = feats["pair"]
    t = tick("features", t)
    Xn, normal_input = _normal_features(single, pair)
    pred_n = classes[cv_predict(Xn, y, groups, cfg.n_folds, cfg.C, cfg.seed)]
    t = tick("normal_model", t)

    ft: dict[str, FineTuned] = {}
    ft_rows: tuple[np.ndarray, np.ndarray] | None = None
    ft_pred: dict[str, np.ndarray] = {}
    if cfg.tra:
        train, test = _holdout_split(n, groups, cfg.tra_holdout, cfg.seed)
        rng = np.random.default_rng(cfg.seed + 1)
        eval_rows = np.sort(rng.permutation(test)[: min(cfg.tra_eval, len(test))])
        ft_rows = (train, eval_rows)
        a, b = dataset.texts_a, dataset.texts_b
        for tag in ("pair", *cfg.views):
            ta = [b[i] if tag == "hypothesis" else a[i] for i in train]
            tb = [b[i] for i in train] if tag == "pair" else None
            ft[tag] = finetune(
                ta, tb, y[train], model_path=cfg.model_path, steps=cfg.tra_steps, batch_size=cfg.tra_batch_size,
                lr=cfg.tra_lr, seed=cfg.seed, device=cfg.device, cache_file=_ft_cache(cfg, ta, tb, y[train], tag),
                show_progress=cfg.show_progress, desc=f"fine-tuning MiniLM ({tag})",
            )
            ea = [b[i] if tag == "hypothesis" else a[i] for i in eval_rows]
            eb = [b[i] for i in eval_rows] if tag == "pair" else None
            ft_pred[tag] = predict(ft[tag], ea, eb)
        t = tick("finetune", t)

    out: dict[str, ViewAudit] = {}
    for view in cfg.views:
        Xb = single[view]
        pred_b = classes[cv_predict(Xb, y, groups, cfg.n_folds, cfg.C, cfg.seed)]
        metrics = leakage_metrics(y, pred_b, pred_n)
        t = tick("biased_models", t)
        texts = dataset.texts_b if view == "hypothesis" else dataset.texts_a
        if cfg.peco_encoder == "finetuned":
            E = embed(ft["pair"], texts, show_progress=cfg.show_progress)
        else:
            E = Xb
        pr = peco(E, y, cfg.n_components, cfg.n_clusters, cfg.seed)
        null = peco_null(pr, y, cfg.peco_shuffles, cfg.seed)
        t = tick("peco", t)
        tsne_xy, tsne_rows = _tsne(pr, cfg)
        t = tick("tsne", t)
        arts = token_artifacts(texts, y, cfg.top_k_tokens, cfg.min_token_count)
        t = tick("artifacts", t)
        va = ViewAudit(view, metrics, pr, tsne_xy, tsne_rows, arts, examples=_examples(pr, texts, y, cfg),
                       peco_null=null, biased_pred=pred_b, normal_pred=pred_n)
        if cfg.tra and ft_rows is not None:
            _, eval_rows = ft_rows
            yt = y[eval_rows]
            m = leakage_metrics(yt, ft_pred[view], ft_pred["pair"])
            va.finetuned = {**m, "n_eval": int(len(eval_rows)), "n_train": int(len(ft_rows[0])),
                            "steps": cfg.tra_steps, "batch_size": cfg.tra_batch_size}
            rows = eval_rows[: min(cfg.tra_sample, len(eval_rows))]
            va.tra = tra(ft["pair"], ft[view], dataset.texts_a, dataset.texts_b, view, rows, cfg.show_progress)
            t = tick("tra", t)
        out[view] = va
    timings["total"] = sum(timings.values())
    label_counts = {str(c): int(k) for c, k in zip(classes, counts, strict=True)}
    return AuditResult(name, n, label_counts, out, cfg, timings, y, np.asarray(dataset.ids).astype(str), normal_input)


def _tsne(pr: PecoResult, cfg: AuditConfig) -> tuple[np.ndarray | None, np.ndarray | None]:
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


def _examples(pr: PecoResult, texts: Sequence[str], y: np.ndarray, cfg: AuditConfig, per: int = 3,
              n_clusters: int = 5) -> list[dict[str, Any]]:
    """Sentences from the most divergent clusters (for the report)."""
    out = []
    for c in np.argsort(-pr.divergences)[:n_clusters]:
        members = np.flatnonzero(pr.cluster_ids == c)[:per]
        dist = {str(k): round(float(p), 3) for k, p in zip(pr.classes, pr.cluster_dists[c], strict=True)}
        out.append({
            "cluster": int(c), "size": int(pr.cluster_sizes[c]), "divergence": float(pr.divergences[c]),
            "l2": float(pr.l2[c]), "label_dist": dist,
            "sentences": [{"text": texts[i], "label": str(y[i])} for i in members],
        })
    return out
