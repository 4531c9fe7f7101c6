"""The model family M on sparse features (a scipy CSR matrix, e.g. TF-IDF): multinomial L2 logistic regression for
a block of partitions at once, by L-BFGS, without ever densifying X.

Why a path of its own: the dense solver (:mod:`aflite.core.solver`) whitens X onto its covariance eigenbasis, a
d × d matrix and a dense copy of X: for a TF-IDF of 20,000 terms that is 3 GB for the basis alone and the copy
grows with |D| × d. Here the only products are a block-diagonal stack of each model's training rows times the
stacked weights, and its transpose times the residuals (sparse × dense; cost: the training rows' non-zeros ×
classes); memory is X's non-zeros, the stack's, and the weights, ``features × classes × models`` floats per block
(capped by :data:`BLOCK_FLOATS`).

The problem is scikit-learn's ``LogisticRegression(C=C)`` (lbfgs) for every partition: ``½‖W‖² + C Σ_i loss_i``,
intercept unpenalised, the binary model (one logit) for two classes, the softmax otherwise; scaled by 1 / (C·t)
as scikit-learn scales it, so that ``tol`` means what its ``tol`` means. The models of a block are independent and
are solved as one L-BFGS problem (their sum): one sparse product serves every model of a block.
``benchmarks/sparse_tfidf.py`` measures the agreement of p̃ with scikit-learn's fits on the same partitions, and
the time against the dense path.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.core.ensemble import FitStats, LinearEnsemble
from aflite.core.store import pred_dtype
from aflite.errors import ParameterError

__all__ = ["BLOCK_FLOATS", "MAX_COLUMNS", "SparseLogisticEnsemble", "check_columns", "is_sparse", "lbfgs"]

BLOCK_FLOATS = 1 << 24  # features × logits × models of one block's float64 weights (128 MiB)
MAX_COLUMNS = 2**31 - 1  # the int32 column-index range: the most columns a sparse X may have


def check_columns(shape: tuple[int, ...]) -> None:
    """Refuse, in one line, a sparse X wider than :data:`MAX_COLUMNS`: a linear model holds dense weights of
    features × logits (the sparse solver, one set per model: 16 GiB a model at 2^31 columns), so such an X would
    otherwise fail deep inside a fit as a MemoryError."""
    d = int(shape[1])
    if d > MAX_COLUMNS:
        raise ParameterError(f"sparse features have {d:,} columns; aflite takes at most 2^31 - 1 = {MAX_COLUMNS:,} "
                             f"(a linear model's dense weights alone would need {8 * d / 2**30:,.0f} GiB): select "
                             f"or hash the features into fewer columns first")


def is_sparse(X: Any) -> bool:
    """A scipy sparse matrix or array, told without importing scipy."""
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


class SparseLogisticEnsemble(LinearEnsemble):
    """Multinomial (binary for two classes) L2 logistic regression on sparse X for m partitions; see the module.
    ``tol`` and ``max_iter`` are scikit-learn's (lbfgs) defaults."""

    def __init__(self, C: float = 1.0, tol: float = 1e-4, max_iter: int = 1000, warm_start: bool = True) -> None:
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start  # each phase starts from the previous phase's mean solution (same optimum)
        self.last_stats = FitStats()
        self._start: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None  # (d, L), (L,)
        self._W: NDArray[np.float64] | None = None  # (d, L, m) of the last full call
        self._b: NDArray[np.float64] | None = None  # (L, m)

    def prepare(self, X: Any, y: NDArray[np.int64], n_classes: int) -> None:
        if not (isinstance(self.C, int | float) and self.C > 0):
            raise ParameterError(f"C must be a number > 0, got {self.C!r}")
        self._X = X.tocsr().astype(np.float64)
        self._y = np.asarray(y, dtype=np.int64)
        self._k = int(n_classes)
        self._L = 1 if self._k == 2 else self._k  # the binary model has one logit, as scikit-learn's
        self._W = self._b = None
        self._start = None

    def get_state(self) -> dict[str, NDArray[Any]]:
        return {} if self._start is None else {"sparse_start_W": self._start[0], "sparse_start_b": self._start[1]}

    def set_state(self, state: dict[str, NDArray[Any]]) -> None:
        if "sparse_start_W" in state:
            self._start = (np.asarray(state["sparse_start_W"], np.float64), np.asarray(state["sparse_start_b"]))

    def fit_predict(
        self, rows: NDArray[np.intp], train_mask: NDArray[np.bool_], models: NDArray[np.intp] | None = None
    ) -> NDArray[np.integer[Any]]:
        start = time.perf_counter()
        if models is not None:
            train_mask = train_mask[:, models]
        Xs, y = self._X[rows], self._y[rows]
        m, d, L = train_mask.shape[1], self._X.shape[1], self._L
        W, b = np.zeros((d, L, m)), np.zeros((L, m))
        step = max(1, BLOCK_FLOATS // max(1, d * L))  # the weights of one block stay under BLOCK_FLOATS
        iters: list[int] = []
        for j0 in range(0, m, step):
            j1 = min(m, j0 + step)
            W[:, :, j0:j1], b[:, j0:j1], nit = self._solve(Xs, y, train_mask[:, j0:j1], self._start)
            iters += [nit] * (j1 - j0)
        preds = self._predict(Xs, W, b)
        if models is None:
            self._W, self._b = W, b
            if self.warm_start:
                self._start = (W.mean(2), b.mean(1))
        self.last_stats = FitStats(time.perf_counter() - start, m, iters, m, int(sum(iters[::step])))
        return preds

    def _solve(self, X: Any, y: NDArray[np.int64], mask: NDArray[np.bool_],
               start: tuple[NDArray[np.float64], NDArray[np.float64]] | None) -> tuple[Any, Any, int]:
        """One block: the models of the columns of ``mask``, fitted jointly (their objectives summed) on a
        block-diagonal matrix of each model's own training rows, so that a pass costs their non-zeros only."""
        from scipy.sparse import block_diag

        d, L, nb = X.shape[1], self._L, mask.shape[1]
        train = [np.flatnonzero(mask[:, j]) for j in range(nb)]
        B = block_diag([X[r] for r in train], format="csr")  # (Σ t, nb·d)
        owner = np.repeat(np.arange(nb), [len(r) for r in train])
        target = _targets(y[np.concatenate(train)], self._k, L)  # (Σ t, L, 1)
        scale = 1.0 / (self.C * max(1, max(len(r) for r in train)))
        size = nb * d * L

        def objective(theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
            W, c = theta[:size].reshape(nb * d, L), theta[size:].reshape(nb, L)
            Z = (np.asarray(B @ W) + c[owner])[:, :, None]
            loss, R = _loss_residual(Z, target, L)
            R2 = R[:, :, 0]
            gW = W + self.C * np.asarray(B.T @ R2)
            gc = self.C * np.stack([np.bincount(owner, R2[:, col], minlength=nb) for col in range(L)], axis=1)
            f = 0.5 * float(np.einsum("ij,ij->", W, W)) + self.C * float(loss.sum())
            return f * scale, np.concatenate([gW.ravel(), gc.ravel()]) * scale

        theta0 = np.zeros(size + nb * L)
        if start is not None:  # every model of the block from the previous phase's mean solution
            theta0[:size] = np.tile(start[0], (nb, 1)).ravel()
            theta0[size:] = np.tile(start[1], nb)
        theta, nit = lbfgs(objective, theta0, self.tol, self.max_iter)
        W = theta[:size].reshape(nb, d, L).transpose(1, 2, 0)  # (d, L, nb)
        return W, theta[size:].reshape(nb, L).T, nit

    def _logits(self, X: Any, W: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
        d, L, m = W.shape
        return np.asarray(X @ W.reshape(d, L * m)).reshape(-1, L, m) + b

    def _predict(self, X: Any, W: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.integer[Any]]:
        Z = self._logits(X, W, b)
        codes = (Z[:, 0, :] > 0) if self._L == 1 else Z.argmax(1)  # argmax's tie rule: the first class
        return codes.astype(pred_dtype(self._k))

    def predict_proba(self, X: Any, rows: NDArray[np.intp]) -> NDArray[np.float32]:
        if self._W is None or self._b is None:
            raise NotImplementedError("no fitted models yet")
        Z = self._logits(X.tocsr()[rows], self._W, self._b)
        if self._L == 1:
            p1 = 1.0 / (1.0 + np.exp(-Z[:, 0, :]))
            return np.stack([1.0 - p1, p1], axis=-1).astype(np.float32)
        Z -= Z.max(1, keepdims=True)
        P = np.exp(Z)
        P /= P.sum(1, keepdims=True)
        return P.transpose(0, 2, 1).astype(np.float32)

    def raw_coefficients(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        if self._W is None or self._b is None:
            raise NotImplementedError("no fitted models yet")
        W, b = self._W.transpose(0, 2, 1), self._b.T  # (d, m, L), (m, L)
        if self._L == 1:  # class 0's logit is 0 in the binary model
            W = np.concatenate([np.zeros_like(W), W], axis=2)
            b = np.concatenate([np.zeros_like(b), b], axis=1)
        return W, b


def lbfgs(fun: Any, x: NDArray[np.float64], tol: float, max_iter: int,
          memory: int = 10) -> tuple[NDArray[np.float64], int]:
    """Minimise a smooth convex ``fun`` (returning value and gradient) by L-BFGS with a backtracking (Armijo) line
    search, until the largest gradient entry is <= ``tol`` (scipy's ``gtol``) or ``max_iter`` steps. Plain numpy on
    one vector: scipy's L-BFGS-B spends ~10 ms a step on its bound constraints for a block's ~10⁵ weights, more
    than the sparse products themselves."""
    f, g = fun(x)
    S: list[NDArray[np.float64]] = []
    Y: list[NDArray[np.float64]] = []
    rho: list[float] = []  # 1 / sᵀy of each pair, computed once
    it = 0
    while it < max_iter and np.abs(g).max() > tol:
        q, alphas = g.copy(), []
        for s, y, r in zip(reversed(S), reversed(Y), reversed(rho), strict=True):
            a = r * (s @ q)
            alphas.append(a)
            q -= a * y
        if S:
            q *= 1.0 / (rho[-1] * (Y[-1] @ Y[-1]))
        for s, y, r, a in zip(S, Y, rho, reversed(alphas), strict=True):
            q += s * (a - r * (y @ q))
        step, slope = 1.0 if S else 1.0 / max(1.0, float(np.abs(g).max())), float(g @ q)
        if slope <= 0:  # not a descent direction (numerical): restart from the gradient
            S, Y, rho, q, slope = [], [], [], g.copy(), float(g @ g)
        while True:
            x_new = x - step * q
            f_new, g_new = fun(x_new)
            if f_new <= f - 1e-4 * step * slope or step < 1e-10:
                break
            step *= 0.5
        if f_new >= f:  # no decrease even on a tiny step: the rounding floor of f; x is as good as it gets
            break
        s, y = x_new - x, g_new - g
        sy = float(s @ y)
        if sy > 1e-12 * np.linalg.norm(s) * np.linalg.norm(y):
            S, Y, rho = [*S[-(memory - 1):], s], [*Y[-(memory - 1):], y], [*rho[-(memory - 1):], 1.0 / sy]
        x, f, g, it = x_new, f_new, g_new, it + 1
    return x, it


def _targets(y: NDArray[np.int64], k: int, L: int) -> NDArray[np.float64]:
    """One-hot targets (n, K, 1), or the binary model's 0/1 target (n, 1, 1)."""
    if L == 1:
        return (y == 1).astype(np.float64)[:, None, None]
    out = np.zeros((len(y), k, 1))
    out[np.arange(len(y)), y, 0] = 1.0
    return out


def _loss_residual(Z: NDArray[np.float64], target: NDArray[np.float64],
                   L: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per row and model the log loss (n, b), and the residual p − target (n, L, b), computed stably."""
    if L == 1:
        z = Z[:, 0, :]
        t = target[:, 0, :]
        loss = np.logaddexp(0.0, z) - t * z
        p = 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic function without overflow
        return loss, (p - t)[:, None, :]
    Zs = Z - Z.max(1, keepdims=True)
    lse = np.log(np.exp(Zs).sum(1))
    loss = lse - (Zs * target).sum(1)
    P = np.exp(Zs - lse[:, None, :])
    return loss, P - target
