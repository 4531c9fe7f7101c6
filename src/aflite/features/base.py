"""What every featurizer shares: the :class:`Featurizer` interface, the views and the featurizer names."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Self, TypeAlias, runtime_checkable

import numpy as np
import scipy.sparse as sp

from aflite.data.images import files_fingerprint
from aflite.device import check_precision, torch_device
from aflite.encoders.onnx_text import resolve_backend
from aflite.errors import InputError, ParameterError
from aflite.features.registry import find
from aflite.hashing import data_fingerprint

log = logging.getLogger("aflite.features")


VIEWS = ("pair", "hypothesis", "premise")
DEFAULT_MAX_LENGTH = 256
DEFAULT_CHUNK_SIZE = 4096
DEFAULT_IMAGE_CHUNK_SIZE = 512
Matrix: TypeAlias = "np.ndarray | sp.csr_matrix"
CACHE_FORMAT = 1  # part of every cache key: a change of the cache layout changes it


def cache_key(
    texts_a: Sequence[str],
    texts_b: Sequence[str] | None,
    name: str,
    view: str,
    options: dict[str, Any],
    extra: Any = None,
) -> str:
    """The identity of a featurizer's output on these inputs: texts, featurizer, view, options and extra."""
    meta = {"format": CACHE_FORMAT, "featurizer": name, "view": view, "options": options, "extra": extra}
    return data_fingerprint(texts_a, texts_b, meta)


@runtime_checkable
class Featurizer(Protocol):
    """The common interface: ``fit`` on texts (and labels, where needed), ``transform`` to float32 (n, d)."""

    name: str

    def fit(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None) -> Self: ...

    def transform(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None) -> Matrix: ...

    def fit_transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None
    ) -> Matrix: ...

    def get_options(self) -> dict[str, Any]:
        """The constructor keywords that determine the output: the cache key, and what ``aflite explain`` and
        ``aflite evaluate`` rebuild a run's featurizer from (they are recorded in its results.json)."""
        ...


@dataclass
class FeatureJob:
    """One call of :func:`aflite.features.featurize` as a featurizer's :meth:`Computes.compute` sees it: the
    view's inputs, labels (for a warm-up), the cache folder and stem, and how to run chunks (here, or as
    ``shards`` elsewhere)."""

    name: str
    view: str
    a: list[str]
    b: list[str] | None
    y: Any
    options: dict[str, Any]
    extra: dict[str, Any]
    cache: Path | None
    stem: str
    chunk_size: int
    show_progress: bool
    shards: Any = None
    chunked: Any = None  # the chunk loop of aflite.features.cache (kept there with the cache layout)
    read_only: tuple[Path, ...] = ()  # featurize's read-only cache folders (a combination's parts look there too)

    def run_chunks(self, feat: Any, a: list[str], b: list[str] | None) -> np.ndarray:
        """``feat.transform`` chunk by chunk: on a cluster's shards when given, else resumably in this process."""
        loop = self.shards or self.chunked
        return loop(feat, a, b, self.cache, self.stem, self.chunk_size, self.show_progress)


class Computes:
    """What :func:`aflite.features.featurize` asks of a featurizer, with the defaults: a featurizer overrides what
    it does differently (a warm-up slice, image files in the cache key, a calibration pass, progress stages), so
    that featurize itself never asks which featurizer it runs."""

    @property
    def reads_images(self) -> bool:
        """Whether its inputs are image references (their files' sizes and times join the cache key)."""
        return False

    def cache_extra(self) -> dict[str, Any]:
        """What else besides :meth:`get_options` decides this encoder's output (part of the features' cache key,
        not of the recorded options): e.g. which layers an int8 backend quantises."""
        return {}

    def plan(self, a: list[str], y: Any, warmup_size: int | float,
             warmup_seed: int | None) -> tuple[np.ndarray | None, dict[str, Any]]:
        """(the warm-up rows, or None for a featurizer without a warm-up; what else goes into the cache key)."""
        extra = dict(self.cache_extra())
        if self.reads_images:
            extra["image_files"] = files_fingerprint(a)
        return None, extra

    def compute(self, job: FeatureJob, rows: np.ndarray, warmup_rows: np.ndarray | None) -> tuple[Any, dict[str, Any]]:
        """(the matrix of ``rows``, what featurize records about computing it): chunk by chunk (resumable, and
        shardable on a cluster) when the registry says the featurizer ``shards``."""
        found = find(job.name)
        if found is not None and found.shards:
            return job.run_chunks(self, job.a, job.b), {}
        return self.fit_transform(job.a, job.b), {}  # type: ignore[attr-defined]


