"""The PyTorch path of the fast ensemble: the same blocks and batched L-BFGS, with the data passes on a GPU.

Only the passes over the rows (the two large products per step, softmax, argmax) run in PyTorch; the
optimiser state is small and stays in float64 numpy, shared with the CPU path (:func:`aflite.core.solver.run_block`).
The whitened features live on the device, optionally as bfloat16/float16 to halve their memory; every
product casts a chunk to float32 first, so accumulation is float32 and sums over chunks are float64.

Two opt-in modes (keywords of :class:`aflite.core.ensemble.FastLogisticEnsemble`; **not yet measured on a GPU**,
so the defaults keep the path measured in issue #31):

* ``resident`` — the phase stays on the device: the training mask goes up once as booleans (not as a float
  weight matrix four times its size built on the host), the predictions never come back (the phase's held-out
  counts are computed there, :meth:`fit_score`), one transfer per objective evaluation instead of one per
  model or per array, no ``.item()`` in the per-model loop. Same operations in the same order: on the CPU
  (``device="torch-cpu"``) its predictions and kept set are the classic path's, bit for bit (tests).
* ``lbfgs_on_device`` — also the batched L-BFGS itself (two-loop recursion, line search, stopping rule) in
  float64 on the device (:func:`run_block_device`), so that a wide softmax's weights (ImageNet: 2M numbers per
  model) never cross to the host; the same algorithm as :func:`aflite.core.solver.run_block`, its reductions in
  another order: predictions agree within the optimiser's tolerance, not bit for bit.

``pass_mb``: MiB of float32 rows per chunk of a pass (default the store's ``chunk_mb``); larger chunks are fewer,
larger kernels, and change the float32 sums within rounding.

``device="torch-cpu"`` runs this code on the CPU: that is how the GPU path is tested on machines without one.
torch is an optional dependency (``pip install 'aflite[text]'``); nothing here imports it until it is used.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.core.blocks import BlockResult, BlockTask
from aflite.core.solver import run_block
from aflite.core.store import Whitening, chunk_rows, pred_dtype, shrink_positions
from aflite.device import torch_device as _torch_device
from aflite.device import torch_module as _torch
from aflite.errors import ParameterError

__all__ = ["TorchFeatureStore", "fit_block_torch", "STORAGE_DTYPES", "run_block_device", "heldout_counts",
           "host_predictions", "block_counts"]

STORAGE_DTYPES = ("float32", "bfloat16", "float16")
LOGITS_MB = 256  # the default bound of one chunk's logits buffer (rows × K × models float32)


class TorchFeatureStore:
    """Whitened features of the current S on a PyTorch device, compacted as S shrinks."""

    def __init__(self, X: Any, whitening: Whitening, device: str, storage: str = "float32", chunk_mb: int = 64,
                 pass_mb: int | None = None) -> None:
        torch = _torch()
        if storage not in STORAGE_DTYPES:
            raise ParameterError(f"storage must be one of {', '.join(STORAGE_DTYPES)}, got {storage!r}")
        self.torch = torch
        self.dev = torch.device(_torch_device(device))
        self.whitening = whitening
        n, d = X.shape
        self.step = chunk_rows(d, chunk_mb)
        # rows per chunk of the passes, and the bound of their logits buffer (the default: as before pass_mb)
        self.pass_step = self.step if pass_mb is None else chunk_rows(whitening.dim, pass_mb)
        self.logits_bytes = (LOGITS_MB if pass_mb is None else max(LOGITS_MB, 4 * pass_mb)) << 20
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

    def upload(self, arr: NDArray[Any]) -> Any:
        """A host array on the device: from pinned memory without waiting on a GPU (the copy is queued), as is
        on the CPU."""
        t = self.torch.from_numpy(np.ascontiguousarray(arr))
        if self.dev.type != "cuda":
            return t
        return t.pin_memory().to(self.dev, non_blocking=True)

    def select(self, rows: NDArray[np.intp]) -> None:
        rows = np.asarray(rows)
        pos = shrink_positions(self.rows, rows)
        if pos is None:
            return
        self.data = self.data[self.upload(pos)]
        self.rows = rows.copy()


class _TorchBlockOps:
    """Objective, gradient and predictions of one block's models on the store's device (``resident``: see the
    module docstring; the arithmetic is the same either way)."""

    def __init__(self, store: TorchFeatureStore, task: BlockTask, resident: bool = False) -> None:
        torch = store.torch
        self.torch, self.store, self.task = torch, store, task
        self.resident = resident
        self.dev = store.dev
        self.K, self.d = task.n_classes, store.whitening.dim
        n, b = task.mask.shape
        self.b = b
        if task.own_rows or not resident:  # (resident passes count them on the device)
            self.t_b = task.mask.sum(0).astype(np.float64)
        self.y = store.upload(task.y) if resident else torch.from_numpy(task.y).to(self.dev)
        self.preds = torch.zeros((n, b), dtype=torch.int32, device=self.dev)
        # rows per chunk: bounded by the logits buffer (rows × K × models) as well as by the features
        self.step = max(256, min(store.pass_step, store.logits_bytes // (4 * max(1, self.K * b))))
        if task.own_rows:  # each model's own training rows (and labels), gathered once on the device
            self.own = []
            by_model = np.ascontiguousarray(task.mask.T) if resident else None  # row scans, not column scans
            for j in range(b):
                if by_model is not None:
                    idx = store.upload(np.flatnonzero(by_model[j]))
                else:
                    idx = torch.from_numpy(np.flatnonzero(task.mask[:, j])).to(self.dev)
                self.own.append((store.data[idx], self.y[idx]))
        elif resident:  # the same float32 division as below, on the device, from a quarter of the bytes
            self.mask = store.upload(task.mask)
            self.weight = self.mask.to(torch.float32) / self.mask.sum(0).to(torch.float32)
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

    def _all_rows(self, W: Any, b: Any, wts: Any, sel: Any) -> tuple[Any, Any, Any]:
        """Loss (nm,), gradient (d, K·nm) and intercept gradient (K, nm), float64 on the device, of one pass over
        every row of the store; each chunk's argmax goes into ``self.preds`` (the columns ``sel``, or all: None)."""
        torch, K, nm = self.torch, self.K, b.shape[1]
        grad = torch.zeros((W.shape[0], K * nm), dtype=torch.float64, device=self.dev)
        grad_b = torch.zeros((K, nm), dtype=torch.float64, device=self.dev)
        lt = torch.zeros(nm, dtype=torch.float64, device=self.dev)
        for r0 in range(0, len(self.store), self.step):
            sl = slice(r0, r0 + self.step)
            lc, gc, gbc, arg = self._pass(self.store.data[sl], W, b, self.y[sl], wts[sl])
            if sel is None:
                self.preds[sl] = arg
            else:
                self.preds[sl, sel] = arg.to(torch.int32)
            lt += lc
            grad += gc
            grad_b += gbc
        return lt, grad, grad_b

    def _own_model(self, j: int, W: Any, b: Any) -> tuple[Any, Any, Any]:
        """Loss, weight and intercept gradients of model ``j`` over its own rows (device tensors, float64)."""
        torch = self.torch
        A, yj = self.own[j]
        w = torch.full((len(A), 1), 1.0 / self.t_b[j], dtype=torch.float32, device=self.dev)
        gw = torch.zeros((self.d, self.K), dtype=torch.float64, device=self.dev)
        gb = torch.zeros((self.K, 1), dtype=torch.float64, device=self.dev)
        li = torch.zeros(1, dtype=torch.float64, device=self.dev)
        for r0 in range(0, len(A), self.step):
            sl = slice(r0, r0 + self.step)
            lc, gc, gbc, _ = self._pass(A[sl], W, b, yj[sl], w[sl])
            li += lc
            gw += gc
            gb += gbc
        return li, gw, gb

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
            parts = []
            if self.resident:  # every model's weights in one upload (one from pageable memory per model would wait)
                Ws = self.store.upload(np.ascontiguousarray(theta[:, :d, :], dtype=np.float32))
                bs = self.store.upload(np.ascontiguousarray(theta[:, d, :], dtype=np.float32))
            for i, j in enumerate(sel):
                if self.resident:  # kept on the device: one transfer for the whole block below
                    li, gw, gb = self._own_model(int(j), Ws[i], bs[i][:, None])
                    parts.append(torch.cat([li, gw.reshape(-1), gb.reshape(-1)]))
                    continue
                W = torch.from_numpy(np.ascontiguousarray(theta[i, :d, :], dtype=np.float32)).to(self.dev)
                b = torch.from_numpy(theta[i, d, :].astype(np.float32)[:, None]).to(self.dev)
                li, gw, gb = self._own_model(int(j), W, b)
                loss[i] += float(li.item())
                g[i, :d, :] = gw.cpu().numpy() + r[i] * Wd[i]
                g[i, d, :] = gb.cpu().numpy()[:, 0]
            if self.resident:
                host = torch.stack(parts).cpu().numpy()  # (nm, 1 + d·K + K)
                for i in range(nm):
                    loss[i] += float(host[i, 0])
                    g[i, :d, :] = host[i, 1 : 1 + d * K].reshape(d, K) + r[i] * Wd[i]
                    g[i, d, :] = host[i, 1 + d * K :]
            return loss, g
        W = torch.from_numpy(np.ascontiguousarray(Wd.transpose(1, 2, 0).reshape(d, K * nm), dtype=np.float32))
        W = W.to(self.dev)
        b = torch.from_numpy(np.ascontiguousarray(theta[:, d, :].T, dtype=np.float32)).to(self.dev)
        every = self.resident and nm == self.b  # sel is sorted: all models, in order (no gather, no scatter)
        sel_t = None if every else torch.from_numpy(np.asarray(sel)).to(self.dev)
        wts = self.weight if every else self.weight[:, sel_t]
        lt, grad, grad_b = self._all_rows(W, b, wts, None if every else sel_t)
        if self.resident:  # one transfer: loss, gradient and intercept gradient together
            host = torch.cat([lt, grad.reshape(-1), grad_b.reshape(-1)]).cpu().numpy()
            lt_h, grad_h, grad_bh = host[:nm], host[nm : nm + d * K * nm], host[nm + d * K * nm :]
        else:
            lt_h, grad_h, grad_bh = lt.cpu().numpy(), grad.cpu().numpy(), grad_b.cpu().numpy()
        loss += lt_h
        g[:, :d, :] = grad_h.reshape(d, K, nm).transpose(2, 0, 1) + r * Wd
        g[:, d, :] = grad_bh.reshape(K, nm).T
        return loss, g

    def _predict_all(self, W: Any, b: Any) -> Any:
        """Predicted classes of every row for the models of ``W`` (d, K·nm) and ``b`` (K, nm), on the device."""
        for r0 in range(0, len(self.store), self.step):
            A = self.store.data[r0 : r0 + self.step].float()
            z = (A @ W).view(len(A), self.K, b.shape[1]) + b
            self.preds[r0 : r0 + len(A)] = z.argmax(1).to(self.torch.int32)
        return self.preds

    def _device_predictions(self, theta: NDArray[np.float64]) -> Any:
        """Predicted classes of every row for every model, as an int32 tensor on the device."""
        K, d = self.K, self.d
        if self.task.own_rows:
            nm = theta.shape[0]
            W = self.torch.from_numpy(
                np.ascontiguousarray(theta[:, :d, :].transpose(1, 2, 0).reshape(d, K * nm), dtype=np.float32)
            ).to(self.dev)
            return self._predict_all(W, self.torch.from_numpy(np.ascontiguousarray(theta[:, d, :].T,
                                                                                   dtype=np.float32)).to(self.dev))
        return self.preds

    def predictions(self, theta: NDArray[np.float64]) -> Any:
        """Predictions at ``theta``: host integers (classic), or the device tensor (``resident``: they stay)."""
        preds = self._device_predictions(theta)
        return preds if self.resident else host_predictions(preds, self.K)


