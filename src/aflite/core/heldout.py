"""What the filter's first phase knows about each row beyond p̃: a data map and soft weights.

The first filtering phase trains m models on random t-subsets of all of D and predicts every row out of sample
about m·(|D|−t)/|D| times. Besides the hard predictions that give p̃, those models give class probabilities, and
their mean and spread per row are the coordinates of a data map (Swayamdipta et al. 2020, "Dataset Cartography",
with models of one ensemble in place of training epochs):

* ``proba`` — the mean held-out probability vector of each row (what confident learning reads);
* ``confidence`` — the mean held-out probability of the gold label;
* ``variability`` — its standard deviation over the models that held the row out (population std, ddof=0);
* ``correctness`` — the fraction of those models whose arg-max is the gold label (the phase's p̃ when the
  ensemble's hard predictions agree with the arg-max of its probabilities, as they do for logistic models).

Rows that no model held out get NaN everywhere: never a default (the pitfall of unscored rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.core.store import map_chunks

__all__ = [
    "FIRST_PHASE_ATTRIBUTES",
    "HeldoutMap",
    "WEIGHT_RULE",
    "first_phase_attributes",
    "heldout_map",
    "soft_weights",
]


@dataclass
class HeldoutMap:
    """Per-row statistics of the held-out probabilities of one phase (NaN where a row was never held out)."""

    proba: NDArray[np.float64]  # (n, K)
    confidence: NDArray[np.float64]
    variability: NDArray[np.float64]
    correctness: NDArray[np.float64]
    n_heldout: NDArray[np.int32]


def heldout_map(
    proba_fn: Any, y: NDArray[np.int64], train_mask: NDArray[np.bool_], n_classes: int, chunk: int = 8192,
    n_jobs: int | None = None,
) -> HeldoutMap:
    """Average ``proba_fn(positions) -> (len, m, K)`` over the models that held each row out.

    ``y`` and ``train_mask`` (True = in the model's training set) are over the same rows as the positions;
    rows are processed ``chunk`` at a time so that the (rows, m, K) block stays small, on ``n_jobs`` threads
    (default: the thread budget; ``proba_fn`` must be safe to call from several threads).
    """
    n = len(y)
    proba = np.full((n, n_classes), np.nan)
    conf = np.full(n, np.nan)
    var = np.full(n, np.nan)
    corr = np.full(n, np.nan)
    held_all = ~np.asarray(train_mask, dtype=bool)
    n_held = held_all.sum(1).astype(np.int32)

    def one(r0: int) -> None:  # each chunk writes only its own rows: chunks run side by side, same bits
        pos = np.arange(r0, min(n, r0 + chunk))
        P = np.asarray(proba_fn(pos), dtype=np.float64)  # (c, m, K)
        held = held_all[pos]
        cnt = held.sum(1)
        ok = cnt > 0
        w = held / np.maximum(cnt, 1)[:, None]  # (c, m) weights of the held-out models
        gold = np.take_along_axis(P, y[pos][:, None, None], 2)[:, :, 0]  # (c, m)
        mu = (w * gold).sum(1)
        sd = np.sqrt(np.maximum((w * (gold - mu[:, None]) ** 2).sum(1), 0.0))
        right = (P.argmax(2) == y[pos][:, None]).astype(np.float64)
        proba[pos[ok]] = np.einsum("cm,cmk->ck", w, P)[ok]
        conf[pos[ok]] = mu[ok]
        var[pos[ok]] = sd[ok]
        corr[pos[ok]] = (w * right).sum(1)[ok]

    map_chunks(one, range(0, n, chunk), n_jobs)
    return HeldoutMap(proba, conf, var, corr, n_held)


WEIGHT_RULE = (
    "w = 1 - p̃ of the filter's first phase (every row scored by one ensemble over all of D), with p̃ taken as "
    "(correct + 1) / (held out + 2) so that no row gets weight 0, then rescaled within each gold class to mean 1: "
    "a class keeps its total weight and its most predictable rows count least; rows the phase never held out get "
    "the neutral weight 1"
)


def soft_weights(n_correct: NDArray[np.integer[Any]], n_heldout: NDArray[np.integer[Any]],
                 y: NDArray[Any]) -> NDArray[np.float64]:
    """Per-row training weights for users who reweight instead of drop (rule: :data:`WEIGHT_RULE`)."""
    c = np.asarray(n_correct, dtype=np.float64)
    h = np.asarray(n_heldout, dtype=np.float64)
    y = np.asarray(y)
    w = np.ones(len(c))
    raw = 1.0 - (c + 1.0) / (h + 2.0)
    for label in np.unique(y):
        rows = np.flatnonzero((y == label) & (h > 0))
        if len(rows):
            w[rows] = raw[rows] * (len(rows) / raw[rows].sum())
    return w


FIRST_PHASE_ATTRIBUTES = ("first_phase_proba_", "confidence_", "variability_", "correctness_",
                          "first_phase_predictability_", "weights_", "first_phase_coef_")


def first_phase_attributes(
    ens: Any, X: Any, codes: NDArray[np.int64], rows: NDArray[np.intp], scores: Any,
    train_mask: NDArray[np.bool_] | None, n_classes: int,
) -> dict[str, NDArray[Any] | None]:
    """The fitted attributes :class:`aflite.core.filter.AFLite` sets after its first phase (None where unknown:
    a resumed run, a model without ``predict_proba``)."""
    attrs: dict[str, NDArray[Any] | None] = dict.fromkeys(FIRST_PHASE_ATTRIBUTES)
    if ens is None or scores is None or train_mask is None:
        return attrs
    attrs["first_phase_predictability_"] = np.asarray(scores.predictability, dtype=np.float64).copy()
    attrs["weights_"] = soft_weights(scores.n_correct, scores.n_heldout, codes[rows])
    try:
        hm = heldout_map(lambda pos: ens.predict_proba(X, rows[pos]), codes[rows], train_mask, n_classes)
    except NotImplementedError:
        return attrs
    attrs.update(first_phase_proba_=hm.proba, confidence_=hm.confidence, variability_=hm.variability,
                 correctness_=hm.correctness)
    try:  # the models' mean weights on the raw features, centred over classes (softmax ignores a shared shift)
        W, _ = ens.raw_coefficients()
        coef = W.mean(1).T  # (K, n_features), as scikit-learn's coef_
        attrs["first_phase_coef_"] = coef - coef.mean(0, keepdims=True)
    except NotImplementedError:
        pass
    return attrs
