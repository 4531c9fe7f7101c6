"""Partial-input probes: how well a cheap TF-IDF model predicts the label from one side of a pair alone."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from aflite.features.ngram_hash import hashed_parts
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

    def to_dict(self) -> dict[str, str | int | float | None]:
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


# The probe's solver and its stopping tolerance. Newton-CG (truncated Newton, deterministic) reaches the optimum of
# the same objective as the SAG fits it replaced (multinomial, C = 1, unpenalised intercept) in 4 Newton steps at
# 1e-4: on SNLI train_100k hypotheses (5 grouped folds of D) every fold within 4e-4 of SAG at 1e-2's (mean 0.6331 for
# both, spread 0.0020 vs 0.0018) for 3.9 instead of 6.3 CPU-s; at 1e-3 it stops a step early (mean -0.0009) and at
# 1e-2 before its first step (#57; benchmarks/probe_speed.py runs the earlier SAG at 1e-3 beside this one)
PROBE_SOLVER = "newton-cg"
PROBE_TOL = 1e-4


def word_counts(texts: list[str]) -> sp.csr_matrix:
    """Word 1-2-gram counts of every text (float64 CSR), tokenized once: scikit-learn's analyzer's n-grams
    (lowercased, token pattern ``(?u)\\b\\w\\w+\\b``), each its own column (a 63-bit hash per n-gram, columns
    in hash order). Every probe set's folds are column selections of it, instead of a tokenization per fold."""
    indptr, indices, data = hashed_parts(texts, "word", (1, 2), 2**63)
    _, columns = np.unique(indices, return_inverse=True)
    n_cols = int(columns.max()) + 1 if len(columns) else 0
    return sp.csr_matrix((data.astype(np.float64), columns.astype(np.int64), indptr), shape=(len(texts), n_cols))


def _tfidf_fold(counts: sp.csr_matrix, tr: NDArray[np.intp], te: NDArray[np.intp]) -> tuple[Any, Any]:
    """The fold's training and test TF-IDF matrices, as ``TfidfVectorizer(min_df=2, sublinear_tf=True)`` fitted on
    the training rows makes them (smooth idf, l2 rows; n-grams in fewer than 2 training rows dropped)."""
    train = counts[tr]
    df = np.bincount(train.indices, minlength=counts.shape[1])
    cols = np.flatnonzero(df >= 2)
    if len(cols) == 0:
        raise ValueError("After pruning, no terms remain. Try a lower min_df or a higher max_df.")
    idf = np.log((1 + len(tr)) / (1 + df[cols])) + 1.0
    out = []
    for m in (train, counts[te]):
        x = sp.csr_matrix(m[:, cols])
        x.data = 1.0 + np.log(x.data)
        x = sp.csr_matrix(x @ sp.diags(idf))
        norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
        out.append(sp.csr_matrix(sp.diags(1.0 / np.where(norms == 0, 1.0, norms)) @ x))
    return out[0], out[1]


def text_probe_accuracy(
    texts: list[str], labels: NDArray[Any], folds: int = 5, random_state: int = 0,
    groups: NDArray[Any] | None = None, counts: sp.csr_matrix | None = None, progress: Any = None,
) -> tuple[float, float]:
    """k-fold accuracy of a TF-IDF (word 1–2-grams) logistic regression: a cheap partial-input baseline.
    With ``groups`` (the run's: premise, twins, a family column) no group sits on both sides of a fold
    (:func:`aflite.splits.probe_folds`), as in the filter's partitions. ``counts``: :func:`word_counts` of
    ``texts`` when the caller has them (one tokenization for several sets). ``progress`` (a tqdm bar) is ticked
    once per fold as it ends, so that a long probe's bar has a rate and an ETA before its first set is done.

    The model is fitted by Newton-CG (``PROBE_SOLVER``) rather than L-BFGS: the same convex objective (C = 1),
    reached in ~4 Newton steps (``PROBE_TOL``) instead of ~140 gradient evaluations (SNLI train_100k hypotheses:
    fold accuracies equal to 4e-4); ``random_state`` seeds the folds."""
    from sklearn.linear_model import LogisticRegression

    # labels as their codes in sorted order (the classes' order either way): the fits and scores compare integers
    # instead of encoding the label strings again in each fit and score (~0.05 CPU-s a fold on train_100k)
    _, y, class_counts = np.unique(np.asarray(labels), return_inverse=True, return_counts=True)
    y = y.ravel()
    k = int(max(2, min(folds, class_counts.min())))
    c = word_counts(list(texts)) if counts is None else counts

    def fold(split: tuple[NDArray[np.intp], NDArray[np.intp]]) -> float:
        tr, te = split
        x_tr, x_te = _tfidf_fold(c, tr, te)
        model = LogisticRegression(C=1.0, solver=PROBE_SOLVER, tol=PROBE_TOL, max_iter=2000,
                                   random_state=random_state)
        score = float(model.fit(x_tr, y[tr]).score(x_te, y[te]))
        if progress is not None:
            progress.update(1)  # tqdm's update holds its own lock: folds may end in any thread
        return score

    # the folds side by side, one BLAS/OpenMP thread each (aflite.threads)
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
    ``progress`` (e.g. a tqdm bar of ``folds`` · (2 + ``random_repeats``) steps) is ticked once per fold; a set
    with fewer folds (few rows of a class, few groups) or none (skipped) makes up its remaining steps at its end.
    ``groups`` (one per row, e.g. the run's): every set's folds keep a group on one side."""
    y = np.asarray(labels)
    g = None if groups is None else np.asarray(groups)
    out = []

    def one(name: str, rows: NDArray[np.intp], seed: int) -> ProbeResult:
        yy = y[rows]
        maj = float(np.unique(yy, return_counts=True)[1].max() / len(yy)) if len(yy) else float("nan")
        gg = None if g is None else g[rows]
        why = probe_skip_reason(yy, folds, gg)
        start = None if progress is None else int(getattr(progress, "n", 0))
        if why is None:
            acc, sd = text_probe_accuracy([texts[i] for i in rows], yy, folds, seed, gg, counts=counts[rows],
                                          progress=progress)
        else:  # e.g. a subset of an imbalanced set that holds one class: no probe, and the reason recorded
            acc, sd = float("nan"), float("nan")
        if progress is not None and start is not None:
            progress.update(max(0, folds - (int(getattr(progress, "n", 0)) - start)))  # each set: ``folds`` steps
        return ProbeResult(name, len(rows), acc, sd, maj, why)

    counts = word_counts(list(texts))  # tokenized once; each set's folds select rows and columns of it
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
