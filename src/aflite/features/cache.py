""":func:`featurize`: a named featurizer on a view, cached on disk by content hash, resumable by chunks."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from aflite.atomic import atomic_open, write_json, write_npy
from aflite.errors import InputError, ParameterError
from aflite.features.base import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_IMAGE_CHUNK_SIZE,
    Computes,
    FeatureJob,
    Featurizer,
    Matrix,
    Plain,
    apply_view,
    cache_key,
    log,
    progress_bar,
)
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
    options: dict[str, Any]
    cache_path: Path | None = None
    from_cache: bool = False
    info: dict[str, Any] = dataclasses.field(default_factory=dict)


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

    ``featurizer`` names the Φ (:mod:`aflite.features.registry`); ``options`` go to its constructor. ``y`` is
    needed by a featurizer that trains on labels (``warmup``: the warm-up slice is ``warmup_size`` rows, a count or
    a fraction, drawn with ``warmup_seed``, default the featurizer's ``seed``); ``ids`` by one that aligns vectors
    by id (``precomputed``). With ``cache_dir``, the matrix is stored as ``<featurizer>-<view>-<hash>.npy`` (sparse
    ngram: ``.npz``) and reloaded by an identical call; encoder runs write every ``chunk_size`` rows to
    ``<stem>.parts/`` and a restarted run skips the chunks already there. ``shards`` replaces that chunk loop (same
    arguments as ``_transform_chunked``): the same chunks computed elsewhere, e.g. on a Dask cluster by
    :class:`aflite.features.shards.ShardedTransform`; featurizers without chunks (ngram, precomputed) ignore it.
    ``read_only`` are cache folders looked in first and never written (not even to drop a damaged entry): another
    command's, e.g. a run folder's cache read by ``explain`` or ``evaluate``.
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
                     _transform_chunked, tuple(map(Path, read_only)))
    if cache_dir is not None or read_only:
        job.stem = f"{featurizer}-{view}-{cache_key(a, b, featurizer, view, opts, key_facts or None)[:20]}"
        found = _read_only(read_only, job.stem)
        if found is not None:
            return Features(found[0], rows, warmup_rows, featurizer, view, opts, found[1], True, found[2])
    if cache_dir is not None:
        job.cache = Path(cache_dir)
        job.cache.mkdir(parents=True, exist_ok=True)
        hit = _load_cached(job.cache, job.stem)
        if hit is not None:
            log.info("features loaded from cache %s", job.cache / job.stem)
            return Features(hit[0], rows, warmup_rows, featurizer, view, opts,
                            _final_path(job.cache, job.stem, hit[0]), True, hit[1])
    t0 = time.perf_counter()
    x, info = feat.compute(job, rows, warmup)
    info["seconds"] = round(time.perf_counter() - t0, 3)
    info["rows_per_second"] = round(len(rows) / max(info["seconds"], 1e-9), 1)
    out_path = None if job.cache is None else _store(job, x, warmup, n, info)
    return Features(x, rows, warmup_rows, featurizer, view, opts, out_path, False, info)


def _read_only(folders: Sequence[str | os.PathLike[str]], stem: str) -> tuple[Matrix, Path, dict[str, Any]] | None:
    """(matrix, its file, its info) of ``stem`` in the first of ``folders`` that holds it whole; nothing there is
    written, not even to drop a damaged entry (another command's cache, e.g. a run folder's)."""
    for folder in map(Path, folders):
        found = _load_cached(folder, stem, drop_damaged=False) if (folder / f"{stem}.json").is_file() else None
        if found is not None:
            log.info("features loaded from %s (read only)", folder / stem)
            return found[0], _final_path(folder, stem, found[0]), found[1]
    return None


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


def _store(job: FeatureJob, x: Any, warmup: np.ndarray | None, n: int, info: dict[str, Any]) -> Path:
    """Cache the matrix (and a warm-up's slice), its description last: a .json is only ever found beside a
    complete matrix, and a matrix without its .json (a write that failed in between) is not trusted
    (:func:`_load_cached`)."""
    cache, stem = job.cache, job.stem
    assert cache is not None
    if warmup is not None:
        write_npy(cache / f"{stem}.warmup_rows.npy", warmup)
    out_path = _final_path(cache, stem, x)
    if sp.issparse(x):
        with atomic_open(out_path, "wb") as fh:
            sp.save_npz(fh, sp.csr_matrix(x), compressed=False)
    else:
        write_npy(out_path, np.asarray(x))
    write_json(cache / f"{stem}.json", {"featurizer": job.name, "view": job.view, "options": job.options,
                                        "n_rows": n, "shape": list(x.shape), "info": info})
    shutil.rmtree(cache / f"{stem}.parts", ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        (cache / f"{stem}.warmup.pt").unlink()
    return out_path


def _final_path(cache: Path, stem: str, x: Any) -> Path:
    return cache / (f"{stem}.npz" if sp.issparse(x) else f"{stem}.npy")


def _load_cached(cache: Path, stem: str, drop_damaged: bool = True) -> tuple[Matrix, dict[str, Any]] | None:
    """The cached matrix and its info, or None: when absent, and when damaged (unreadable, or not the shape
    its .json records; a warning says so and, with ``drop_damaged``, the entry is removed, so that it is recomputed
    and rewritten)."""
    meta = cache / f"{stem}.json"
    dense, sparse = cache / f"{stem}.npy", cache / f"{stem}.npz"
    if not (dense.is_file() or sparse.is_file()) and not meta.is_file():
        return None
    try:
        described = json.loads(meta.read_text(encoding="utf-8"))
        info = dict(described.get("info", {}))
        if dense.is_file():
            x: Matrix = np.load(dense, allow_pickle=False)
        elif sparse.is_file():
            x = sp.csr_matrix(sp.load_npz(sparse), dtype=np.float32)
        else:
            raise ValueError("the matrix file is missing")
        if list(x.shape) != list(described["shape"]):
            raise ValueError(f"shape {list(x.shape)}, expected {described['shape']}")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log.warning("damaged feature cache entry %s (%s): recomputing it", cache / stem, why)
        for f in (meta, dense, sparse) if drop_damaged else ():
            with contextlib.suppress(OSError):
                f.unlink()
        return None
    return x, info


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
                try:
                    arr = np.load(f, allow_pickle=False)
                except (OSError, ValueError, EOFError) as exc:  # damaged: embed that chunk again
                    log.warning("damaged cached chunk %s (%s): embedding it again", f, str(exc).splitlines()[0])
                    continue
                if arr.shape[0] == min(chunk_size, n - c * chunk_size):
                    done[c] = arr
        if done:
            log.info("resuming: %d of %d chunks already embedded in %s", len(done), n_chunks, parts_dir)
    initial = sum(v.shape[0] for v in done.values())
    unit = "image" if getattr(feat, "reads_images", False) else "pair"
    bar = progress_bar(n, feat.name, show_progress, initial=initial, unit=unit)
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
