"""The synthetic experiment's data (§3, Figure 2): two concentric rings in 2-D, plus features that carry a planted
bias for most points and noise for the rest, a stratified dev split and the two models of Table 7."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
from numpy.typing import NDArray

from aflite.data.keywords import option_label
from aflite.errors import ParameterError
from aflite.splits import stratified_mask

DEFAULT_N_SAMPLES = 1000
DEFAULT_DEV_FRACTION = 0.2
BIAS_FRACTION = 0.75
FLIP_FRACTION = 0.05
FLIP_MIN_SEPARATION = 0.8


# ----------------------------------------------------------------------------------------------- data
class CirclesOptions(TypedDict, total=False):
    """:func:`make_circles_dataset`'s keyword options."""

    ring_noise: float
    bias_fraction: float
    bias_dim: int
    bias_shift: float
    flip_fraction: float | None


class CirclesParams(TypedDict):
    """The generator's settings as it ran (defaults filled in), for the record of a run."""

    separation: float
    n_samples: int
    inner_radius: float
    outer_radius: float
    ring_noise: float
    bias_fraction: float
    bias_dim: int
    bias_shift: float
    flip_fraction: float
    n_flipped: int


class DataParams(TypedDict):
    """The data generator's settings over the experiment (:class:`CirclesParams` less what differs by separation;
    ``flip_fraction`` per separation)."""

    n_samples: int
    outer_radius: float
    ring_noise: float
    bias_fraction: float
    bias_dim: int
    bias_shift: float
    flip_fraction: dict[str, float]


@dataclass
class SyntheticData:
    """One synthetic dataset. Rows are in random order (the generator shuffles them)."""

    X: NDArray[np.float64]  # (N, 2 + bias_dim): ring coordinates, then bias / noise features
    y: NDArray[np.int64]  # label: 1 = inner ring, 0 = outer ring (after flips)
    coords: NDArray[np.float64]  # (N, 2): the ring coordinates (= X[:, :2])
    ring: NDArray[np.int64]  # the ring each point was drawn from (= y except where flipped)
    is_biased: NDArray[np.bool_]  # True: bias features; False: noise features
    flipped: NDArray[np.bool_]  # label flipped (only for separation >= 0.8)
    separation: float
    params: CirclesParams  # the generator's settings (results.json's "data")

    @property
    def n_samples(self) -> int:
        return len(self.y)


def check_fraction(name: str, value: float, *, closed: bool = False) -> float:
    v = float(value)
    ok = (0.0 <= v <= 1.0) if closed else (0.0 < v < 1.0)
    if not (math.isfinite(v) and ok):
        raise ParameterError(f"{name}={value} must lie in {'[0, 1]' if closed else '(0, 1)'}")
    return v


