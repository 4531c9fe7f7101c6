"""Features shaped like a real problem for the benchmarks: SNLI-like sentence embeddings in memory and
ImageNet-like pooled CNN features written to a memory-mapped .npy, each with a planted, learnable bias."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.atomic import atomic_path

SNLI_N = 550_152


@dataclass
class BenchData:
    X: NDArray[np.float32]
    y: NDArray[Any]
    biased: NDArray[np.bool_] | None
    description: str


def make_snli_like(
    n: int = SNLI_N,
    d: int = 768,
    n_classes: int = 3,
    bias_fraction: float = 0.3,
    decay: float = 1.0,
    random_state: int = 0,
) -> BenchData:
    """Synthetic sentence-embedding-like features with a planted bias.

    Latent Gaussian coordinates carry a weak label signal for everyone (the "task": directions 5–14) and a
    strong class-specific offset for a random ``bias_fraction`` of the rows (the artifact: directions
    30–39). They are then scaled by a power-law spectrum σ_j ∝ j^-decay (real embeddings are strongly
    anisotropic: scikit-learn's L-BFGS needs hundreds of steps on them instead of a handful on isotropic
    noise), rotated by a random orthogonal matrix and shifted by a non-zero mean.
    """
    rng = np.random.default_rng(random_state)
    y = rng.integers(0, n_classes, n)
    spectrum = (2.0 * np.arange(1, d + 1, dtype=np.float64) ** -decay).astype(np.float32)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    rot = (spectrum[:, None] * q.T).astype(np.float32)  # scale then rotate, as one matrix
    mean = (0.3 * rng.standard_normal(d)).astype(np.float32)
    task = np.zeros((n_classes, d), dtype=np.float32)
    task[:, 5:15] = 0.25 * rng.standard_normal((n_classes, 10))
    bias = np.zeros((n_classes, d), dtype=np.float32)
    bias[:, 30:40] = 1.5 * rng.standard_normal((n_classes, 10))
    biased = rng.random(n) < bias_fraction
    X = np.empty((n, d), dtype=np.float32)
    step = 65_536
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        g = rng.standard_normal((r1 - r0, d), dtype=np.float32)
        g += task[y[r0:r1]]
        g[biased[r0:r1]] += bias[y[r0:r1][biased[r0:r1]]]
        np.matmul(g, rot, out=X[r0:r1])
        X[r0:r1] += mean
    desc = (
        f"synthetic SNLI-shaped: {n} x {d} float32, {n_classes} classes, bias on {biased.mean():.1%} of rows, "
        f"spectrum j^-{decay}, non-zero mean, seed {random_state}"
    )
    return BenchData(X, y, biased, desc)


IMAGENET_N = 1_281_167
# Table 8 (appendix A.5), ImageNet column; n = 640K and no τ (the paper controls n instead).
IMAGENET_PARAMS = {"n_partitions": 64, "train_size": 32_700, "slice_size": 33_600, "target_size": 640_000,
                   "threshold": 0.0}


def write_imagenet_like(
    path: str, n: int = IMAGENET_N, d: int = 2048, n_classes: int = 1000, bias_fraction: float = 0.3,
    random_state: int = 0,
) -> NDArray[np.int64]:
    """ImageNet-shaped features written chunk by chunk to a .npy (never whole in memory); returns labels.

    Pooled CNN features are non-negative-ish, anisotropic and class-clustered: each class has a weak mean
    direction, a random ``bias_fraction`` of rows carries a strong class-specific offset (the artifact), the
    coordinates are scaled by a power-law spectrum and shifted by a positive mean.
    """
    rng = np.random.default_rng(random_state)
    y = rng.integers(0, n_classes, n)
    spectrum = (2.0 * np.arange(1, d + 1, dtype=np.float64) ** -0.5).astype(np.float32)
    centres = (0.15 * rng.standard_normal((n_classes, d))).astype(np.float32)
    bias = np.zeros((n_classes, d), dtype=np.float32)
    nb = min(64, max(1, d // 4))
    bias[:, -nb:] = 1.5 * rng.standard_normal((n_classes, nb))  # the artifact lives in low-variance directions
    biased = rng.random(n) < bias_fraction
    with atomic_path(path) as tmp:
        X = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, d))
        step = 32_768
        for r0 in range(0, n, step):
            r1 = min(n, r0 + step)
            g = rng.standard_normal((r1 - r0, d), dtype=np.float32)
            g += centres[y[r0:r1]]
            g[biased[r0:r1]] += bias[y[r0:r1][biased[r0:r1]]]
            g *= spectrum
            g += 0.5
            X[r0:r1] = g
        X.flush()
        del X
    return y
