"""Blocks of partitions, the unit of work the ensemble hands to threads, cluster workers or a GPU: the task, its
result, and the rules that cut a problem into blocks and pick how each model's rows are read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray


@dataclass
class BlockResult:
    """What fitting one block of partitions returns: solutions, held-out predictions, optimiser counts."""

    theta: NDArray[np.float64]
    preds: NDArray[np.integer[Any]]
    iterations: NDArray[np.int64]
    converged: int
    passes: int
    pairs: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None  # the first model's newest (s, y)
    seconds: dict[str, float] = field(default_factory=dict)  # where this block's time went (see run_block)
    # per row: (held-out models that predicted its label, models that held it out), where a device kept ``preds``
    counts: tuple[Any, Any] | None = None


@dataclass
class BlockTask:
    """One block of partitions to fit: everything a process needs besides the feature store.

    ``mask`` is the block's columns of the training mask over the current S (``rows``); ``theta0`` the
    starting point per model; ``reg`` the per-model penalty weights. A block is the unit of work handed to
    threads or cluster workers; its result depends only on the task, never on which process computes it.
    ``own_rows``: each model's training rows are gathered once (wide softmax); ``chunked``: they are gathered
    chunk by chunk in every pass (the ``fast`` solver); neither: passes over all of S (``previous``).
    ``pairs`` are L-BFGS curvature pairs ``(S, Y)``, shape ``(p, P)`` each, that every model starts with.
    """

    rows: NDArray[np.intp]
    y: NDArray[np.int64]
    mask: NDArray[np.bool_]
    theta0: NDArray[np.float64]
    reg: NDArray[np.float64]
    n_classes: int
    own_rows: bool
    tol: float
    max_iter: int
    memory: int
    chunked: bool = False
    pairs: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None
    jobs: int = 1  # threads for the chunks of one pass (compiled own-row passes); never changes the result


def default_block_size(n_partitions: int, n_classes: int, n_rows: int = 1 << 30, dim: int = 1 << 10) -> int:
    """Partitions per block: enough weight columns (≈256) for an efficient GEMM, and at least 4 blocks so that
    threads or cluster workers have work to share; tiny problems (the synthetic experiment) in one block, where
    per-block overhead would dominate. A function of the problem's shape only, never of how many workers run
    it, so the result does not depend on them."""
    if n_rows * (dim + 1) * n_classes * n_partitions < 20_000_000:
        return max(1, n_partitions)
    b = max(1, -(-256 // max(n_classes, 1)))
    return max(1, min(b, -(-n_partitions // 4)))


def use_own_rows(n_rows: int, train_size: int, n_classes: int) -> bool:
    """Train each model on its own gathered rows (rather than weighting a pass over all of S) when the softmax
    is wide and t is a small share of S: ImageNet-like problems, where a pass over S costs |S|/t times more."""
    return n_classes >= 16 and 4 * train_size <= n_rows


CHUNKED_MAX_SHARE = 0.35


def use_chunked_rows(n_rows: int, train_size: int) -> bool:
    """The ``fast`` solver's own-row passes pay off while t is a small enough share of S: a gathered row costs
    several times a row of a full pass (narrow products, the gather; ~5× measured at d = 512-768), and each
    phase adds one prediction pass, so above about a third of S the passes over all rows are cheaper."""
    return train_size <= CHUNKED_MAX_SHARE * n_rows
