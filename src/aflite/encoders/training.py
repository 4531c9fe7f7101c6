"""The one fine-tuning routine: an encoder + linear head trained with cross-entropy, for every modality and caller.

The warm-up Φ (:class:`aflite.features.WarmupFeaturizer`), ``evaluate``'s fine-tuned model and the audit's
fine-tuned models all call :func:`fit_classifier`; what differs between them is a :class:`TrainConfig`, kept as
named presets (:data:`WARMUP`, :data:`EVALUATE`, :data:`AUDIT`) equal to the loops they replace, so that the
measured tables reproduce: same optimizer, learning-rate schedule, batch order and stopping rule. The warm-up Φ
on images uses :data:`WARMUP_IMAGE` (the same recipe at a learning rate measured for a pretrained CNN).

Batch order: ``sampling="epochs"`` shuffles all rows once per pass and takes consecutive batches (the last one
may be short); ``sampling="stream"`` takes only full batches and reshuffles when fewer than a batch remain. The
shuffling generator is ``numpy.random.default_rng(shuffle_seed)``; torch's generator (head initialisation,
dropout) is seeded with ``seed`` by :func:`seeded` *before* the encoder is built.

Checkpoints (:func:`save_checkpoint` / :func:`load_checkpoint`) are one torch file of plain tensors and lists,
read back with ``weights_only=True`` (never unpickling arbitrary objects).

For a GPU (issue #31; opt-in, **not yet measured on one**): ``precision`` runs the encoder's forward pass under
bfloat16/float16 autocast (the pooled representation, the head and the loss in float32; float16 with a gradient
scaler), ``sync_every`` brings the loss log to the host every that many steps instead of after each (the same
numbers, later: the device runs ahead of the host in between), and ``prefetch`` collates the next batch in a
worker thread while the device trains on this one (the same batches in the same order).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypedDict

import numpy as np

from aflite.atomic import atomic_open
from aflite.device import autocast, check_precision, pin_batch, to_device
from aflite.errors import InputError, ParameterError
from aflite.progress import tqdm  # Jupyter: a widget bar, or none without ipywidgets

log = logging.getLogger(__name__)

_NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")
CHECKPOINT_FORMAT = 1


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """How to fine-tune. ``max_steps`` caps the ``epochs`` × ceil(n / batch_size) steps (required for
    ``stream`` sampling when ``epochs`` should not decide). The learning rate rises linearly over the first
    ``warmup_ratio`` of the steps and then falls linearly to 0 at the last step. Gradients are clipped to
    ``clip_norm`` (None: no clipping). ``decay_norm_bias=False`` exempts biases and norm weights from weight
    decay (the Hugging Face convention)."""

    optimizer: str = "adamw"
    lr: float = 5e-5
    weight_decay: float = 0.01
    decay_norm_bias: bool = True
    eps: float = 1e-8
    warmup_ratio: float = 0.0
    batch_size: int = 32
    epochs: int = 3
    max_steps: int | None = None
    sampling: str = "epochs"
    seed: int = 0
    shuffle_seed: tuple[int, ...] = (0,)
    clip_norm: float | None = 1.0
    head_dropout: float = 0.1
    device: str | None = None
    precision: str = "float32"
    sync_every: int = 1
    prefetch: bool = False

    def check(self) -> None:
        if self.optimizer not in ("adam", "adamw"):
            raise ParameterError(f"optimizer must be 'adam' or 'adamw', got {self.optimizer!r}")
        if not self.lr > 0 or not self.eps > 0:
            raise ParameterError("fine-tuning lr and eps must be > 0")
        if self.batch_size < 1 or self.epochs < 1:
            raise ParameterError("fine-tuning needs batch_size >= 1 and epochs >= 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise ParameterError(f"max_steps must be >= 1, got {self.max_steps}")
        if not 0 <= self.warmup_ratio < 1:
            raise ParameterError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.sampling not in ("epochs", "stream"):
            raise ParameterError(f"sampling must be 'epochs' or 'stream', got {self.sampling!r}")
        if not 0 <= self.head_dropout < 1:
            raise ParameterError(f"head_dropout must be in [0, 1), got {self.head_dropout}")

        check_precision(self.precision)
        if isinstance(self.sync_every, bool) or not isinstance(self.sync_every, int) or self.sync_every < 1:
            raise ParameterError(f"sync_every must be an int >= 1, got {self.sync_every!r}")

    def total_steps(self, n: int) -> int:
        total = math.ceil(n / self.batch_size) * self.epochs
        if self.max_steps is None:
            return total
        # stream sampling runs exactly max_steps (the audit's recipe); epochs sampling stops at whichever is first
        return self.max_steps if self.sampling == "stream" else min(total, self.max_steps)

    def replace(self, **changes: Any) -> TrainConfig:
        return dataclasses.replace(self, **changes)


# The warm-up Φ (features.WarmupFeaturizer): AdamW 5e-5, weight decay 0.01 except biases/norms, 10 % linear
# warm-up then linear decay, batch 32, 3 epochs, dropout 0.1 before the head.
WARMUP = TrainConfig(optimizer="adamw", lr=5e-5, weight_decay=0.01, decay_norm_bias=False, warmup_ratio=0.1,
                     batch_size=32, epochs=3)
# evaluate's fine-tuned model (appendix A.6): Adam 1e-5, eps 1e-8, batch 92, 3 epochs, linear decay from the start.
EVALUATE = TrainConfig(optimizer="adam", lr=1e-5, weight_decay=0.0, eps=1e-8, batch_size=92, epochs=3)
# the audit's fine-tuned models (TRA): 300 AdamW steps of full batches of 32, linear decay, no dropout.
AUDIT = TrainConfig(optimizer="adamw", lr=5e-5, weight_decay=0.01, batch_size=32, epochs=1, max_steps=300,
                    sampling="stream", head_dropout=0.0)
WARMUP_IMAGE = WARMUP.replace(lr=1e-3)
"""The warm-up Φ on images: the ``WARMUP`` recipe at lr 1e-3 (text keeps 5e-5). A pretrained CNN with a new head
needs a larger step than a transformer: EfficientNet-Lite0 on 400 coloured-MNIST digits at 112 px (39 steps,
seeds 0-2) ended at training loss 2.04 with lr 5e-5 (chance: ln 10 = 2.30; held-out accuracy of the fine-tuned
classifier 0.21) and 0.21 with 1e-3 (held-out 0.83; 3e-3 was as good on average but varied more across seeds),
and a linear probe on the fine-tuned features did better too (0.95 vs 0.92); at 224 px, held-out 0.28 vs 0.80.
docs/measured/images_warmup_lr.json and _224.json (script: docs/measured/images_warmup_lr.py)."""


@dataclasses.dataclass
class TrainResult:
    steps: int
    losses: list[float]

    @property
    def final_loss(self) -> float | None:
        return self.losses[-1] if self.losses else None


class CurvePoints(TypedDict):
    """A binned training-loss curve: the last step of each bin (1-based) and the bin's mean loss."""

    step: list[int]
    loss: list[float | None]


