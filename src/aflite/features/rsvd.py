"""A seeded randomized truncated SVD of a sparse matrix: scikit-learn's ``TruncatedSVD(algorithm="randomized")``,
the same function in exact arithmetic, computed cheaper.

Why: on SNLI train_100k the n-gram featurizer spent ~100 of its 116 CPU-s in scikit-learn's dense steps around the
sparse products: LU of every power iterate, a Householder QR of the final range and a dense SVD of the 266 x m
matrix B. None of them changes the answer in exact arithmetic:

* the power iterations only need *some* basis of the same subspace after each product (scikit-learn's LU is one,
  a Cholesky-QR of the tall skinny iterate through its small Gram matrix is another); the final basis Q must be
  orthonormal, for which Cholesky-QR is applied twice (CholQR2);
* the SVD ``B = Uhat S Vt`` of ``B = Q^T M`` follows from the small eigenproblem ``B B^T = Uhat S^2 Uhat^T``
  (Gram accumulated in float64), and ``Vt = S^-1 Uhat^T B`` where it is needed;
* a matrix with repeated rows is ``P u`` (u its distinct rows, P a 0/1 selection), so its sparse products run
  over u's non-zeros (:func:`_distinct_rows`): SNLI's premise field, a quarter of the work.

The random start is scikit-learn's draw (``RandomState(seed).normal`` of the same shape, cast to float32 for
float32 input), ``n_oversamples`` 10 and the ``transpose="auto"`` rule are its own, and the signs follow its
``svd_flip(u_based_decision=False)`` (the largest-magnitude entry of each component is positive), so the
components match scikit-learn's to rounding (tests/test_rsvd.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as la
import scipy.linalg.blas as blas
import scipy.sparse as sp
from numpy.typing import NDArray

from aflite.features.spmm import csr_dense, csr_t_dense

__all__ = ["randomized_components"]

DEDUP_BELOW = 0.9  # products through x's distinct rows when they hold at most this share of its non-zeros
SYRK_ROWS = 2048  # rows per float32 block Gram inside the power iterations (each block's sums stay short)
GRAM_ROWS = 32768  # rows per float64 block of a Gram matrix (bounds the float64 copy to ~70 MB at 266 columns)


def _gram64(y: NDArray[Any], exact: bool = True) -> NDArray[np.float64]:
    """``y^T y`` accumulated in float64 over row blocks (float32 Gram would square float32 rounding).

    ``exact=False`` (a power iterate, which needs any well-conditioned basis of its range, not an orthonormal
    one): each block's Gram in ``y``'s own precision by BLAS syrk (no float64 copy, half a product's work), the
    blocks summed in float64."""
    g = np.zeros((y.shape[1], y.shape[1]), dtype=np.float64)
    if not exact and y.dtype == np.float32:
        y = np.ascontiguousarray(y)
        for s in range(0, y.shape[0], SYRK_ROWS):
            g += blas.ssyrk(1.0, y[s:s + SYRK_ROWS].T, trans=0, lower=0)
        return np.triu(g) + np.triu(g, 1).T
    for s in range(0, y.shape[0], GRAM_ROWS):
        blk = np.asarray(y[s:s + GRAM_ROWS], dtype=np.float64)
        g += blk.T @ blk
    return g


def _distinct_rows(x: sp.csr_matrix) -> tuple[sp.csr_matrix, NDArray[np.intp]]:
    """x's distinct rows (first occurrences, in row order) and, for each row of x, its row among them.

    Why: an NLI field repeats its texts (SNLI train_100k's premises: 27,433 distinct rows of 99,890, a quarter of
    the non-zeros), and ``x = P u`` with P a 0/1 row selection: ``x @ d = (u @ d)[inverse]`` and
    ``x^T @ d = u^T (P^T d)`` are the same products over a quarter of the non-zeros. Rows compare by their exact
    bytes (indices and values in storage order), so equal keys are equal rows."""
    rows = np.empty(x.nnz, dtype=[("i", x.indices.dtype), ("v", x.data.dtype)])
    rows["i"], rows["v"] = x.indices, x.data
    first: dict[bytes, int] = {}
    inverse = np.empty(x.shape[0], dtype=np.intp)
    ptr = x.indptr
    for r in range(x.shape[0]):
        inverse[r] = first.setdefault(rows[ptr[r]:ptr[r + 1]].tobytes(), len(first))
    keep = np.unique(inverse, return_index=True)[1]  # each distinct row's first occurrence, in row order
    return sp.csr_matrix(x[keep]), inverse


def _chol_qr(y: NDArray[Any], exact: bool = True) -> NDArray[Any] | None:
    """One Cholesky-QR pass: ``y R^-1`` with ``R^T R = y^T y``; None when the Gram matrix is not positive
    definite in floating point (a rank-deficient iterate). ``y R^-1`` as a triangular product (BLAS trmm: half
    a matrix product's work)."""
    try:
        r = la.cholesky(_gram64(y, exact), lower=False, check_finite=False)
    except la.LinAlgError:
        return None
    rinv = la.solve_triangular(r, np.eye(r.shape[0]), lower=False, check_finite=False).astype(y.dtype)
    trmm = blas.strmm if y.dtype == np.float32 else blas.dtrmm
    # (y R^-1)^T = R^-T y^T: y^T is y's Fortran-ordered view, and the result's transpose is C-ordered
    return np.asarray(trmm(1.0, rinv, np.ascontiguousarray(y).T, side=0, lower=0, trans_a=1).T, dtype=y.dtype)


def _basis(y: NDArray[Any], orthonormal: bool) -> NDArray[Any]:
    """A basis of ``range(y)``: one Cholesky-QR pass inside the power iterations, two (CholQR2) for the final
    orthonormal one; Householder QR when Cholesky breaks down."""
    q = _chol_qr(y, exact=orthonormal)
    if q is not None and orthonormal:
        q = _chol_qr(q)
    if q is None:
        q = la.qr(y, mode="economic", check_finite=False)[0].astype(y.dtype, copy=False)
    return q


def _flip(components: NDArray[Any]) -> NDArray[Any]:
    """scikit-learn's ``svd_flip(u_based_decision=False)``: each row's largest-magnitude entry made positive."""
    at = np.argmax(np.abs(components), axis=1)
    signs = np.sign(components[np.arange(components.shape[0]), at])
    signs[signs == 0] = 1
    return components * signs[:, None].astype(components.dtype)


def randomized_components(x: sp.csr_matrix, k: int, seed: int | None, n_iter: int = 5, n_oversamples: int = 10,
                          threads: int = 1) -> NDArray[Any]:
    """The ``k x n_features`` components (float32 for float32 ``x``) that
    ``TruncatedSVD(k, algorithm="randomized", n_iter=n_iter, random_state=seed).fit(x)`` computes, up to rounding.

    ``threads``: the sparse products run on that many threads (the result does not depend on it). The dense
    steps (Gram matrices, 266 x 266 factorisations) run on one BLAS thread: on a busy 2-core host OpenBLAS's
    spinning pool made them 6x (Gram) to 80x (Cholesky) dearer in CPU-s (benchmarks/ngram_stages.py), and one
    thread keeps their bits independent of the BLAS thread count."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return _components(sp.csr_matrix(x), k, seed, n_iter, n_oversamples, threads)


def _components(x: sp.csr_matrix, k: int, seed: int | None, n_iter: int, n_oversamples: int,
                threads: int) -> NDArray[Any]:
    """:func:`randomized_components`' body (inside its BLAS limit)."""
    dtype = np.float32 if x.dtype == np.float32 else np.float64
    x = x.astype(dtype, copy=False)
    n_samples, n_features = x.shape
    transpose = n_samples < n_features
    # M = x^T when transposed: products with M and M^T are x's gather (x @ d) and scatter (x^T @ d) loops

    u, rows = _distinct_rows(x)
    inverse: NDArray[np.intp] | None = rows
    if u.nnz > DEDUP_BELOW * x.nnz:  # few repeats: the gathers and sums below would cost more than they save
        u, inverse = x, None
    # P^T as a CSR matrix of ones: P^T d sums each distinct row's copies of d, in ascending row order
    pt = None if inverse is None else sp.csr_matrix(
        (np.ones(n_samples, dtype=dtype), (inverse, np.arange(n_samples))), shape=(u.shape[0], n_samples))

    def times_x(d: NDArray[Any]) -> NDArray[Any]:
        out = csr_dense(u, d, threads)
        return out if inverse is None else out[inverse]

    def times_xt(d: NDArray[Any]) -> NDArray[Any]:
        return csr_t_dense(u, d if pt is None else csr_dense(pt, d, threads), threads)

    m, mt = (times_xt, times_x) if transpose else (times_x, times_xt)
    size = k + n_oversamples
    q = np.random.RandomState(seed).normal(size=(n_samples if transpose else n_features, size)).astype(
        dtype, copy=False)
    # scikit-learn's "auto" normaliser: none for n_iter <= 2, else LU (here: Cholesky-QR, the same subspace)
    normalise = n_iter > 2
    for _ in range(n_iter):
        q = m(q)
        if normalise:
            q = _basis(q, orthonormal=False)
        q = mt(q)
        if normalise:
            q = _basis(q, orthonormal=False)
    q = _basis(m(q), orthonormal=True)
    # B = Q^T M; stored as its transpose bt = M^T Q (the tall skinny product)
    bt = mt(q)
    evals, evecs = la.eigh(_gram64(bt), check_finite=False)
    order = np.argsort(evals)[::-1][:k]
    uhat = evecs[:, order]
    if transpose:
        # components = (Q Uhat)^T
        comps = (q @ uhat.astype(dtype)).T
    else:
        s = np.sqrt(np.clip(evals[order], 0.0, None))
        if s[-1] <= s[0] * 1e-6:  # rank-deficient B: the Gram route would divide by ~0; a dense SVD instead
            _, _, vt = la.svd(bt.T, full_matrices=False, check_finite=False)
            comps = vt[:k]
        else:
            comps = (bt @ (uhat / s).astype(dtype)).T
    return np.ascontiguousarray(_flip(comps).astype(dtype))
