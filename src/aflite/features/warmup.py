"""``warmup``: the paper's Φ: fine-tune an encoder on a warm-up slice, embed the remaining rows."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypedDict

import numpy as np

from aflite.data.images import files_fingerprint
from aflite.device import import_torch, resolve_model_path, torch_device
from aflite.encoders import TextEncoder, embed_items, embed_pairs, training
from aflite.encoders.images import IMAGE_MODELS, ImageEncoder
from aflite.encoders.onnx_images import calibration_sample, image_runner
from aflite.encoders.onnx_text import CPU_DEFAULT, text_runner
from aflite.encoders.training import WARMUP, WARMUP_IMAGE, TrainResult, load_checkpoint, save_checkpoint
from aflite.errors import InputError, ParameterError
from aflite.features.base import (
    DEFAULT_MAX_LENGTH,
    BackendEncoder,
    Facts,
    FeatureJob,
    PhiInfo,
    cache_identity,
    check_gpu_options,
    embed_pipelined,
    log,
    precision_option,
    progress_bar,
)
from aflite.features.cache import tie, tied
from aflite.hashing import data_fingerprint

if TYPE_CHECKING:  # pragma: no cover
    from tqdm import tqdm as Tqdm


def select_warmup_rows(n: int, warmup_size: int | float, seed: int = 0) -> np.ndarray:
    """Sorted indices of a seeded random warm-up slice; ``warmup_size`` is a count or a fraction in (0, 1)."""
    if isinstance(warmup_size, bool):
        raise ParameterError("warmup_size must be a count or a fraction")
    if isinstance(warmup_size, float) and 0 < warmup_size < 1:
        k = int(round(warmup_size * n))
    elif float(warmup_size) == int(warmup_size) and warmup_size >= 1:
        k = int(warmup_size)
    else:
        raise ParameterError(f"warmup_size must be a count >= 1 or a fraction in (0, 1), got {warmup_size}")
    if k < 2 or k >= n:
        raise ParameterError(f"the warm-up slice must hold at least 2 rows and leave some: {k} of {n} rows")
    return np.sort(np.random.default_rng(seed).choice(n, size=k, replace=False)).astype(np.int64)


class GpuTrainOptions(TypedDict, total=False):
    """The opt-in GPU settings of :class:`aflite.encoders.training.TrainConfig` a warm-up asked for."""

    precision: str
    sync_every: int
    prefetch: bool


def warmup_loss_summary(losses: Sequence[float], n_classes: int) -> PhiInfo:
    """Did the warm-up train Φ? The mean loss of its first and last (up to) 3 steps, chance (ln of the classes)
    and a plain judgement: "fell" when the end is below 80 % of the start, else "barely moved" (none of them when
    the warm-up took no step)."""
    if not losses:
        return PhiInfo()
    w = max(1, min(3, len(losses) // 3 or 1))
    start, end = float(np.mean(losses[:w])), float(np.mean(losses[-w:]))
    return PhiInfo(warmup_loss_start=round(start, 4), warmup_loss_end=round(end, 4),
                   warmup_loss_chance=round(math.log(max(n_classes, 2)), 4),
                   warmup_loss_judgement="fell" if end < 0.8 * start else "barely moved")


class WarmupFeaturizer(BackendEncoder):
    """The paper's warm-up Φ: fine-tune an encoder + linear head, then embed with the fine-tuned encoder.

    ``fit(texts_a, texts_b, y)`` fine-tunes on exactly the rows given (the caller picks the warm-up slice,
    e.g. with :func:`select_warmup_rows`; :func:`featurize` does this for you and returns the slice).
    ``transform`` returns the mean-pooled last hidden state, the representation the (dropout +) linear head
    reads.

    Defaults: AdamW, lr 5e-5 for text and 1e-3 for images (``lr=None``: the preset's,
    :data:`aflite.encoders.training.WARMUP` / :data:`aflite.encoders.training.WARMUP_IMAGE`; weight decay 0.01, 10%
    linear warm-up then linear decay), batch 32, 3 epochs (the paper's epoch count, appendix A.6),
    max_length 128 while training. The paper used lr 1e-5, 3 epochs, batch 92 for RoBERTa-large on a 55K-row
    warm-up slice (~1,800 steps). A 22M-parameter MiniLM on a slice of a few thousand rows takes only tens
    to a few hundred steps, and small BERT-style models are usually fine-tuned at 3e-5..1e-4: at 1e-5 it
    would barely move from the pretrained features. ``max_steps`` caps optimisation steps; on CPU it defaults
    to ``cpu_max_steps`` (300 steps ~ 9,600 examples) so that a warm-up on a laptop stays within minutes.

    For a GPU (torch backend): ``precision`` ``bfloat16``/``float16`` for fine-tuning and embedding (opt-in
    autocast; pooling, head and loss in float32; part of the cache key), ``token_budget`` (embedding batches by
    padded tokens) and ``pipelined`` (True: batches prepared by worker threads ahead of the device, the loss log
    brought to the host every 50 steps, embeddings in large blocks; None, the default: only the embedding
    pipelined, and only on a CUDA device, as :class:`~aflite.features.minilm.MiniLMFeaturizer`): see
    :mod:`aflite.encoders` and :mod:`aflite.encoders.training`.
    """

    name = "warmup"
    _OUTPUT = ("model_path", "epochs", "lr", "batch_size", "weight_decay", "warmup_ratio", "max_steps",
               "cpu_max_steps", "train_max_length", "max_length", "dropout", "seed")

    @property
    def output_params(self) -> tuple[str, ...]:  # type: ignore[override]
        """The fine-tuning's parameters, with the image model's first for an image warm-up."""
        return self._OUTPUT if self.image_model is None else ("image_model", "image_size", *self._OUTPUT)

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        epochs: int = 3,
        lr: float | None = None,
        batch_size: int = 32,
        weight_decay: float = 0.01,
        warmup_ratio: float = 0.1,
        max_steps: int | None = None,
        cpu_max_steps: int | None = 300,
        train_max_length: int = 128,
        max_length: int = DEFAULT_MAX_LENGTH,
        embed_batch_size: int = 32,
        dropout: float = 0.1,
        seed: int = 0,
        num_threads: int | None = None,
        device: str | None = None,
        show_progress: bool = True,
        image_model: str | None = None,
        image_size: int = 224,
        backend: str | None = None,
        export_dir: str | os.PathLike[str] | None = None,
        precision: str | None = None,
        token_budget: int | None = None,
        pipelined: bool | None = None,
    ) -> None:
        # scikit-learn convention: store the arguments as given; _validate (called by fit) checks them
        self.image_model = image_model
        self.image_size = image_size
        self.model_path = model_path
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.weight_decay = weight_decay
        self.warmup_ratio = warmup_ratio
        self.max_steps = max_steps
        self.cpu_max_steps = cpu_max_steps
        self.train_max_length = train_max_length
        self.max_length = max_length
        self.embed_batch_size = embed_batch_size
        self.dropout = dropout
        self.seed = seed
        self.num_threads = num_threads
        self.device = device
        self.show_progress = show_progress
        self.backend = backend  # how transform embeds after fine-tuning: torch, onnx, onnx-int8 (None: torch)
        self.export_dir = export_dir  # where ONNX exports are cached (featurize sets <cache>/onnx)
        self.precision = precision  # None/float32, bfloat16, float16 (fine-tuning and the torch backend)
        self.token_budget = token_budget
        self.pipelined = pipelined
        self._encoder: Any = None
        self._head: Any = None
        self._runner: Any = None
        self._resolved: str | None = None
        self.classes_: np.ndarray | None = None
        self.steps_: int = 0
        self.train_log_: list[float] = []

    @property
    def reads_images(self) -> bool:
        return self.image_model is not None

    def plan(self, a: list[str], y: Any, warmup_size: int | float,
             warmup_seed: int | None) -> tuple[np.ndarray | None, Facts]:
        """The warm-up slice (``warmup_size`` rows, a count or a fraction, drawn with ``warmup_seed``, default
        ``seed``) and the cache key's labels, slice and (for images) image files."""
        if y is None:
            raise ParameterError("the warmup featurizer needs labels (y)")
        y_arr = np.asarray(y)
        if len(y_arr) != len(a):
            raise InputError(f"{len(a)} rows but {len(y_arr)} labels")
        wseed = self.seed if warmup_seed is None else int(warmup_seed)
        key_facts: Facts = {"labels": data_fingerprint([str(v) for v in y_arr.tolist()], None),
                                 "warmup_size": warmup_size, "warmup_seed": wseed}
        if self.reads_images:
            key_facts["image_files"] = files_fingerprint(a)
        return select_warmup_rows(len(a), warmup_size, wseed), key_facts

    def compute(self, job: FeatureJob, rows: np.ndarray, warmup_rows: np.ndarray | None) -> tuple[Any, PhiInfo]:
        """Fine-tune on the warm-up slice (or load the model a previous call fine-tuned on it: it does not depend
        on the backend that embeds with it), then embed the other rows chunk by chunk."""
        assert warmup_rows is not None
        a, b, y = job.a, job.b, np.asarray(job.y)
        model_file = model_id = None
        if job.cache is not None:
            model_id = cache_identity(a, b, job.name, job.view,
                                      {k: v for k, v in job.options.items() if k != "backend"}, job.key_facts)
            model_file = job.cache / f"{job.name}-{job.view}-{model_id.key[:20]}.warmup.pt"
        if model_file is not None and model_id is not None and tied(model_file, model_id, "warm-up model"):
            self.load(model_file)  # this input's, bytes unchanged
        else:
            self.fit([a[i] for i in warmup_rows], None if b is None else [b[i] for i in warmup_rows], y[warmup_rows])
            if model_file is not None and model_id is not None:
                self.save(model_file)
                tie(model_file, model_id)
        info = dataclasses.replace(warmup_loss_summary(self.train_log_, len(np.unique(y[warmup_rows]))),
                                   warmup_steps=self.steps_, warmup_rows=len(warmup_rows),
                                   warmup_final_loss=self.train_log_[-1] if self.train_log_ else None)
        x = job.run_chunks(self, [a[i] for i in rows], None if b is None else [b[i] for i in rows])
        return x, info

    def _validate(self) -> None:
        """Check the constructor arguments; raised at fit time (or early by :func:`make_featurizer`)."""
        if self.epochs < 1:
            raise ParameterError(f"epochs must be >= 1, got {self.epochs}")
        if self.lr is not None and not self.lr > 0:
            raise ParameterError(f"lr must be > 0, got {self.lr}")
        if self.batch_size < 1 or self.embed_batch_size < 1:
            raise ParameterError("batch sizes must be >= 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise ParameterError(f"max_steps must be >= 1, got {self.max_steps}")
        if not 0 <= self.warmup_ratio < 1:
            raise ParameterError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.image_model is not None and self.image_model not in IMAGE_MODELS:
            raise ParameterError(f"unknown image model {self.image_model!r}; choose one of {', '.join(IMAGE_MODELS)}")
        self._resolved_model_path()
        self.resolved_backend()
        check_gpu_options(self)

    def resolved_option(self, name: str, value: Any) -> Any:
        """The model folder as found, and the preset's learning rate when none is given."""
        if name == "model_path":
            path = self._resolved_model_path()
            return None if path is None else str(path)
        if name == "lr" and value is None:
            return self.preset().lr
        return value

    def resolved_backend(self) -> str:
        """The backend transform embeds with once fine-tuned. Fine-tuning always runs in torch. The default on a
        CPU is minilm's (onnx-int8 with the ``[onnx]`` extra): on a real fine-tune (the bundled SNLI sample) its
        Φ had mean cosine 0.997 to torch's and a kept-set Jaccard of 0.949
        (docs/measured/warmup_backend_agreement.json). An image warm-up stays on torch, as the image encoders do."""
        return self._backend(CPU_DEFAULT if self.image_model is None else "torch")

    def _resolved_model_path(self) -> Path | None:
        """The text model folder (default: the MiniLM wheel's) or the image model folder, if any."""
        if self.image_model is None:
            return resolve_model_path(self.model_path)
        return None if self.model_path is None else Path(self.model_path).expanduser().resolve()

    def _setup(self) -> tuple[Any, Any]:
        torch, transformers = import_torch()
        if self.num_threads is not None:
            torch.set_num_threads(int(self.num_threads))
        return torch, transformers

    def preset(self) -> Any:
        """The :class:`aflite.encoders.training.TrainConfig` preset this featurizer starts from: ``WARMUP_IMAGE`` for an
        image network (a pretrained CNN barely moves at the text learning rate), ``WARMUP`` for text."""
        return WARMUP if self.image_model is None else WARMUP_IMAGE

    def train_config(self, device: str) -> Any:
        """This featurizer's settings as a :class:`aflite.encoders.training.TrainConfig` (its :meth:`preset`, with
        ``lr`` when given)."""
        base = self.preset()
        cap = self.max_steps
        if cap is None and device == "cpu":
            cap = self.cpu_max_steps
        return base.replace(lr=base.lr if self.lr is None else self.lr, batch_size=self.batch_size,
                            epochs=self.epochs, weight_decay=self.weight_decay, warmup_ratio=self.warmup_ratio,
                            max_steps=cap, seed=self.seed, shuffle_seed=(self.seed,), head_dropout=self.dropout,
                            device=device, **self._gpu_train_options())

    def _gpu_train_options(self) -> GpuTrainOptions:
        """The opt-in GPU settings of :class:`aflite.encoders.training.TrainConfig` (none unless asked for: the
        preset's)."""
        out = GpuTrainOptions()
        if precision_option(self):
            out["precision"] = check_gpu_options(self)
        if self.pipelined:  # asked for: None (the default) pipelines only the embedding, on CUDA
            out.update({"sync_every": 50, "prefetch": True})
        return out

    def _new_encoder(self, device: str) -> Any:
        if self.image_model is not None:
            return ImageEncoder(self.image_model, model_path=self._resolved_model_path(), device=device,
                                image_size=self.image_size)
        path = self._resolved_model_path()
        assert path is not None
        return TextEncoder(path, device=device, max_length=self.max_length)

    def _prepare(self, a: list[str], b: list[str] | None, max_length: int) -> list[Any]:
        if self.image_model is not None:
            return list(self._encoder.prepare(a))
        return list(self._encoder.prepare_pairs(a, b, max_length))

    def fit(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None) -> Self:
        self._validate()
        torch, _ = self._setup()
        a = list(texts_a)
        b = None if texts_b is None else list(texts_b)
        if y is None:
            raise ParameterError("the warmup featurizer needs labels y to fine-tune")
        y_arr = np.asarray(y)
        if len(y_arr) != len(a):
            raise InputError(f"{len(a)} texts but {len(y_arr)} labels")
        classes, y_idx = np.unique(y_arr, return_inverse=True)
        if len(classes) < 2:
            raise InputError("the warm-up slice holds a single label; fine-tuning needs at least 2 classes")
        self.classes_ = classes
        device = torch_device(self.device)
        cfg = self.train_config(device)
        planned = math.ceil(len(a) / self.batch_size) * self.epochs
        if cfg.max_steps is not None and planned > cfg.max_steps:
            log.warning("warm-up fine-tuning capped at %d steps (%d planned: %d epochs x %d)", cfg.max_steps,
                        planned, self.epochs, math.ceil(len(a) / self.batch_size))
        training.seeded(self.seed)
        self._encoder = self._new_encoder(device)
        items = self._prepare(a, b, self.train_max_length)
        self._head, res = training.fit_classifier(self._encoder, items, y_idx, len(classes), cfg,
                                                  desc="warm-up fine-tuning", show_progress=self.show_progress)
        self.steps_ = res.steps
        self.train_log_ = res.losses
        self._runner = None  # new weights: a new export (keyed by their hash)
        return self

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save the fine-tuned encoder and head, classes and loss log atomically (one torch file)."""
        if self._encoder is None or self.classes_ is None:
            raise ParameterError("nothing to save: the warmup featurizer is not fitted")
        save_checkpoint(path, self._encoder, self._head, self.classes_.tolist(),
                        TrainResult(self.steps_, self.train_log_))

    def load(self, path: str | os.PathLike[str]) -> Self:
        torch, _ = self._setup()
        self._encoder = self._new_encoder(torch_device(self.device))
        classes, res = load_checkpoint(path, self._encoder)
        self.classes_ = np.asarray(classes)
        self.steps_, self.train_log_ = res.steps, res.losses
        self._runner = None
        return self

    def transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, *, progress: Tqdm | None = None
    ) -> np.ndarray:
        if self._encoder is None:
            raise ParameterError("WarmupFeaturizer.transform called before fit")
        self._setup()
        a = list(texts_a)
        b = None if texts_b is None else list(texts_b)
        own = progress is None
        unit = "image" if self.image_model is not None else "pair"
        bar = progress_bar(len(a), self.name, self.show_progress, unit=unit) if own else progress
        try:
            precision = check_gpu_options(self)
            if embed_pipelined(self) and self.image_model is None and self.resolved_backend() == "torch":
                return embed_pairs(self._encoder, a, b, max_length=self.max_length, normalize=False, progress=bar,
                                   precision=precision, token_budget=self.token_budget)
            items = self._prepare(a, b, self.max_length)
            if self.resolved_backend() != "torch":
                return self._embed_onnx(items, bar)
            return embed_items(self._encoder, items, batch_size=self.embed_batch_size, normalize=False,
                               progress=bar, precision=precision, token_budget=self.token_budget,
                               pipelined=embed_pipelined(self))
        finally:
            if own and bar is not None:
                bar.close()

    def _embed_onnx(self, items: list[Any], bar: Tqdm | None) -> np.ndarray:
        """The fine-tuned encoder through ONNX Runtime (:mod:`aflite.encoders.onnx_text` for text,
        :mod:`aflite.encoders.onnx_images` for images), exported from the fine-tuned weights (keyed by their
        hash); an int8 image model is calibrated on the first images embedded."""
        if self._runner is None:
            torch, _ = self._setup()
            self._encoder.module.to("cpu")
            self._encoder.device = "cpu"
            if self.image_model is not None:
                self._runner = image_runner(self._encoder, self.resolved_backend(), export_dir=self.export_dir,
                                            calibration=calibration_sample(items), threads=self.num_threads)
            else:
                self._runner = text_runner(self._encoder.module, torch, self.resolved_backend(),
                                           pad_id=self._encoder.pad_id, export_dir=self.export_dir,
                                           threads=self.num_threads)
        if self.image_model is not None:
            return np.asarray(self._runner.embed(self._encoder, items, batch_size=self.embed_batch_size,
                                                 progress=bar))
        return np.asarray(self._runner.embed(items, batch_size=self.embed_batch_size, normalize=False,
                                             progress=bar))

