"""What every featurizer shares: the :class:`Featurizer` interface, the base class :class:`BaseFeaturizer` (its
parameters, ``fit_transform`` and recorded options, in the scikit-learn manner), the views and the cache key."""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self, TypeAlias, runtime_checkable

import numpy as np
import scipy.sparse as sp

from aflite.atomic import JSON, JsonObject, JsonValue
from aflite.data.images import files_fingerprint
from aflite.device import check_precision, torch_device
from aflite.encoders.onnx_text import resolve_backend
from aflite.errors import InputError, ParameterError
from aflite.features.registry import find
from aflite.hashing import data_fingerprints
from aflite.progress import tqdm  # Jupyter: a widget bar, or none without ipywidgets

log = logging.getLogger("aflite.features")


VIEWS = ("pair", "hypothesis", "premise")
DEFAULT_MAX_LENGTH = 256
DEFAULT_CHUNK_SIZE = 4096
DEFAULT_IMAGE_CHUNK_SIZE = 512
Matrix: TypeAlias = "np.ndarray | sp.csr_matrix"
CACHE_FORMAT = 1  # part of every cache key: a change of the cache layout changes it
# a value a results or cache file holds as it is: what a featurizer's recorded options and cache key facts are made of
Options: TypeAlias = dict[str, JsonValue]  # get_options(): the keywords that decide Φ, as recorded
Facts: TypeAlias = dict[str, JsonValue]  # what else joins the cache key: labels, warm-up slice, image files


@dataclass(frozen=True)
class CacheIdentity:
    """What a cache record holds of the call that wrote it (:func:`cache_identity`), checked by the next reader."""

    format: int
    featurizer: str
    view: str
    options: Options  # the featurizer's own options, as results.json records them
    extra: Facts | None  # key_facts: labels, warm-up slice, image files (whatever else decides the output)
    inputs: str  # the fingerprint of the inputs alone
    key: str  # the fingerprint of the inputs and all the above

    def to_json(self) -> JsonObject:
        """As the cache record holds it: every field in their order (one marked ``omit_none`` left out while None;
        :class:`PhiInfo` as its own JSON)."""
        values = ((f, getattr(self, f.name)) for f in fields(self))
        return {f.name: v.to_json() if isinstance(v, PhiInfo) else v for f, v in values
                if not (v is None and f.metadata.get("omit_none"))}


@dataclass(frozen=True)
class PartInfo:
    """One part of a combined Φ: its name, dimension, the RMS row norm it was scaled by, whether it was cached."""

    name: str
    dim: int
    rms_row_norm: float
    from_cache: bool


@dataclass(frozen=True)
class PhiInfo:
    """What featurize records about computing Φ (results.json's ``featurizer.info`` and its cache record's): a
    warm-up's training and loss (:func:`aflite.features.warmup.warmup_loss_summary`), the time taken, a
    combination's parts. A field is left out of the JSON while None, so each featurizer writes only its own."""

    warmup_steps: int | None = None
    warmup_final_loss: float | None = None
    warmup_rows: int | None = None
    warmup_loss_start: float | None = None
    warmup_loss_end: float | None = None
    warmup_loss_chance: float | None = None
    warmup_loss_judgement: str | None = None
    seconds: float | None = None
    rows_per_second: float | None = None
    parts: list[PartInfo] | None = None

    def to_json(self) -> JSON:
        """The fields that are set, in their order (``parts`` each as a JSON object)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, obj: JSON) -> PhiInfo:
        """Back from :meth:`to_json` (a cache record's ``info``; keys it does not name are left out)."""
        values = {f.name: obj[f.name] for f in fields(cls) if f.name in obj}
        if values.get("parts") is not None:
            values["parts"] = [PartInfo(**p) for p in values["parts"]]
        return cls(**values)


def cache_key(
    texts_a: Sequence[str],
    texts_b: Sequence[str] | None,
    name: str,
    view: str,
    options: Options,
    key_facts: Facts | None = None,
) -> str:
    """The identity of a featurizer's output on these inputs: texts, featurizer, view, options and ``key_facts``
    (what else decides the output: the warm-up's labels, image files' sizes and times; under the key "extra", so that
    caches written before the name changed stay valid)."""
    return cache_identity(texts_a, texts_b, name, view, options, key_facts).key


def cache_identity(
    texts_a: Sequence[str],
    texts_b: Sequence[str] | None,
    name: str,
    view: str,
    options: Options,
    key_facts: Facts | None = None,
) -> CacheIdentity:
    """The whole of :func:`cache_key`, part by part, as a cache record holds it: the format, featurizer, view,
    options and ``extra``, the fingerprint of the inputs alone (``inputs``) and the ``key`` of them all, so that a
    record found under a stem can be told to be this input's, or another dataset's or options' (and which)."""
    meta = {"format": CACHE_FORMAT, "featurizer": name, "view": view, "options": options, "extra": key_facts}
    inputs, key = data_fingerprints(texts_a, texts_b, meta)
    return CacheIdentity(format=CACHE_FORMAT, featurizer=name, view=view, options=options, extra=key_facts,
                         inputs=inputs, key=key)


@runtime_checkable
class Featurizer(Protocol):
    """The common interface: ``fit`` on texts (and labels, where needed), ``transform`` to float32 (n, d)."""

    name: str

    def fit(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None) -> Self: ...

    def transform(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None) -> Matrix: ...

    def fit_transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None
    ) -> Matrix: ...

    def get_options(self) -> Options:
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
    options: Options  # get_options(): what results.json records
    key_facts: Facts  # what else joins the cache key (hashed as JSON)
    cache: Path | None
    stem: str
    chunk_size: int
    show_progress: bool
    shards: Any = None
    chunked: Any = None  # the chunk loop of aflite.features.cache (kept there with the cache layout)
    read_only: tuple[Path, ...] = ()  # featurize's read-only cache folders (a combination's parts look there too)
    identity: CacheIdentity | None = None  # this call's: what its cache record holds and is checked against

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

    def cache_extra(self) -> Facts:
        """What else besides :meth:`get_options` decides this encoder's output (part of the features' cache key,
        not of the recorded options): e.g. which layers an int8 backend quantises."""
        return {}

    def plan(self, a: list[str], y: Any, warmup_size: int | float,
             warmup_seed: int | None) -> tuple[np.ndarray | None, Facts]:
        """(the warm-up rows, or None for a featurizer without a warm-up; what else goes into the cache key)."""
        key_facts = dict(self.cache_extra())
        if self.reads_images:
            key_facts["image_files"] = files_fingerprint(a)
        return None, key_facts

    def get_options(self) -> Options:
        raise NotImplementedError  # BaseFeaturizer's (its output parameters), or Plain's (its featurizer's)

    def compute(self, job: FeatureJob, rows: np.ndarray, warmup_rows: np.ndarray | None) -> tuple[Any, PhiInfo]:
        """(the matrix of ``rows``, what featurize records about computing it): chunk by chunk (resumable, and
        shardable on a cluster) when the registry says the featurizer ``shards``."""
        found = find(job.name)
        if found is not None and found.shards:
            return job.run_chunks(self, job.a, job.b), PhiInfo()
        return self.fit_transform(job.a, job.b), PhiInfo()  # type: ignore[attr-defined]


