"""Stratified group k-fold in a compiled loop: the folds of scikit-learn's ``StratifiedGroupKFold``, computed fast.

Why: scikit-learn assigns groups to folds greedily, one group at a time, in Python (``np.std`` and ``np.isclose``
per group and fold). On SNLI train_100k (134,399 premise groups) that is ~6 s per call and 30 s of the
hypothesis-only probe's 56. The loop below makes the same choices with the same floating-point operations in the
same order, so the folds are identical (tests/test_group_folds.py compares them on many shapes, ties included),
in a few milliseconds. It is compiled with numba (a dependency); without numba the same loop runs as plain Python
(slow, same output).

What is reproduced (scikit-learn 1.x ``_split.py``): groups numbered in ``np.unique`` order and shuffled by
``RandomState(seed).shuffle``; visited by decreasing spread of their class counts (stable sort, ties in shuffled
order); each goes to the fold whose per-class fraction spread (mean over classes of the std over folds, computed
with the group added) is lowest, a near tie (``np.isclose``) going to the fold with fewer rows so far.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.errors import ParameterError
from aflite.jit import Jit, compile_with

__all__ = ["stratified_group_folds", "stratified_group_splits", "compiled"]


def _block_sum(a: Any, lo: int, n: int) -> float:  # pragma: no cover - compiled; tested through the folds
    """numpy's pairwise sum of ``a[lo:lo + n]`` for ``n`` <= 128: sequential below 8, else 8 accumulators."""
    if n < 8:
        res = -0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - (n % 8):
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


def _pairwise_sum(a: Any, lo: int, n: int) -> float:  # pragma: no cover - compiled; tested through the folds
    """Sum of ``a[lo:lo + n]`` in numpy's pairwise order (blocks of at most 128 halved at multiples of 8), so that a
    class mean has numpy's bits: ``np.mean`` of a contiguous vector is ``(0 + pairwise sum) / n``. numpy recurses;
    here the halves are walked with an explicit stack (numba's cached machine code does not take recursion)."""
    if n <= 128:
        return _block_sum(a, lo, n)
    f_lo = np.empty(64, dtype=np.int64)  # a frame per level: start, length, stage (0 left, 1 right, 2 add)
    f_n = np.empty(64, dtype=np.int64)
    f_stage = np.zeros(64, dtype=np.int64)
    f_left = np.empty(64)
    top, ret = 0, 0.0
    f_lo[0], f_n[0] = lo, n
    while top >= 0:
        m = f_n[top]
        half = m // 2
        half -= half % 8
        if f_stage[top] == 0 and m <= 128:
            ret = _block_sum(a, f_lo[top], m)
            top -= 1
        elif f_stage[top] == 0:
            f_stage[top] = 1
            top += 1
            f_lo[top], f_n[top], f_stage[top] = f_lo[top - 1], half, 0
        elif f_stage[top] == 1:
            f_left[top], f_stage[top] = ret, 2
            top += 1
            f_lo[top], f_n[top], f_stage[top] = f_lo[top - 1] + half, m - half, 0
        else:
            ret = f_left[top] + ret
            top -= 1
    return ret


def _assign(order: Any, group_counts: Any, y_cnt: Any, k: int, fold_of: Any) -> None:  # pragma: no cover - compiled
    """Put each group (``order``: the visiting order) in its fold (``fold_of``), scikit-learn's greedy rule.

    ``group_counts`` (groups, classes) float64, ``y_cnt`` (classes,) float64. Every sum runs in numpy's order for
    the same arrays: over folds sequentially (a reduction along the outer axis), over classes pairwise."""
    n_classes = group_counts.shape[1]
    fold_counts = np.zeros((k, n_classes))
    vals = np.empty(k)
    stds = np.empty(n_classes)
    for g in order:
        best = -1
        min_eval = np.inf
        min_samples = np.inf
        for i in range(k):
            for c in range(n_classes):
                s = 0.0
                for f in range(k):
                    x = fold_counts[f, c] + group_counts[g, c] if f == i else fold_counts[f, c]
                    vals[f] = x / y_cnt[c]
                    s += vals[f]
                mean = s / k
                ss = 0.0
                for f in range(k):
                    d = vals[f] - mean
                    ss += d * d
                stds[c] = np.sqrt(ss / k)
            fold_eval = (0.0 + _pairwise_sum(stds, 0, n_classes)) / n_classes
            samples = 0.0
            for c in range(n_classes):  # whole numbers: exact in any order
                samples += fold_counts[i, c]
            close = min_eval < np.inf and abs(fold_eval - min_eval) <= 1e-8 + 1e-5 * abs(min_eval)
            if fold_eval < min_eval or (close and samples < min_samples):
                min_eval = fold_eval
                min_samples = samples
                best = i
        fold_of[g] = best
        for c in range(n_classes):
            fold_counts[best, c] += group_counts[g, c]


