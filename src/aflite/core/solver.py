"""The solver shared by every backend of the fast ensemble: whitening, feature stores, blocks and batched L-BFGS.

Both :mod:`aflite.core.ensemble` (numpy) and :mod:`aflite.core.backends.torch` (PyTorch) import from here, never from
each other. A *block* (:class:`BlockTask`) is the unit of work handed to threads, cluster workers or a GPU;
its result depends only on the task, so every way of running it gives the same bits.

Two ways of computing the objective over the rows of S (the *solver*):

* ``"previous"`` — each L-BFGS step is one pass over *all* rows of S with the weight columns of all the
  block's models (``X @ [W_1 … W_b]``), training rows weighted in, held-out rows weighted out; the argmax of
  every pass is kept, so predictions come free with the last pass. Simple, and a large GEMM, but each model
  trains on t rows while the pass reads |S| (11× the useful work at SNLI's |S| = 550K, t = 50K).
* ``"fast"`` (default) — passes over each model's *own* training rows: S is read in cache-sized chunks and
  every model of the block takes its rows of a chunk while the chunk is in cache. With numba installed this is
  the compiled kernel of :mod:`aflite.core.kernels` (logits, softmax, loss and gradient from one read of each row,
  only for the models that train on it), one block holds all m models so that S is read once per pass, and
  the chunks of a pass are shared by the threads; without numba each model's rows are gathered and multiplied
  in numpy. Predictions come from one GEMM pass at the end, and L-BFGS starts with curvature pairs carried over
  from the previous phase (the problem changes little between phases: 3-4 steps per model instead of 7).
  The optimum and the stopping rule are the same as ``"previous"``; held-out predictions of the two solvers
  agree to 1e-6 or better (``python benchmarks/bench.py --solvers both``, which also gives the measured speed ratio).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.core import kernels
from aflite.core.blocks import BlockResult, BlockTask
from aflite.core.lbfgs import LbfgsState
from aflite.core.store import FeatureStore, chunk_rows, map_chunks, pred_dtype

__all__ = ["run_block", "fit_block_local", "SOLVERS"]

SOLVERS = ("fast", "previous")


class _NumpyBlockOps:
    """Objective, gradient and predictions of one block's models over the store (numpy/BLAS)."""

    def __init__(self, store: FeatureStore, task: BlockTask) -> None:
        self.store, self.task = store, task
        self.K = task.n_classes
        self.d = store.whitening.dim
        n, b = task.mask.shape
        self.t_b = task.mask.sum(0).astype(np.float64)
        self.preds = np.zeros((n, b), dtype=pred_dtype(self.K))
        self.own: list[NDArray[np.float32]] = []
        if task.own_rows:  # each model's own training rows, gathered once (large K: far fewer rows than S)
            self.own = [store.gather(np.flatnonzero(task.mask[:, j])) for j in range(b)]
        elif not task.chunked:  # per-row weights of the passes over all of S (the chunked passes need none)
            self.weight = task.mask.astype(np.float32) / self.t_b.astype(np.float32)

    def _weights(self, W: NDArray[np.float64]) -> NDArray[np.float32]:
        """(d', K·nm) whitened weights → the matrix to multiply chunks by."""
        W32 = np.ascontiguousarray(W, dtype=np.float32)
        return self.store.whitening.transform @ W32 if self.store.folded else W32

    def _penalty(
        self, theta: NDArray[np.float64], sel: NDArray[np.intp]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """The weights ``Wd``, the penalty weights ``r`` of the models ``sel`` and the penalty part of their
        objective, which every way of computing the data part adds to."""
        d = self.d
        Wd = theta[:, :d, :]
        r = self.task.reg[sel, :d, None]
        return Wd, r, 0.5 * (r * Wd * Wd).sum((1, 2))

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
        Wd, r, loss = self._penalty(theta, sel)
        g = np.empty_like(theta)
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
        if not (self.task.own_rows or self.task.chunked):
            return self.preds  # recorded by the last pass at each model's final point
        K, d = self.K, self.d
        nm = theta.shape[0]
        if K < 2:
            self.preds[:] = 0
            return self.preds
        # The argmax is unchanged by subtracting class 0's logit, so K - 1 columns per model suffice
        # (two thirds of the product for three classes, half for two).
        rel = theta[:, :, 1:] - theta[:, :, :1]
        Weff = self._weights(rel[:, :d, :].transpose(1, 2, 0).reshape(d, (K - 1) * nm))
        b = np.ascontiguousarray(rel[:, d, :].T, dtype=np.float32)

        def one(r0: int) -> None:
            A = self.store.chunk(r0, r0 + self.store.step)
            z = (A @ Weff).reshape(len(A), K - 1, nm)
            z += b
            self.preds[r0 : r0 + len(A)] = relative_argmax(z)

        map_chunks(one, range(0, len(self.store), self.store.step), self.task.jobs)  # each chunk its own rows
        return self.preds


def relative_argmax(z: NDArray[np.float32]) -> NDArray[np.integer[Any]]:
    """Predicted classes from logits relative to class 0, ``z`` of shape (rows, K - 1, models): class 0 unless
    some relative logit is > 0, else the first class with the largest one (``argmax``'s tie rule).

    One class at a time with elementwise maxima and comparisons: ``argmax`` over the short middle axis plus
    ``take_along_axis`` cost twice the product itself (measured: 0.38 s against 0.23 s for the GEMM of 100K rows,
    d = 768, 64 models); this costs a third of it and gives the same classes.
    """
    best_val = z[:, 0, :].copy()
    best = np.ones(best_val.shape, dtype=np.int32)
    for c in range(1, z.shape[1]):
        higher = z[:, c, :] > best_val  # strict: a tie keeps the earlier class, as argmax does
        np.maximum(best_val, z[:, c, :], out=best_val)
        best[higher] = c + 1
    best[~(best_val > 0)] = 0
    return best


def own_chunk_rows(d: int, compiled: bool = False) -> int:
    """Rows per chunk of S in the ``fast`` solver's passes, fixed by d alone (results never depend on threads).

    numpy passes: about 8 MiB of float32, so that a chunk stays in cache while each model of the block gathers
    its rows from it. Compiled kernel: 32 MiB (the kernel keeps its own cache-sized tiles; a chunk is the unit of
    the per-chunk gradient partials, (m, K, d) float64 each, added up in chunk order: 4x fewer of them to zero,
    fill and add, measured 1.4 s of main-thread time over a 300K-row filter at 8 MiB)."""
    return chunk_rows(d, COMPILED_CHUNK_MB if compiled else 8)


COMPILED_CHUNK_MB = 32


class _ChunkedOwnOps(_NumpyBlockOps):
    """The ``fast`` solver's passes: each model's own training rows, gathered chunk by chunk of S.

    A chunk of S is read once per pass; each model's training rows in it are gathered while it is in cache and
    multiplied by that model's weights only, so a pass costs about t·b row-products instead of |S|·b. The
    softmax, loss and gradient of all the block's models in a chunk are one set of vector operations on the
    concatenated logits. Predictions come from one pass over all of S at the end (:meth:`predictions`).
    """

    def __init__(self, store: FeatureStore, task: BlockTask) -> None:
        super().__init__(store, task)  # task.own_rows is False here (see run_block), so nothing is gathered
        n, b = task.mask.shape
        self.compiled = kernels.available()
        self.step = own_chunk_rows(store.whitening.transform.shape[0], self.compiled)
        self.starts = np.arange(0, n, self.step)
        by_model = np.ascontiguousarray(task.mask.T)  # one contiguous copy: a column scan per model is slow
        self.pos = [np.flatnonzero(by_model[j]) for j in range(b)]  # each model's rows, as positions in S
        ends = np.append(self.starts, n)
        self.cuts = np.stack([np.searchsorted(p, ends) for p in self.pos])  # (b, chunks + 1)
        if self.compiled:  # the kernel's layout: all models' positions in one array, each model from base[j]
            self.flat_pos = np.concatenate(self.pos).astype(np.int64)
            self.base = np.concatenate([[0], np.cumsum([len(p) for p in self.pos])[:-1]]).astype(np.int64)
            self.y64 = np.ascontiguousarray(task.y, dtype=np.int64)

    def loss_grad(
        self, theta: NDArray[np.float64], sel: NDArray[np.intp]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Objective and gradient of the models ``sel`` at ``theta``, from their own rows only."""
        if self.compiled:
            return self._loss_grad_compiled(theta, sel)
        K, d, task = self.K, self.d, self.task
        nm = len(sel)
        n = len(self.store)
        Wd, r, loss = self._penalty(theta, sel)
        Ws = [self._weights(theta[i, :d, :]) for i in range(nm)]  # (d', K) float32 each
        bias = theta[:, d, :].astype(np.float32)
        inv_t = (1.0 / self.t_b[sel]).astype(np.float32)
        gw = np.zeros((nm, Ws[0].shape[0], K))
        gb = np.zeros((nm, K))
        cuts = self.cuts[sel]
        model = np.arange(nm)
        for c, r0 in enumerate(self.starts):
            lo, hi = cuts[:, c], cuts[:, c + 1]
            cnt = hi - lo
            off = np.concatenate([[0], np.cumsum(cnt)])
            tot = int(off[-1])
            if tot == 0:
                continue
            A = self.store.chunk(int(r0), min(n, int(r0) + self.step))
            Z = np.empty((tot, K), dtype=np.float32)
            idx = [self.pos[j][lo[i] : hi[i]] for i, j in enumerate(sel)]
            parts: list[NDArray[np.float32] | None] = []
            for i in range(nm):
                if cnt[i] == 0:
                    parts.append(None)
                    continue
                Ai = A[idx[i] - r0]  # this model's rows of the chunk, gathered while the chunk is in cache
                np.matmul(Ai, Ws[i], out=Z[off[i] : off[i + 1]])
                parts.append(Ai)
            which = np.repeat(model, cnt)
            yc = task.y[np.concatenate(idx)]
            Z += bias[which]
            Z -= Z.max(1, keepdims=True)
            ar = np.arange(tot)
            zy = Z[ar, yc]
            np.exp(Z, out=Z)
            se = Z.sum(1)
            w = inv_t[which]
            loss += np.bincount(which, weights=(np.log(se) - zy) * w, minlength=nm)
            Z /= se[:, None]
            Z[ar, yc] -= 1.0
            Z *= w[:, None]
            for i, Ai in enumerate(parts):
                if Ai is not None:
                    gw[i] += Ai.T @ Z[off[i] : off[i + 1]]
            for k in range(K):
                gb[:, k] += np.bincount(which, weights=Z[:, k], minlength=nm)
        return loss, self._gradient(theta, Wd, r, gw, gb)

    def _gradient(
        self, theta: NDArray[np.float64], Wd: NDArray[np.float64], r: NDArray[np.float64],
        gw: NDArray[np.float64], gb: NDArray[np.float64],
    ) -> NDArray[np.float64]:
        """The full gradient from the data part ``gw`` (nm, d', K) and ``gb`` (nm, K): mapped back through the
        whitening when it is folded into the weights, plus the penalty's part."""
        d = self.d
        if self.store.folded:
            gw = np.einsum("ij,mjk->mik", self.store.whitening.transform.T.astype(np.float64), gw)
        g = np.empty_like(theta)
        g[:, :d, :] = gw + r * Wd
        g[:, d, :] = gb
        return g


    def _loss_grad_compiled(
        self, theta: NDArray[np.float64], sel: NDArray[np.intp]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The same objective and gradient, from :mod:`aflite.core.kernels` (one read of each row per pass)."""
        K, d, task = self.K, self.d, self.task
        nm = len(sel)
        n = len(self.store)
        Wd, r, loss = self._penalty(theta, sel)
        W = np.ascontiguousarray(np.stack([self._weights(theta[i, :d, :]).T for i in range(nm)]))  # (nm, K, d')
        bias = np.ascontiguousarray(theta[:, d, :])
        inv_t = 1.0 / self.t_b[sel]
        data_loss = np.zeros(nm)
        gw = np.zeros((nm, K, W.shape[2]))
        gb = np.zeros((nm, K))
        cuts = self.cuts[sel]
        base = self.base[sel]
        todo = [c for c in range(len(self.starts)) if np.any(cuts[:, c + 1] > cuts[:, c])]

        def one(c: int, out: tuple[Any, Any, Any] | None = None) -> tuple[Any, Any, Any]:
            r0 = int(self.starts[c])
            if out is None:  # a partial of its own, added to the totals in chunk order
                out = (np.zeros(nm), np.zeros_like(gw), np.zeros_like(gb))
            A = self.store.chunk(r0, min(n, r0 + self.step))
            kernels.own_rows_pass(A, r0, self.flat_pos, base + cuts[:, c], base + cuts[:, c + 1], self.y64, W,
                                  bias, inv_t, *out)
            return out

        jobs = min(task.jobs, len(todo))
        if jobs <= 1:
            for c in todo:
                one(c, (data_loss, gw, gb))
        else:  # the kernel releases the GIL; chunk sums are added in chunk order, so threads change no bits

            with ThreadPoolExecutor(max_workers=jobs) as pool:
                for part_l, part_g, part_b in pool.map(one, todo):
                    data_loss += part_l
                    gw += part_g
                    gb += part_b
        return loss + data_loss, self._gradient(theta, Wd, r, gw.transpose(0, 2, 1), gb)  # gw → (nm, d', K)


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


class _Clock:
    """Seconds spent per part of a block's fit: ``passes`` (the objective at each step's first trial point),
    ``line_search`` (backtracking re-evaluations), ``lbfgs`` (directions and bookkeeping), ``prediction``."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, part: str) -> None:
        now = time.perf_counter()
        self.seconds[part] = self.seconds.get(part, 0.0) + now - self._t
        self._t = now


def run_block(ops: Any, task: BlockTask) -> BlockResult:
    """Batched, diagonally preconditioned L-BFGS for the models of one block; each model has its own line
    search, memory and stopping rule, so a model's path does not depend on how long the others run."""
    theta = task.theta0.copy()
    m, d1, K = theta.shape
    P = d1 * K
    reg = task.reg
    # Diagonal preconditioner: whitened data gives curvature ≈ 0.25 per coordinate, plus the penalty.
    precond = np.repeat(1.0 / (0.25 + reg), K, axis=1)  # (m, P)
    state = LbfgsState(m, P, task.memory)
    if task.pairs is not None and task.pairs[0].shape[1:] == (P,):
        state.seed(*task.pairs)
    clock = _Clock()
    everyone = np.arange(m)
    f, g = ops.loss_grad(theta, everyone)
    clock.lap("passes")
    state.passes += 1
    iters = np.zeros(m, dtype=np.int64)
    conv = lambda gr: np.abs(gr).reshape(len(gr), -1).max(1) <= task.tol  # noqa: E731
    active = ~conv(g)
    while active.any():
        idx = np.flatnonzero(active)
        gi = g[idx].reshape(len(idx), P)
        direction = -state.direction(idx, gi, precond[idx])
        clock.lap("lbfgs")
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
        for attempt in range(30):  # backtracking (Armijo) line search, only re-evaluating models that failed
            sel = idx[pending]
            trial = theta[sel] + (alpha[pending, None] * direction[pending]).reshape(len(sel), d1, K)
            ft, gt = ops.loss_grad(trial, sel)
            clock.lap("passes" if attempt == 0 else "line_search")  # the first trial (α = 1) is the step itself
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
            if not (task.own_rows or task.chunked):
                ops.loss_grad(theta[kept], kept)  # re-record predictions at the kept point
            clock.lap("line_search")
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
        clock.lap("lbfgs")
    preds = ops.predictions(theta)
    clock.lap("prediction")
    return BlockResult(theta, preds, iters, int(conv(g).sum()), state.passes, state.newest_pairs(0), clock.seconds)


def fit_block_local(store: FeatureStore, task: BlockTask) -> BlockResult:
    """Fit one block in this process. Callers limit BLAS to one thread first: a block's floating-point result
    then depends only on the task, so threads, processes and cluster workers all give the same answer."""
    t0 = time.perf_counter()
    store.select(task.rows)
    ops = _ChunkedOwnOps(store, task) if task.chunked and not task.own_rows else _NumpyBlockOps(store, task)
    setup = time.perf_counter() - t0
    res = run_block(ops, task)
    res.seconds["setup"] = setup
    return res