def host_predictions(preds: Any, n_classes: int) -> NDArray[np.integer[Any]]:
    """Device predictions (or host ones) as the host's compact integer array (:func:`pred_dtype`)."""
    host = preds if isinstance(preds, np.ndarray) else preds.cpu().numpy()
    return np.asarray(host).astype(pred_dtype(n_classes), copy=False)


def heldout_counts(torch: Any, preds: Any, y: Any, mask: Any) -> tuple[Any, Any]:
    """Per row: how many models that held it out predicted its label, and how many held it out (int32 device
    tensors) — the phase's scores without bringing the (rows × models) predictions to the host."""
    held = ~mask
    correct = ((preds == y[:, None].to(preds.dtype)) & held).sum(1, dtype=torch.int32)
    return correct, held.sum(1, dtype=torch.int32)


def block_counts(results: list[BlockResult]) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
    """The phase's counts per row (correct, held out), added up over the blocks on the device."""
    correct, held = results[0].counts  # type: ignore[misc]
    for r in results[1:]:
        correct, held = correct + r.counts[0], held + r.counts[1]  # type: ignore[index]
    return correct.cpu().numpy().astype(np.int32), held.cpu().numpy().astype(np.int32)


def fit_block_torch(store: TorchFeatureStore, task: BlockTask, resident: bool = False,
                    lbfgs_on_device: bool = False) -> BlockResult:
    """Fit one block of partitions with the data passes on ``store``'s device (see the module docstring for the
    two modes)."""
    t0 = time.perf_counter()
    store.select(task.rows)
    with store.torch.no_grad():
        if lbfgs_on_device:
            ops: Any = _DeviceOps(store, task)
            setup = time.perf_counter() - t0
            res = run_block_device(ops, task)
        else:
            ops = _TorchBlockOps(store, task, resident=resident)
            setup = time.perf_counter() - t0
            res = run_block(ops, task)
        if resident or lbfgs_on_device:  # the phase's scores, where its predictions are
            mask = getattr(ops, "mask", None)
            res.counts = heldout_counts(store.torch, res.preds, ops.y, store.upload(task.mask) if mask is None
                                        else mask)
    res.seconds["setup"] = setup
    return res


