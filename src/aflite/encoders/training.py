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
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from aflite.atomic import atomic_open
from aflite.errors import InputError, ParameterError

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


def seeded(seed: int) -> None:
    """Seed torch's generator (head initialisation, dropout); call before building the encoder and head."""
    import torch

    torch.manual_seed(int(seed))


def make_head(torch: Any, dim: int, n_classes: int, dropout: float, device: str) -> Any:
    """Linear head over the pooled representation, behind dropout when ``dropout`` > 0."""
    lin = torch.nn.Linear(int(dim), int(n_classes))
    head = lin if dropout <= 0 else torch.nn.Sequential(torch.nn.Dropout(dropout), lin)
    return head.to(device)


def train(
    model: Any,
    batch_loss: Callable[[np.ndarray], Any],
    n: int,
    cfg: TrainConfig,
    *,
    desc: str = "fine-tuning",
    show_progress: bool = True,
) -> TrainResult:
    """Optimise ``model``'s parameters for ``cfg.total_steps(n)`` steps; ``batch_loss(rows)`` returns the loss
    of one batch of row indices into the n training rows. ``model`` is left in eval mode."""
    import torch

    cfg.check()
    if n < 1:
        raise InputError("no rows to fine-tune on")
    total = cfg.total_steps(n)
    named = [(k, p) for k, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in named]
    if cfg.decay_norm_bias:
        groups: list[dict[str, Any]] = [{"params": params, "weight_decay": cfg.weight_decay}]
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

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    rng = np.random.default_rng(list(cfg.shuffle_seed) if len(cfg.shuffle_seed) > 1 else cfg.shuffle_seed[0])
    losses: list[float] = []
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="step", disable=not show_progress, dynamic_ncols=True)
    model.train()

    def one(idx: np.ndarray) -> None:
        loss = batch_loss(idx)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(params, cfg.clip_norm)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        bar.update(1)
        bar.set_postfix(loss=f"{losses[-1]:.3f}")

    try:
        if cfg.sampling == "stream":
            perm, pos = rng.permutation(n), 0
            for _ in range(total):
                if pos + cfg.batch_size > n:
                    perm, pos = rng.permutation(n), 0
                one(perm[pos : pos + cfg.batch_size])
                pos += cfg.batch_size
        else:
            while len(losses) < total:
                perm = rng.permutation(n)
                for start in range(0, n, cfg.batch_size):
                    if len(losses) >= total:
                        break
                    one(perm[start : start + cfg.batch_size])
    finally:
        bar.close()
        model.eval()
    return TrainResult(len(losses), losses)


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
    """Fine-tune ``encoder`` (see :class:`aflite.encoders.Encoder`) end to end with a new linear head on
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

    def batch_loss(idx: np.ndarray) -> Any:
        logits = head(encoder.pooled(encoder.collate([items[i] for i in idx])))
        return torch.nn.functional.cross_entropy(logits, labels[torch.from_numpy(idx).to(encoder.device)])

    result = train(model, batch_loss, len(items), cfg, desc=desc, show_progress=show_progress)
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
