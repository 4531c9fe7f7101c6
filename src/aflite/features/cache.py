"""The on-disk cache of :func:`aflite.features.compute.featurize`: one matrix per featurizer, view and content hash
(``<featurizer>-<view>-<hash>.npy``, sparse ``.npz``, with its ``.json`` record, which holds the whole key the name
is cut from (:func:`aflite.features.base.cache_identity`: the inputs' fingerprint, featurizer, view, every option,
the cache format) and the matrix file's sha256, and a warm-up's rows), encoder runs written chunk by chunk to
``<stem>.parts/`` (each chunk's ``.json`` record, written after it, holds the sha256 of its values) so that a
restarted run resumes, and read-only cache folders (another command's) looked in first. Every reader goes through
:func:`load_cached`, which checks the record against the call's own key and the recorded sha256 before the matrix is
used: an entry of other inputs or options (a *foreign* one, e.g. copied from another dataset's run) or whose bytes
changed (a *damaged* one) is never used, and a warning line says which. :func:`tie` and :func:`tied` do the same for
another cached file (the warm-up's fine-tuned model)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import scipy.sparse as sp

from aflite import __version__
from aflite.atomic import atomic_open, write_json, write_npy
from aflite.errors import InputError
from aflite.features.base import CacheIdentity, FeatureJob, JsonValue, Matrix, PhiInfo, log, progress_bar
from aflite.hashing import data_fingerprint, file_sha256, inputs_fingerprint

__all__ = ["check_run_features", "final_path", "load_cached", "read_only_hit", "store", "tie", "tied",
           "transform_chunked", "values_sha256", "why_foreign"]


def read_only_hit(folders: Sequence[str | os.PathLike[str]], stem: str,
                  identity: CacheIdentity | None = None) -> tuple[Matrix, Path, PhiInfo] | None:
    """(matrix, its file, its info) of ``stem`` in the first of ``folders`` that holds it whole (and, given
    ``identity``, is this call's: :func:`load_cached`); nothing there is written, not even to drop a damaged entry
    (another command's cache, e.g. a run folder's)."""
    for folder in map(Path, folders):
        found = (load_cached(folder, stem, drop_damaged=False, identity=identity)
                 if (folder / f"{stem}.json").is_file() else None)
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


def store(job: FeatureJob, x: Any, warmup: np.ndarray | None, n: int, info: PhiInfo) -> Path:
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
    assert job.identity is not None, "featurize gives a call with a cache its identity"
    write_json(cache / f"{stem}.json", CacheEntry(**asdict(job.identity), n_rows=n, shape=list(x.shape),
                                                  sha256=file_sha256(out_path), info=info).to_json())
    shutil.rmtree(cache / f"{stem}.parts", ignore_errors=True)
    for done in (f"{stem}.warmup.pt", f"{stem}.warmup.pt.json"):
        with contextlib.suppress(FileNotFoundError):
            (cache / done).unlink()
    return out_path


OMIT_NONE = {"omit_none": True}  # a field's metadata: absent from the record while None


@dataclass(frozen=True, kw_only=True)
class CacheEntry(CacheIdentity):
    """A cache record (``<stem>.json``, or ``<file>.json`` beside a :func:`tie`-d file): the call's identity, the
    aflite that wrote it, the sha256 of the file it describes and, for a matrix, its rows, shape and how it was
    computed."""

    aflite: str = __version__
    n_rows: int | None = field(default=None, metadata=OMIT_NONE)
    shape: list[int] | None = field(default=None, metadata=OMIT_NONE)
    sha256: str
    info: PhiInfo | None = field(default=None, metadata=OMIT_NONE)


def final_path(cache: Path, stem: str, x: Any) -> Path:
    return cache / (f"{stem}.npz" if sp.issparse(x) else f"{stem}.npy")


def load_cached(cache: Path, stem: str, drop_damaged: bool = True,
                identity: CacheIdentity | None = None) -> tuple[Matrix, PhiInfo] | None:
    """The cached matrix and its info, or None: when absent; when foreign (given ``identity``, the call's
    :func:`aflite.features.base.cache_identity`: its record holds another key, or none, as an older aflite wrote
    it: computed from another dataset's inputs, with other options, ...); and when damaged (unreadable, not the shape
    its .json records, or bytes whose sha256 is not the one it records — or records none: such an entry cannot be
    verified). A warning naming the file says which and why; with ``drop_damaged`` a damaged entry is removed (a
    foreign one is left for the recomputed matrix to replace), so that it is recomputed and rewritten. Neither is
    ever used: another command's cache (a run folder's, read only) is recomputed into the reader's own."""
    meta = cache / f"{stem}.json"
    dense, sparse = cache / f"{stem}.npy", cache / f"{stem}.npz"
    if not (dense.is_file() or sparse.is_file()) and not meta.is_file():
        return None
    try:
        described = _read_record(meta)
        foreign = None if identity is None else why_foreign(described, identity)
        if foreign is not None:
            log.warning("foreign feature cache entry %s (%s): not used, recomputing it", meta, foreign)
            return None
        info = PhiInfo.from_json(_object(described.get("info") or {}, "info"))
        _check_sha256(dense if dense.is_file() else sparse, described.get("sha256"))
        if dense.is_file():
            x: Matrix = np.load(dense, allow_pickle=False)
        elif sparse.is_file():
            x = sp.csr_matrix(sp.load_npz(sparse), dtype=np.float32)
        else:
            raise ValueError("the matrix file is missing")
        if not isinstance(described["shape"], list) or list(x.shape) != described["shape"]:
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


