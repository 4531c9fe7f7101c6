"""CSR sparse matrix times dense matrix on several threads (the randomized SVD's products).

Why: scipy's ``csr @ dense`` runs on one core; the SVD's 22 products per text field were ~37 CPU-s of the
featurizer on SNLI train_100k. Rows are independent, so a numba ``prange`` loop over rows splits them across
threads, each output row summed in the same order as one thread would (the result does not depend on ``threads``).
Without numba, scipy's product (the same values up to summation order); with it, the compiled loop for any
``threads``, one included, so that the bits do not depend on the thread count.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

try:
    from numba import prange
except ImportError:  # pragma: no cover - numba is a dependency
    prange = range  # type: ignore[misc]

__all__ = ["csr_dense"]


def _rows_times(indptr: Any, indices: Any, data: Any, dense: Any, out: Any) -> None:
    """``out[i] = sum_j data[j] * dense[indices[j]]`` over row i's entries, rows in parallel."""
    for i in prange(len(indptr) - 1):
        for j in range(indptr[i], indptr[i + 1]):
            v = data[j]
            row = dense[indices[j]]
            for c in range(dense.shape[1]):
                out[i, c] += v * row[c]


@cache
def _kernel() -> Callable[..., None] | None:
    """The compiled row loop, or None without numba (machine code cached next to the module when possible)."""
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency
        return None
    for cache_code in (True, False):
        try:
            return numba.njit(parallel=True, nogil=True, cache=cache_code)(_rows_times)
        except RuntimeError:  # no writable cache folder
            continue
    return None  # pragma: no cover


def csr_dense(a: sp.csr_matrix, b: NDArray[Any], threads: int = 1) -> NDArray[Any]:
    """``a @ b`` for CSR ``a`` and a dense C-ordered ``b`` of the same float dtype, on ``threads`` threads."""
    kernel = _kernel()  # one thread too: scipy's product sums in another order (the result must not depend on threads)
    if kernel is None:
        return np.asarray(a @ b)
    import numba

    b = np.ascontiguousarray(b)
    out = np.zeros((a.shape[0], b.shape[1]), dtype=np.result_type(a.dtype, b.dtype))
    previous = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    try:
        kernel(a.indptr, a.indices, a.data, b, out)
    finally:
        numba.set_num_threads(previous)
    return out
