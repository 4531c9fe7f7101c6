"""Partial-input probes: how well a cheap TF-IDF model predicts the label from one side of a pair alone."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.atomic import JSON
from aflite.splits import probe_folds
from aflite.threads import limited, map_fits


@dataclass
class ProbeResult:
    """Cross-validated accuracy of a probe on one training set."""

    name: str
    size: int
    accuracy: float
    accuracy_std: float
    majority: float
    skipped: str | None = None  # why this set could not be probed (accuracy is then NaN)

    def to_dict(self) -> JSON:
        return asdict(self)


def probe_skip_reason(labels: NDArray[Any], folds: int = 5, groups: NDArray[Any] | None = None) -> str | None:
    """Why a ``folds``-fold probe cannot be trained on these labels (None when it can): every training fold
    needs two classes, so at least two classes must have as many rows as there are folds (at least 2); grouped
    folds need at least two groups."""
    if groups is not None and len(np.unique(groups)) < 2:
        return "all rows are in one group, so grouped folds cannot hold any out"
    names, counts = np.unique(np.asarray(labels).astype(str), return_counts=True)
    k = int(max(2, min(folds, counts.min()))) if len(counts) else 2
    if (counts >= k).sum() >= 2:
        return None
    if len(names) < 2:
        return f"all {int(counts.sum()) if len(counts) else 0} rows have one label" + (
            f" ({str(names[0])!r})" if len(names) else "")
    small = ", ".join(f"{str(n)!r} {c}" for n, c in zip(names.tolist(), counts.tolist(), strict=True) if c < k)
    return f"too few rows of the other classes for a {k}-fold probe ({small})"


def text_probe_accuracy(
    texts: list[str], labels: NDArray[Any], folds: int = 5, random_state: int = 0,
    groups: NDArray[Any] | None = None,
) -> tuple[float, float]:
    """k-fold accuracy of a TF-IDF (word 1–2-grams) logistic regression: a cheap partial-input baseline.
    With ``groups`` (the run's: premise, twins, a family column) no group sits on both sides of a fold
    (:func:`aflite.splits.probe_folds`), as in the filter's partitions."""
    from sklearn.base import clone
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    y = np.asarray(labels)
    _, counts = np.unique(y, return_counts=True)
    k = int(max(2, min(folds, counts.min())))
    model = make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True), LogisticRegression(C=1.0, max_iter=2000)
    )
    X = np.asarray(texts, dtype=object)

    def fold(split: tuple[NDArray[np.intp], NDArray[np.intp]]) -> float:
        tr, te = split
        return float(clone(model).fit(X[tr], y[tr]).score(X[te], y[te]))

    # the folds side by side, one BLAS/OpenMP thread each (aflite.threads); the same scores as cross_val_score
    scores = np.asarray(map_fits(fold, probe_folds(y, groups, k, random_state)))
    return float(scores.mean()), float(scores.std())


@limited  # one thread policy (aflite.threads)
def compare_partial_input(
    texts: list[str],
    labels: NDArray[Any],
    keep: NDArray[np.bool_],
    folds: int = 5,
    random_state: int = 0,
    random_repeats: int = 3,
    progress: Any = None,
    groups: NDArray[Any] | None = None,
) -> list[ProbeResult]:
    """The probe on D, on D(Φ) (``keep``) and on random subsets of D with |D(Φ)| rows (seeded).
    ``progress`` (e.g. a tqdm bar of 2 + ``random_repeats`` steps) is updated after each training set.
    ``groups`` (one per row, e.g. the run's): every set's folds keep a group on one side."""
    y = np.asarray(labels)
    g = None if groups is None else np.asarray(groups)
    out = []

    def one(name: str, rows: NDArray[np.intp], seed: int) -> ProbeResult:
        yy = y[rows]
        maj = float(np.unique(yy, return_counts=True)[1].max() / len(yy)) if len(yy) else float("nan")
        gg = None if g is None else g[rows]
        why = probe_skip_reason(yy, folds, gg)
        if why is None:
            acc, sd = text_probe_accuracy([texts[i] for i in rows], yy, folds, seed, gg)
        else:  # e.g. a subset of an imbalanced set that holds one class: no probe, and the reason recorded
            acc, sd = float("nan"), float("nan")
        if progress is not None:
            progress.update(1)
        return ProbeResult(name, len(rows), acc, sd, maj, why)

    everything = np.arange(len(y))
    out.append(one("D", everything, random_state))
    kept = np.flatnonzero(keep)
    out.append(one("D(Φ)", kept, random_state))
    rng = np.random.default_rng([random_state, 7])
    accs = []
    for r in range(random_repeats):
        rows = np.sort(rng.choice(len(y), size=len(kept), replace=False))
        accs.append(one("random", rows, random_state + r))
    probed = [a for a in accs if a.skipped is None]
    skipped = None if probed else accs[0].skipped if accs else "no random subsets"
    out.append(
        ProbeResult(
            f"random subset (mean of {random_repeats})" if len(probed) == len(accs) else
            f"random subset (mean of {len(probed)} of {len(accs)}; the others could not be probed)",
            len(kept),
            float(np.mean([a.accuracy for a in probed])) if probed else float("nan"),
            float(np.std([a.accuracy for a in probed])) if probed else float("nan"),
            float(np.mean([a.majority for a in probed or accs])),
            skipped,
        )
    )
    return out