def why_foreign(recorded: dict[str, JsonValue], identity: CacheIdentity) -> str | None:
    """Why a cache record is not of the call whose :func:`aflite.features.base.cache_identity` is ``identity``
    (None: it is), the first part that differs named: the inputs, the featurizer or view, an option, the rest of the
    key (labels, warm-up slice, image files), the format."""
    if recorded.get("key") == identity.key:
        return None
    if not isinstance(recorded.get("key"), str) or not isinstance(recorded.get("inputs"), str):
        return "its record does not hold the key of the input it was computed from (an older aflite's cache)"
    if recorded["inputs"] != identity.inputs:
        return "computed from other inputs: another dataset's, or other rows or columns"
    for part in ("featurizer", "view"):
        if recorded.get(part) != getattr(identity, part):
            return f"another {part}: {recorded.get(part)!r} there, {getattr(identity, part)!r} here"
    theirs, ours = _object(recorded.get("options") or {}, "options"), identity.options or {}
    changed = sorted(k for k in {*theirs, *ours} if json.dumps(theirs.get(k), sort_keys=True, default=str)
                     != json.dumps(ours.get(k), sort_keys=True, default=str))
    if changed:
        k = changed[0]
        return f"other featurizer options: {k}={theirs.get(k)!r} there, {ours.get(k)!r} here"
    if recorded.get("format") != identity.format:
        return f"another cache format: {recorded.get('format')!r} there, {identity.format!r} here"
    return "another key: other labels, warm-up slice or image files"


def tie(path: Path, identity: CacheIdentity) -> None:
    """Write ``<path>.json`` beside a cached file just written (the warm-up's model): the key it was made for and
    the sha256 of its bytes, which :func:`tied` checks before the file is used."""
    write_json(path.with_name(path.name + ".json"), CacheEntry(**asdict(identity), sha256=file_sha256(path)).to_json())


