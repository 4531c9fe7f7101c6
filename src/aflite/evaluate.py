"""Re-estimating what models can do on a dataset and on its filtered versions.

The paper's evidence that AFLite removes artifacts is that partial-input baselines (here: a hypothesis-only
classifier) fall on D(Φ) while a random subset of the same size keeps them (Le Bras et al. 2020, Table 3).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray


@dataclass
class ProbeResult:
    """Cross-validated accuracy of a probe on one training set."""

    name: str
    size: int
    accuracy: float
    accuracy_std: float
    majority: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def text_probe_accuracy(
    texts: list[str], labels: NDArray[Any], folds: int = 5, random_state: int = 0
) -> tuple[float, float]:
    """k-fold accuracy of a TF-IDF (word 1–2-grams) logistic regression: a cheap partial-input baseline."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline

    y = np.asarray(labels)
    _, counts = np.unique(y, return_counts=True)
    k = int(max(2, min(folds, counts.min())))
    model = make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True), LogisticRegression(C=1.0, max_iter=2000)
    )
    cv = StratifiedKFold(n_splits=k, shuffle=True, random_state=random_state)
    scores = cross_val_score(model, np.asarray(texts, dtype=object), y, cv=cv)
    return float(scores.mean()), float(scores.std())


def compare_partial_input(
    texts: list[str],
    labels: NDArray[Any],
    keep: NDArray[np.bool_],
    folds: int = 5,
    random_state: int = 0,
    random_repeats: int = 3,
) -> list[ProbeResult]:
    """The probe on D, on D(Φ) (``keep``) and on random subsets of D with |D(Φ)| rows (seeded)."""
    y = np.asarray(labels)
    out = []

    def one(name: str, rows: NDArray[np.intp], seed: int) -> ProbeResult:
        yy = y[rows]
        acc, sd = text_probe_accuracy([texts[i] for i in rows], yy, folds, seed)
        maj = float(np.unique(yy, return_counts=True)[1].max() / len(yy))
        return ProbeResult(name, len(rows), acc, sd, maj)

    everything = np.arange(len(y))
    out.append(one("D", everything, random_state))
    kept = np.flatnonzero(keep)
    out.append(one("D(Φ)", kept, random_state))
    rng = np.random.default_rng([random_state, 7])
    accs = []
    for r in range(random_repeats):
        rows = np.sort(rng.choice(len(y), size=len(kept), replace=False))
        accs.append(one("random", rows, random_state + r))
    out.append(
        ProbeResult(
            f"random subset (mean of {random_repeats})",
            len(kept),
            float(np.mean([a.accuracy for a in accs])),
            float(np.std([a.accuracy for a in accs])),
            float(np.mean([a.majority for a in accs])),
        )
    )
    return out
