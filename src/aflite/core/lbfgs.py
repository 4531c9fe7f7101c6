"""Batched L-BFGS memory: the curvature pairs of m models, updated in lockstep (the solver's quasi-Newton step)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


class LbfgsState:
    """Ring buffers of L-BFGS pairs for m models, updated in lockstep (one shared slot per iteration)."""

    def __init__(self, m: int, P: int, memory: int) -> None:
        self.S = np.zeros((memory, m, P))
        self.Y = np.zeros((memory, m, P))
        self.rho = np.zeros((memory, m))
        self.count = np.zeros(m, dtype=np.int64)  # pairs pushed per model (slot = count % memory)
        self.memory = memory
        self.passes = 0

    def seed(self, S: NDArray[np.float64], Y: NDArray[np.float64]) -> None:
        """Start every model with the same curvature pairs (oldest first), e.g. the previous phase's: the
        objective changes little between phases, so they describe its curvature well from the first step."""
        m = self.S.shape[1]
        for s, y in zip(S[-self.memory :], Y[-self.memory :], strict=True):
            self.push(np.arange(m), np.broadcast_to(s, (m, len(s))), np.broadcast_to(y, (m, len(y))))

    def newest_pairs(self, model: int) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
        """One model's stored pairs, oldest first (those with positive curvature), or None if there are none."""
        cnt = int(self.count[model])
        n = min(cnt, self.memory)
        slots = [(cnt - n + j) % self.memory for j in range(n)]
        keep = [k for k in slots if self.rho[k, model] > 0]
        if not keep:
            return None
        return self.S[keep, model].copy(), self.Y[keep, model].copy()

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
