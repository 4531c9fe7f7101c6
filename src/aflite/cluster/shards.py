"""Φ on a Dask cluster: the rows cut into fixed shards, each shard embedded by a worker and written to shared storage.

Why shards of the resumable chunks: featurizing, not filtering, is the long part at ImageNet size, and the
single-process path already embeds the rows ``chunk_size`` at a time (length-sorted batches *within* a chunk,
:func:`aflite.features.compute.featurize`). A shard is exactly such a chunk — rows ``[i·size, (i+1)·size)``, the
boundaries depending only on the number of rows and the size, never on the number of workers — and a worker
computes it with the same ``transform`` call on the same rows. The batches, their padding and their order are
then those of one process, and each batch runs with one intra-op thread in both (:mod:`aflite.threads`), so
the features are the same bits as a single-process run on the same backend (tests/test_shards.py checks it).

A worker keeps the featurizer of the run in progress (:data:`_LOADED`, per worker process): its encoder is
loaded on the worker's first shard and reused for the next ones. (On a fresh cache each worker also makes the
ONNX export of an ``onnx``/``onnx-int8`` backend itself: the same bytes, written atomically under the same name,
so whichever file a worker reads is the same model.) Each shard goes to
``<folder>/<i>.npy`` (atomically: temp + rename), then its manifest ``<i>.json`` (the featurizer's key, a
fingerprint of the shard's inputs, its rows and the sha256 of its values). On resume a shard whose files agree
with its manifest is never recomputed; a damaged or foreign one is removed and computed again. The lead process
then reads the shards back in order. ``folder`` must be storage every worker can write at the same path (any
folder for a local cluster; a shared file system for a real one).

Featurizers whose ``fit`` reads every row (``ngram``: its IDF and SVD) have no chunks; they run in the lead
process (:func:`aflite.features.shards.check_shardable`). This module knows only an object with ``transform``;
the featurize hook that uses it is :class:`aflite.features.shards.ShardedTransform`.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import atomic_path, new_memmap, write_json, write_npy
from aflite.errors import ParameterError
from aflite.hashing import data_fingerprint
from aflite.progress import tqdm  # Jupyter: a widget bar, or none without ipywidgets
from aflite.threads import thread_policy

log = logging.getLogger("aflite.cluster")

__all__ = ["ShardReport", "ShardTask", "compute_shard", "concat_shards", "run_shards", "shard_bounds", "shard_is_valid",
           "shards_to_npy"]

_FORMAT = 1


def shard_bounds(n: int, size: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` of each shard: fixed by ``n`` and ``size`` alone, whatever the number of workers."""
    if size < 1:
        raise ParameterError(f"shard size must be >= 1, got {size}")
    return [(lo, min(n, lo + size)) for lo in range(0, n, size)]


@dataclass(frozen=True)
class ShardTask:
    """One shard as a worker gets it: its inputs and where its files go."""

    index: int
    lo: int
    hi: int
    key: str  # the featurizer, its options, the whole input and the shard size (featurize's cache stem)
    rows: str  # fingerprint of this shard's inputs
    path: str  # <folder>/<index>.npy; the manifest is <folder>/<index>.json
    a: list[str]
    b: list[str] | None


@dataclass
class ShardReport:
    """What a sharded run did: shards reused from storage and computed, by which worker, and encoder loads."""

    shards: int = 0
    reused: int = 0
    computed: int = 0
    loads: int = 0  # workers that loaded the encoder (once each) during this run
    per_worker: dict[str, int] = field(default_factory=dict)
    shard_seconds: list[tuple[int, float, bool]] = field(default_factory=list)  # (rows, seconds, loaded first)
    seconds: float = 0.0
    folder: str = ""

    def as_dict(self) -> dict[str, int | float | dict[str, int] | list[float]]:
        """The report as results.json's ``featurizer.cluster`` and embed's ``cluster`` record it."""
        return {"shards": self.shards, "reused": self.reused, "computed": self.computed, "loads": self.loads,
                "workers": len(self.per_worker), "shards_per_worker": dict(sorted(self.per_worker.items())),
                "seconds": round(self.seconds, 3),
                "first_shard_seconds": [round(t, 2) for _, t, first in self.shard_seconds if first],
                "other_shard_seconds": [round(t, 2) for _, t, first in self.shard_seconds if not first]}