# ------------------------------------------------------------------------------------ L-BFGS on the device


class _DeviceOps(_TorchBlockOps):
    """:class:`_TorchBlockOps` with ``theta``, the objective and the gradient as float64 device tensors, for
    :func:`run_block_device` (nothing but the final solution and the counts cross to the host)."""

    def __init__(self, store: TorchFeatureStore, task: BlockTask) -> None:
        super().__init__(store, task, resident=True)
        self.reg = store.upload(task.reg)

    def loss_grad(self, theta: Any, sel: Any) -> tuple[Any, Any]:
        torch = self.torch
        K, d = self.K, self.d
        nm = len(sel)
        Wd = theta[:, :d, :]
        r = self.reg[sel, :d, None]
        loss = 0.5 * (r * Wd * Wd).sum((1, 2))
        g = torch.empty_like(theta)
        if self.task.own_rows:
            lis, gws, gbs = [], [], []
            for i, j in enumerate(sel.tolist()):  # one transfer of the model numbers, none per model
                li, gw, gb = self._own_model(j, theta[i, :d, :].float(), theta[i, d, :].float()[:, None])
                lis.append(li)
                gws.append(gw)
                gbs.append(gb[:, 0])
            g[:, :d, :] = torch.stack(gws) + r * Wd
            g[:, d, :] = torch.stack(gbs)
            return loss + torch.cat(lis), g
        W = Wd.permute(1, 2, 0).reshape(d, K * nm).float()
        b = theta[:, d, :].T.float().contiguous()
        every = nm == self.b  # sel is sorted: all models, in order
        wts = self.weight if every else self.weight[:, sel]
        lt, grad, grad_b = self._all_rows(W, b, wts, None if every else sel)
        g[:, :d, :] = grad.view(d, K, nm).permute(2, 0, 1) + r * Wd
        g[:, d, :] = grad_b.T
        return loss + lt, g

    def predictions(self, theta: Any) -> Any:
        K, d = self.K, self.d
        if self.task.own_rows:
            W = theta[:, :d, :].permute(1, 2, 0).reshape(d, K * theta.shape[0]).float()
            return self._predict_all(W, theta[:, d, :].T.float().contiguous())
        return self.preds


