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
    FEATURIZERS,
    IMAGE_FEATURIZERS,
    Featurizer,
    Matrix,
    apply_view,
    log,
    progress_bar,
)
from aflite.features.images import ImageFeaturizer
from aflite.features.minilm import MiniLMFeaturizer
from aflite.features.ngram import NgramFeaturizer
from aflite.features.precomputed import PrecomputedFeaturizer
from aflite.features.warmup import WarmupFeaturizer, select_warmup_rows
from aflite.hashing import data_fingerprint
from aflite.threads import limited

_CACHE_FORMAT = 1


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
    shards: Any = None,
    read_only: Sequence[str | os.PathLike[str]] = (),
    **options: Any,
) -> Features:
    """Featurize a dataset under a view, with an on-disk cache and resumable encoder runs.

    ``featurizer`` names the Φ; ``options`` go to its constructor. ``y`` is needed for ``warmup`` (the warm-up
    slice is ``warmup_size`` rows, a count or a fraction, drawn with ``warmup_seed``, default the featurizer's
    ``seed``); ``ids`` for ``precomputed``. With ``cache_dir``, the matrix is stored as
    ``<featurizer>-<view>-<hash>.npy`` (sparse ngram: ``.npz``) and reloaded by an identical call; encoder
    runs write every ``chunk_size`` rows to ``<stem>.parts/`` and a restarted run skips the chunks already
    there. ``shards`` replaces that chunk loop (same arguments as ``_transform_chunked``): the same chunks computed
    elsewhere, e.g. on a Dask cluster by :class:`aflite.runs.shards.ShardedTransform`; featurizers without chunks
    (ngram, precomputed) ignore it. ``read_only`` are cache folders looked in first and never written (not even
    to drop a damaged entry): another command's, e.g. a run folder's cache read by ``explain`` or ``evaluate``.
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
    if cache_dir is not None and getattr(feat, "export_dir", False) is None:
        setattr(feat, "export_dir", Path(cache_dir) / "onnx")  # noqa: B010 - ONNX exports live in the run cache
    opts = feat.get_options()

    extra: dict[str, Any] = dict(getattr(feat, "cache_extra", dict)())
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
        from aflite.data.images import files_fingerprint

        extra["image_files"] = files_fingerprint(a)
        if isinstance(feat, ImageFeaturizer):
            feat.fit(a)  # the int8 backend's calibration images: a sample of all rows, whatever the chunking
        if chunk_size == DEFAULT_CHUNK_SIZE:  # images embed ~100× slower than sentences on a CPU: resume finer
            chunk_size = DEFAULT_IMAGE_CHUNK_SIZE
    mask = np.ones(n, dtype=bool)
    mask[warmup_rows] = False
    rows = np.flatnonzero(mask)

    cache: Path | None = None
    stem = ""
    if cache_dir is not None or read_only:
        key = cache_key(a, b, featurizer, view, opts, extra or None)
        stem = f"{featurizer}-{view}-{key[:20]}"
        for folder in map(Path, read_only):
            found = _load_cached(folder, stem, drop_damaged=False) if (folder / f"{stem}.json").is_file() else None
            if found is not None:
                log.info("features loaded from %s (read only)", folder / stem)
                x_found, found_info = found
                return Features(x_found, rows, warmup_rows, featurizer, view, opts,
                                _final_path(folder, stem, x_found), True, found_info)
    if cache_dir is not None:
        cache = Path(cache_dir)
        cache.mkdir(parents=True, exist_ok=True)
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
        model_file = None
        if cache is not None:  # the fine-tuned model does not depend on the backend that embeds with it
            mkey = cache_key(a, b, featurizer, view, {k: v for k, v in opts.items() if k != "backend"}, extra)
            model_file = cache / f"{featurizer}-{view}-{mkey[:20]}.warmup.pt"
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
                **warmup_loss_summary(wf.train_log_, len(np.unique(np.asarray(y)[warmup_rows]))),
            }
        )
        ra = [a[i] for i in rows]
        rb = None if b is None else [b[i] for i in rows]
        x = (shards or _transform_chunked)(wf, ra, rb, cache, stem, chunk_size, show_progress)
    elif getattr(feat, "resumable", False):
        x = (shards or _transform_chunked)(feat, a, b, cache, stem, chunk_size, show_progress)
    elif isinstance(feat, NgramFeaturizer):  # one tick per hashing pass / SVD (minutes on large sets)
        feat.progress = progress_bar(feat.fit_stages(1 if b is None else 2), f"{feat.name} features ({n} rows)",
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
        # the matrix first, its description last: a .json is only ever found beside a complete matrix, and a
        # matrix without its .json (a write that failed in between) is not trusted (see _load_cached)
        out_path = _final_path(cache, stem, x)
        if sp.issparse(x):
            with atomic_open(out_path, "wb") as fh:
                sp.save_npz(fh, sp.csr_matrix(x), compressed=False)
        else:
            write_npy(out_path, np.asarray(x))
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
        shutil.rmtree(cache / f"{stem}.parts", ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            (cache / f"{stem}.warmup.pt").unlink()
    return Features(x, rows, warmup_rows, featurizer, view, opts, out_path, False, info)


def warmup_loss_summary(losses: Sequence[float], n_classes: int) -> dict[str, Any]:
    """Did the warm-up train Φ? The mean loss of its first and last (up to) 3 steps, chance (ln of the classes)
    and a plain judgement: "fell" when the end is below 80 % of the start, else "barely moved"."""
    if not losses:
        return {}
    w = max(1, min(3, len(losses) // 3 or 1))
    start, end = float(np.mean(losses[:w])), float(np.mean(losses[-w:]))
    return {"warmup_loss_start": round(start, 4), "warmup_loss_end": round(end, 4),
            "warmup_loss_chance": round(math.log(max(n_classes, 2)), 4),
            "warmup_loss_judgement": "fell" if end < 0.8 * start else "barely moved"}


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
    unit = "image" if isinstance(feat, ImageFeaturizer) or getattr(feat, "image_model", None) else "pair"
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