def tied(path: Path, identity: CacheIdentity, what: str) -> bool:
    """Whether the cached ``path`` may be used: it is there with a record (:func:`tie`) of this ``identity`` and
    its bytes are those recorded. Otherwise (a file copied from another run, changed, or without its record), a
    warning line names it, ``what`` it is and why (foreign or damaged), and False: the caller makes it again."""
    record = path.with_name(path.name + ".json")
    if not path.is_file():
        return False
    try:
        described = _read_record(record)
    except (OSError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log.warning("damaged cached %s %s (its record %s: %s): making it again", what, path, record.name, why)
        return False
    foreign = why_foreign(described, identity)
    if foreign is not None:
        log.warning("foreign cached %s %s (%s): not used, making it again", what, path, foreign)
        return False
    if described.get("sha256") != file_sha256(path):
        log.warning("damaged cached %s %s (its sha256 differs from the one its record holds: the bytes changed "
                    "since): making it again", what, path)
        return False
    return True


def _read_record(path: Path) -> dict[str, JsonValue]:
    """A record file's object (ValueError where it holds another value: the entry is damaged)."""
    return _object(json.loads(path.read_text(encoding="utf-8")), "record")


def _object(value: JsonValue, what: str) -> dict[str, JsonValue]:
    """``value``, a JSON object read from a record (ValueError where it is another value: the entry is damaged)."""
    if not isinstance(value, dict):
        raise ValueError(f"its {what} is not a JSON object")
    return value


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
    """Transform ``chunk_size`` rows at a time; with a cache, each chunk is written atomically, then its record
    (:func:`_chunk_record`), and reused by a restarted call only when the two agree (:func:`_cached_chunk`)."""
    n = len(a)
    n_chunks = math.ceil(n / chunk_size)
    parts_dir = None if cache is None else cache / f"{stem}.parts" / f"chunk{chunk_size}"
    done: dict[int, np.ndarray] = {}
    if parts_dir is not None and parts_dir.is_dir():
        for c in range(n_chunks):
            lo, hi = c * chunk_size, min(n, (c + 1) * chunk_size)
            arr = _cached_chunk(parts_dir / f"part-{c:06d}.npy", _chunk_record(stem, a, b, lo, hi))
            if arr is not None:
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
            part = np.ascontiguousarray(feat.transform(a[lo:hi], None if b is None else b[lo:hi], progress=bar),
                                        dtype=np.float32)
            if parts_dir is not None:  # the values first, their record last: a record is only beside whole values
                f = parts_dir / f"part-{c:06d}.npy"
                write_npy(f, part)
                write_json(f.with_suffix(".json"), {**_chunk_record(stem, a, b, lo, hi),
                                                    "shape": list(part.shape), "sha256": values_sha256(part)})
            done[c] = part
    finally:
        if bar is not None:
            bar.close()
    return np.ascontiguousarray(np.vstack([done[c] for c in range(n_chunks)]), dtype=np.float32)


class ChunkRecord(TypedDict):
    """What ties a chunk file to its run and rows (beside its shape and values' sha256 in its record)."""

    stem: str  # the run's stem (its cache key)
    lo: int
    hi: int
    rows: str  # the rows' inputs' fingerprint


def _chunk_record(stem: str, a: list[str], b: list[str] | None, lo: int, hi: int) -> ChunkRecord:
    """What ties a chunk file to its run and rows: the run's stem (its key), the rows' bounds and their inputs'
    fingerprint."""
    return ChunkRecord(stem=stem, lo=lo, hi=hi, rows=data_fingerprint(a[lo:hi], None if b is None else b[lo:hi]))


def values_sha256(x: np.ndarray) -> str:
    """sha256 of a chunk's float32 values (C order): what its record (or embed's progress file) holds and a resumed
    run checks."""
    return hashlib.sha256(np.ascontiguousarray(x, dtype=np.float32).tobytes()).hexdigest()


def _cached_chunk(f: Path, expected: ChunkRecord) -> np.ndarray | None:
    """The chunk in ``f`` when it and its record agree with ``expected`` and with each other (its values' sha256),
    else None with a warning line saying why (foreign: another run's or rows'; damaged: unreadable, other values, no
    record), so that the chunk is embedded again and never sealed into the matrix."""
    if not f.is_file():
        return None
    record = f.with_suffix(".json")
    try:
        if not record.is_file():
            raise ValueError("it has no record (interrupted before its record was written, or an older aflite's)")
        described = _read_record(record)
        if any(described.get(k) != v for k, v in expected.items()):
            log.warning("foreign cached chunk %s (its record is of another run or other rows): embedding it again", f)
            return None
        arr = np.load(f, allow_pickle=False)
        if arr.dtype != np.float32 or arr.ndim != 2 or arr.shape[0] != expected["hi"] - expected["lo"]:
            raise ValueError(f"shape {arr.shape} {arr.dtype}, expected {expected['hi'] - expected['lo']} float32 rows")
        if values_sha256(arr) != described.get("sha256"):
            raise ValueError("its values' sha256 differs from the one its record holds: the bytes changed since")
    except (OSError, ValueError, EOFError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log.warning("damaged cached chunk %s (%s): embedding it again", f, why)
        return None
    return arr
