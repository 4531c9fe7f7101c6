"""The data map of the filter's first phase (regions) and label-issue candidates from cleanlab.

Coordinates come from :mod:`aflite.core.heldout` (confidence = mean held-out probability of the gold label over the
first phase's models, variability = its standard deviation, correctness = fraction of those models right).

Regions. Swayamdipta et al. (2020, "Dataset Cartography") name three regions of the map — easy-to-learn (high
confidence, low variability), ambiguous (high variability) and hard-to-learn (low confidence, low variability) —
and in their experiments take the top 33 % of the training set by variability as *ambiguous*, the top 33 % by
confidence as *easy* and the bottom 33 % by confidence as *hard*. Those three selections overlap; here they are
made a partition of the scored rows, in this order:

1. ``ambiguous``: variability ≥ its 2/3 quantile over the scored rows (the top third by variability);
2. ``hard``: of the others, confidence ≤ the 1/3 quantile of confidence over all scored rows;
3. ``easy``: every other scored row;

and ``unscored`` for a row no model of the phase held out. Quantiles make the rule independent of the
ensemble's calibration (a linear probe on frozen features is far less confident than a fine-tuned network).

Label issues: cleanlab's ``find_label_issues`` (confident learning, Northcutt et al. 2021) on the mean
held-out probabilities — the library's own implementation, never re-implemented here; cleanlab is the optional
extra ``aflite[explain]``. Without it the column is left empty and the results say so.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
from numpy.typing import NDArray

__all__ = ["REGIONS", "REGION_RULE", "regions", "label_issues", "LabelIssues", "overlap_table"]

REGIONS = ("easy", "ambiguous", "hard")
REGION_RULE = (
    "ambiguous: variability >= its 2/3 quantile over scored rows; else hard: confidence <= the 1/3 quantile of "
    "confidence over scored rows; else easy (Swayamdipta et al. 2020's top-33% selections made a partition); "
    "unscored: never held out in the first phase"
)


def regions(confidence: NDArray[np.float64], variability: NDArray[np.float64]) -> NDArray[np.str_]:
    """The region of each row under :data:`REGION_RULE`."""
    conf = np.asarray(confidence, dtype=float)
    var = np.asarray(variability, dtype=float)
    out = np.full(len(conf), "unscored", dtype=object)
    scored = ~(np.isnan(conf) | np.isnan(var))
    if not scored.any():
        return out.astype(str)
    v_cut = np.quantile(var[scored], 2 / 3)
    c_cut = np.quantile(conf[scored], 1 / 3)
    amb = scored & (var >= v_cut)
    hard = scored & ~amb & (conf <= c_cut)
    out[scored] = "easy"
    out[hard] = "hard"
    out[amb] = "ambiguous"
    return out.astype(str)


@dataclass
class LabelIssues:
    """cleanlab's verdict per row (None when cleanlab is not installed), and why not when skipped."""

    flags: NDArray[np.bool_] | None
    skipped: str | None
    method: str = "cleanlab.filter.find_label_issues (filter_by='prune_by_noise_rate')"


def label_issues(proba: NDArray[np.float64], y: NDArray[np.int64]) -> LabelIssues:
    """Label-issue candidates among the scored rows (rows without probabilities are never flagged)."""
    try:
        from cleanlab.filter import find_label_issues
    except ImportError:
        return LabelIssues(None, "cleanlab is not installed (pip install 'aflite[explain]'): label issues skipped")
    P = np.asarray(proba, dtype=float)
    scored = ~np.isnan(P).any(1)
    flags = np.zeros(len(y), dtype=bool)
    ys = np.asarray(y)[scored]
    K = P.shape[1]
    if scored.sum() < 2 * K or len(np.unique(ys)) < K:
        return LabelIssues(flags, f"too few scored rows per class for confident learning ({int(scored.sum())})")
    Ps = P[scored]
    Ps = Ps / Ps.sum(1, keepdims=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cleanlab warns about classes with few rows; the counts are reported
        flags[scored] = np.asarray(find_label_issues(labels=ys, pred_probs=Ps, filter_by="prune_by_noise_rate",
                                                     n_jobs=1), dtype=bool)
    return LabelIssues(flags, None)


class OverlapRow(TypedDict):
    """One group of the overlap table: its size, how many the filter removed, the shares both ways."""

    group: str
    size: int
    removed: int
    share_of_group_removed: float | None  # NaN (null in results.json): an empty group
    share_of_removed_in_group: float | None  # NaN (null): nothing removed


def overlap_table(removed: NDArray[np.bool_], region: NDArray[Any],
                  issues: NDArray[np.bool_] | None) -> list[OverlapRow]:
    """Rows of the overlap table: for each group (each region, label issues), its size, how many of it the
    filter removed, and the shares both ways (of the group removed; of the removed set in the group)."""
    removed = np.asarray(removed, dtype=bool)
    n_removed = int(removed.sum())
    groups: list[tuple[str, NDArray[np.bool_]]] = [(r, np.asarray(region) == r) for r in (*REGIONS, "unscored")]
    if issues is not None:
        groups.append(("label issue", np.asarray(issues, dtype=bool)))
    groups.append(("all rows", np.ones(len(removed), dtype=bool)))
    rows: list[OverlapRow] = []
    for name, member in groups:
        size = int(member.sum())
        if name == "unscored" and size == 0:
            continue
        both = int((member & removed).sum())
        rows.append({"group": name, "size": size, "removed": both,
                     "share_of_group_removed": both / size if size else float("nan"),
                     "share_of_removed_in_group": both / n_removed if n_removed else float("nan")})
    return rows
