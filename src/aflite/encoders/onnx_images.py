"""CPU inference of the image encoders with ONNX Runtime: fp32, or static int8 calibrated on the data.

Why: on 2 CPU cores torch runs EfficientNet-Lite0 at about a dozen images per second (its depthwise convolutions
are slow in torch's CPU kernels), while ONNX Runtime's fused Conv+Clip kernels run the same fp32 network several
times faster with the same output (docs/embed.md). The network and its pooling (the encoder's ``pooled``: global
average of the last feature map) are exported once with ``torch.onnx.export``, cached under ``<cache>/onnx/`` keyed
by the weights' content hash and the input size, written atomically.

The int8 model is ONNX Runtime's *static* quantisation (QDQ, uint8 activations, per-channel int8 weights, MinMax
ranges): dynamic quantisation does not speed up convolutions and its per-batch activation ranges moved the pooled
features far (mean cosine 0.56 on MNIST digits). Static ranges need calibration images; they are an evenly spaced
sample of the data being embedded (:func:`calibration_sample`, deterministic given the data), and the int8 file
is keyed by that sample's fingerprint too, so a resumed run reuses the same model.

Preprocessing (decode, resize, crop, scale) is the encoder's own ``collate``; batches run side by side, one ONNX
Runtime thread each (the thread policy of :mod:`aflite.threads`), so each row's output is independent of threads.
"""

from __future__ import annotations

import hashlib
import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aflite.data.images import files_fingerprint
from aflite.encoders.onnx_text import cpu_session, export_folder, load_onnxruntime, map_batches, weights_hash
from aflite.errors import ParameterError
from aflite.threads import budget

__all__ = ["IMAGE_CPU_DEFAULTS", "CALIBRATION_SIZE", "calibration_sample", "export_image_model",
           "quantize_image_int8", "OnnxImageRunner", "image_runner"]

# the CPU default per image model when the [onnx] extra is installed: the fastest backend whose agreement with
# torch passed on the bench data (mean cosine >= 0.99 and kept-set Jaccard >= 0.9); none yet: on 1,000 MNIST
# digits fp32 ONNX had cosine 1.000000 but kept-set Jaccard 0.813 (docs/measured/bench_embed_efficientnet-lite0.json),
# so every image model keeps torch unless --backend says otherwise
IMAGE_CPU_DEFAULTS: dict[str, str] = {}
CALIBRATION_SIZE = 64
_EXPORT_FORMAT = 1  # bump when the exported graph changes
_INPUT = "pixels"


def calibration_sample(refs: Sequence[str], size: int = CALIBRATION_SIZE) -> list[str]:
    """Up to ``size`` image references evenly spaced over ``refs`` (all of them when there are fewer): every part
    of the data, usually every class of an image folder, is represented; no randomness, so a rerun agrees."""
    refs = [str(r) for r in refs]
    if len(refs) <= size:
        return refs
    return [refs[i] for i in np.linspace(0, len(refs) - 1, size).round().astype(int)]


def _fingerprint(refs: Sequence[str]) -> str:
    return hashlib.sha256(("\n".join(refs) + "|" + files_fingerprint(list(refs))).encode()).hexdigest()


def _pooled_module(torch: Any, encoder: Any) -> Any:
    class Pooled(torch.nn.Module):  # the network and its pooling as one graph
        def __init__(self) -> None:
            super().__init__()
            self.inner = encoder.module

        def forward(self, pixels: Any) -> Any:
            return encoder.pooled(pixels)

    return Pooled().eval()


def _example(encoder: Any) -> Any:
    """One preprocessed batch of the encoder's input shape (two blank images)."""
    from PIL import Image

    size = int(getattr(encoder, "image_size", 224))
    tmp = Image.new("RGB", (size, size))
    torch = encoder.torch
    if getattr(encoder, "processor", None) is not None:
        return encoder.processor(images=[tmp, tmp], return_tensors="pt")["pixel_values"].cpu()
    return torch.zeros((2, 3, size, size), dtype=torch.float32)