class _DeviceLbfgs:
    """:class:`aflite.core.lbfgs.LbfgsState` in float64 on the device: the same ring buffers, update rule and
    two-loop recursion, without a transfer (the recursion runs over every slot; an empty slot is a no-op)."""

    def __init__(self, torch: Any, m: int, P: int, memory: int, dev: Any) -> None:
        f64 = torch.float64
        self.torch = torch
        self.S = torch.zeros((memory, m, P), dtype=f64, device=dev)
        self.Y = torch.zeros((memory, m, P), dtype=f64, device=dev)
        self.rho = torch.zeros((memory, m), dtype=f64, device=dev)
        self.count = torch.zeros(m, dtype=torch.int64, device=dev)
        self.memory = memory
        self.passes = 0

    def seed(self, S: Any, Y: Any) -> None:
        m = self.S.shape[1]
        every = self.torch.arange(m, device=self.S.device)
        for s, y in zip(S[-self.memory :], Y[-self.memory :], strict=True):
            self.push(every, s.expand(m, -1), y.expand(m, -1))

    def reset(self, idx: Any) -> None:
        self.rho[:, idx] = 0.0
        self.S[:, idx] = 0.0
        self.Y[:, idx] = 0.0

    def push(self, idx: Any, s: Any, y: Any) -> None:
        torch = self.torch
        sy = (s * y).sum(1)
        ok = sy > 1e-12 * torch.linalg.vector_norm(s, dim=1) * torch.linalg.vector_norm(y, dim=1)
        slot = self.count[idx] % self.memory
        self.S[slot, idx] = s
        self.Y[slot, idx] = y
        self.rho[slot, idx] = torch.where(ok, 1.0 / torch.where(ok, sy, 1.0), 0.0)
        self.count[idx] += 1

    def direction(self, idx: Any, g: Any, precond: Any) -> Any:
        torch = self.torch
        mem = self.memory
        q = g.clone()
        cnt = self.count[idx]
        n_valid = torch.clamp(cnt, max=mem)
        slots = [(cnt - 1 - j) % mem for j in range(mem)]  # newest first, per model
        alphas = []
        for j, slot in enumerate(slots):
            s, yv = self.S[slot, idx], self.Y[slot, idx]
            a = self.rho[slot, idx] * (j < n_valid) * (s * q).sum(1)
            alphas.append(a)
            q -= a[:, None] * yv
        s, yv = self.S[slots[0], idx], self.Y[slots[0], idx]
        sy = (s * yv).sum(1)
        ydy = (yv * precond * yv).sum(1)
        use = (cnt > 0) & (self.rho[slots[0], idx] > 0) & (ydy > 0)
        gamma = torch.where(use, sy / torch.where(use, ydy, 1.0), 1.0)
        r = gamma[:, None] * precond * q
        for j in reversed(range(mem)):
            slot = slots[j]
            s, yv = self.S[slot, idx], self.Y[slot, idx]
            beta = self.rho[slot, idx] * (j < n_valid) * (yv * r).sum(1)
            r += s * (alphas[j] - beta)[:, None]
        return r

    def newest_pairs(self, model: int) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
        cnt = int(self.count[model])
        n = min(cnt, self.memory)
        slots = [(cnt - n + j) % self.memory for j in range(n)]
        rho = self.rho[:, model].cpu().numpy()
        keep = [k for k in slots if rho[k] > 0]
        if not keep:
            return None
        return self.S[keep, model].cpu().numpy(), self.Y[keep, model].cpu().numpy()