@dataclass(frozen=True)
class ShardDone:
    """What a worker hands back for one shard: which, where it ran, whether it loaded the encoder, how long."""

    index: int
    worker: str
    loaded: bool
    seconds: float


def _manifest_path(npy: Path) -> Path:
    return npy.with_suffix(".json")


def _digest(x: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()


def shard_is_valid(task: ShardTask) -> bool:
    """True when the shard's .npy and manifest are there and agree (featurizer key, inputs, rows, values); a
    damaged or foreign shard is removed (with a warning) so that it is computed again."""
    npy = Path(task.path)
    meta = _manifest_path(npy)
    if not meta.is_file():
        npy.unlink(missing_ok=True)  # a value file without its manifest is an interrupted write: not trusted
        return False
    try:
        m = json.loads(meta.read_text(encoding="utf-8"))
        if (m.get("format"), m.get("key"), m.get("rows"), m.get("lo"), m.get("hi")) != (
                _FORMAT, task.key, task.rows, task.lo, task.hi):
            raise ValueError("its manifest is for other rows or another featurizer")
        x = np.load(npy, allow_pickle=False)
        if x.dtype != np.float32 or x.ndim != 2 or x.shape[0] != task.hi - task.lo:
            raise ValueError(f"shape {x.shape} {x.dtype}, expected {task.hi - task.lo} float32 rows")
        if _digest(x) != m.get("sha256"):
            raise ValueError("its values do not match the manifest's checksum")
    except (OSError, ValueError, TypeError, EOFError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log.warning("shard %s not usable (%s): computing it again", npy, why)
        for f in (meta, npy):
            with contextlib.suppress(OSError):
                f.unlink()
        return False
    return True


# per worker process: (run key, worker) -> the featurizer of the run in progress, its encoder loaded on first use
_LOADED: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


def _worker_featurizer(key: str, feat: Any) -> tuple[Any, bool, str, int]:
    """The worker's own featurizer for ``key`` (kept between shards: the encoder loads once per worker), whether
    this call made it, the worker's address and its thread count."""
    try:
        from distributed import get_worker

        w = get_worker()
        where, threads = str(w.address), int(getattr(w.state, "nthreads", 0) or getattr(w, "nthreads", 1) or 1)
    except (ImportError, ValueError):  # called outside a Dask worker (tests, a plain process)
        where, threads = "local", 1
    with _LOCK:
        f = _LOADED.get((key, where))
        if f is not None:
            return f, False, where, threads
        for k in [k for k in _LOADED if k[0] != key]:  # one run at a time per worker: drop an earlier run's model
            del _LOADED[k]
        shared = any(v is feat for v in _LOADED.values())  # in-process workers get the same object: copy it
        f = copy.deepcopy(feat) if shared else feat
        if hasattr(f, "show_progress"):
            f.show_progress = False  # progress is the lead's bar, not one per worker
        _LOADED[(key, where)] = f
        return f, True, where, threads


def compute_shard(task: ShardTask, feat: Any) -> ShardDone:
    """The task a worker runs: the shard's rows through the worker's featurizer (the same ``transform`` call a
    single process makes on this chunk), with the worker's threads, written atomically with its manifest."""
    f, first, where, threads = _worker_featurizer(task.key, feat)
    t0 = time.perf_counter()
    with thread_policy(threads):
        x = np.ascontiguousarray(f.transform(task.a, task.b, progress=None), dtype=np.float32)
    if x.ndim != 2 or x.shape[0] != task.hi - task.lo:
        raise ValueError(f"shard {task.index}: the featurizer returned shape {x.shape} for {task.hi - task.lo} rows")
    npy = Path(task.path)
    write_npy(npy, x)  # values first, manifest last: a manifest is only ever found beside complete values
    write_json(_manifest_path(npy), {"format": _FORMAT, "key": task.key, "rows": task.rows, "lo": task.lo,
                                     "hi": task.hi, "shape": list(x.shape), "sha256": _digest(x)})
    return ShardDone(task.index, where, first, time.perf_counter() - t0)


def run_shards(executor: Any, feat: Any, a: Sequence[str], b: Sequence[str] | None, folder: str | Path,
               key: str, shard_size: int, *, show_progress: bool = True, unit: str = "pair") -> tuple[list[Path],
                                                                                                     ShardReport]:
    """Embed ``a`` (and ``b``) with ``feat`` in shards of ``shard_size`` rows on ``executor``'s Dask workers.

    Shards already in ``folder`` with a matching manifest are reused; the others are computed, each by one
    worker. Returns the shard files in row order and a :class:`ShardReport`."""
    t0 = time.perf_counter()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    n = len(a)
    bounds = shard_bounds(n, shard_size)
    width = max(6, len(str(len(bounds))))
    run_key = f"{key}:{shard_size}"
    tasks = [ShardTask(i, lo, hi, run_key, data_fingerprint(a[lo:hi], None if b is None else b[lo:hi]),
                       str(folder / f"{i:0{width}d}.npy"), list(a[lo:hi]), None if b is None else list(b[lo:hi]))
             for i, (lo, hi) in enumerate(bounds)]
    todo = [t for t in tasks if not shard_is_valid(t)]
    report = ShardReport(shards=len(tasks), reused=len(tasks) - len(todo), folder=str(folder))
    if report.reused:
        log.info("resuming: %d of %d shards already in %s", report.reused, len(tasks), folder)
    if todo:
        client = executor.client
        from distributed import as_completed

        remote = client.scatter(feat, broadcast=True, hash=False)  # once per worker, not once per shard
        bar = _bar(n, getattr(feat, "name", "embed"), show_progress, unit,
                   initial=sum(t.hi - t.lo for t in tasks) - sum(t.hi - t.lo for t in todo))
        futures = [client.submit(compute_shard, t, remote, pure=False) for t in todo]
        size = {t.index: t.hi - t.lo for t in todo}
        try:
            for fut in as_completed(futures):
                done: ShardDone = fut.result()
                report.computed += 1
                report.loads += int(done.loaded)
                report.per_worker[done.worker] = report.per_worker.get(done.worker, 0) + 1
                report.shard_seconds.append((size[done.index], done.seconds, done.loaded))
                if bar is not None:
                    bar.update(size[done.index])
        finally:
            if bar is not None:
                bar.close()
            client.cancel(futures + [remote])
    report.seconds = time.perf_counter() - t0
    return [Path(t.path) for t in tasks], report


def _bar(total: int, desc: str, enabled: bool, unit: str, initial: int) -> Any:
    """The lead's progress bar over the rows of all shards (None when progress is off)."""
    if not enabled:
        return None
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, unit_scale=False, dynamic_ncols=True)


def concat_shards(paths: Sequence[Path]) -> np.ndarray:
    """The shards stacked in row order, float32 and C-contiguous (as the single-process chunk loop returns)."""
    return np.ascontiguousarray(np.vstack([np.load(p, allow_pickle=False) for p in paths]), dtype=np.float32)


def shards_to_npy(paths: Sequence[Path], dest: str | Path) -> Path:
    """The shards written one by one into a memory-mapped ``dest`` .npy (atomically; never all in memory)."""
    first = np.load(paths[0], mmap_mode="r")
    rows = sum(int(np.load(p, mmap_mode="r").shape[0]) for p in paths)
    with atomic_path(dest) as tmp:
        out = new_memmap(tmp, (rows, int(first.shape[1])))
        lo = 0
        for p in paths:
            part = np.load(p, allow_pickle=False)
            out[lo : lo + len(part)] = part
            lo += len(part)
        out.flush()
        del out
    return Path(dest)