def export_image_model(encoder: Any, folder: str | os.PathLike[str], key: str | None = None) -> Path:
    """The fp32 ONNX file of an :class:`aflite.encoders.images.ImageEncoder` (network + pooling), exported once into
    ``folder`` (named by the weights' hash ``key`` and the input shape) and reused when it is already there."""

    torch = encoder.torch
    ex = _example(encoder)
    key = key or weights_hash(encoder.module)
    shape = "x".join(str(int(s)) for s in ex.shape[1:])
    dest = Path(folder) / f"image-{key[:24]}-{shape}-v{_EXPORT_FORMAT}.onnx"
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    module = encoder.module
    was_training, device = module.training, encoder.device
    module.eval()
    try:
        if device != "cpu":
            module.cpu()
            encoder.device = "cpu"
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(_pooled_module(torch, encoder), (ex,), str(tmp), dynamo=False, input_names=[_INPUT],
                              output_names=["pooled"], dynamic_axes={_INPUT: {0: "batch"}, "pooled": {0: "batch"}},
                              opset_version=17)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
        if device != "cpu":
            module.to(device)
            encoder.device = device
        module.train(was_training)
    return dest


def quantize_image_int8(fp32_path: Path, encoder: Any, calibration: Sequence[str]) -> Path:
    """The static int8 (QDQ) model next to ``fp32_path``, calibrated on the images ``calibration`` (MinMax ranges,
    uint8 activations, per-channel int8 weights); made once per calibration set and written atomically."""

    load_onnxruntime()
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    refs = [str(r) for r in calibration]
    if not refs:
        raise ParameterError("int8 image backend: no calibration images")
    dest = fp32_path.with_name(f"{fp32_path.stem}-int8-{_fingerprint(refs)[:16]}.onnx")
    if dest.is_file():
        return dest
    batches = [np.ascontiguousarray(encoder.collate(refs[s : s + 16]).cpu().numpy(), dtype=np.float32)
               for s in range(0, len(refs), 16)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = list(batches)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return {_INPUT: self.left.pop(0)} if self.left else None

    pre = dest.with_name(f".{dest.stem}.{os.getpid()}.pre.onnx")
    tmp = dest.with_name(f".{dest.stem}.{os.getpid()}.tmp.onnx")
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)
    try:
        quant_pre_process(str(fp32_path), str(pre), skip_symbolic_shape=True)
        quantize_static(str(pre), str(tmp), Reader(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True,
                        calibrate_method=CalibrationMethod.MinMax)
        os.replace(tmp, dest)
    finally:
        logging.getLogger().setLevel(level)
        for f in (pre, tmp):
            f.unlink(missing_ok=True)
    return dest


class OnnxImageRunner:
    """An ONNX Runtime session of an exported image encoder: image references in, pooled float32 rows out."""

    def __init__(self, path: Path, dim: int, threads: int | None = None) -> None:
        self.session = cpu_session(path)
        self.path, self.dim = path, int(dim)
        self.workers = max(1, min(int(threads) if threads else budget(), budget()))

    def embed(self, encoder: Any, refs: Sequence[str], *, batch_size: int = 32, progress: Any = None) -> np.ndarray:
        """Rows in input order; each batch decoded and preprocessed by ``encoder.collate``."""
        n = len(refs)
        out = np.empty((n, self.dim), dtype=np.float32)
        chunks = [np.arange(s, min(n, s + batch_size)) for s in range(0, n, batch_size)]

        def one(idx: np.ndarray) -> None:
            x = encoder.collate([refs[i] for i in idx]).cpu().numpy()
            out[idx] = self.session.run(None, {_INPUT: np.ascontiguousarray(x, dtype=np.float32)})[0]
            if progress is not None:
                progress.update(len(idx))

        map_batches(one, chunks, self.workers)
        return out


def image_runner(encoder: Any, backend: str, *, export_dir: str | os.PathLike[str] | None,
                 calibration: Sequence[str] | None = None, threads: int | None = None) -> OnnxImageRunner:
    """The runner of ``backend`` ('onnx' or 'onnx-int8') for a loaded image encoder; int8 needs ``calibration``
    image references (see :func:`calibration_sample`)."""
    load_onnxruntime()
    with export_folder(export_dir) as folder:
        path = export_image_model(encoder, folder)
        if backend == "onnx-int8":
            path = quantize_image_int8(path, encoder, calibration or [])
        return OnnxImageRunner(path, int(encoder.dim), threads)
