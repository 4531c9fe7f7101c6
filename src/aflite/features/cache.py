"""The on-disk cache of :func:`aflite.features.compute.featurize`: one matrix per featurizer, view and content hash
(``<featurizer>-<view>-<hash>.npy``, sparse ``.npz``, with its ``.json`` record, which holds the matrix file's
sha256, and a warm-up's rows), encoder
runs written chunk by chunk to ``<stem>.parts/`` so that a restarted run resumes, and read-only cache folders
(another command's) looked in first. Every reader goes through :func:`load_cached`, which verifies the recorded
sha256 before the matrix is used: an entry whose bytes changed (same shape, other numbers) is never used."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from aflite.atomic import JSON, atomic_open, write_json, write_npy
from aflite.errors import InputError
from aflite.features.base import FeatureJob, Matrix, log, progress_bar
from aflite.hashing import file_sha256, inputs_fingerprint

__all__ = ["check_run_features", "final_path", "load_cached", "read_only_hit", "store", "transform_chunked"]


def read_only_hit(folders: Sequence[str | os.PathLike[str]], stem: str) -> tuple[Matrix, Path, JSON] | None:
    """(matrix, its file, its info) of ``stem`` in the first of ``folders`` that holds it whole; nothing there is
    written, not even to drop a damaged entry (another command's cache, e.g. a run folder's)."""
    for folder in map(Path, folders):
        found = load_cached(folder, stem, drop_damaged=False) if (folder / f"{stem}.json").is_file() else None
        if found is not None:
            log.info("features loaded from %s (read only)", folder / stem)
            return found[0], final_path(folder, stem, found[0]), found[1]
    return None


def check_run_features(X: Any, y: np.ndarray, fingerprint: str | None, run_path: Path, source: Path | None,
                       data_name: str) -> None:
    """Refuse Φ (of the run's rows, in its order, with their labels) that is not the Φ the run in ``run_path``
    filtered: its checkpoint's ``fingerprint`` differs. Every reader of a run's Φ (explain, evaluate's
    single-iteration baseline) asks this before use; ``source`` is the cache file Φ was read from (None: computed),
    named in the message. No fingerprint (no readable checkpoint): nothing to check against."""
    if fingerprint is None or inputs_fingerprint(X, y) == fingerprint:
        return
    what = "Φ computed from DATA" if source is None else f"Φ read from {source}"
    raise InputError(f"{data_name}: {what} is not the Φ the run in {run_path} filtered (checkpoint fingerprint "
                     f"differs): another dataset, another featurizer option, or another Φ cache")


def store(job: FeatureJob, x: Any, warmup: np.ndarray | None, n: int, info: JSON) -> Path:
    """Cache the matrix (and a warm-up's slice), its description last: a .json is only ever found beside a
    complete matrix, and a matrix without its .json (a write that failed in between) is not trusted
    (:func:`load_cached`)."""
    cache, stem = job.cache, job.stem
    assert cache is not None
    if warmup is not None:
        write_npy(cache / f"{stem}.warmup_rows.npy", warmup)
    out_path = final_path(cache, stem, x)
    if sp.issparse(x):
        with atomic_open(out_path, "wb") as fh:
            sp.save_npz(fh, sp.csr_matrix(x), compressed=False)
    else:
        write_npy(out_path, np.asarray(x))
    write_json(cache / f"{stem}.json", {"featurizer": job.name, "view": job.view, "options": job.options,
                                        "n_rows": n, "shape": list(x.shape), "sha256": file_sha256(out_path),
                                        "info": info})
    shutil.rmtree(cache / f"{stem}.parts", ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        (cache / f"{stem}.warmup.pt").unlink()
    return out_path


def final_path(cache: Path, stem: str, x: Any) -> Path:
    return cache / (f"{stem}.npz" if sp.issparse(x) else f"{stem}.npy")


def load_cached(cache: Path, stem: str, drop_damaged: bool = True) -> tuple[Matrix, JSON] | None:
    """The cached matrix and its info, or None: when absent, and when damaged (unreadable, not the shape its .json
    records, or bytes whose sha256 is not the one it records — or records none, as an older aflite wrote it: such an
    entry cannot be verified); a warning naming the file says so and, with ``drop_damaged``, the entry is removed, so
    that it is recomputed and rewritten. A damaged entry is never used: another command's cache (a run folder's,
    read only) is recomputed into the reader's own."""
    meta = cache / f"{stem}.json"
    dense, sparse = cache / f"{stem}.npy", cache / f"{stem}.npz"
    if not (dense.is_file() or sparse.is_file()) and not meta.is_file():
        return None
    try:
        described = json.loads(meta.read_text(encoding="utf-8"))
        info = dict(described.get("info", {}))
        _check_sha256(dense if dense.is_file() else sparse, described.get("sha256"))
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
        log.warning("damaged feature cache entry %s (%s): recomputing it",
                    dense if dense.is_file() else sparse if sparse.is_file() else cache / stem, why)
        for f in (meta, dense, sparse) if drop_damaged else ():
            with contextlib.suppress(OSError):
                f.unlink()
        return None
    return x, info


def _check_sha256(matrix: Path, recorded: Any) -> None:
    """Refuse (ValueError: the entry is damaged) a matrix file whose bytes are not those its record describes."""
    if not matrix.is_file():
        raise ValueError("the matrix file is missing")
    if not isinstance(recorded, str):
        raise ValueError("its record holds no sha256 of the matrix (an older aflite's cache): it cannot be verified")
    if file_sha256(matrix) != recorded:
        raise ValueError("its sha256 differs from the one the cache recorded: the bytes changed since")


def transform_chunked(
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