def make_circles_dataset(
    separation: float,
    n_samples: int = DEFAULT_N_SAMPLES,
    random_state: int | np.random.Generator | None = 0,
    *,
    ring_noise: float = 0.25,
    bias_fraction: float = BIAS_FRACTION,
    bias_dim: int = 2,
    bias_shift: float = 2.5,
    flip_fraction: float | None = None,
) -> SyntheticData:
    """Two noisy concentric rings with planted class-specific bias features (see the module docstring).

    ``separation`` in (0, 1) is the gap between the ring radii (outer 1, inner ``1 - separation``).
    ``flip_fraction`` (of the biased instances) defaults to 5% when ``separation >= 0.8`` and 0 otherwise.
    """
    sep = check_fraction("separation", separation)
    if isinstance(n_samples, bool) or int(n_samples) != n_samples or n_samples < 8:
        raise ParameterError(f"{option_label('--n-samples ', 'n_samples=')}{n_samples} must be an integer >= 8")
    n = int(n_samples)
    bias_fraction = check_fraction("bias_fraction", bias_fraction, closed=True)
    if flip_fraction is None:
        flip_fraction = FLIP_FRACTION if sep >= FLIP_MIN_SEPARATION - 1e-9 else 0.0
    flip_fraction = check_fraction("flip_fraction", flip_fraction, closed=True)
    if int(bias_dim) < 1:
        raise ParameterError(f"bias_dim={bias_dim} must be at least 1")
    if not (math.isfinite(ring_noise) and ring_noise >= 0) or not (math.isfinite(bias_shift) and bias_shift >= 0):
        raise ParameterError("ring_noise and bias_shift must be finite and non-negative")
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)

    n_inner = n // 2
    ring = np.repeat(np.array([0, 1], dtype=np.int64), [n - n_inner, n_inner])
    radius = np.where(ring == 1, 1.0 - sep, 1.0)
    angle = rng.uniform(0.0, 2.0 * np.pi, n)
    coords = np.c_[radius * np.cos(angle), radius * np.sin(angle)] + rng.normal(0.0, ring_noise, (n, 2))

    is_biased = np.zeros(n, dtype=bool)
    for c in (0, 1):  # exactly round(75%) of each class
        idx = np.flatnonzero(ring == c)
        is_biased[rng.choice(idx, int(round(bias_fraction * len(idx))), replace=False)] = True
    flipped = np.zeros(n, dtype=bool)
    biased_idx = np.flatnonzero(is_biased)
    n_flip = int(round(flip_fraction * len(biased_idx)))
    if n_flip:
        flipped[rng.choice(biased_idx, n_flip, replace=False)] = True
    y = np.where(flipped, 1 - ring, ring).astype(np.int64)

    d = int(bias_dim)
    mu = (bias_shift / 2.0) / np.sqrt(d)  # per coordinate, so that ‖μ₁ − μ₀‖ = bias_shift
    sign = np.where(y == 1, 1.0, -1.0)[:, None]
    gauss = rng.normal(size=(n, d))
    feats = np.where(is_biased[:, None], sign * mu + gauss, gauss)

    perm = rng.permutation(n)
    coords, feats, ring, y = coords[perm], feats[perm], ring[perm], y[perm]
    is_biased, flipped = is_biased[perm], flipped[perm]
    X = np.ascontiguousarray(np.c_[coords, feats], dtype=np.float64)
    params: CirclesParams = {
        "separation": sep, "n_samples": n, "inner_radius": 1.0 - sep, "outer_radius": 1.0, "ring_noise": ring_noise,
        "bias_fraction": bias_fraction, "bias_dim": d, "bias_shift": bias_shift, "flip_fraction": flip_fraction,
        "n_flipped": n_flip,
    }
    return SyntheticData(X=X, y=y, coords=X[:, :2], ring=ring, is_biased=is_biased, flipped=flipped,
                         separation=sep, params=params)


def train_dev_split(
    y: NDArray[Any], dev_fraction: float = DEFAULT_DEV_FRACTION, random_state: int | np.random.Generator | None = 0
) -> NDArray[np.bool_]:
    """A stratified random dev mask (True = dev): round(dev_fraction · |class|) rows of each class."""
    dev_fraction = check_fraction("dev_fraction", dev_fraction)
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    return stratified_mask(y, dev_fraction, rng)


def evaluate_models(
    X: NDArray[np.float64], y: NDArray[np.int64], train: NDArray[np.bool_], dev: NDArray[np.bool_]
) -> dict[str, float]:
    """Dev accuracy (%) of an RBF SVM and logistic regression trained on the ``train`` rows.

    NaN for a model that cannot be trained (a single class left) or scored (no dev rows)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import SVC

    out: dict[str, float] = {}
    models: dict[str, Callable[[], Any]] = {
        "svm": lambda: SVC(kernel="rbf"),
        "lr": lambda: LogisticRegression(max_iter=1000),
    }
    for name, make in models.items():
        if train.sum() == 0 or len(np.unique(y[train])) < 2 or dev.sum() == 0:
            out[name] = float("nan")
            continue
        model = make().fit(X[train], y[train])
        out[name] = 100.0 * float(model.score(X[dev], y[dev]))
    return out