class LossCurve(CurvePoints):
    """:func:`loss_summary`: the curve and the mean loss of its first and last ``window`` steps."""

    start: float | None
    end: float | None
    window: int


def loss_summary(losses: Sequence[float], max_points: int = 200) -> LossCurve:
    """A training-loss log made small enough for results.json and a plot: ``step`` (1-based, the last step of
    each bin) and ``loss`` (the bin's mean) for at most ``max_points`` bins, and ``start`` / ``end``, the mean of
    the first and last ``window`` steps (``window`` = a tenth of the steps, 1 to 10): single batches are too
    noisy to say whether the loss fell."""
    v = np.asarray(losses, dtype=np.float64)
    n = len(v)
    if n == 0:
        return {"step": [], "loss": [], "start": None, "end": None, "window": 0}
    edges = np.unique(np.linspace(0, n, min(n, max_points) + 1).round().astype(int))
    window = max(1, min(10, n // 10))

    def mean(x: np.ndarray) -> float | None:
        m = float(np.mean(x))
        return round(m, 5) if math.isfinite(m) else None

    return {"step": [int(e) for e in edges[1:]], "loss": [mean(v[a:b]) for a, b in zip(edges[:-1], edges[1:],
                                                                                         strict=True)],
            "start": mean(v[:window]), "end": mean(v[-window:]), "window": window}


def seeded(seed: int) -> None:
    """Seed torch's generator (head initialisation, dropout); call before building the encoder and head."""
    import torch

    torch.manual_seed(int(seed))


def make_head(torch: Any, dim: int, n_classes: int, dropout: float, device: str) -> Any:
    """Linear head over the pooled representation, behind dropout when ``dropout`` > 0."""
    lin = torch.nn.Linear(int(dim), int(n_classes))
    head = lin if dropout <= 0 else torch.nn.Sequential(torch.nn.Dropout(dropout), lin)
    return head.to(device)


def batch_schedule(n: int, cfg: TrainConfig) -> list[np.ndarray]:
    """The row indices of every step, in order (see the module docstring for the two samplings): drawn from
    ``numpy.random.default_rng(shuffle_seed)`` exactly as the loop that consumed them one at a time did."""
    total = cfg.total_steps(n)
    rng = np.random.default_rng(list(cfg.shuffle_seed) if len(cfg.shuffle_seed) > 1 else cfg.shuffle_seed[0])
    out: list[np.ndarray] = []
    if cfg.sampling == "stream":
        perm, pos = rng.permutation(n), 0
        for _ in range(total):
            if pos + cfg.batch_size > n:
                perm, pos = rng.permutation(n), 0
            out.append(perm[pos : pos + cfg.batch_size])
            pos += cfg.batch_size
        return out
    while len(out) < total:
        perm = rng.permutation(n)
        for start in range(0, n, cfg.batch_size):
            if len(out) >= total:
                break
            out.append(perm[start : start + cfg.batch_size])
    return out


def train(
    model: Any,
    batch_loss: Callable[..., Any],
    n: int,
    cfg: TrainConfig,
    *,
    desc: str = "fine-tuning",
    show_progress: bool = True,
    prepare: Callable[[np.ndarray], Any] | None = None,
) -> TrainResult:
    """Optimise ``model``'s parameters for ``cfg.total_steps(n)`` steps; ``batch_loss(rows)`` returns the loss
    of one batch of row indices into the n training rows. With ``prepare``, ``batch_loss(rows, prepare(rows))``:
    ``prepare`` (host work, e.g. padding a batch) runs in a worker thread one step ahead when ``cfg.prefetch``.
    ``model`` is left in eval mode."""
    import torch

    cfg.check()
    if n < 1:
        raise InputError("no rows to fine-tune on")
    total = cfg.total_steps(n)
    params, opt, sched = _optimizer(torch, model, cfg, total)
    steps = batch_schedule(n, cfg)
    losses: list[float] = []
    waiting: list[Any] = []  # losses still on the device (sync_every > 1)
    scaler = None
    if cfg.precision == "float16":  # float16 gradients underflow without a loss scale; bfloat16 needs none
        device_type = next((p.device.type for p in params), "cpu")
        scaler = torch.amp.GradScaler(device_type)

    bar = tqdm(total=total, desc=desc, unit="step", disable=not show_progress, dynamic_ncols=True)
    model.train()

    def collect() -> None:
        if waiting:
            losses.extend(float(v) for v in torch.stack(waiting).cpu().tolist())  # one wait for many steps
            waiting.clear()
            bar.set_postfix(loss=f"{losses[-1]:.3f}")

    def one(idx: np.ndarray, prepared: Any) -> None:
        loss = batch_loss(idx) if prepare is None else batch_loss(idx, prepared)
        opt.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
        else:
            loss.backward()
        if cfg.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(params, cfg.clip_norm)
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        sched.step()
        if cfg.sync_every == 1:
            losses.append(float(loss.detach()))
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
        else:
            waiting.append(loss.detach().float())
            if len(waiting) >= cfg.sync_every:
                collect()
        bar.update(1)

    try:
        _run_steps(steps, one, prepare, cfg.prefetch)
        collect()
    finally:
        bar.close()
        model.eval()
    return TrainResult(len(losses), losses)


class ParamGroup(TypedDict):
    """One of the optimizer's parameter groups: its tensors and their weight decay."""

    params: list[Any]  # torch parameters
    weight_decay: float


def _optimizer(torch: Any, model: Any, cfg: TrainConfig, total: int) -> tuple[list[Any], Any, Any]:
    """The trained parameters, the optimizer (Adam or AdamW; norms and biases without weight decay unless
    ``decay_norm_bias``) and its schedule: a linear warm-up over ``warmup_ratio`` of the steps, then linear decay."""
    named = [(k, p) for k, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in named]
    if cfg.decay_norm_bias:
        groups: list[ParamGroup] = [{"params": params, "weight_decay": cfg.weight_decay}]
    else:
        groups = [
            {"params": [p for k, p in named if not k.endswith(_NO_DECAY)], "weight_decay": cfg.weight_decay},
            {"params": [p for k, p in named if k.endswith(_NO_DECAY)], "weight_decay": 0.0},
        ]
    if cfg.optimizer == "adamw":
        opt: Any = torch.optim.AdamW(groups, lr=cfg.lr, eps=cfg.eps)
    else:
        opt = torch.optim.Adam(groups, lr=cfg.lr, eps=cfg.eps)
    warm = int(cfg.warmup_ratio * total)

    def schedule(step: int) -> float:
        if step < warm:
            return (step + 1) / (warm + 1)
        return max(0.0, (total - step) / max(1, total - warm))

    return params, opt, torch.optim.lr_scheduler.LambdaLR(opt, schedule)


def _run_steps(steps: list[np.ndarray], one: Callable[[np.ndarray, Any], None],
               prepare: Callable[[np.ndarray], Any] | None, prefetch: bool) -> None:
    """Every step in order; with ``prepare`` and ``prefetch``, the next batch is prepared in a worker thread while
    the device runs this one."""
    if prepare is None or not prefetch or not steps:
        for idx in steps:
            one(idx, None if prepare is None else prepare(idx))
        return
    pool = ThreadPoolExecutor(1)
    try:
        nxt = pool.submit(prepare, steps[0])
        for i, idx in enumerate(steps):
            prepared = nxt.result()
            if i + 1 < len(steps):
                nxt = pool.submit(prepare, steps[i + 1])  # the next batch, while the device runs this one
            one(idx, prepared)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def fit_classifier(
    encoder: Any,
    items: list[Any],
    y_idx: np.ndarray,
    n_classes: int,
    cfg: TrainConfig,
    *,
    desc: str = "fine-tuning",
    show_progress: bool = True,
) -> tuple[Any, TrainResult]:
    """Fine-tune ``encoder`` (an encoder of :mod:`aflite.encoders`) end to end with a new linear head on
    ``items`` (prepared by the encoder) and integer labels ``y_idx``. Returns (head, result); the encoder's
    module is updated in place. Call :func:`seeded` before building the encoder to fix the head's initial
    weights and the dropout masks."""
    torch = encoder.torch
    y_idx = np.asarray(y_idx, dtype=np.int64)
    if len(y_idx) != len(items):
        raise InputError(f"{len(items)} inputs but {len(y_idx)} labels")
    head = make_head(torch, encoder.dim, n_classes, cfg.head_dropout, encoder.device)
    model = torch.nn.ModuleDict({"encoder": encoder.module, "head": head})
    labels = torch.from_numpy(y_idx).to(encoder.device)
    if cfg.precision == "float32" and not cfg.prefetch:  # the loop as measured (bit for bit)
        def batch_loss(idx: np.ndarray) -> Any:
            logits = head(encoder.pooled(encoder.collate([items[i] for i in idx])))
            return torch.nn.functional.cross_entropy(logits, labels[torch.from_numpy(idx).to(encoder.device)])

        result = train(model, batch_loss, len(items), cfg, desc=desc, show_progress=show_progress)
        return head, result

    host_collate = getattr(encoder, "collate_host", None)
    cuda = torch.device(encoder.device).type == "cuda"

    def prepare(idx: np.ndarray) -> Any:  # host work: padding / decoding (a worker thread with cfg.prefetch)
        batch_items = [items[i] for i in idx]
        rows = torch.from_numpy(np.ascontiguousarray(idx))  # pinned too: an upload from pageable memory waits
        if host_collate is None:  # for the device's queue to drain
            return encoder.collate(batch_items), rows
        batch = host_collate(batch_items)
        return (pin_batch(batch), pin_batch(rows)) if cuda else (batch, rows)

    def batch_loss_mixed(idx: np.ndarray, prepared: Any) -> Any:
        batch, rows = prepared
        batch = to_device(batch, encoder.device) if host_collate is not None else batch
        with autocast(torch, encoder.device, cfg.precision):
            pooled = encoder.pooled(batch)  # float32 (pooled in float32 after the network's forward pass)
        logits = head(pooled.float())
        return torch.nn.functional.cross_entropy(logits, labels[to_device(rows, encoder.device)])

    result = train(model, batch_loss_mixed, len(items), cfg, desc=desc, show_progress=show_progress,
                   prepare=prepare)
    return head, result


def predict_classes(encoder: Any, head: Any, items: list[Any], batch_size: int = 64) -> np.ndarray:
    """Arg-max class indices of ``head(encoder.pooled(...))`` (text batched by length, order kept)."""
    torch = encoder.torch
    n = len(items)
    out = np.empty(n, dtype=np.int64)
    length = getattr(encoder, "length", None)
    order = np.argsort([-length(it) for it in items], kind="stable") if length else np.arange(n)
    encoder.module.eval()
    head.eval()
    with torch.inference_mode():
        for s in range(0, n, batch_size):
            idx = order[s : s + batch_size]
            out[idx] = head(encoder.pooled(encoder.collate([items[i] for i in idx]))).argmax(-1).cpu().numpy()
    return out


def save_checkpoint(path: str | os.PathLike[str], encoder: Any, head: Any | None, classes: Sequence[Any] | np.ndarray,
                    result: TrainResult) -> None:
    """Encoder and head weights, classes and the loss log in one torch file, written atomically."""
    torch = encoder.torch
    state = {"format": CHECKPOINT_FORMAT, "encoder": encoder.module.state_dict(),
             "head": None if head is None else head.state_dict(), "classes": [str(c) for c in classes],
             "steps": int(result.steps), "losses": [float(v) for v in result.losses]}
    with atomic_open(path, "wb") as fh:
        torch.save(state, fh)


def load_checkpoint(path: str | os.PathLike[str], encoder: Any, head: Any | None = None) -> tuple[list[str],
                                                                                                  TrainResult]:
    """Load weights saved by :func:`save_checkpoint` into ``encoder`` (and ``head``); returns (classes, result)."""
    state = encoder.torch.load(str(path), map_location=encoder.device, weights_only=True)
    if not isinstance(state, dict) or "encoder" not in state:
        raise InputError(f"{path}: not an aflite fine-tuning checkpoint")
    encoder.module.load_state_dict(state["encoder"])
    if head is not None:
        if state.get("head") is None:
            raise InputError(f"{path}: the checkpoint has no classification head")
        head.load_state_dict(state["head"])
        head.eval()
    encoder.module.eval()
    losses = state.get("losses") or []
    return [str(c) for c in state.get("classes", [])], TrainResult(int(state.get("steps", 0)),
                                                                   [float(v) for v in losses])
