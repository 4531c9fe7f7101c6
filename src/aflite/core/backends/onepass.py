"""The filter's one-pass ensemble on a PyTorch device: every pass over the rows serves every model of the block.

:func:`aflite.core.backends.torch.run_block_device` runs its models in lockstep: each step waits until every
model's line search has accepted, and each pass evaluates only the models still searching, so it gathers their
columns of the (rows × models) training weights and scatters their predictions back, and the host waits on the
device several times per pass (which models are active, pending, in trouble). Here each pass evaluates *all*
``b`` models at once, each at its own current trial point, with the training masks as per-model row weights (no
gather of rows, weights or predictions): a model whose trial is accepted starts its next step in the next pass
while another still backtracks, and a finished model rides along at its solution until fewer than
:data:`COMPACT_SHARE` of the models still run (then a pass evaluates only those, gathering their columns). The
bookkeeping (directions, curvature pairs, Armijo tests, stopping) is masked arithmetic over all models, so the
host waits on the device once per pass, to learn which models are still running.

Per model the sequence of trial points is :func:`run_block_device`'s (the same direction, the same halving from
α = 1, the same Armijo and stopping rules), so the solutions agree within float32 rounding of the passes (the
products have other column counts). A pass costs the columns of every model while most still run, so it
computes more than the lockstep path and waits less. Which is faster on a GPU is a measurement
(``python benchmarks/bench.py --device cuda``, filter modes ``device_onepass*``; ``benchmarks/device_check.sh``);
it is opt-in
(``FastLogisticEnsemble(device_onepass=True)``) until then: on ``torch-cpu``, which waits for nothing, it was
slower (docs/measured/2026-11-28-g4-onepass-noise-floor.md).
"""

from __future__ import annotations

import time
from typing import Any

from aflite.core.backends.torch import TorchFeatureStore, _DeviceLbfgs, _DeviceOps, heldout_counts
from aflite.core.blocks import BlockResult, BlockTask

__all__ = ["fit_block_onepass", "run_block_onepass"]

ARMIJO = 1e-4
# below this share of the block's models still running, a pass evaluates only those (their columns gathered, as
# the lockstep path does): all-model passes cost 2.6× the lockstep path on torch-cpu when most models had finished
COMPACT_SHARE = 0.5
MAX_HALVINGS = 30  # as run_block_device's line search: a model whose 30th halving fails stops at its last point


def _masked_push(state: _DeviceLbfgs, take: Any, s: Any, y: Any) -> None:
    """:meth:`_DeviceLbfgs.push` for the models where ``take`` (booleans over all models) is True, with no
    index list (no host wait): the others' slots and counts stay as they were."""
    torch = state.torch
    m = take.shape[0]
    every = torch.arange(m, device=take.device)
    sy = (s * y).sum(1)
    ok = sy > 1e-12 * torch.linalg.vector_norm(s, dim=1) * torch.linalg.vector_norm(y, dim=1)
    slot = state.count % state.memory
    t = take[:, None]
    state.S[slot, every] = torch.where(t, s, state.S[slot, every])
    state.Y[slot, every] = torch.where(t, y, state.Y[slot, every])
    rho = torch.where(ok, 1.0 / torch.where(ok, sy, 1.0), 0.0)
    state.rho[slot, every] = torch.where(take, rho, state.rho[slot, every])
    state.count += take.to(state.count.dtype)


def _masked_reset(state: _DeviceLbfgs, which: Any) -> None:
    """:meth:`_DeviceLbfgs.reset` of the models where ``which`` is True, as arithmetic (no index list)."""
    keep = (~which).to(state.S.dtype)
    state.rho *= keep[None, :]
    state.S *= keep[None, :, None]
    state.Y *= keep[None, :, None]