class BaseFeaturizer(Computes):
    """The base class of every featurizer, as scikit-learn's ``BaseEstimator`` is of its estimators: the
    constructor stores its keywords as given (checked when fitting), so :meth:`get_params` reads them back from
    the constructor's signature; :meth:`fit_transform` is ``fit`` then ``transform`` (a featurizer overrides it
    only when one pass differs from the two, as ngram's SVD does); :meth:`get_options`, what decides Φ's values
    (the cache key, and what explain and evaluate rebuild a run's Φ from), is the parameters named in
    ``output_params``, made JSON-ready, with :meth:`resolved_option` where a value is resolved (a model folder
    found, a preset filled in)."""

    name: str
    # the constructor keywords that decide Φ's values; the others (threads, device, batch size, progress, where
    # exports are cached) decide only how fast it is computed, so they stay out of the cache key
    output_params: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def _param_names(cls) -> list[str]:
        """The constructor's keywords (``*args``/``**kwargs`` are no parameters: a combination's options are)."""
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self"
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]

    def get_params(self, deep: bool = True) -> dict[str, object]:
        """The constructor's keywords and their values (``deep`` is accepted for scikit-learn's signature; a
        featurizer holds no estimators as parameters)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> Self:
        """Set constructor keywords by name (unknown names refused, as scikit-learn does)."""
        valid = set(self._param_names())
        for key, value in params.items():
            if key not in valid:
                raise ParameterError(f"{type(self).__name__} has no parameter {key!r}; "
                                     f"it takes {', '.join(sorted(valid))}")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_params().items())})"

    def fit(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None) -> Self:
        """Nothing to learn by default (a frozen encoder, precomputed vectors)."""
        return self

    def transform(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None) -> Matrix:
        raise NotImplementedError(f"{type(self).__name__} must define transform")

    def fit_transform(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None) -> Matrix:
        """``fit`` on the rows, then ``transform`` them."""
        return self.fit(texts_a, texts_b, y).transform(texts_a, texts_b)

    def resolved_option(self, name: str, value: Any) -> Any:
        """The recorded value of the output parameter ``name`` given as ``value`` (a featurizer overrides it where a
        value is resolved: a model folder found, a preset filled in)."""
        return value

    def get_options(self) -> Options:
        """The output parameters, in ``output_params``' order, JSON-ready (paths as strings, tuples as lists)."""
        params = self.get_params()
        return {name: _json_ready(self.resolved_option(name, params[name])) for name in self.output_params}


def _json_ready(value: Any) -> Any:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, tuple):
        return list(value)
    return value


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

    def cache_extra(self) -> Facts:
        hook = getattr(self.inner, "cache_extra", None)
        return dict(hook()) if hook is not None else {}

    def get_options(self) -> Options:
        return dict(self.inner.get_options())

    def fit_transform(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None) -> Any:
        return self.inner.fit_transform(texts_a, texts_b)

    def transform(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, **kwargs: Any) -> Any:
        return self.inner.transform(texts_a, texts_b, **kwargs)


class BackendEncoder(BaseFeaturizer):
    """What the encoder featurizers that may run through ONNX Runtime (minilm, the image models, warmup) share:
    resolving their backend once (the CPU default is each model's, :func:`aflite.encoders.onnx_text.
    resolve_backend`), and pickling without the ONNX Runtime session (for Dask workers and copies; it cannot be
    pickled and is rebuilt from the cached export where it is next used)."""

    backend: str | None
    device: str | None
    _resolved: str | None
    _runner: Any

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_runner"] = None
        return state

    def get_options(self) -> Options:
        """The output parameters, then the backend when it is not torch (torch keeps its cache keys from before
        backends existed) and the precision when it is not float32."""
        opts = super().get_options()
        if self.resolved_backend() != "torch":
            opts["backend"] = self.resolved_backend()
        return opts | precision_option(self)

    def resolved_backend(self) -> str:
        raise NotImplementedError

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


def precision_option(feat: Any) -> dict[str, str]:
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
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, unit_scale=False, dynamic_ncols=True)
