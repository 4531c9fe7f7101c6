"""CSR sparse matrix times dense matrix, and its transpose times dense, on several threads (the randomized
SVD's products).

Why: scipy's ``csr @ dense`` runs on one core; the SVD's 22 products per text field were ~37 CPU-s of the
featurizer on SNLI train_100k. Two compiled loops, each output element summed in one fixed order whatever the
thread count (the result does not depend on ``threads``):

* ``a @ b`` (:func:`csr_dense`): rows are independent, so a ``prange`` loop over rows gathers rows of ``b``;
* ``a.T @ b`` (:func:`csr_t_dense`): a scatter over ``a``'s rows in order, split across threads by column blocks
  of ``b`` (each thread owns its block of the output). It sums each element over ``a``'s rows in ascending
  order, as a gather over ``csr(a.T)`` would (bit-identical to it), without building the transpose, and it
  reads ``b`` once in row order instead of gathering it. On SNLI train_100k's first field (99,890 x 107,185,
  16M non-zeros, 266 columns, a host at load ~12) the SVD's six transposed products took 9.0 CPU-s against the
  gather's 10.8 (transpose included); alone, on a quieter host, one product 1.1 CPU-s against 2.2.

Without numba, scipy's products (the same values up to summation order); with it, the compiled loops for any
``threads``, one included, so that the bits do not depend on the thread count.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from aflite.jit import compile_with

try:
    from numba import prange
except ImportError:  # pragma: no cover - numba is a dependency
    prange = range  # type: ignore[misc]

__all__ = ["column_blocks", "csr_dense", "csr_t_dense"]

BLOCK = 64  # widest column block of the scatter (its output block, n_out x 64 float32, stays near L3's size)


def _rows_times(indptr: Any, indices: Any, data: Any, dense: Any, out: Any) -> None:
    """``out[i] = sum_j data[j] * dense[indices[j]]`` over row i's entries, rows in parallel."""
    for i in prange(len(indptr) - 1):
        for j in range(indptr[i], indptr[i + 1]):
            v = data[j]
            row = dense[indices[j]]
            for c in range(dense.shape[1]):
                out[i, c] += v * row[c]


def _rows_scatter(indptr: Any, indices: Any, data: Any, dense: Any, out: Any, bounds: Any) -> None:
    """``out[indices[j]] += data[j] * dense[i]`` over rows i in order, one column block per parallel task
    (``bounds``: the blocks' first columns, then the last block's end)."""
    for b in prange(len(bounds) - 1):
        c0 = bounds[b]
        w = bounds[b + 1] - c0
        block = np.zeros((out.shape[0], w), dtype=out.dtype)  # contiguous: the scattered rows are w wide
        for i in range(len(indptr) - 1):
            src = dense[i, c0:c0 + w]
            for j in range(indptr[i], indptr[i + 1]):
                v = data[j]
                dst = block[indices[j]]
                for c in range(w):
                    dst[c] += v * src[c]
        out[:, c0:c0 + w] = block


@cache
def _kernel() -> Callable[..., None] | None:
    """The compiled row loop, or None without numba."""
    return compile_with(lambda jit: jit(_rows_times, parallel=True, nogil=True))


@cache
def _scatter_kernel() -> Callable[..., None] | None:
    """The compiled scatter loop, or None without numba."""
    return compile_with(lambda jit: jit(_rows_scatter, parallel=True, nogil=True))


def _call(kernel: Callable[..., None], threads: int, *args: Any) -> None:
    """``kernel(*args)`` on ``threads`` numba threads (restored afterwards)."""
    import numba

    previous = numba.get_num_threads()
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]
    try:
        kernel(*args)
    finally:
        numba.set_num_threads(previous)


def csr_dense(a: sp.csr_matrix, b: NDArray[Any], threads: int = 1) -> NDArray[Any]:
    """``a @ b`` for CSR ``a`` and a dense C-ordered ``b`` of the same float dtype, on ``threads`` threads."""
    kernel = _kernel()  # one thread too: scipy's product sums in another order (the result must not depend on threads)
    if kernel is None:
        return np.asarray(a @ b)
    b = np.ascontiguousarray(b)
    out = np.zeros((a.shape[0], b.shape[1]), dtype=np.result_type(a.dtype, b.dtype))
    _call(kernel, threads, a.indptr, a.indices, a.data, b, out)
    return out


def column_blocks(columns: int, threads: int) -> NDArray[np.int64]:
    """Bounds of near-equal column blocks at most :data:`BLOCK` wide, their count a multiple of ``threads`` (the
    threads finish together); the blocks do not change the result, only how it is split."""
    threads = max(1, threads)
    count = threads * -(-columns // (threads * BLOCK))
    count = max(1, min(count, columns))
    return np.linspace(0, columns, count + 1).round().astype(np.int64)


def csr_t_dense(a: sp.csr_matrix, b: NDArray[Any], threads: int = 1) -> NDArray[Any]:
    """``a.T @ b`` for CSR ``a`` and a dense ``b`` with ``a.shape[0]`` rows, on ``threads`` threads; the same bits
    as ``csr_dense(csr_matrix(a.T), b)``."""
    kernel = _scatter_kernel()
    if kernel is None:
        return np.asarray(a.T @ b)
    b = np.ascontiguousarray(b)
    out = np.zeros((a.shape[1], b.shape[1]), dtype=np.result_type(a.dtype, b.dtype))
    _call(kernel, threads, a.indptr, a.indices, a.data, b, out, column_blocks(b.shape[1], threads))
    return out