def run_block_onepass(ops: _DeviceOps, task: BlockTask) -> BlockResult:
    """Fit one block's models with one pass over the rows per evaluation, serving all of them (module
    docstring); the same per-model L-BFGS as :func:`run_block_device`."""
    torch = ops.torch
    t0 = time.perf_counter()
    dev = ops.dev
    theta = ops.store.upload(task.theta0)
    m, d1, K = theta.shape
    P = d1 * K
    every = torch.arange(m, device=dev)
    precond = (1.0 / (0.25 + ops.reg)).repeat_interleave(K, dim=1)
    state = _DeviceLbfgs(torch, m, P, task.memory, dev)
    if task.pairs is not None and task.pairs[0].shape[1:] == (P,):
        state.seed(ops.store.upload(task.pairs[0]), ops.store.upload(task.pairs[1]))
    f, g = ops.loss_grad(theta, every)
    state.passes += 1

    def conv(gr: Any) -> Any:
        return gr.reshape(m, -1).abs().amax(1) <= task.tol

    iters = torch.zeros(m, dtype=torch.int64, device=dev)
    halvings = torch.zeros(m, dtype=torch.int64, device=dev)
    alpha = torch.ones(m, dtype=torch.float64, device=dev)
    direction = torch.zeros((m, P), dtype=torch.float64, device=dev)
    gd = torch.zeros(m, dtype=torch.float64, device=dev)
    active = ~conv(g)
    fresh = active.clone()  # models that need a new direction (their last trial was accepted)
    failed_any = torch.zeros((), dtype=torch.bool, device=dev)
    while True:
        running = torch.nonzero(active).squeeze(1)  # the one host wait per pass
        n_run = int(running.numel())
        if n_run == 0:
            break
        gf = g.reshape(m, P)
        new_dir = -state.direction(every, gf, precond)
        new_gd = (gf * new_dir).sum(1)
        bad = fresh & (new_gd >= 0)  # not a descent direction: restart from the preconditioned gradient
        _masked_reset(state, bad)
        new_dir = torch.where(bad[:, None], -precond * gf, new_dir)
        new_gd = torch.where(bad, (gf * new_dir).sum(1), new_gd)
        direction = torch.where(fresh[:, None], new_dir, direction)
        gd = torch.where(fresh, new_gd, gd)
        alpha = torch.where(fresh, 1.0, alpha)
        halvings = torch.where(fresh, 0, halvings)
        step = torch.where(active, alpha, 0.0)  # finished models are evaluated at their solution
        trial = theta + (step[:, None] * direction).reshape(m, d1, K)
        if n_run > COMPACT_SHARE * m:  # most models still run: all of them, no gather
            ft, gt = ops.loss_grad(trial, every)
        else:  # few left: their columns only (the finished ones' results would be thrown away)
            ft_r, gt_r = ops.loss_grad(trial[running], running)
            ft, gt = f.clone(), g.clone()
            ft[running], gt[running] = ft_r, gt_r
        state.passes += 1
        ok = active & ((ft <= f + ARMIJO * alpha * gd) | ~torch.isfinite(f))
        _masked_push(state, ok, (trial - theta).reshape(m, P), (gt - g).reshape(m, P))
        f_old = f
        theta = torch.where(ok[:, None, None], trial, theta)
        f = torch.where(ok, ft, f)
        g = torch.where(ok[:, None, None], gt, g)
        iters += ok.to(iters.dtype)
        stop = conv(g) | (iters >= task.max_iter) | ((f_old - f) <= 1e-12 * torch.clamp(f.abs(), min=1.0))
        missed = active & ~ok
        halvings += missed.to(halvings.dtype)
        alpha = torch.where(missed, alpha * 0.5, alpha)
        dead = missed & (halvings >= MAX_HALVINGS)  # line search failed: keep the old point, stop
        iters += dead.to(iters.dtype)
        failed_any |= dead.any()
        active = active & ~((ok & stop) | dead)
        fresh = ok & active
    if bool(failed_any) and not task.own_rows:  # the last pass predicted at a failed trial: at the kept points
        ops.loss_grad(theta, every)
        state.passes += 1
    preds = ops.predictions(theta)
    res = BlockResult(theta.cpu().numpy(), preds, iters.cpu().numpy(), int(conv(g).sum()), state.passes,
                      state.newest_pairs(0), {})
    res.seconds["device_lbfgs"] = time.perf_counter() - t0
    return res


def fit_block_onepass(store: TorchFeatureStore, task: BlockTask) -> BlockResult:
    """:func:`aflite.core.backends.torch.fit_block_torch` with ``lbfgs_on_device`` and one pass per evaluation
    serving every model of the block (:func:`run_block_onepass`); the phase's counts stay on the device."""
    t0 = time.perf_counter()
    store.select(task.rows)
    with store.torch.no_grad():
        ops = _DeviceOps(store, task)
        setup = time.perf_counter() - t0
        res = run_block_onepass(ops, task)
        mask = getattr(ops, "mask", None)
        res.counts = heldout_counts(store.torch, res.preds, ops.y, store.upload(task.mask) if mask is None
                                    else mask)
    res.seconds["setup"] = setup
    return res
