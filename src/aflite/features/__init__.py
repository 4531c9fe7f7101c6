"""Feature representations Φ(x) for AFLite: texts (or text pairs, or image references) to a float32 matrix.

Featurizers follow scikit-learn (``fit`` / ``transform`` / ``fit_transform``); the built-in ones (``ngram``,
``minilm``, ``warmup``, the paper's fine-tuned Φ, ``precomputed`` vectors and the image encoders) are listed, with
what each can do, in :mod:`~aflite.features.registry`. Views: ``pair``, ``hypothesis`` (second text only),
``premise`` (first text only).

:func:`featurize` (in :mod:`~aflite.features.compute`) applies the view and caches the matrix on disk under the
whole key of its inputs and options (:mod:`~aflite.features.cache`), so that reruns are free and long encoder runs
resume chunk by chunk. torch and transformers are optional (``pip install aflite[text]``) and imported lazily.
Every public name is importable from ``aflite.features``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names for type checkers; at run time each is imported on first use (__getattr__ below)
    from aflite.features.base import (
        DEFAULT_CHUNK_SIZE,
        DEFAULT_IMAGE_CHUNK_SIZE,
        DEFAULT_MAX_LENGTH,
        VIEWS,
        BaseFeaturizer,
        Featurizer,
        Matrix,
        apply_view,
        cache_key,
    )
    from aflite.features.compute import Features, featurize, featurize_dataset, make_featurizer
    from aflite.features.images import ImageFeaturizer
    from aflite.features.minilm import MiniLMFeaturizer
    from aflite.features.ngram import NgramFeaturizer
    from aflite.features.precomputed import PrecomputedFeaturizer, align_embeddings, load_embeddings
    from aflite.features.warmup import WarmupFeaturizer, select_warmup_rows

# public name -> module; lazy so that the CLI can read aflite.features.registry (``aflite --help``) without numpy
_LAZY: dict[str, str] = {
    **dict.fromkeys(("DEFAULT_CHUNK_SIZE", "DEFAULT_IMAGE_CHUNK_SIZE", "DEFAULT_MAX_LENGTH", "VIEWS",
                     "BaseFeaturizer", "Featurizer", "Matrix", "apply_view"), "aflite.features.base"),
    "cache_key": "aflite.features.base",
    **dict.fromkeys(("Features", "featurize", "featurize_dataset", "make_featurizer"), "aflite.features.compute"),
    "ImageFeaturizer": "aflite.features.images",
    "MiniLMFeaturizer": "aflite.features.minilm",
    "NgramFeaturizer": "aflite.features.ngram",
    **dict.fromkeys(("PrecomputedFeaturizer", "align_embeddings", "load_embeddings"), "aflite.features.precomputed"),
    "WarmupFeaturizer": "aflite.features.warmup",
    "select_warmup_rows": "aflite.features.warmup",
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:  # a sub-module (aflite.features.compute, ...), as the eager package offered it
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(target), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_IMAGE_CHUNK_SIZE",
    "DEFAULT_MAX_LENGTH",
    "BaseFeaturizer",
    "Features",
    "Featurizer",
    "ImageFeaturizer",
    "Matrix",
    "MiniLMFeaturizer",
    "NgramFeaturizer",
    "PrecomputedFeaturizer",
    "VIEWS",
    "WarmupFeaturizer",
    "align_embeddings",
    "apply_view",
    "cache_key",
    "featurize",
    "featurize_dataset",
    "load_embeddings",
    "make_featurizer",
    "select_warmup_rows",
]
