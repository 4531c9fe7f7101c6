"""``ngram``: hashed word and character n-gram TF-IDF, reduced by a seeded TruncatedSVD."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any, ClassVar, Self

import numpy as np
import scipy.sparse as sp

from aflite.errors import InputError, ParameterError
from aflite.features.base import BaseFeaturizer, FeatureJob, Matrix, PhiInfo, progress_bar
from aflite.features.ngram_hash import murmur_counts
from aflite.features.rsvd import randomized_components
from aflite.option import Option, check_params
from aflite.threads import budget

DEDUP_BELOW = 0.9  # hash a field's distinct texts once when they are at most this share of its rows
NGRAM_RANGE = "must be an n-gram range (low, high) with 1 <= low <= high"


def _ngram_range(value: Any) -> bool:
    return len(value) == 2 and all(isinstance(v, int) for v in value) and 1 <= value[0] <= value[1]


def _project(x: sp.csr_matrix, components: np.ndarray) -> np.ndarray:
    """TF-IDF rows onto the SVD components (TruncatedSVD.transform: ``x @ components^T``), float32."""
    return np.asarray(x @ components.T, dtype=np.float32)


def _hashed(texts: list[str], hasher: Any) -> sp.csr_matrix:
    """``hasher``'s counts of ``texts``, each distinct text hashed once and its row repeated.

    Why: an NLI field repeats its texts (SNLI train_100k: 27,433 distinct premises in 99,890 rows), and equal
    texts have equal count rows, so hashing the distinct ones and gathering rows gives the same matrix, bit for
    bit, for a quarter of the premise hashing. Fields with few repeats are hashed as they are."""
    first: dict[str, int] = {}
    inverse = np.fromiter((first.setdefault(t, len(first)) for t in texts), dtype=np.intp, count=len(texts))
    args = (hasher.analyzer, hasher.ngram_range, hasher.n_features, budget())
    if len(first) > DEDUP_BELOW * len(texts):
        return murmur_counts(texts, *args)
    return sp.csr_matrix(murmur_counts(list(first), *args)[inverse])


class NgramFeaturizer(BaseFeaturizer):
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
    rows are transformed. Its default (200,000) leaves SNLI-sized sets fully fitted on purpose: on train_100k a
    20,000- or 50,000-row fit gave kept-set Jaccard 0.887 / 0.891 to the full fit's filter (d68b964), below
    the 0.90 the speed issue (#57) keeps and a little below the ngram ``seed`` floor (a full fit with seed 1:
    0.895; probe D(Φ) 0.517 / 0.521 / 0.522 against 0.521), so the sample is a cap for memory on large sets,
    not a speed default (benchmarks/ngram_stages.py for the cost).
    """

    name = "ngram"
    # the constructor's arguments and their rules, declared once (their defaults are the signature's)
    param_options: ClassVar[tuple[Option, ...]] = (
        Option("n_components", int, valid=lambda v: v >= 1, rule="must be >= 1"),
        Option("dense", bool),
        Option("word_ngrams", (tuple, list), valid=_ngram_range, rule=NGRAM_RANGE),
        Option("char_ngrams", (tuple, list), valid=_ngram_range, rule=NGRAM_RANGE),
        Option("n_features", int, valid=lambda v: v >= 16, rule="must be >= 16"),
        Option("min_df", int, valid=lambda v: v >= 1, rule="must be >= 1"),
        Option("max_columns", int, valid=lambda v: v >= 1, rule="must be >= 1"),
        Option("sublinear_tf", bool),
        Option("svd_fit_rows", int, valid=lambda v: v >= 2, rule="must be >= 2", optional=True),
        Option("seed", int, optional=True),
    )
    output_params = ("n_components", "dense", "word_ngrams", "char_ngrams", "n_features", "min_df", "max_columns",
                     "sublinear_tf", "svd_fit_rows", "seed")

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
        # scikit-learn convention: store the arguments as given; _validate (called by fit) checks them
        self.n_components = n_components
        self.dense = dense
        self.word_ngrams = word_ngrams
        self.char_ngrams = char_ngrams
        self.n_features = n_features
        self.min_df = min_df
        self.max_columns = max_columns
        self.sublinear_tf = sublinear_tf
        self.svd_fit_rows = svd_fit_rows
        self.seed = seed
        # per field: ([(columns, tfidf) per analyzer], SVD components or None)
        self._fields: list[tuple[list[tuple[np.ndarray, Any]], Any]] | None = None
        self.n_components_: list[int] = []
        self.progress: Any = None  # a tqdm bar ticked once per stage of fit_transform (see fit_stages)

    def _validate(self) -> None:
        """Check the constructor arguments against :attr:`param_options`; raised at fit time (or early by
        :func:`make_featurizer`)."""
        check_params(self, self.param_options)

    def fit_stages(self, n_fields: int) -> int:
        """Stages :meth:`fit_transform` reports on ``progress``: per field, two hashing passes and the SVD."""
        return n_fields * (3 if self.dense else 2)

    def _tick(self, stage: str) -> None:
        if self.progress is not None:
            self.progress.set_postfix_str(stage, refresh=False)
            self.progress.update(1)

    def compute(self, job: FeatureJob, rows: np.ndarray, warmup_rows: np.ndarray | None) -> tuple[Any, PhiInfo]:
        """fit_transform with one progress tick per hashing pass / SVD (minutes on large sets)."""
        self.progress = progress_bar(self.fit_stages(1 if job.b is None else 2),
                                     f"{self.name} features ({len(job.a)} rows)", job.show_progress, unit="stage")
        try:
            return self.fit_transform(job.a, job.b), PhiInfo()
        finally:
            if self.progress is not None:
                self.progress.close()
            self.progress = None

    def _hashers(self) -> tuple[Any, Any]:
        from sklearn.feature_extraction.text import HashingVectorizer

        common = {"n_features": self.n_features, "alternate_sign": False, "norm": None, "dtype": np.float32}
        word = HashingVectorizer(analyzer="word", ngram_range=tuple(self.word_ngrams), lowercase=True, **common)
        char = HashingVectorizer(analyzer="char_wb", ngram_range=tuple(self.char_ngrams), lowercase=True, **common)
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
            # hasher.transform(texts) bit for bit, compiled and over the thread budget (ngram_hash.murmur_counts)
            counts = _hashed(texts, hasher)
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
        self._validate()
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
                # scikit-learn's TruncatedSVD(k, algorithm="randomized", n_iter=5, random_state=seed), cheaper
                svd = randomized_components(x if sample is None else x[sample], k, self.seed, n_iter=5,
                                            threads=os.cpu_count() or 1)
                self._tick("SVD")
                self.n_components_.append(k)
                outs.append(_project(x, svd))
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
            outs.append(x if svd is None else _project(x, svd))
        return self._combine(outs)

    def _combine(self, outs: list[Matrix]) -> Matrix:
        if self.dense:
            return np.ascontiguousarray(np.hstack(outs), dtype=np.float32)
        return sp.csr_matrix(sp.hstack(outs, format="csr"), dtype=np.float32)
