"""The ``ngram`` featurizer's reduction: a seeded randomized SVD fitted on a sample of rows, and the projection
of every row onto it, both on a compiled sparse-times-dense loop.

Why not scikit-learn's ``TruncatedSVD``: on SNLI train_100k its randomized SVD took ~25 s of the featurizer's
~57 s, and most of the rest of its time was scipy's scalar ``csr_matvecs`` loop (one multiply-add per stored value
and output column, not vectorised) and LU/QR factorisations of (columns x 266) matrices, one per power iteration.
Here the power iterations re-orthonormalise only the short side (the sampled rows x 266), the small SVD is taken
from the (266 x 266) Gram matrix of the projected sample, and sparse x dense products run in float32 on a numba loop
(vectorised over the output columns), in row chunks side by side (each output row is one chunk's: the result does
not depend on the number of threads).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from numpy.typing import NDArray

__all__ = ["SampledSVD", "sparse_dot"]

OVERSAMPLE = 10  # extra random directions of the range finder (scikit-learn's default)
CHUNK_ROWS = 4096


def _spmm_rows(indptr: Any, indices: Any, data: Any, w: Any, out: Any, r0: int, r1: int) -> None:
    """``out[i] = sum_j data[j] * w[indices[j]]`` over row i's stored values, for rows r0..r1-1 (in order)."""
    k = w.shape[1]
    for i in range(r0, r1):
        acc = np.zeros(k, dtype=np.float32)
        for j in range(indptr[i], indptr[i + 1]):
            v = data[j]
            row = w[indices[j]]
            for c in range(k):
                acc[c] += v * row[c]
        out[i - r0] = acc


@cache
def _kernel() -> Callable[..., None]:
    """The loop compiled with numba (machine code cached when a folder is writable), else plain Python (slow, the
    same result)."""
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency
        return _spmm_rows
    for cache_code in (True, False):
        try:
            compiled: Callable[..., None] = numba.njit(nogil=True, cache=cache_code, fastmath=True)(_spmm_rows)
            return compiled
        except RuntimeError:  # no writable cache folder
            continue
    return _spmm_rows  # pragma: no cover


def sparse_dot(x: sp.csr_matrix, w: NDArray[np.float32], threads: int = 1) -> NDArray[np.float32]:
    """``x @ w`` for a CSR ``x`` and a dense ``w`` (float32, rows of ``w`` indexed by ``x``'s columns), in row
    chunks over ``threads`` threads; bit-equal for any ``threads``."""
    x = sp.csr_matrix(x, dtype=np.float32)
    w = np.ascontiguousarray(w, dtype=np.float32)
    n = x.shape[0]
    out = np.empty((n, w.shape[1]), dtype=np.float32)
    kernel = _kernel()
    indptr, indices, data = x.indptr.astype(np.int64), x.indices, x.data

    def run(r0: int) -> None:
        r1 = min(n, r0 + CHUNK_ROWS)
        kernel(indptr, indices, data, w, out[r0:r1], r0, r1)

    starts = range(0, n, CHUNK_ROWS)
    if threads > 1 and n > CHUNK_ROWS:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(run, starts))
    else:
        for r0 in starts:
            run(r0)
    return out


def _orthonormal(y: NDArray[np.float64]) -> NDArray[np.float64]:
    """An orthonormal basis of ``y``'s columns: Cholesky QR twice (two GEMMs and triangular solves, a fifth of a
    Householder QR's time on a tall matrix), Householder QR where the Gram matrix is too ill-conditioned."""
    try:
        for _ in range(2):
            r = np.linalg.cholesky(y.T @ y)
            y = scipy.linalg.solve_triangular(r, y.T, lower=True, check_finite=False).T
    except np.linalg.LinAlgError:
        return np.asarray(np.linalg.qr(y)[0])
    return y


class SampledSVD:
    """A rank-``n_components`` randomized SVD of a sparse matrix (Halko et al.'s range finder, ``n_iter`` power
    iterations), fitted on the rows given to :meth:`fit` with a seeded Gaussian sketch; :meth:`transform`
    projects any rows onto its components (``x @ components_.T``), as scikit-learn's ``TruncatedSVD`` does.
    Each component's sign is fixed (its largest entry positive), so that a seed gives one result."""

    def __init__(self, n_components: int, n_iter: int = 4, seed: int = 0, threads: int = 1) -> None:
        self.n_components = n_components
        self.n_iter = n_iter
        self.seed = seed
        self.threads = threads
        self.components_: NDArray[np.float32] | None = None
        self.singular_values_: NDArray[np.float64] | None = None
        self._w: NDArray[np.float32] | None = None

    def fit(self, x: sp.csr_matrix) -> SampledSVD:
        """Fit the components on the rows of ``x`` (n_rows x n_columns, CSR)."""
        x = sp.csr_matrix(x, dtype=np.float32)
        xt = sp.csr_matrix(x.T)  # the transpose as CSR: A.T @ Q on the same row loop
        n_rows, n_cols = x.shape
        size = min(self.n_components + OVERSAMPLE, n_rows, n_cols)
        rng = np.random.default_rng([self.seed, 57])
        omega = rng.standard_normal((n_cols, size), dtype=np.float32)
        q = sparse_dot(x, omega, self.threads)
        for _ in range(self.n_iter):  # LU keeps the iterates well scaled at a fifth of a QR's cost (scikit-learn's way)
            q = scipy.linalg.lu(q, permute_l=True, check_finite=False)[0]
            q = sparse_dot(x, sparse_dot(xt, q, self.threads), self.threads)
        basis = _orthonormal(q.astype(np.float64))
        q32 = basis.astype(np.float32)
        # B = Q.T A (size x n_cols); B B.T = Q.T A (A.T Q) from two sparse products and one small GEMM
        gram = basis.T @ sparse_dot(x, sparse_dot(xt, q32, self.threads), self.threads).astype(np.float64)
        evals, evecs = np.linalg.eigh((gram + gram.T) / 2)  # = U S^2 U.T, ascending
        order = np.argsort(evals)[::-1][: self.n_components]
        s = np.sqrt(np.clip(evals[order], 0.0, None))
        keep = s > s[0] * 1e-6 if len(s) and s[0] > 0 else np.zeros(len(s), dtype=bool)
        u = evecs[:, order] / np.where(keep, s, 1.0)
        u[:, ~keep] = 0.0
        v = sparse_dot(xt, (basis @ u).astype(np.float32), self.threads)  # V = A.T Q U S^-1: (n_cols x k)
        flip = np.sign(v[np.argmax(np.abs(v), axis=0), np.arange(v.shape[1])])
        v *= np.where(flip == 0, 1.0, flip).astype(np.float32)
        s = np.where(keep, s, 0.0)
        self.components_ = np.ascontiguousarray(v.T, dtype=np.float32)
        self._w = np.ascontiguousarray(v, dtype=np.float32)  # (n_cols x k): the rows transform reads
        self.singular_values_ = s
        return self

    def transform(self, x: sp.csr_matrix) -> NDArray[np.float32]:
        """The rows of ``x`` in the components' coordinates (float32)."""
        if self._w is None:
            raise ValueError("SampledSVD.transform called before fit")
        return sparse_dot(x, self._w, self.threads)
