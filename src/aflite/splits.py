"""Every way the package splits rows, in one place: random training partitions (Algorithm 1), held-out sets,
cross-validation folds and stratified samples.

Rows that share a *group* (a premise, a counterfactual-twin family, ``--groups COLUMN``) are never split
between the two sides: a classifier that saw a premise with one hypothesis must not be scored on the same premise
with another. Each function takes its own seed and draws from it exactly as it did in the module it came from, so
results are unchanged by the move.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.errors import ParameterError
from aflite.group_folds import stratified_group_splits

__all__ = [
    "draw_partitions",
    "fold_assignment",
    "probe_folds",
    "holdout_groups",
    "split_heldout",
    "stratified_mask",
    "stratified_sample",
]


def draw_partitions(
    n_rows: int,
    n_partitions: int,
    train_size: int,
    rng: np.random.Generator,
    groups: NDArray[np.int64] | None = None,
) -> NDArray[np.bool_]:
    """Random training sets, one column per partition (True = trains on that row).

    Without groups each column is a uniform random subset of exactly ``train_size`` rows. With groups,
    whole groups are taken in random order until the size is as close to ``train_size`` as possible, so
    that no group is split between a classifier's training and held-out sides.
    """
    if train_size >= n_rows:
        raise ParameterError(f"train_size t={train_size} must be smaller than |S|={n_rows}")
    mask = np.zeros((n_rows, n_partitions), dtype=bool)
    if groups is None:
        for b in range(n_partitions):
            mask[rng.choice(n_rows, size=train_size, replace=False), b] = True
        return mask
    uniq, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    for b in range(n_partitions):
        order = rng.permutation(len(uniq))
        csum = np.cumsum(counts[order])
        j = int(np.searchsorted(csum, train_size))  # first prefix reaching t
        if j >= len(csum):
            j = len(csum) - 1
        elif j > 0 and abs(csum[j - 1] - train_size) <= abs(csum[j] - train_size):
            j -= 1
        if csum[j] >= n_rows:  # never train on everything: leave at least one group out
            j -= 1
        chosen = np.zeros(len(uniq), dtype=bool)
        chosen[order[: j + 1]] = True
        mask[:, b] = chosen[inverse]
    return mask


def split_heldout(n: int, groups: NDArray[Any] | None, fraction: float, seed: int) -> NDArray[np.bool_]:
    """A held-out mask over D: whole premise groups (when given) in seeded random order, ~``fraction`` of rows.

    Used by ``aflite evaluate`` (D's held-out part); groups are added until the rows reach the fraction, and
    at least one group stays on the training side."""
    if not 0 < fraction < 1:
        raise ParameterError(f"heldout must be a fraction in (0, 1), got {fraction}")
    g = np.arange(n) if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1]
    n_groups = int(g.max()) + 1
    order = np.random.default_rng([seed, 5]).permutation(n_groups)
    sizes = np.bincount(g, minlength=n_groups)[order]
    take = int(np.searchsorted(np.cumsum(sizes), fraction * n)) + 1
    chosen = np.zeros(n_groups, dtype=bool)
    chosen[order[: min(take, n_groups - 1)]] = True
    return chosen[g]


def holdout_groups(n: int, groups: np.ndarray | None, frac: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and test row indices with round(``frac`` · #groups) whole groups (at least one) on the test side.

    Used by the audit's fine-tuned models (TRA); unlike :func:`split_heldout` it counts groups, not rows."""
    rng = np.random.default_rng(seed)
    g = np.arange(n) if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1]
    ug = np.unique(g)
    test_groups = rng.permutation(ug)[: max(1, int(round(frac * len(ug))))]
    test = np.isin(g, test_groups)
    return np.flatnonzero(~test), np.flatnonzero(test)


def fold_assignment(yi: np.ndarray, groups: Any, folds: int, seed: int) -> np.ndarray:
    """The cross-validation fold (0..folds-1) of every row: grouped folds (scikit-learn's ``GroupKFold``) when
    there are at least ``folds`` groups, else stratified folds when every class has ``folds`` rows, else plain
    shuffled k-fold."""
    from sklearn.model_selection import GroupKFold, StratifiedKFold

    n = len(yi)
    if groups is not None and len(np.unique(groups)) >= folds:
        splits = GroupKFold(n_splits=folds).split(np.zeros(n), yi, groups)
    else:
        min_class = int(np.bincount(yi).min())
        if min_class >= folds:
            splits = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(np.zeros(n), yi)
        else:
            from sklearn.model_selection import KFold

            splits = KFold(n_splits=folds, shuffle=True, random_state=seed).split(np.zeros(n))
    fold = np.empty(n, dtype=np.int64)
    for f, (_, te) in enumerate(splits):
        fold[te] = f
    return fold


def probe_folds(y: NDArray[Any], groups: NDArray[Any] | None, folds: int, seed: int) -> list[tuple[Any, Any]]:
    """The (train, test) row indices of a probe's k-fold cross-validation: stratified and shuffled with ``seed``
    (scikit-learn's ``StratifiedKFold``, as the probe always drew them) and, with ``groups``, grouped too
    (``StratifiedGroupKFold``'s folds, computed by :func:`aflite.group_folds.stratified_group_splits` in a compiled
    loop): no group is on both sides of a fold, as in the run's filter. With fewer groups than ``folds`` there are
    as many folds as groups."""
    from sklearn.model_selection import StratifiedKFold

    if groups is None:
        return list(StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(np.zeros((len(y), 1)), y))
    k = min(folds, len(np.unique(groups)))
    if k < 2:
        raise ParameterError("a grouped probe needs at least two groups")
    return list(stratified_group_splits(y, groups, k, seed))


def stratified_sample(labels: NDArray[Any], groups: NDArray[Any] | None, m: int, seed: int) -> NDArray[np.intp]:
    """Exactly ``m`` row indices (sorted), proportional to each (group, label) stratum; all rows when m ≥ n."""
    n = len(labels)
    if m >= n:
        return np.arange(n)
    lab = labels.astype(str)
    strata = lab if groups is None else np.char.add(groups.astype(str), np.char.add("|", lab))
    rng = np.random.default_rng([seed, 9])
    uniq, inv = np.unique(strata, return_inverse=True)
    quota = m * np.bincount(inv) / n
    k = np.floor(quota).astype(np.int64)  # proportional allocation, largest remainders first: exactly m rows
    k[np.argsort(-(quota - k), kind="stable")[: m - int(k.sum())]] += 1
    out = [rng.choice(np.flatnonzero(inv == j), size=int(k[j]), replace=False) for j in range(len(uniq))]
    return np.sort(np.concatenate(out)).astype(np.intp)


def stratified_mask(y: NDArray[Any], fraction: float, rng: np.random.Generator) -> NDArray[np.bool_]:
    """A stratified random mask: round(``fraction`` · |class|) rows of each class (the synthetic dev set)."""
    dev = np.zeros(len(y), dtype=bool)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        dev[rng.choice(idx, int(round(fraction * len(idx))), replace=False)] = True
    return dev
