"""PECO (eqs. 11-12): clusters of the view's embeddings, their label divergence, and its permutation null."""

from __future__ import annotations

import dataclasses
from typing import Any, TypedDict

import numpy as np

from aflite.audit.metrics import BIAS_THRESHOLD, _as_1d, _check_same_length
from aflite.errors import InputError, ParameterError


class PecoRecord(TypedDict):
    """What results.json records of PECO (:meth:`PecoResult.to_dict`)."""

    score: float
    score_min_lower_limit: float
    score_fraction20: float
    n_components: int
    n_clusters: int
    classes: list[str]
    global_dist: list[float]
    divergences: list[float]
    l2: list[float]
    cluster_sizes: list[int]
    mean_divergence: float
    max_divergence: float


class PecoNullRecord(TypedDict):
    """What results.json records of PECO's shuffled-label null (:meth:`PecoNull.to_dict`)."""

    shuffles: int
    seed: int
    n_rows: int
    null_mean: float
    null_std: float
    null_p95: float
    null_min: float
    null_max: float
    excess: float
    z: float
    p_value: float
    fraction20_null_mean: float
    fraction20_null_p95: float
    fraction20_excess: float


class Sentence(TypedDict):
    text: str
    label: str


class PecoExample(TypedDict):
    """One of the most divergent clusters the report shows: its size, divergence, L2, label shares and a few rows
    (their texts; an image audit's: ids)."""

    cluster: int
    size: int
    divergence: float
    l2: float
    label_dist: dict[str, float]
    sentences: list[Sentence]


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

    def to_dict(self) -> PecoRecord:
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

    def to_dict(self) -> PecoNullRecord:
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