class Plain(Computes):
    """A featurizer with only the :class:`Featurizer` interface (``fit``/``transform``/``get_options``), given
    the defaults of :class:`Computes`: how :func:`aflite.features.featurize` runs a class
    that does not derive from it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)

    @property
    def reads_images(self) -> bool:
        return bool(getattr(self.inner, "reads_images", False))

    def cache_extra(self) -> dict[str, Any]:
        extra = getattr(self.inner, "cache_extra", None)
        return dict(extra()) if extra is not None else {}

    def get_options(self) -> dict[str, Any]:
        return dict(self.inner.get_options())

    def fit_transform(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None) -> Any:
        return self.inner.fit_transform(texts_a, texts_b)

    def transform(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, **kwargs: Any) -> Any:
        return self.inner.transform(texts_a, texts_b, **kwargs)


class BackendEncoder(Computes):
    """What the encoder featurizers that may run through ONNX Runtime (minilm, the image models, warmup) share:
    resolving their backend once (the CPU default is each model's, :func:`aflite.encoders.onnx_text.
    resolve_backend`), and pickling without the ONNX Runtime session (for Dask workers and copies; it cannot be
    pickled and is rebuilt from the cached export where it is next used)."""

    backend: str | None
    device: str | None
    _resolved: str | None
    _runner: Any

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_runner"] = None
        return state

    def _backend(self, cpu_default: str) -> str:
        """``backend`` resolved once: an ONNX backend named outright runs on the CPU; the default follows the
        device (torch on a GPU) and ``cpu_default``."""
        if self._resolved is None:
            device = "cpu" if self.backend not in (None, "", "auto", "torch") else torch_device(self.device)
            self._resolved = resolve_backend(self.backend, device, cpu_default)
        return self._resolved


def check_gpu_options(feat: Any) -> str:
    """Check an encoder featurizer's opt-in GPU options (``precision``, ``token_budget``, ``pipelined``; see
    :mod:`aflite.encoders`) and return the precision's canonical name. They apply to the torch backend only: an
    ONNX backend with another precision is refused rather than silently run in float32."""
    precision = check_precision(getattr(feat, "precision", None))
    budget = getattr(feat, "token_budget", None)
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise ParameterError(f"token_budget must be an int >= 1 (padded tokens per batch), got {budget!r}")
    if getattr(feat, "pipelined", None) is not None and not isinstance(feat.pipelined, bool):
        raise ParameterError(f"pipelined must be True, False or None (on a CUDA device), got {feat.pipelined!r}")
    backend = feat.resolved_backend()
    if precision != "float32" and backend != "torch":
        raise ParameterError(f"precision={precision} applies to the torch backend, not {backend}")
    return precision


def embed_pipelined(feat: Any) -> bool:
    """Whether an encoder featurizer embeds through the pipelined path: ``pipelined`` as given, or with None the
    torch backend on a CUDA device (one H100: 16,675 pairs/s against 6,822 for the fixed batches, issue #43; the
    rows agree to ~1e-7, tests/test_encoders.py), never elsewhere (the CPU's measured path runs batches side by
    side instead)."""
    given = getattr(feat, "pipelined", None)
    if given is not None:
        return bool(given)
    return feat.resolved_backend() == "torch" and torch_device(getattr(feat, "device", None)).startswith("cuda")


def precision_option(feat: Any) -> dict[str, Any]:
    """``{"precision": ...}`` for the cache key and the recorded options when it is not float32 (a float32 Φ keeps
    the keys it had before precisions existed)."""
    p = check_precision(getattr(feat, "precision", None))
    return {} if p == "float32" else {"precision": p}


def apply_view(
    texts_a: Sequence[str], texts_b: Sequence[str] | None, view: str
) -> tuple[list[str], list[str] | None]:
    """The text fields a view uses: ``pair`` (a, b), ``hypothesis`` (b, None), ``premise`` (a, None)."""
    if view not in VIEWS:
        raise ParameterError(f"unknown view {view!r}; choose one of {', '.join(VIEWS)}")
    a = _as_str_list(texts_a, "texts_a")
    b = None if texts_b is None else _as_str_list(texts_b, "texts_b")
    if b is not None and len(b) != len(a):
        raise InputError(f"texts_a has {len(a)} rows but texts_b has {len(b)}")
    if view == "premise":
        return a, None
    if view == "hypothesis":
        if b is None:
            raise ParameterError("view 'hypothesis' needs a second text column (texts_b)")
        return b, None
    return a, b


def _as_str_list(texts: Sequence[str], what: str) -> list[str]:
    if isinstance(texts, str):
        raise InputError(f"{what} must be a sequence of strings, not one string")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise InputError(f"{what}[{i}] is {type(t).__name__}, not a string")
    return out


def progress_bar(total: int, desc: str, enabled: bool, initial: int = 0, unit: str = "pair") -> Any:
    """A tqdm bar on stderr, or None when progress is off (tqdm imported only when a bar is shown)."""
    if not enabled:
        return None
    from tqdm.auto import tqdm  # a notebook bar in Jupyter, else a terminal bar

    return tqdm(total=total, initial=initial, desc=desc, unit=unit, unit_scale=False, dynamic_ncols=True)
