"""Accuracy-based leakage metrics (Saxon et al., eqs. 3-8): majority rate, Δmaj, %R_R, NBA and NBR."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aflite.check.summary import CheckSummary
from aflite.errors import InputError

AUDIT_VIEWS = ("hypothesis", "premise")
BIAS_THRESHOLD = 0.2


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


@dataclass
class LeakageMetrics(CheckSummary):
    """One view's accuracy-based leakage figures (fractions), the ``leakage_metrics`` check's summary; ``score``:
    Δmaj, the biased accuracy over the majority rate (eq. 4).

    ``majority_accuracy`` is the majority-class rate of the *same* rows, so that every accuracy is read against
    chance: ``delta_maj`` for the biased model, ``normal_delta_maj`` for the normal one. ``biased_accuracy`` is
    ``biased_model``'s score, written here so that the view entry has every figure of eqs. 3-8 from one type.
    """

    biased_accuracy: float
    normal_accuracy: float
    majority_accuracy: float
    delta_maj: float
    normal_delta_maj: float
    pct_rr: float
    nba: float
    nbr: float

    def __post_init__(self) -> None:
        self.score = self.delta_maj

    @classmethod
    def compute(cls, y: Any, pred_bias: Any, pred_normal: Any) -> LeakageMetrics:
        """The figures of out-of-fold biased/normal predictions against the labels; NBA/NBR by :func:`nba_nbr`."""
        yy, pb, pn = _as_1d(y, "labels"), _as_1d(pred_bias, "pred_bias"), _as_1d(pred_normal, "pred_normal")
        _check_same_length(labels=yy, pred_bias=pb, pred_normal=pn)
        acc_b, acc_n, maj = float(np.mean(pb == yy)), float(np.mean(pn == yy)), majority_accuracy(yy)
        return cls(acc_b, acc_n, maj, acc_b - maj, acc_n - maj, acc_b / acc_n if acc_n > 0 else float("nan"),
                   *nba_nbr(pb, pn, yy))
