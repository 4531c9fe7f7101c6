"""Ensembles of linear classifiers, one per random partition: the model family M of Algorithm 1.

Two interchangeable implementations of the same contract (:class:`LinearEnsemble`):

* :class:`FastLogisticEnsemble` — multinomial L2 logistic regression for *all* partitions at once. The m
  weight matrices are stacked side by side so that every optimisation step is one pass over the rows with
  two large GEMMs (``X @ [W_1 … W_m]`` and ``Xᵀ @ G``); there is no Python loop over models or samples.
  It solves exactly scikit-learn's problem (``C/2``-scaled L2 penalty, unpenalised intercept) but in a
  whitened coordinate system: with ``x' = (x - μ) V diag(1/σ)`` the penalty ``‖W‖²`` becomes the diagonal
  ``Σ_j ‖W'_j‖² / σ_j²`` — a change of variables, not an approximation — and the problem is well
  conditioned, so batched L-BFGS converges in tens of steps where L-BFGS on raw sentence embeddings needs
  hundreds.
* :class:`SklearnEnsemble` — the reference: any scikit-learn classifier (``LogisticRegression`` by default)
  fitted in a plain loop over the same partitions. Slow, obviously right, and the yardstick for the fast path.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "LinearEnsemble",
    "FastLogisticEnsemble",
    "SklearnEnsemble",
    "FitStats",
    "make_ensemble",
    "Whitening",
    "fit_whitening",
    "FeatureStore",
    "BlockTask",
    "BlockResult",
    "run_block",
    "fit_block_local",
    "whiten_into",
    "chunk_rows",
]


@dataclass
class FitStats:
    """What the last ``fit_predict`` call did (for logs, summaries and benchmarks)."""

    seconds: float = 0.0
    n_models: int = 0
    iterations: list[int] = field(default_factory=list)
    converged: int = 0
    passes: int = 0


class LinearEnsemble(ABC):
    """Contract: ``prepare`` once on the whole dataset D, then ``fit_predict`` for each filtering phase.

    ``fit_predict(rows, train_mask)`` trains one classifier per column of ``train_mask`` (shape
    ``(len(rows), m)``, True = that row is in the partition's training set) on ``X[rows]`` and returns
    the predicted class codes for every row and partition, shape ``(len(rows), m)``. Entries for training
    rows are unspecified (the caller only reads held-out ones). With ``models`` only those columns are
    (re)trained and returned, each starting from its own previous solution where the implementation keeps
    one (the incremental greedy strategy refits only the partitions a removal touched).
    """

    last_stats: FitStats

    @abstractmethod
    def prepare(self, X: NDArray[Any], y: NDArray[np.int64], n_classes: int) -> None: ...

    @abstractmethod
    def fit_predict(
        self, rows: NDArray[np.intp], train_mask: NDArray[np.bool_], models: NDArray[np.intp] | None = None
    ) -> NDArray[np.integer[Any]]: ...

    def get_state(self) -> dict[str, NDArray[Any]]:
        """Arrays that, restored with :meth:`set_state`, make a resumed run continue exactly."""
        return {}

    def set_state(self, state: dict[str, NDArray[Any]]) -> None:
        del state


def _pred_dtype(n_classes: int) -> type[np.integer[Any]]:
    return np.int8 if n_classes <= 127 else np.int16 if n_classes <= 32767 else np.int32


class SklearnEnsemble(LinearEnsemble):
    """Reference path: a scikit-learn classifier cloned and fitted in a loop, one per partition."""

    def __init__(self, estimator: Any = None, partitions: list[int] | None = None) -> None:
        from sklearn.linear_model import LogisticRegression

        # scikit-learn's default regularisation (C=1.0); max_iter raised so it runs to convergence
        self.estimator = estimator if estimator is not None else LogisticRegression(C=1.0, max_iter=10_000)
        self.partitions = partitions  # optional subset of partition indices to actually fit (benchmarks)
        self.last_stats = FitStats()

    def prepare(self, X: NDArray[Any], y: NDArray[np.int64], n_classes: int) -> None:
        self._X, self._y, self._k = X, y, n_classes

    def fit_predict(
        self, rows: NDArray[np.intp], train_mask: NDArray[np.bool_], models: NDArray[np.intp] | None = None
    ) -> NDArray[np.integer[Any]]:
        from sklearn.base import clone

        start = time.perf_counter()
        X = np.asarray(self._X[rows])
        y = self._y[rows]
        if models is not None:
            train_mask = train_mask[:, models]
        m = train_mask.shape[1]
        preds = np.full((len(rows), m), -1, dtype=_pred_dtype(self._k))
        todo = range(m) if self.partitions is None else self.partitions
        iters: list[int] = []
        for b in todo:
            tr = train_mask[:, b]
            clf = clone(self.estimator).fit(X[tr], y[tr])
            preds[~tr, b] = clf.predict(X[~tr])
            n_iter = getattr(clf, "n_iter_", None)
            if n_iter is not None:
                iters.append(int(np.max(n_iter)))
        self.last_stats = FitStats(time.perf_counter() - start, len(todo), iters, len(todo), len(todo))
        return preds


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


def fit_whitening(X: Any, chunk_mb: int = 64) -> Whitening:
    """Mean and covariance in chunks (a memory-mapped X is never loaded whole), then the eigenbasis."""
    n, d = X.shape
    step = chunk_rows(d, chunk_mb)
    mean = np.zeros(d, dtype=np.float64)
    for r0 in range(0, n, step):
        mean += np.asarray(X[r0 : r0 + step]).sum(0, dtype=np.float64)
    mean /= n
    cov = np.zeros((d, d), dtype=np.float64)
    mean32 = mean.astype(np.float32)
    for r0 in range(0, n, step):
        c = np.asarray(X[r0 : r0 + step], dtype=np.float32) - mean32
        cov += (c.T @ c).astype(np.float64)
    cov /= n
    evals, evecs = np.linalg.eigh(cov)
    top = float(evals[-1]) if evals.size else 0.0
    # Directions along which the data has (numerically) no variance carry no information; the optimal weight
    # there is 0 under the L2 penalty, so dropping them leaves the optimum unchanged.
    keep = evals > max(top, 1e-30) * 1e-9
    evals, evecs = evals[keep][::-1], evecs[:, keep][:, ::-1]
    return Whitening(mean, np.ascontiguousarray((evecs / np.sqrt(evals)).astype(np.float32)), 1.0 / evals)


def whiten_into(X: Any, whitening: Whitening, out: Any, step: int) -> None:
    """``out[i] = (X[i] - mean) @ transform``, chunk by chunk (``out`` may be a memory-mapped .npy)."""
    mean32 = whitening.mean.astype(np.float32)
    for r0 in range(0, X.shape[0], step):
        c = np.asarray(X[r0 : r0 + step], dtype=np.float32) - mean32
        np.matmul(c, whitening.transform, out=out[r0 : r0 + len(c)])


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
        raise ValueError("rows must be a sorted subset of the rows passed before")
    return pos


class FeatureStore:
    """The rows of the current S in whitened coordinates, chunk by chunk.

    With ``copy`` a whitened float32 copy is kept in memory and compacted as S shrinks (fastest). Without it
    the original matrix — typically a memory-mapped .npy larger than RAM — is read chunk by chunk and only
    centred; the whitening transform is then folded into the weights (``(x-μ) @ (T W)``), which costs a
    d×d product on the weights per pass instead of a copy of the data. With ``whitened`` X already holds
    whitened rows (a cluster's shared, memory-mapped copy): read as is, never copied.
    """

    def __init__(self, X: Any, whitening: Whitening, copy: bool, chunk_mb: int = 64, whitened: bool = False) -> None:
        self.whitening = whitening
        self.copy = copy or whitened
        self.step = chunk_rows(X.shape[1], chunk_mb)
        self.rows: NDArray[np.intp] = np.arange(X.shape[0])  # the current S, as rows of X
        self._mean32 = whitening.mean.astype(np.float32)
        self._owned = copy and not whitened  # our own in-memory copy: compacted as S shrinks
        if self._owned:
            self._data: Any = np.empty((X.shape[0], whitening.dim), dtype=np.float32)
            whiten_into(X, whitening, self._data, self.step)
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
            self._data = self._data[pos]  # keep only S (frees memory as S shrinks)
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


@dataclass
class BlockResult:
    """What fitting one block of partitions returns: solutions, held-out predictions, optimiser counts."""

    theta: NDArray[np.float64]
    preds: NDArray[np.integer[Any]]
    iterations: NDArray[np.int64]
    converged: int
    passes: int


@dataclass
class BlockTask:
    """One block of partitions to fit: everything a process needs besides the feature store.

    ``mask`` is the block's columns of the training mask over the current S (``rows``); ``theta0`` the
    starting point per model; ``reg`` the per-model penalty weights. A block is the unit of work handed to
    threads or cluster workers; its result depends only on the task, never on which process computes it.
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


class _NumpyBlockOps:
    """Objective, gradient and predictions of one block's models over the store (numpy/BLAS)."""

    def __init__(self, store: FeatureStore, task: BlockTask) -> None:
        self.store, self.task = store, task
        self.K = task.n_classes
        self.d = store.whitening.dim
        n, b = task.mask.shape
        self.t_b = task.mask.sum(0).astype(np.float64)
        self.preds = np.zeros((n, b), dtype=_pred_dtype(self.K))
        self.own: list[NDArray[np.float32]] = []
        if task.own_rows:  # each model's own training rows, gathered once (large K: far fewer rows than S)
            self.own = [store.gather(np.flatnonzero(task.mask[:, j])) for j in range(b)]
        else:
            self.weight = task.mask.astype(np.float32) / self.t_b.astype(np.float32)

    def _weights(self, W: NDArray[np.float64]) -> NDArray[np.float32]:
        """(d', K·nm) whitened weights → the matrix to multiply chunks by."""
        W32 = np.ascontiguousarray(W, dtype=np.float32)
        return self.store.whitening.transform @ W32 if self.store.folded else W32

    def loss_grad(
        self, theta: NDArray[np.float64], sel: NDArray[np.intp]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Objective and gradient of the models ``sel`` at ``theta`` (one pass; records argmax on all rows).

        Logits are laid out class-major, ``(rows, K, models)``, so that every per-class operation is a
        contiguous elementwise op and the only Python loop is over the K classes.
        """
        K, d, task = self.K, self.d, self.task
        nm = len(sel)
        step = self.store.step
        T64 = self.store.whitening.transform.T.astype(np.float64) if self.store.folded else None
        Wd = theta[:, :d, :]
        r = task.reg[sel, :d, None]
        g = np.empty_like(theta)
        loss = 0.5 * (r * Wd * Wd).sum((1, 2))
        if task.own_rows:
            for i, j in enumerate(sel):
                A, yj = self.own[j], task.y[task.mask[:, j]]
                Wi = self._weights(theta[i, :d, :])
                bi = theta[i, d, :].astype(np.float32)[:, None]
                w = np.full((len(A), 1), 1.0 / self.t_b[j], dtype=np.float32)
                gw = np.zeros((Wi.shape[0], K))
                gb = np.zeros(K)
                for r0 in range(0, len(A), step):
                    li, gi, gbi = _np_pass(A[r0 : r0 + step], Wi, bi, yj[r0 : r0 + step], w[r0 : r0 + step], None)
                    loss[i] += li[0]
                    gw += gi
                    gb += gbi[:, 0]
                g[i, :d, :] = (gw if T64 is None else T64 @ gw) + r[i] * Wd[i]
                g[i, d, :] = gb
            return loss, g
        Weff = self._weights(Wd.transpose(1, 2, 0).reshape(d, K * nm))
        b = np.ascontiguousarray(theta[:, d, :].T, dtype=np.float32)  # (K, nm)
        grad = np.zeros((Weff.shape[0], K * nm), dtype=np.float64)
        grad_b = np.zeros((K, nm), dtype=np.float64)
        wts = self.weight[:, sel]
        for r0 in range(0, len(self.store), step):
            A = self.store.chunk(r0, r0 + step)
            R = len(A)
            arg = np.zeros((R, nm), dtype=self.preds.dtype)
            li, gi, gbi = _np_pass(A, Weff, b, task.y[r0 : r0 + R], wts[r0 : r0 + R], arg)
            self.preds[r0 : r0 + R, sel] = arg
            loss += li
            grad += gi
            grad_b += gbi
        if T64 is not None:
            grad = T64 @ grad
        g[:, :d, :] = grad.reshape(d, K, nm).transpose(2, 0, 1) + r * Wd
        g[:, d, :] = grad_b.T
        return loss, g

    def predictions(self, theta: NDArray[np.float64]) -> NDArray[np.integer[Any]]:
        """Predicted classes of every row of S for every model of the block at ``theta``."""
        if not self.task.own_rows:
            return self.preds  # recorded by the last pass at each model's final point
        K, d = self.K, self.d
        nm = theta.shape[0]
        Weff = self._weights(theta[:, :d, :].transpose(1, 2, 0).reshape(d, K * nm))
        b = np.ascontiguousarray(theta[:, d, :].T, dtype=np.float32)
        for r0 in range(0, len(self.store), self.store.step):
            A = self.store.chunk(r0, r0 + self.store.step)
            z = (A @ Weff).reshape(len(A), K, nm)
            z += b
            self.preds[r0 : r0 + len(A)] = z.argmax(1)
        return self.preds


def _np_pass(
    A: NDArray[np.float32],
    W: NDArray[np.float32],
    b: NDArray[np.float32],
    y: NDArray[np.int64],
    w: NDArray[np.float32],
    arg: NDArray[Any] | None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Weighted softmax loss and its gradient for one chunk of rows and nm models (class-major layout)."""
    R = len(A)
    K, nm = b.shape
    z = (A @ W).reshape(R, K, nm)
    z += b
    top = z[:, 0, :].copy()
    for k in range(1, K):
        if arg is not None:
            arg[z[:, k, :] > top] = k
        np.maximum(top, z[:, k, :], out=top)
    z -= top[:, None, :]
    ar = np.arange(R)
    zy = z[ar, y, :]  # (R, nm): logit of the true class
    np.exp(z, out=z)
    se = z[:, 0, :].copy()
    for k in range(1, K):
        se += z[:, k, :]
    loss = ((np.log(se) - zy) * w).sum(0, dtype=np.float64)
    z /= se[:, None, :]
    z[ar, y, :] -= 1.0
    z *= w[:, None, :]
    grad = (A.T @ z.reshape(R, K * nm)).astype(np.float64)
    return loss, grad, z.sum(0, dtype=np.float64)


def run_block(ops: Any, task: BlockTask) -> BlockResult:
    """Batched, diagonally preconditioned L-BFGS for the models of one block; each model has its own line
    search, memory and stopping rule, so a model's path does not depend on how long the others run."""
    theta = task.theta0.copy()
    m, d1, K = theta.shape
    P = d1 * K
    reg = task.reg
    # Diagonal preconditioner: whitened data gives curvature ≈ 0.25 per coordinate, plus the penalty.
    precond = np.repeat(1.0 / (0.25 + reg), K, axis=1)  # (m, P)
    state = _LbfgsState(m, P, task.memory)
    everyone = np.arange(m)
    f, g = ops.loss_grad(theta, everyone)
    state.passes += 1
    iters = np.zeros(m, dtype=np.int64)
    conv = lambda gr: np.abs(gr).reshape(len(gr), -1).max(1) <= task.tol  # noqa: E731
    active = ~conv(g)
    while active.any():
        idx = np.flatnonzero(active)
        gi = g[idx].reshape(len(idx), P)
        direction = -state.direction(idx, gi, precond[idx])
        gd = np.einsum("ij,ij->i", gi, direction)
        bad = gd >= 0  # not a descent direction (numerical trouble): restart from the preconditioned gradient
        if bad.any():
            state.reset(idx[bad])
            direction[bad] = -precond[idx[bad]] * gi[bad]
            gd[bad] = np.einsum("ij,ij->i", gi[bad], direction[bad])
        alpha = np.ones(len(idx))
        pending = np.arange(len(idx))
        new_theta = theta[idx].copy()
        new_f = np.empty(len(idx))
        new_g = np.empty((len(idx), d1, K))
        for _ in range(30):  # backtracking (Armijo) line search, only re-evaluating models that failed
            sel = idx[pending]
            trial = theta[sel] + (alpha[pending, None] * direction[pending]).reshape(len(sel), d1, K)
            ft, gt = ops.loss_grad(trial, sel)
            state.passes += 1
            ok = ft <= f[sel] + 1e-4 * alpha[pending] * gd[pending]
            ok |= ~np.isfinite(f[sel])
            done = pending[ok]
            new_theta[done], new_f[done], new_g[done] = trial[ok], ft[ok], gt[ok]
            pending = pending[~ok]
            if pending.size == 0:
                break
            alpha[pending] *= 0.5
        if pending.size:  # line search failed: keep the old point, stop those models
            kept = idx[pending]
            new_theta[pending], new_f[pending], new_g[pending] = theta[kept], f[kept], g[kept]
            ops.loss_grad(theta[kept], kept)  # re-record predictions at the kept point
        s = (new_theta - theta[idx]).reshape(len(idx), P)
        yv = (new_g - g[idx]).reshape(len(idx), P)
        state.push(idx, s, yv)
        f_old = f[idx].copy()
        theta[idx], f[idx], g[idx] = new_theta, new_f, new_g
        iters[idx] += 1
        stop = conv(g[idx]) | (iters[idx] >= task.max_iter)
        stop |= (f_old - new_f) <= 1e-12 * np.maximum(1.0, np.abs(new_f))
        if pending.size:
            stop[pending] = True
        active[idx[stop]] = False
    preds = ops.predictions(theta)
    return BlockResult(theta, preds, iters, int(conv(g).sum()), state.passes)


def fit_block_local(store: FeatureStore, task: BlockTask) -> BlockResult:
    """Fit one block in this process. Callers limit BLAS to one thread first: a block's floating-point result
    then depends only on the task, so threads, processes and cluster workers all give the same answer."""
    store.select(task.rows)
    return run_block(_NumpyBlockOps(store, task), task)


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


class FastLogisticEnsemble(LinearEnsemble):
    """Multinomial L2 logistic regression for m partitions, in blocks (batched, preconditioned L-BFGS).

    Parameters mirror scikit-learn's ``LogisticRegression``: ``C`` is the inverse regularisation strength
    (the objective is ``½‖W‖² + C Σ_i loss_i``, intercept unpenalised; for two classes the binary model,
    as scikit-learn fits it). ``tol`` bounds the largest gradient entry of the per-sample-averaged objective
    in whitened coordinates; ``max_iter`` caps L-BFGS steps per model. ``warm_start`` starts each phase
    from the mean solution of the previous one (same optimum — the problem is convex — in fewer steps).

    Scale: the partitions are fitted in blocks of ``block_size`` (default :func:`default_block_size`), each
    with one BLAS thread, ``n_jobs`` blocks at a time, or on the workers of ``executor`` (see
    :mod:`aflite.cluster`); the result is the same whichever runs them. ``device`` ``"cuda"`` (or ``"auto"``
    with a GPU present) runs the same algorithm in PyTorch on the GPU (:mod:`aflite.torch_backend`), with
    features stored as ``storage`` (float32, bfloat16 or float16; products accumulate in float32). Features
    larger than ``max_copy_gb`` of whitened float32 are streamed from X (e.g. a memory-mapped .npy) instead
    of copied.
    """

    def __init__(
        self,
        C: float = 1.0,
        tol: float = 1e-4,
        max_iter: int = 300,
        memory: int = 10,
        warm_start: bool = True,
        chunk_mb: int = 64,
        block_size: int | None = None,
        n_jobs: int | None = None,
        max_copy_gb: float = 4.0,
        device: str = "cpu",
        storage: str = "float32",
        executor: Any = None,
    ) -> None:
        if C <= 0:
            raise ValueError("C must be positive")
        if block_size is not None and block_size < 1:
            raise ValueError("block_size must be at least 1")
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.memory = memory
        self.warm_start = warm_start
        self.chunk_mb = chunk_mb
        self.block_size = block_size
        self.n_jobs = n_jobs
        self.max_copy_gb = max_copy_gb
        self.device = device
        self.storage = storage
        self.executor = executor
        self.last_stats = FitStats()
        self._coef0: NDArray[np.float64] | None = None
        self._coefs: NDArray[np.float64] | None = None  # per-model solutions of the last call
        self._store: Any = None

    # ------------------------------------------------------------------ preparation (once per dataset)
    def prepare(self, X: NDArray[Any], y: NDArray[np.int64], n_classes: int) -> None:
        """Whiten X once (centre, rotate onto the covariance eigenbasis, unit variance) and set up the store."""
        from aflite.torch_backend import resolve_device

        self._y = np.asarray(y, dtype=np.int64)
        self._k = int(n_classes)
        self._whitening = fit_whitening(X, self.chunk_mb)
        self._dim = self._whitening.dim
        self._penalty = self._whitening.penalty
        self.device_ = resolve_device(self.device)
        copy = X.shape[0] * self._dim * 4 <= self.max_copy_gb * (1 << 30)
        if self.device_ != "cpu":
            from aflite.torch_backend import TorchFeatureStore

            self._store = TorchFeatureStore(X, self._whitening, self.device_, self.storage, self.chunk_mb)
        elif self.executor is not None:
            self._store = None
            self.executor.prepare(X, self._whitening, copy, self.chunk_mb)
        else:
            self._store = FeatureStore(X, self._whitening, copy, self.chunk_mb)
        self._coef0 = None
        self._coefs = None

    def get_state(self) -> dict[str, NDArray[Any]]:
        state = {} if self._coef0 is None else {"coef0": self._coef0}
        if self._coefs is not None:
            state["coefs"] = self._coefs
        return state

    def set_state(self, state: dict[str, NDArray[Any]]) -> None:
        self._coef0 = np.asarray(state["coef0"], dtype=np.float64) if "coef0" in state else None
        self._coefs = np.asarray(state["coefs"], dtype=np.float64) if "coefs" in state else None

    # ------------------------------------------------------------------ one phase
    def fit_predict(
        self, rows: NDArray[np.intp], train_mask: NDArray[np.bool_], models: NDArray[np.intp] | None = None
    ) -> NDArray[np.integer[Any]]:
        start = time.perf_counter()
        rows = np.asarray(rows)
        m_all = train_mask.shape[1]
        cols = np.arange(m_all) if models is None else np.asarray(models)
        mask = train_mask[:, cols]
        n, m = mask.shape
        K, d = self._k, self._dim
        t_b = mask.sum(0).astype(np.float64)
        if np.any(t_b == 0):
            raise ValueError("every partition needs at least one training row")
        # For two classes scikit-learn fits one binary weight vector with penalty ½‖w‖²; the symmetric
        # two-column softmax reaches the same model with twice the penalty on each column.
        pen_scale = 2.0 if K == 2 else 1.0
        lam = np.concatenate([self._penalty, [0.0]])  # intercept row unpenalised
        reg = pen_scale * lam[None, :] / (self.C * t_b[:, None])  # (m, d+1): per-model penalty weights

        theta0 = np.zeros((m, d + 1, K))
        own = self._coefs is not None and self._coefs.shape == (m_all, d + 1, K)
        if models is not None and own:
            assert self._coefs is not None
            theta0[:] = self._coefs[cols]  # a refit of partitions that changed a little: start where they were
        elif self.warm_start and self._coef0 is not None and self._coef0.shape == (d + 1, K):
            theta0[:] = self._coef0
        y = self._y[rows]
        own_rows = use_own_rows(n, int(t_b.max()), K)
        gpu = self.device_ != "cpu"
        if self.block_size:
            b = self.block_size
        elif gpu:  # one block, unless the L-BFGS history (2·memory float64 copies per model) passes ~4 GiB
            b = max(1, min(m, (4 << 30) // (16 * self.memory * (d + 1) * K)))
        else:
            b = default_block_size(m_all, K, n, d)
        tasks = [
            BlockTask(rows, y, mask[:, s : s + b], theta0[s : s + b], reg[s : s + b], K, own_rows,
                      self.tol, self.max_iter, self.memory)
            for s in range(0, m, b)
        ]
        results = self._run_tasks(tasks, n)
        theta = np.concatenate([r.theta for r in results])
        preds = np.concatenate([r.preds for r in results], axis=1)
        if models is None:
            self._coefs = theta
            self._coef0 = theta.mean(0)
        elif own:
            assert self._coefs is not None
            self._coefs[cols] = theta
        iters = np.concatenate([r.iterations for r in results])
        self.last_stats = FitStats(
            time.perf_counter() - start, m, iters.tolist(), sum(r.converged for r in results),
            sum(r.passes for r in results),
        )
        return preds

    def _run_tasks(self, tasks: list[BlockTask], n: int) -> list[BlockResult]:
        if self.device_ != "cpu":
            from aflite.torch_backend import fit_block_torch

            return [fit_block_torch(self._store, t) for t in tasks]
        if self.executor is not None:
            return list(self.executor.map_blocks(tasks))
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return self._run_local(tasks, n)

    def _run_local(self, tasks: list[BlockTask], n: int) -> list[BlockResult]:
        store = self._store
        jobs = self.n_jobs or _cpu_count()
        # Tiny problems (the synthetic experiment) are dominated by thread start-up: run them in order.
        work = n * (self._dim + 1) * self._k * sum(t.mask.shape[1] for t in tasks)
        if jobs <= 1 or len(tasks) == 1 or work < 20_000_000:
            return [fit_block_local(store, t) for t in tasks]
        from concurrent.futures import ThreadPoolExecutor

        store.select(tasks[0].rows)  # compact once, before the threads share the store
        with ThreadPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
            return list(pool.map(lambda t: fit_block_local(store, t), tasks))


def _cpu_count() -> int:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class _LbfgsState:
    """Ring buffers of L-BFGS pairs for m models, updated in lockstep (one shared slot per iteration)."""

    def __init__(self, m: int, P: int, memory: int) -> None:
        self.S = np.zeros((memory, m, P))
        self.Y = np.zeros((memory, m, P))
        self.rho = np.zeros((memory, m))
        self.count = np.zeros(m, dtype=np.int64)  # pairs pushed per model (slot = count % memory)
        self.memory = memory
        self.passes = 0

    def reset(self, idx: NDArray[np.intp]) -> None:
        self.rho[:, idx] = 0.0
        self.S[:, idx] = 0.0
        self.Y[:, idx] = 0.0

    def push(self, idx: NDArray[np.intp], s: NDArray[np.float64], y: NDArray[np.float64]) -> None:
        sy = np.einsum("ij,ij->i", s, y)
        ok = sy > 1e-12 * np.linalg.norm(s, axis=1) * np.linalg.norm(y, axis=1)
        slot = self.count[idx] % self.memory
        self.S[slot, idx] = s
        self.Y[slot, idx] = y
        self.rho[slot, idx] = np.where(ok, 1.0 / np.where(ok, sy, 1.0), 0.0)
        self.count[idx] += 1

    def direction(
        self, idx: NDArray[np.intp], g: NDArray[np.float64], precond: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Two-loop recursion, batched over models; a pair with rho = 0 is a no-op."""
        q = g.copy()
        mem = self.memory
        cnt = self.count[idx]
        n_pairs = int(min(cnt.max(initial=0), mem))
        alphas = np.zeros((mem, len(idx)))
        # newest first; slots are per-model positions (count-1-j) % mem
        order = [((cnt - 1 - j) % mem, j < np.minimum(cnt, mem)) for j in range(n_pairs)]
        for j, (slot, valid) in enumerate(order):
            s = self.S[slot, idx]
            yv = self.Y[slot, idx]
            rho = self.rho[slot, idx] * valid
            a = rho * np.einsum("ij,ij->i", s, q)
            alphas[j] = a
            q -= a[:, None] * yv
        # initial inverse Hessian: preconditioner scaled by the newest pair (sᵀy / yᵀDy)
        gamma = np.ones(len(idx))
        if n_pairs:
            slot, valid = order[0]
            s, yv = self.S[slot, idx], self.Y[slot, idx]
            sy = np.einsum("ij,ij->i", s, yv)
            ydy = np.einsum("ij,ij->i", yv * precond, yv)
            use = valid & (self.rho[slot, idx] > 0) & (ydy > 0)
            gamma = np.where(use, sy / np.where(use, ydy, 1.0), 1.0)
        r = gamma[:, None] * precond * q
        for j in reversed(range(n_pairs)):
            slot, valid = order[j]
            s = self.S[slot, idx]
            yv = self.Y[slot, idx]
            rho = self.rho[slot, idx] * valid
            beta = rho * np.einsum("ij,ij->i", yv, r)
            r += s * (alphas[j] - beta)[:, None]
        return r


def make_ensemble(
    model: Any = "logistic", C: float = 1.0, device: str = "cpu", storage: str = "float32", executor: Any = None
) -> LinearEnsemble:
    """Resolve the user's choice of model family into an ensemble implementation.

    ``"logistic"`` → the fast batched path (on ``device``, or on ``executor``'s workers); ``"sklearn"`` →
    scikit-learn LogisticRegression in a loop;
    a scikit-learn classifier instance → that estimator in a loop; a :class:`LinearEnsemble` → itself.
    """
    if isinstance(model, LinearEnsemble):
        return model
    if model == "logistic":
        return FastLogisticEnsemble(C=C, device=device, storage=storage, executor=executor)
    if model == "sklearn":
        from sklearn.linear_model import LogisticRegression

        return SklearnEnsemble(LogisticRegression(C=C, max_iter=10_000))
    if hasattr(model, "fit") and hasattr(model, "predict"):
        return SklearnEnsemble(model)
    raise ValueError(f"unknown model {model!r}: use 'logistic', 'sklearn' or a scikit-learn classifier")
