"""The features of S as every ensemble backend reads them: whitening (fitted once on D), the whitened copy
compacted as S shrinks (:class:`FeatureStore`), chunking and the thread map over chunks."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.core import kernels
from aflite.errors import ParameterError
from aflite.threads import fit_workers


def pred_dtype(n_classes: int) -> type[np.integer[Any]]:
    """The smallest integer type that holds class codes (predictions of m models over |S| rows add up)."""
    return np.int8 if n_classes <= 127 else np.int16 if n_classes <= 32767 else np.int32


@dataclass
class Whitening:
    """The change of variables ``x' = (x - mean) @ transform`` that makes the L2 problem well conditioned.

    ``transform`` is ``V diag(1/σ)`` over the covariance eigenbasis (directions with no variance dropped), so
    the original penalty ``‖W‖²`` becomes the diagonal ``Σ_j ‖W'_j‖² · penalty_j`` with ``penalty = 1/σ²``.
    """

    mean: NDArray[np.float64]
    transform: NDArray[np.float32]
    penalty: NDArray[np.float64]

    @property
    def dim(self) -> int:
        return int(self.transform.shape[1])


def chunk_rows(d: int, chunk_mb: int) -> int:
    """Rows per chunk of a ``(rows, d)`` float32 pass; fixed by d alone so that results never depend on it."""
    return max(256, (chunk_mb << 20) // (4 * max(d, 1)))


def map_chunks(fn: Any, starts: Any, n_jobs: int | None = None) -> list[Any]:
    """``[fn(r0) for r0 in starts]`` with one BLAS thread per call, on ``n_jobs`` threads (default: the thread
    budget of :mod:`aflite.threads`). Each call's result depends only on its chunk, and callers combine results
    in chunk order, so the outcome is the same bits for any number of threads."""
    from threadpoolctl import threadpool_limits

    starts = list(starts)
    jobs = min(n_jobs, len(starts)) if n_jobs else fit_workers(len(starts))
    with threadpool_limits(limits=1, user_api="blas"):
        if jobs <= 1:
            return [fn(r0) for r0 in starts]

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(fn, starts))


def fit_whitening(X: Any, chunk_mb: int = 64, n_jobs: int | None = None) -> Whitening:
    """Mean and covariance in chunks (a memory-mapped X is never loaded whole), then the eigenbasis. Chunks
    are processed on ``n_jobs`` threads; the partial sums are added in chunk order (same result for any count)."""
    n, d = X.shape
    step = chunk_rows(d, chunk_mb)
    starts = range(0, n, step)
    mean = np.zeros(d, dtype=np.float64)
    for part in map_chunks(lambda r0: np.asarray(X[r0 : r0 + step]).sum(0, dtype=np.float64), starts, n_jobs):
        mean += part
    mean /= n
    mean32 = mean.astype(np.float32)

    def gram(r0: int) -> NDArray[np.float64]:
        c = np.asarray(X[r0 : r0 + step], dtype=np.float32) - mean32
        return (c.T @ c).astype(np.float64)

    cov = np.zeros((d, d), dtype=np.float64)
    for part in map_chunks(gram, starts, n_jobs):
        cov += part
    cov /= n
    evals, evecs = np.linalg.eigh(cov)
    top = float(evals[-1]) if evals.size else 0.0
    # Directions along which the data has (numerically) no variance carry no information; the optimal weight
    # there is 0 under the L2 penalty, so dropping them leaves the optimum unchanged.
    keep = evals > max(top, 1e-30) * 1e-9
    evals, evecs = evals[keep][::-1], evecs[:, keep][:, ::-1]
    return Whitening(mean, np.ascontiguousarray((evecs / np.sqrt(evals)).astype(np.float32)), 1.0 / evals)


def whiten_into(X: Any, whitening: Whitening, out: Any, step: int, n_jobs: int | None = None) -> None:
    """``out[i] = (X[i] - mean) @ transform``, chunk by chunk (``out`` may be a memory-mapped .npy)."""
    mean32 = whitening.mean.astype(np.float32)

    def one(r0: int) -> None:
        c = np.asarray(X[r0 : r0 + step], dtype=np.float32) - mean32
        np.matmul(c, whitening.transform, out=out[r0 : r0 + len(c)])

    map_chunks(one, range(0, X.shape[0], step), n_jobs)


def whiten_in_place(X: NDArray[np.float32], whitening: Whitening, step: int,
                    n_jobs: int | None = None) -> NDArray[np.float32]:
    """Whiten ``X`` (a writable, C-contiguous float32 array) in its own memory and return the whitened
    ``(n, d')`` rows, a view of X's buffer: no second copy of the features (half the peak memory of a copy).

    A chunk is read whole before it is written. With ``d' = d`` each chunk overwrites only its own rows, so
    chunks run side by side (:func:`map_chunks`); with ``d' < d`` row ``i`` of the result starts at element
    ``i·d'``, never after row ``i`` of X, and chunks go in increasing order so that no row is overwritten
    before it is read. Each chunk is the same product as :func:`whiten_into`'s: the same bits as a copy."""
    n, d = X.shape
    dw = whitening.dim
    flat = X.reshape(-1)
    mean32 = whitening.mean.astype(np.float32)

    def one(r0: int) -> None:
        r1 = min(n, r0 + step)
        c = X[r0:r1] - mean32  # the chunk, read before any of it is overwritten
        np.matmul(c, whitening.transform, out=flat[r0 * dw : r1 * dw].reshape(r1 - r0, dw))

    map_chunks(one, range(0, n, step), n_jobs if dw == d else 1)
    return flat[: n * dw].reshape(n, dw)


def shrink_positions(held: NDArray[np.intp], rows: NDArray[np.intp]) -> NDArray[np.intp] | None:
    """Positions of ``rows`` within ``held`` (None when they are the same rows); refuses anything but a sorted
    subset, since AFLite only ever shrinks S. Shared by the CPU and GPU feature stores."""
    if rows.shape == held.shape and np.array_equal(rows, held):
        return None
    pos = np.searchsorted(held, rows)
    if not (
        np.all(np.diff(rows) > 0)
        and np.all(pos < len(held))
        and np.array_equal(held[np.minimum(pos, len(held) - 1)], rows)
    ):
        raise ParameterError("rows must be a sorted subset of the rows passed before")
    return pos


class FeatureStore:
    """The rows of the current S in whitened coordinates, chunk by chunk.

    With ``copy`` a whitened float32 copy is kept in memory and compacted as S shrinks (fastest); with
    ``overwrite`` as well, and X a writable C-contiguous float32 array, X itself is whitened in place and becomes
    that copy (the caller gives X up: half the memory). Without ``copy``
    the original matrix — typically a memory-mapped .npy larger than RAM — is read chunk by chunk and only
    centred; the whitening transform is then folded into the weights (``(x-μ) @ (T W)``), which costs a
    d×d product on the weights per pass instead of a copy of the data. With ``whitened`` X already holds
    whitened rows (a cluster's shared, memory-mapped copy): read as is, never copied.
    """

    def __init__(
        self, X: Any, whitening: Whitening, copy: bool, chunk_mb: int = 64, whitened: bool = False,
        n_jobs: int | None = None, overwrite: bool = False,
    ) -> None:
        self.whitening = whitening
        self.copy = copy or whitened
        self.step = chunk_rows(X.shape[1], chunk_mb)
        self.rows: NDArray[np.intp] = np.arange(X.shape[0])  # the current S, as rows of X
        self._mean32 = whitening.mean.astype(np.float32)
        self._owned = copy and not whitened  # our own in-memory copy: compacted as S shrinks
        in_place = (overwrite and isinstance(X, np.ndarray) and X.dtype == np.float32 and X.flags.c_contiguous
                    and X.flags.writeable)
        if self._owned and in_place:
            self._data: Any = whiten_in_place(X, whitening, self.step, n_jobs)
        elif self._owned:
            self._data = np.empty((X.shape[0], whitening.dim), dtype=np.float32)
            whiten_into(X, whitening, self._data, self.step, n_jobs)
        else:
            self._data = X
        self._offset = self.rows  # rows of _data holding S (the identity until an owned copy is compacted)

    @property
    def folded(self) -> bool:
        """True when chunks are centred raw rows, so weights must be mapped through the transform."""
        return not self.copy

    def __len__(self) -> int:
        return len(self.rows)

    def select(self, rows: NDArray[np.intp]) -> None:
        """Make ``rows`` (a sorted subset of the rows held so far: AFLite only shrinks S) the current S."""
        rows = np.asarray(rows)
        pos = shrink_positions(self.rows, rows)
        if pos is None:
            return
        if self._owned:
            # Compact in place, in increasing order: pos is sorted with pos[i] >= i, so a row only overwrites rows
            # that no later row reads. ~6x faster than a fresh copy (no new pages); the compiled loop moves each
            # row once, the numpy fallback gathers a chunk and copies it back.
            if not kernels.compact_rows(self._data, pos):
                for r0 in range(0, len(pos), self.step):
                    p = pos[r0 : r0 + self.step]
                    self._data[r0 : r0 + len(p)] = self._data[p]
            self._data = self._data[: len(rows)]
            self._offset = np.arange(len(rows))
        else:
            self._offset = rows.copy()
        self.rows = rows.copy()

    def _read(self, where: NDArray[np.intp] | slice) -> NDArray[np.float32]:
        block = np.asarray(self._data[where], dtype=np.float32)
        return block - self._mean32 if self.folded else block

    def chunk(self, r0: int, r1: int) -> NDArray[np.float32]:
        """Rows r0:r1 of S (positions), whitened (copy) or centred (folded)."""
        if self._owned or len(self._offset) == self._data.shape[0]:
            return self._read(slice(r0, r1))  # contiguous: S is all of the data, or our compacted copy
        return self._read(self._offset[r0:r1])

    def gather(self, pos: NDArray[np.intp]) -> NDArray[np.float32]:
        """Rows at positions ``pos`` of S, in the same coordinates as :meth:`chunk`."""
        if self._owned:
            return np.asarray(self._data[pos])
        out = np.empty((len(pos), self._data.shape[1]), dtype=np.float32)
        for r0 in range(0, len(pos), self.step):
            idx = self._offset[pos[r0 : r0 + self.step]]
            order = np.argsort(idx, kind="stable")  # sorted reads are much faster on a memory map
            out[r0 + order] = self._read(idx[order])
        return out
