"""``benchmarks/bench.py --embed efficientnet-lite0``: the image encoder's CPU backends side by side in one run.

The image counterpart of :mod:`aflitebench.bench_embed` (same JSON keys under ``embed``): images/s of
torch fp32 and of each ONNX Runtime backend on the same images (evenly spaced over the folder, so every class is
in; backends alternate round after round so that load drifting hits them alike), per-row cosine of each backend's
Φ to torch's, the Jaccard of the AFLite kept sets (same seed, Table 8 scaled) with each Φ on all the images, and
the roofline: the network's FLOPs per image (counted from its convolutions) and the GFLOP/s each backend reaches
next to the host's float32 and int8 GEMM rates.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from aflite.atomic import JSON
from aflite.data.images import load_image_dataset
from aflite.encoders.onnx_images import calibration_sample
from aflite.errors import ParameterError
from aflite.features.images import ImageFeaturizer
from aflite.threads import budget
from aflitebench.embed_common import agreement_passes, gemm_rates, kept_set_agreement, timing_summary

__all__ = ["image_embed_benchmark", "conv_flops"]

BACKENDS = ("torch", "onnx", "onnx-int8")


def conv_flops(encoder: Any) -> float:
    """FLOPs of one image through the encoder's convolutions and linear layers (2 per multiply-add), counted with
    forward hooks on one blank input of the encoder's size. EfficientNet-Lite0 at 224²: ~0.77 GFLOP."""
    torch = encoder.torch
    total = [0.0]

    def hook(mod: Any, inp: Any, out: Any) -> None:
        if isinstance(mod, torch.nn.Conv2d):
            k = mod.kernel_size[0] * mod.kernel_size[1] * mod.in_channels // mod.groups
            total[0] += 2.0 * out.numel() / out.shape[0] * k
        elif isinstance(mod, torch.nn.Linear):
            total[0] += 2.0 * mod.in_features * mod.out_features

    handles = [m.register_forward_hook(hook) for m in encoder.module.modules()
               if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    size = int(encoder.image_size)
    try:
        with torch.inference_mode():
            encoder.pooled(torch.zeros((1, 3, size, size), device=encoder.device))
    finally:
        for h in handles:
            h.remove()
    return total[0]


def image_embed_benchmark(data: str | os.PathLike[str], *, model: str = "efficientnet-lite0", n_items: int = 500,
                          rounds: int = 3, seed: int = 0, kept_set: bool = True, kept_all: bool = False,
                          backends: tuple[str, ...] = BACKENDS, batch_size: int = 32,
                          log: Callable[[str], None] = lambda m: None) -> JSON:
    """The ``embed`` section of ``benchmarks/bench.py --json`` for an image model on the image folder ``data``. The kept
    sets are filtered from the timed images' Φ (no second pass: on 2 cores torch embeds only a few images per
    second), or from every image's with ``kept_all``."""
    if n_items < 1 or rounds < 1:
        raise ParameterError("--n-items and --rounds must be >= 1")

    ds = load_image_dataset(data)
    refs_all = list(ds.texts_a)
    refs = calibration_sample(refs_all, min(n_items, len(refs_all)))  # evenly spaced: every class
    n = len(refs)
    feats = {be: ImageFeaturizer(model, backend=be, show_progress=False, batch_size=batch_size) for be in backends}
    for f in feats.values():  # load, export, calibrate (on a sample of all images) outside the timings
        f.fit(refs_all)
        f.transform(refs[:4])
    fpi = conv_flops(feats[backends[0]].encoder())
    res: JSON = {"model": model, "data": str(data), "unit": "image", "n_items": n, "rounds": rounds,
                           "seed": seed, "batch_size": batch_size, "threads": budget(),
                           "image_size": feats[backends[0]].image_size, "gflop_per_item": round(fpi / 1e9, 3),
                           "host": platform.processor() or platform.machine(), "loadavg_start": list(os.getloadavg())}
    runs: dict[str, list[float]] = {be: [] for be in backends}
    small: dict[str, np.ndarray] = {}
    loads: list[float] = []
    for r in range(rounds):  # alternate: every backend once per round
        for be in runs:
            t0 = time.perf_counter()
            small[be] = feats[be].transform(refs)
            runs[be].append(time.perf_counter() - t0)
        loads.append(round(os.getloadavg()[0], 2))
        log(f"round {r + 1}/{rounds}: " + ", ".join(f"{be} {n / v[-1]:.1f}/s" for be, v in runs.items()))
    med = {be: float(np.median(v)) for be, v in runs.items()}
    res.update(timing_summary(runs, n, loads, digits=2))
    res["gflops_achieved"] = {be: round(n / s * fpi / 1e9, 1) for be, s in med.items()}
    cos = {be: _cosine(x, small["torch"]) for be, x in small.items() if be != "torch"}
    res["min_cosine"] = {be: round(float(c.min()), 6) for be, c in cos.items()}
    res["mean_cosine"] = {be: round(float(c.mean()), 6) for be, c in cos.items()}
    res["loadavg_end_of_timing"] = list(os.getloadavg())
    log("roofline: GEMM rates")
    res["roofline"] = gemm_rates()
    if kept_set:
        label_of = dict(zip(refs_all, np.asarray(ds.labels).tolist(), strict=True))
        y = np.asarray([label_of[r] for r in (refs_all if kept_all else refs)])
        res.update(kept_set_agreement(backends, lambda be: feats[be].transform(refs_all) if kept_all else small[be],
                                      y, seed, _cosine, f"{len(y)} images", log,
                                      rows="all images" if kept_all else "the timed images"))
    res["passes"] = agreement_passes(res, backends)
    res["loadavg_end"] = list(os.getloadavg())
    return res


def _cosine(x: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Per-row cosine (image features are not L2-normalised)."""
    num = (x * ref).sum(axis=1)
    return np.asarray(num / np.maximum(np.linalg.norm(x, axis=1) * np.linalg.norm(ref, axis=1), 1e-12))
