"""The PyTorch path of the fast ensemble: the same blocks and batched L-BFGS, with the data passes on a GPU.

Only the passes over the rows (the two large products per step, softmax, argmax) run in PyTorch; the
optimiser state is small and stays in float64 numpy, shared with the CPU path (:func:`aflite.core.solver.run_block`).
The whitened features live on the device, optionally as bfloat16/float16 to halve their memory; every
product casts a chunk to float32 first, so accumulation is float32 and sums over chunks are float64.

``device="torch-cpu"`` runs this code on the CPU: that is how the GPU path is tested on machines without one.
torch is an optional dependency (``pip install 'aflite[text]'``); nothing here imports it until it is used.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.core.blocks import BlockResult, BlockTask
from aflite.core.solver import run_block
from aflite.core.store import Whitening, chunk_rows, pred_dtype, shrink_positions
from aflite.device import torch_device as _torch_device
from aflite.device import torch_module as _torch
from aflite.errors import ParameterError

__all__ = ["TorchFeatureStore", "fit_block_torch", "STORAGE_DTYPES"]

STORAGE_DTYPES = ("float32", "bfloat16", "float16")


class TorchFeatureStore:
    """Whitened features of the current S on a PyTorch device, compacted as S shrinks."""

    def __init__(self, X: Any, whitening: Whitening, device: str, storage: str = "float32", chunk_mb: int = 64) -> None:
        torch = _torch()
        if storage not in STORAGE_DTYPES:
            raise ParameterError(f"storage must be one of {', '.join(STORAGE_DTYPES)}, got {storage!r}")
        self.torch = torch
        self.dev = torch.device(_torch_device(device))
        self.whitening = whitening
        n, d = X.shape
        self.step = chunk_rows(d, chunk_mb)
        dtype = getattr(torch, storage)
        mean = torch.from_numpy(whitening.mean.astype(np.float32)).to(self.dev)
        T = torch.from_numpy(whitening.transform).to(self.dev)
        self.data = torch.empty((n, whitening.dim), dtype=dtype, device=self.dev)
        for r0 in range(0, n, self.step):
            c = torch.from_numpy(np.array(X[r0 : r0 + self.step], dtype=np.float32)).to(self.dev)
            self.data[r0 : r0 + len(c)] = ((c - mean) @ T).to(dtype)
        self.rows: NDArray[np.intp] = np.arange(n)

    def __len__(self) -> int:
        return len(self.rows)

    def select(self, rows: NDArray[np.intp]) -> None:
        rows = np.asarray(rows)
        pos = shrink_positions(self.rows, rows)
        if pos is None:
            return
        self.data = self.data[self.torch.from_numpy(pos).to(self.dev)]
        self.rows = rows.copy()


class _TorchBlockOps:
    """Objective, gradient and predictions of one block's models, computed on the store's device."""

    def __init__(self, store: TorchFeatureStore, task: BlockTask) -> None:
        torch = store.torch
        self.torch, self.store, self.task = torch, store, task
        self.dev = store.dev
        self.K, self.d = task.n_classes, store.whitening.dim
        n, b = task.mask.shape
        self.t_b = task.mask.sum(0).astype(np.float64)
        self.y = torch.from_numpy(task.y).to(self.dev)
        self.preds = torch.zeros((n, b), dtype=torch.int32, device=self.dev)
        # rows per chunk: bounded by the logits buffer (rows × K × models) as well as by the features
        self.step = max(256, min(store.step, (256 << 20) // (4 * max(1, self.K * b))))
        if task.own_rows:  # each model's own training rows (and labels), gathered once on the device
            self.own = []
            for j in range(b):
                idx = torch.from_numpy(np.flatnonzero(task.mask[:, j])).to(self.dev)
                self.own.append((store.data[idx], self.y[idx]))
        else:
            w = task.mask.astype(np.float32) / self.t_b.astype(np.float32)
            self.weight = torch.from_numpy(w).to(self.dev)

    def _pass(self, A: Any, W: Any, b: Any, y: Any, w: Any) -> tuple[Any, Any, Any, Any]:
        """Loss, weight gradient, intercept gradient and argmax of one chunk for nm models (class-major)."""
        torch = self.torch
        R = A.shape[0]
        K, nm = b.shape
        A = A.float()
        z = (A @ W).view(R, K, nm) + b
        arg = z.argmax(1)
        lse = torch.logsumexp(z, 1)
        zy = z.gather(1, y.view(R, 1, 1).expand(R, 1, nm)).squeeze(1)
        loss = ((lse - zy) * w).sum(0, dtype=torch.float64)
        p = torch.softmax(z, 1)
        p.scatter_add_(1, y.view(R, 1, 1).expand(R, 1, nm), torch.full((R, 1, nm), -1.0, device=self.dev))
        p *= w[:, None, :]
        grad = (A.T @ p.view(R, K * nm)).double()
        return loss, grad, p.sum(0, dtype=torch.float64), arg

    def loss_grad(
        self, theta: NDArray[np.float64], sel: NDArray[np.intp]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        torch = self.torch
        K, d, task = self.K, self.d, self.task
        nm = len(sel)
        Wd = theta[:, :d, :]
        r = task.reg[sel, :d, None]
        g = np.empty_like(theta)
        loss = 0.5 * (r * Wd * Wd).sum((1, 2))
        if task.own_rows:
            for i, j in enumerate(sel):
                A, yj = self.own[j]
                W = torch.from_numpy(np.ascontiguousarray(theta[i, :d, :], dtype=np.float32)).to(self.dev)
                b = torch.from_numpy(theta[i, d, :].astype(np.float32)[:, None]).to(self.dev)
                w = torch.full((len(A), 1), 1.0 / self.t_b[j], dtype=torch.float32, device=self.dev)
                gw = torch.zeros((d, K), dtype=torch.float64, device=self.dev)
                gb = torch.zeros((K, 1), dtype=torch.float64, device=self.dev)
                li = torch.zeros(1, dtype=torch.float64, device=self.dev)
                for r0 in range(0, len(A), self.step):
                    sl = slice(r0, r0 + self.step)
                    lc, gc, gbc, _ = self._pass(A[sl], W, b, yj[sl], w[sl])
                    li += lc
                    gw += gc
                    gb += gbc
                loss[i] += float(li.item())
                g[i, :d, :] = gw.cpu().numpy() + r[i] * Wd[i]
                g[i, d, :] = gb.cpu().numpy()[:, 0]
            return loss, g
        W = torch.from_numpy(np.ascontiguousarray(Wd.transpose(1, 2, 0).reshape(d, K * nm), dtype=np.float32))
        W = W.to(self.dev)
        b = torch.from_numpy(np.ascontiguousarray(theta[:, d, :].T, dtype=np.float32)).to(self.dev)
        sel_t = torch.from_numpy(np.asarray(sel)).to(self.dev)
        wts = self.weight[:, sel_t]
        grad = torch.zeros((d, K * nm), dtype=torch.float64, device=self.dev)
        grad_b = torch.zeros((K, nm), dtype=torch.float64, device=self.dev)
        lt = torch.zeros(nm, dtype=torch.float64, device=self.dev)
        for r0 in range(0, len(self.store), self.step):
            sl = slice(r0, r0 + self.step)
            lc, gc, gbc, arg = self._pass(self.store.data[sl], W, b, self.y[sl], wts[sl])
            self.preds[sl, sel_t] = arg.to(torch.int32)
            lt += lc
            grad += gc
            grad_b += gbc
        loss += lt.cpu().numpy()
        g[:, :d, :] = grad.cpu().numpy().reshape(d, K, nm).transpose(2, 0, 1) + r * Wd
        g[:, d, :] = grad_b.cpu().numpy().T
        return loss, g

    def predictions(self, theta: NDArray[np.float64]) -> NDArray[np.integer[Any]]:
        torch = self.torch
        K, d = self.K, self.d
        if self.task.own_rows:
            nm = theta.shape[0]
            W = torch.from_numpy(
                np.ascontiguousarray(theta[:, :d, :].transpose(1, 2, 0).reshape(d, K * nm), dtype=np.float32)
            ).to(self.dev)
            b = torch.from_numpy(np.ascontiguousarray(theta[:, d, :].T, dtype=np.float32)).to(self.dev)
            for r0 in range(0, len(self.store), self.step):
                A = self.store.data[r0 : r0 + self.step].float()
                z = (A @ W).view(len(A), K, nm) + b
                self.preds[r0 : r0 + len(A)] = z.argmax(1).to(torch.int32)
        return self.preds.cpu().numpy().astype(pred_dtype(K))


def fit_block_torch(store: TorchFeatureStore, task: BlockTask) -> BlockResult:
    """Fit one block of partitions with the data passes on ``store``'s device."""
    store.select(task.rows)
    with store.torch.no_grad():
        return run_block(_TorchBlockOps(store, task), task)