def run_block_device(ops: _DeviceOps, task: BlockTask) -> BlockResult:
    """:func:`aflite.core.solver.run_block` with every array on the device: the same batched, diagonally
    preconditioned L-BFGS (each model its own Armijo line search, memory and stopping rule). The host waits on
    the device only to learn which models are still running (a few bytes, once per step and per line-search
    trial)."""
    torch = ops.torch
    t0 = time.perf_counter()
    f64 = torch.float64
    dev = ops.dev
    theta = ops.store.upload(task.theta0)
    m, d1, K = theta.shape
    P = d1 * K
    precond = (1.0 / (0.25 + ops.reg)).repeat_interleave(K, dim=1)  # (m, P), as np.repeat(..., K, axis=1)
    state = _DeviceLbfgs(torch, m, P, task.memory, dev)
    if task.pairs is not None and task.pairs[0].shape[1:] == (P,):
        state.seed(ops.store.upload(task.pairs[0]), ops.store.upload(task.pairs[1]))
    f, g = ops.loss_grad(theta, torch.arange(m, device=dev))
    state.passes += 1
    iters = torch.zeros(m, dtype=torch.int64, device=dev)

    def conv(gr: Any) -> Any:
        return gr.reshape(len(gr), -1).abs().amax(1) <= task.tol

    active = ~conv(g)
    while True:
        idx = torch.nonzero(active).squeeze(1)
        n_i = int(idx.numel())
        if n_i == 0:
            break
        gi = g[idx].reshape(n_i, P)
        pre = precond[idx]
        direction = -state.direction(idx, gi, pre)
        gd = (gi * direction).sum(1)
        bad = gd >= 0  # not a descent direction (numerical trouble): restart from the preconditioned gradient
        if bool(bad.any()):
            state.reset(idx[bad])
            direction[bad] = -pre[bad] * gi[bad]
            gd[bad] = (gi[bad] * direction[bad]).sum(1)
        alpha = torch.ones(n_i, dtype=f64, device=dev)
        pending = torch.arange(n_i, device=dev)
        new_theta = theta[idx].clone()
        new_f = torch.empty(n_i, dtype=f64, device=dev)
        new_g = torch.empty((n_i, d1, K), dtype=f64, device=dev)
        for _ in range(30):  # backtracking (Armijo) line search, only re-evaluating models that failed
            sel = idx[pending]
            trial = theta[sel] + (alpha[pending, None] * direction[pending]).reshape(len(sel), d1, K)
            ft, gt = ops.loss_grad(trial, sel)
            state.passes += 1
            ok = ft <= f[sel] + 1e-4 * alpha[pending] * gd[pending]
            ok |= ~torch.isfinite(f[sel])
            done = pending[ok]
            new_theta[done], new_f[done], new_g[done] = trial[ok], ft[ok], gt[ok]
            pending = pending[~ok]
            if pending.numel() == 0:
                break
            alpha[pending] *= 0.5
        failed = pending.numel() > 0
        if failed:  # line search failed: keep the old point, stop those models
            kept = idx[pending]
            new_theta[pending], new_f[pending], new_g[pending] = theta[kept], f[kept], g[kept]
            if not (task.own_rows or task.chunked):
                ops.loss_grad(theta[kept], kept)  # re-record predictions at the kept point
        state.push(idx, (new_theta - theta[idx]).reshape(n_i, P), (new_g - g[idx]).reshape(n_i, P))
        f_old = f[idx]
        theta[idx], f[idx], g[idx] = new_theta, new_f, new_g
        iters[idx] += 1
        stop = conv(g[idx]) | (iters[idx] >= task.max_iter)
        stop |= (f_old - new_f) <= 1e-12 * torch.clamp(new_f.abs(), min=1.0)
        if failed:
            stop[pending] = True
        active[idx[stop]] = False
    preds = ops.predictions(theta)
    res = BlockResult(theta.cpu().numpy(), preds, iters.cpu().numpy(), int(conv(g).sum()), state.passes,
                      state.newest_pairs(0), {})
    res.seconds["device_lbfgs"] = time.perf_counter() - t0
    return res