@cache
def _kernel() -> tuple[Callable[..., None], bool]:
    """The loop compiled with numba (see :mod:`aflite.jit`), else the plain Python function (the same output)."""
    g = globals()

    def build(jit: Jit) -> Callable[..., None]:
        g.update({name: jit(g[name], nogil=True) for name in ("_block_sum", "_pairwise_sum")})
        return jit(_assign, nogil=True)  # it calls the compiled sums

    run = compile_with(build, g)
    return (_assign, False) if run is None else (run, True)


def compiled() -> bool:
    """Whether the fold loop runs as machine code (numba); else as plain Python (slow, same output)."""
    return _kernel()[1]


def stratified_group_folds(y: NDArray[Any], groups: NDArray[Any], n_splits: int, seed: int | None,
                           shuffle: bool = True, kernel: Callable[..., None] | None = None) -> NDArray[np.int64]:
    """The test fold (0..n_splits-1) of every row, as ``StratifiedGroupKFold(n_splits, shuffle=shuffle,
    random_state=seed).split(X, y, groups)`` makes them (its i-th test set is ``np.flatnonzero(folds == i)``).

    Rows of a group share a fold; class proportions are kept as even across folds as the groups allow.
    ``kernel``: the loop to run (tests pass the plain Python one); by default the compiled one."""
    y = np.asarray(y)
    groups = np.asarray(groups)
    if y.ndim != 1 or groups.shape != y.shape:
        raise ParameterError(f"labels and groups must be one per row, got shapes {y.shape} and {groups.shape}")
    if n_splits < 2 or n_splits > len(y):
        raise ParameterError(f"n_splits={n_splits} must be at least 2 and at most the {len(y)} rows")
    _, y_inv, y_cnt = np.unique(y, return_inverse=True, return_counts=True)
    if np.all(n_splits > y_cnt):
        raise ParameterError(f"n_splits={n_splits} cannot be greater than the number of members in each class")
    _, g_inv, g_cnt = np.unique(groups, return_inverse=True, return_counts=True)
    n_groups, n_classes = len(g_cnt), len(y_cnt)
    if n_splits > n_groups:
        raise ParameterError(f"n_splits={n_splits} cannot be greater than the number of groups ({n_groups})")
    g_inv, y_inv = g_inv.ravel(), y_inv.ravel()
    counts = np.bincount(g_inv * n_classes + y_inv, minlength=n_groups * n_classes).astype(np.float64)
    counts = counts.reshape(n_groups, n_classes)
    if shuffle:  # scikit-learn's check_random_state(seed), then its permutation of the group numbers
        rng = seed if isinstance(seed, np.random.RandomState) else np.random.RandomState(seed)
        perm = np.arange(n_groups)
        rng.shuffle(perm)
        counts = counts[perm]
        inv_perm = np.empty_like(perm)
        inv_perm[perm] = np.arange(n_groups)
        g_inv = inv_perm[g_inv]
    order = np.argsort(-np.std(counts, axis=1), kind="stable")  # the same numpy call: the same ties
    fold_of = np.full(n_groups, -1, dtype=np.int64)
    run = _kernel()[0] if kernel is None else kernel
    run(order.astype(np.int64), np.ascontiguousarray(counts), y_cnt.astype(np.float64), int(n_splits), fold_of)
    return fold_of[g_inv]


def stratified_group_splits(y: NDArray[Any], groups: NDArray[Any], n_splits: int,
                            seed: int | None, shuffle: bool = True) -> list[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    """The (train, test) row indices of every fold, as ``list(StratifiedGroupKFold(...).split(X, y, groups))``."""
    fold = stratified_group_folds(y, groups, n_splits, seed, shuffle)
    return [(np.flatnonzero(fold != i), np.flatnonzero(fold == i)) for i in range(n_splits)]

