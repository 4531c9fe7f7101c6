""":func:`featurize`: a named featurizer on a view -- built (:func:`make_featurizer`), asked what it needs (the
labels of a warm-up slice, the ids of vectors aligned by id), computed or read back from its cache
(:mod:`aflite.features.cache`) -- and :func:`featurize_dataset`, the same on a :class:`aflite.data.Dataset`."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import announce
from aflite.errors import InputError, ParameterError
from aflite.features.base import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_IMAGE_CHUNK_SIZE,
    Computes,
    FeatureJob,
    Featurizer,
    Matrix,
    Options,
    PhiInfo,
    Plain,
    apply_view,
    cache_identity,
    cache_key,
    log,
)
from aflite.features.cache import final_path, load_cached, read_only_hit, store, transform_chunked
from aflite.features.registry import CONTEXT, image_featurizer_options, spec
from aflite.threads import limited

__all__ = ["Features", "cache_key", "featurize", "featurize_dataset", "make_featurizer"]


def make_featurizer(name: str, **options: Any) -> Featurizer:
    """Build a registered featurizer (:mod:`aflite.features.registry`) by name with its options (and the call
    context it takes: ``show_progress``, ``ids``); a bad option is refused before any work."""
    context = {k: options.pop(k) for k in CONTEXT if k in options}
    feat: Featurizer = spec(name).build(options, **context)
    validate = getattr(feat, "_validate", None)
    if validate is not None:
        validate()  # on purpose before any work: the CLI reports a bad option before reading or embedding
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
    options: Options
    cache_path: Path | None = None
    from_cache: bool = False
    info: PhiInfo = dataclasses.field(default_factory=PhiInfo)


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
    shards: Any = None,
    read_only: Sequence[str | os.PathLike[str]] = (),
    **options: Any,
) -> Features:
    """Featurize a dataset under a view, with an on-disk cache and resumable encoder runs.

    With ``cache_dir`` the matrix is stored as ``<featurizer>-<view>-<hash>.npy`` (sparse ngram: ``.npz``) and
    reloaded by an identical call; encoder runs write every ``chunk_size`` rows to ``<stem>.parts/``, so that a
    restarted run skips the chunks already there.

    Parameters
    ----------
    texts_a : sequence of str
        The first texts (or image references).
    texts_b : sequence of str, optional
        The second texts of pairs.
    featurizer : str, default "ngram"
        The registered featurizer (:mod:`aflite.features.registry`).
    view : str, default "pair"
        Which text Φ reads: ``pair``, ``premise`` or ``hypothesis``.
    cache_dir : path, optional
        Where the matrix is cached.
    y : array-like, optional
        Labels, for a featurizer that trains on them (``warmup``).
    ids : array-like, optional
        Ids, for a featurizer that aligns vectors by id (``precomputed``).
    warmup_size : int or float, default 0.1
        The warm-up slice (a count, or a fraction of the rows).
    warmup_seed : int, optional
        The seed the warm-up slice is drawn with (default: the featurizer's ``seed``).
    chunk_size : int, default 4096
        Rows embedded (and cached) at a time.
    show_progress : bool, default True
        Show a progress bar.
    shards : callable, optional
        Replaces the chunk loop (the arguments of ``transform_chunked``): the same chunks computed elsewhere, e.g.
        by :class:`aflite.features.shards.ShardedTransform` on a Dask cluster; featurizers without chunks ignore it.
    read_only : list of path, optional
        Cache folders looked in first and never written, not even to drop a damaged entry (another command's,
        e.g. a run folder's cache read by ``explain``).
    **options
        The featurizer's constructor options.

    Returns
    -------
    Features
        The matrix and the rows it covers (a warm-up slice left out), with the featurizer's info.
    """
    if chunk_size < 1:
        raise ParameterError(f"chunk_size must be >= 1, got {chunk_size}")
    a, b = apply_view(texts_a, texts_b, view)
    n = len(a)
    if n == 0:
        raise InputError("no rows to featurize")
    feat: Any = make_featurizer(featurizer, show_progress=show_progress, ids=ids, **options)
    if spec(featurizer).aligned_by_id:  # the user's own vectors: read, not computed or cached
        x = feat.transform(a, b)
        return Features(x, np.arange(n), np.empty(0, np.int64), featurizer, view, feat.get_options())
    if cache_dir is not None and getattr(feat, "export_dir", False) is None:
        setattr(feat, "export_dir", Path(cache_dir) / "onnx")  # noqa: B010 - ONNX exports live in the run cache
    if not isinstance(feat, Computes):  # only fit/transform/get_options: the default hooks
        feat = Plain(feat)
    opts = feat.get_options()
    warmup, key_facts = feat.plan(a, y, warmup_size, warmup_seed)
    if feat.reads_images and chunk_size == DEFAULT_CHUNK_SIZE:  # images embed ~100x slower on a CPU: resume finer
        chunk_size = DEFAULT_IMAGE_CHUNK_SIZE
    warmup_rows = np.empty(0, dtype=np.int64) if warmup is None else warmup
    mask = np.ones(n, dtype=bool)
    mask[warmup_rows] = False
    rows = np.flatnonzero(mask)
    job = FeatureJob(featurizer, view, a, b, y, opts, key_facts, None, "", chunk_size, show_progress, shards,
                     transform_chunked, tuple(map(Path, read_only)))
    if cache_dir is not None or read_only:
        job.identity = cache_identity(a, b, featurizer, view, opts, key_facts or None)
        job.stem = f"{featurizer}-{view}-{job.identity.key[:20]}"
        found = read_only_hit(read_only, job.stem, job.identity)
        if found is not None:
            return Features(found[0], rows, warmup_rows, featurizer, view, opts, found[1], True, found[2])
    if cache_dir is not None:
        job.cache = Path(cache_dir)
        announce(job.cache)  # inside a run folder: the folder records its cache as aflite's
        job.cache.mkdir(parents=True, exist_ok=True)
        hit = load_cached(job.cache, job.stem, identity=job.identity)
        if hit is not None:
            log.info("features loaded from cache %s", job.cache / job.stem)
            return Features(hit[0], rows, warmup_rows, featurizer, view, opts,
                            final_path(job.cache, job.stem, hit[0]), True, hit[1])
    t0 = time.perf_counter()
    x, info = feat.compute(job, rows, warmup)
    seconds = round(time.perf_counter() - t0, 3)
    info = dataclasses.replace(info, seconds=seconds, rows_per_second=round(len(rows) / max(seconds, 1e-9), 1))
    out_path = None if job.cache is None else store(job, x, warmup, n, info)
    return Features(x, rows, warmup_rows, featurizer, view, opts, out_path, False, info)


def featurize_dataset(ds: Any, featurizer: str = "ngram", view: str = "pair",
                      cache_dir: str | os.PathLike[str] | None = None, *, warmup_size: int | float = 0.1,
                      warmup_seed: int | None = None, **kwargs: Any) -> Features:
    """:func:`featurize` on a :class:`aflite.data.Dataset`: its inputs, and what the featurizer's registry entry
    asks of it (the labels for a featurizer trained on a warm-up slice drawn with ``warmup_seed``, the ids for vectors
    aligned by id; on an image dataset, the image network a warm-up fine-tunes). ``kwargs``: featurize's keywords
    and the featurizer's options."""
    found = spec(featurizer)
    if ds.modality == "image":
        kwargs = image_featurizer_options(featurizer, kwargs)
    return featurize(ds.texts_a, ds.texts_b, featurizer, view, cache_dir=cache_dir,
                     y=ds.labels.tolist() if found.needs_labels else None,
                     ids=ds.ids.tolist() if found.aligned_by_id else None,
                     warmup_size=warmup_size, warmup_seed=warmup_seed, **kwargs)
