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

__all__ = ["LinearEnsemble", "FastLogisticEnsemble", "SklearnEnsemble", "FitStats", "make_ensemble"]


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


class FastLogisticEnsemble(LinearEnsemble):
    """Multinomial L2 logistic regression for m partitions at once (batched, preconditioned L-BFGS).

    Parameters mirror scikit-learn's ``LogisticRegression``: ``C`` is the inverse regularisation strength
    (the objective is ``½‖W‖² + C Σ_i loss_i``, intercept unpenalised; for two classes the binary model,
    as scikit-learn fits it). ``tol`` bounds the largest gradient entry of the per-sample-averaged objective
    in whitened coordinates; ``max_iter`` caps L-BFGS steps per model. ``warm_start`` starts each phase
    from the mean solution of the previous one (same optimum — the problem is convex — in fewer steps).
    """

    def __init__(
        self,
        C: float = 1.0,
        tol: float = 1e-4,
        max_iter: int = 300,
        memory: int = 10,
        warm_start: bool = True,
        chunk_mb: int = 64,
    ) -> None:
        if C <= 0:
            raise ValueError("C must be positive")
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.memory = memory
        self.warm_start = warm_start
        self.chunk_mb = chunk_mb
        self.last_stats = FitStats()
        self._coef0: NDArray[np.float64] | None = None
        self._coefs: NDArray[np.float64] | None = None  # per-model solutions of the last call

    # ------------------------------------------------------------------ preparation (once per dataset)
    def prepare(self, X: NDArray[Any], y: NDArray[np.int64], n_classes: int) -> None:
        """Whiten X once: centre, rotate onto the covariance eigenbasis and scale to unit variance."""
        n, d = X.shape
        self._y = np.asarray(y, dtype=np.int64)
        self._k = int(n_classes)
        step = max(1, (self.chunk_mb << 20) // (4 * max(d, 1)))
        mean = np.zeros(d, dtype=np.float64)
        for r0 in range(0, n, step):
            mean += X[r0 : r0 + step].sum(0, dtype=np.float64)
        mean /= n
        cov = np.zeros((d, d), dtype=np.float64)
        mean32 = mean.astype(np.float32)
        for r0 in range(0, n, step):
            c = np.asarray(X[r0 : r0 + step], dtype=np.float32) - mean32
            cov += (c.T @ c).astype(np.float64)
        cov /= n
        evals, evecs = np.linalg.eigh(cov)
        top = float(evals[-1]) if evals.size else 0.0
        # Directions along which the data has (numerically) no variance carry no information; the optimal
        # weight there is 0 under the L2 penalty, so dropping them leaves the optimum unchanged.
        keep = evals > max(top, 1e-30) * 1e-9
        evals, evecs = evals[keep][::-1], evecs[:, keep][:, ::-1]
        transform = (evecs / np.sqrt(evals)).astype(np.float32)
        self._penalty = 1.0 / evals  # λ_j: the L2 penalty of the original problem in whitened coordinates
        self._dim = int(keep.sum())
        Xw = np.empty((n, self._dim), dtype=np.float32)
        for r0 in range(0, n, step):
            np.matmul(np.asarray(X[r0 : r0 + step], dtype=np.float32) - mean32, transform, out=Xw[r0 : r0 + step])
        self._Xw = Xw
        self._Xw_rows = np.arange(n)
        self._coef0 = None
        self._coefs = None

    def _take(self, rows: NDArray[np.intp]) -> NDArray[np.float32]:
        """Rows of the whitened matrix; AFLite only ever shrinks S, so compact in place of copying twice."""
        rows = np.asarray(rows)
        if rows.shape == self._Xw_rows.shape and np.array_equal(rows, self._Xw_rows):
            return self._Xw
        pos = np.searchsorted(self._Xw_rows, rows)
        if (
            np.all(np.diff(rows) > 0)
            and np.all(pos < len(self._Xw_rows))
            and np.array_equal(self._Xw_rows[np.minimum(pos, len(self._Xw_rows) - 1)], rows)
        ):
            # a sorted subset of what we hold: keep only it (frees memory as S shrinks)
            self._Xw = self._Xw[pos]
            self._Xw_rows = rows.copy()
            return self._Xw
        raise ValueError("rows must be a sorted subset of the rows passed before")

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
        from threadpoolctl import threadpool_limits

        # Tiny problems (the synthetic experiment: t = 100, a few features) are dominated by BLAS thread
        # start-up: one thread was 5-10x faster there. Large ones want every core. Results do not depend on it.
        small = len(rows) * (self._dim + 1) * self._k * train_mask.shape[1] < 2_000_000
        with threadpool_limits(limits=1 if small else None):
            return self._fit_predict(rows, train_mask, models)

    def _fit_predict(
        self, rows: NDArray[np.intp], train_mask: NDArray[np.bool_], models: NDArray[np.intp] | None
    ) -> NDArray[np.integer[Any]]:
        start = time.perf_counter()
        m_all = train_mask.shape[1]
        if models is not None:
            train_mask = train_mask[:, models]
        Xs = self._take(rows)
        y = self._y[rows]
        n, m = train_mask.shape
        K, d = self._k, self._dim
        P = (d + 1) * K  # parameters per model: weights and intercepts, flattened
        t_b = train_mask.sum(0).astype(np.float64)
        if np.any(t_b == 0):
            raise ValueError("every partition needs at least one training row")
        # For two classes scikit-learn fits one binary weight vector with penalty ½‖w‖²; the symmetric
        # two-column softmax reaches the same model with twice the penalty on each column.
        pen_scale = 2.0 if K == 2 else 1.0
        lam = np.concatenate([self._penalty, [0.0]])  # intercept row unpenalised
        reg = pen_scale * lam[None, :] / (self.C * t_b[:, None])  # (m, d+1): per-model penalty weights
        # Diagonal preconditioner: whitened data gives curvature ≈ 0.25 per coordinate, plus the penalty.
        precond = np.repeat(1.0 / (0.25 + reg), K, axis=1)  # (m, P)

        theta = np.zeros((m, d + 1, K))
        own = self._coefs is not None and self._coefs.shape == (m_all, d + 1, K)
        if models is not None and own:
            assert self._coefs is not None
            theta[:] = self._coefs[models]  # a refit of partitions that changed a little: start where they were
        elif self.warm_start and self._coef0 is not None and self._coef0.shape == (d + 1, K):
            theta[:] = self._coef0
        weight = train_mask.astype(np.float32) / t_b.astype(np.float32)  # per-sample weight 1/t_b on train rows
        preds = np.empty((n, m), dtype=_pred_dtype(K))

        state = _LbfgsState(m, P, self.memory)
        f, g = self._loss_grad(Xs, y, weight, reg, theta, np.arange(m), preds)
        state.passes += 1
        iters = np.zeros(m, dtype=np.int64)
        active = np.ones(m, dtype=bool)
        active &= ~self._converged(g)
        alpha0 = np.ones(m)
        while active.any():
            idx = np.flatnonzero(active)
            direction = -state.direction(idx, g[idx].reshape(len(idx), P), precond[idx])
            gd = np.einsum("ij,ij->i", g[idx].reshape(len(idx), P), direction)
            bad = gd >= 0  # not a descent direction (numerical trouble): restart from the preconditioned gradient
            if bad.any():
                state.reset(idx[bad])
                direction[bad] = -precond[idx[bad]] * g[idx[bad]].reshape(int(bad.sum()), P)
                gd[bad] = np.einsum("ij,ij->i", g[idx[bad]].reshape(int(bad.sum()), P), direction[bad])
            alpha = alpha0[idx].copy()
            pending = np.arange(len(idx))
            new_theta = theta[idx].copy()
            new_f = np.empty(len(idx))
            new_g = np.empty((len(idx), d + 1, K))
            for _ in range(30):  # backtracking (Armijo) line search, only re-evaluating models that failed
                sel = idx[pending]
                trial = theta[sel] + (alpha[pending, None] * direction[pending]).reshape(len(sel), d + 1, K)
                ft, gt = self._loss_grad(Xs, y, weight, reg, trial, sel, preds)
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
                # re-evaluate predictions at the kept point
                self._loss_grad(Xs, y, weight, reg, theta[idx[pending]], idx[pending], preds)
            s = (new_theta - theta[idx]).reshape(len(idx), P)
            yv = (new_g - g[idx]).reshape(len(idx), P)
            state.push(idx, s, yv)
            f_old = f[idx].copy()
            theta[idx], f[idx], g[idx] = new_theta, new_f, new_g
            iters[idx] += 1
            stop = self._converged(g[idx]) | (iters[idx] >= self.max_iter)
            stop |= (f_old - new_f) <= 1e-12 * np.maximum(1.0, np.abs(new_f))
            if pending.size:
                stop[pending] = True
            active[idx[stop]] = False
        if models is None:
            self._coefs = theta
            self._coef0 = theta.mean(0)
        elif own:
            assert self._coefs is not None
            self._coefs[models] = theta
        converged = int(self._converged(g).sum())
        self.last_stats = FitStats(time.perf_counter() - start, m, iters.tolist(), converged, state.passes)
        return preds

    def _converged(self, g: NDArray[np.float64]) -> NDArray[np.bool_]:
        return np.abs(g).reshape(len(g), -1).max(1) <= self.tol

    def _loss_grad(
        self,
        Xs: NDArray[np.float32],
        y: NDArray[np.int64],
        weight: NDArray[np.float32],
        reg: NDArray[np.float64],
        theta: NDArray[np.float64],
        models: NDArray[np.intp],
        preds: NDArray[np.integer[Any]],
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Objective and gradient of ``len(models)`` models in one pass over the rows; records argmax.

        Logits are laid out class-major, ``(rows, K, models)``, so that every per-class operation is a
        contiguous elementwise op (numpy reductions over a length-3 last axis are slow) and the loop is over
        the K classes only, never over models or rows.
        """
        n, d = Xs.shape
        K = self._k
        nm = len(models)
        W = np.ascontiguousarray(theta[:, :d, :].transpose(1, 2, 0).reshape(d, K * nm), dtype=np.float32)
        b = np.ascontiguousarray(theta[:, d, :].T, dtype=np.float32)  # (K, nm)
        wts = weight if nm == weight.shape[1] else weight[:, models]
        grad_w = np.zeros((d, K * nm), dtype=np.float64)
        grad_b = np.zeros((K, nm), dtype=np.float64)
        loss = np.zeros(nm, dtype=np.float64)
        step = max(256, (self.chunk_mb << 20) // (4 * nm * K))
        for r0 in range(0, n, step):
            xc = Xs[r0 : r0 + step]
            R = len(xc)
            z = (xc @ W).reshape(R, K, nm)
            z += b
            top = z[:, 0, :].copy()
            arg = np.zeros((R, nm), dtype=preds.dtype)
            for k in range(1, K):
                better = z[:, k, :] > top
                arg[better] = k
                np.maximum(top, z[:, k, :], out=top)
            preds[r0 : r0 + R, models] = arg
            z -= top[:, None, :]
            yc = y[r0 : r0 + R]
            ar = np.arange(R)
            zy = z[ar, yc, :]  # (R, nm): logit of the true class
            np.exp(z, out=z)
            se = z[:, 0, :].copy()
            for k in range(1, K):
                se += z[:, k, :]
            wc = wts[r0 : r0 + R]
            loss += ((np.log(se) - zy) * wc).sum(0, dtype=np.float64)
            z /= se[:, None, :]
            z[ar, yc, :] -= 1.0
            z *= wc[:, None, :]
            grad_w += xc.T @ z.reshape(R, K * nm)
            grad_b += z.sum(0, dtype=np.float64)
        Wd = theta[:, :d, :]  # (nm, d, K)
        r = reg[models, :d, None]
        loss += 0.5 * (r * Wd * Wd).sum((1, 2))
        g = np.empty_like(theta)
        g[:, :d, :] = grad_w.reshape(d, K, nm).transpose(2, 0, 1) + r * Wd
        g[:, d, :] = grad_b.T
        return loss, g


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


def make_ensemble(model: Any = "logistic", C: float = 1.0) -> LinearEnsemble:
    """Resolve the user's choice of model family into an ensemble implementation.

    ``"logistic"`` → the fast batched path; ``"sklearn"`` → scikit-learn LogisticRegression in a loop;
    a scikit-learn classifier instance → that estimator in a loop; a :class:`LinearEnsemble` → itself.
    """
    if isinstance(model, LinearEnsemble):
        return model
    if model == "logistic":
        return FastLogisticEnsemble(C=C)
    if model == "sklearn":
        from sklearn.linear_model import LogisticRegression

        return SklearnEnsemble(LogisticRegression(C=C, max_iter=10_000))
    if hasattr(model, "fit") and hasattr(model, "predict"):
        return SklearnEnsemble(model)
    raise ValueError(f"unknown model {model!r}: use 'logistic', 'sklearn' or a scikit-learn classifier")
