"""Filtering on more than one process or machine: the ensemble's blocks of partitions as tasks on a Dask cluster
(:mod:`aflite.cluster.dask`; why Dask is said there). One task fits a block of partitions for one filtering phase.

Features travel through shared storage, not the network: :meth:`DaskExecutor.prepare` writes the whitened
features once as a .npy under ``scratch`` (a folder every worker can read at the same path), and each
worker memory-maps it. A task carries only the rows of S, its block of the training mask and the starting
weights. Each block is fitted with one BLAS thread, exactly as in a single process, so a cluster run gives
the same models, predictions and removed set as ``aflite filter`` without ``--cluster`` (on workers with the
same numpy/BLAS build and CPU kind).
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import atomic_path, new_memmap, write_npz
from aflite.cluster.dask import Cluster, local_workers
from aflite.core.blocks import BlockResult, BlockTask
from aflite.core.solver import fit_block_local
from aflite.core.store import FeatureStore, Whitening, chunk_rows, whiten_into

__all__ = ["DaskExecutor", "StoreSpec", "open_executor", "use_cluster"]


@dataclass(frozen=True)
class StoreSpec:
    """Where a worker finds the whitened features (and the whitening) in shared storage."""

    key: str
    features: str
    whitening: str
    chunk_mb: int


_STORES: dict[str, FeatureStore] = {}  # per worker process: the store of the run in progress


def _load_store(spec: StoreSpec) -> FeatureStore:
    store = _STORES.get(spec.key)
    if store is None:
        _STORES.clear()  # one run at a time per worker: drop the previous run's data
        with np.load(spec.whitening, allow_pickle=False) as z:
            wh = Whitening(z["mean"], z["transform"], z["penalty"])
        Xw = np.load(spec.features, mmap_mode="r", allow_pickle=False)
        store = FeatureStore(Xw, wh, copy=True, chunk_mb=spec.chunk_mb, whitened=True)
        _STORES[spec.key] = store
    return store


def fit_block_on_worker(spec: StoreSpec, task: BlockTask, rows: Any, y: Any) -> BlockResult:
    """The task a worker runs: one BLAS thread (as in the single-process path), then the block. ``rows`` and
    ``y`` (the same for every block of a phase) travel once per worker, not inside each task."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")  # this process only ever runs our blocks
    return fit_block_local(_load_store(spec), dataclasses.replace(task, rows=rows, y=y))


class DaskExecutor(Cluster):
    """Runs the ensemble's blocks on a Dask cluster (:class:`aflite.cluster.dask.Cluster`: a scheduler's, or a
    local one of ``n_workers`` processes; ``scratch`` a folder every worker reads at the same path); the same
    object embeds Φ's shards (:class:`aflite.features.shards.ShardedTransform`)."""

    def __init__(self, address: str | None = None, n_workers: int | None = None,
                 scratch: str | os.PathLike[str] | None = None, connect_timeout: float | None = None):
        super().__init__(address, n_workers, scratch, connect_timeout)
        self.spec: StoreSpec | None = None

    def prepare(self, X: Any, whitening: Whitening, copy: bool, chunk_mb: int) -> None:
        """Write the whitened features and the whitening to shared storage (once per run)."""
        del copy  # workers always read the whitened copy from storage: it is shared, not held per worker
        key = uuid.uuid4().hex
        feats = self.scratch / f"whitened-{key}.npy"
        wh = self.scratch / f"whitening-{key}.npz"
        with atomic_path(feats) as tmp:
            out = new_memmap(tmp, (X.shape[0], whitening.dim))
            whiten_into(X, whitening, out, chunk_rows(X.shape[1], chunk_mb))
            out.flush()
            del out
        write_npz(wh, mean=whitening.mean, transform=whitening.transform, penalty=whitening.penalty)
        self._remove_files()
        self.spec = StoreSpec(key, str(feats), str(wh), chunk_mb)

    def map_blocks(self, tasks: list[BlockTask]) -> list[BlockResult]:
        """Fit the blocks on the workers; results come back in task order."""
        if self.spec is None:
            raise RuntimeError("prepare() first")
        empty = np.empty(0, dtype=np.int64)
        rows, y = self.client.scatter([tasks[0].rows, tasks[0].y], broadcast=True)
        light = [dataclasses.replace(t, rows=empty, y=empty) for t in tasks]
        futures = [self.client.submit(fit_block_on_worker, self.spec, t, rows, y, pure=False) for t in light]
        return list(self.client.gather(futures))

    def _remove_files(self) -> None:
        if self.spec is not None:
            for f in (self.spec.features, self.spec.whitening):
                Path(f).unlink(missing_ok=True)

    def close(self) -> None:
        self._remove_files()
        self.spec = None
        super().close()


def open_executor(address: str, scratch: str | os.PathLike[str] | None = None) -> DaskExecutor:
    """The executor of a ``--cluster`` value: ``local`` or ``local:N`` starts N local worker processes (default
    :class:`DaskExecutor`'s), anything else is a scheduler address (``tcp://host:8786``)."""
    if address == "local" or address.startswith("local:"):
        return DaskExecutor(n_workers=local_workers(address), scratch=scratch)
    return DaskExecutor(address=address, scratch=scratch)


def use_cluster(cluster: Any, scratch: str | os.PathLike[str] | None = None) -> tuple[Any, Callable[[], None]]:
    """``cluster`` as an executor and how to release it: an address (``local``, ``local:N``, ``tcp://host:port``)
    is opened here and closed by the returned function; an executor object is used as given (its owner closes
    it); None gives (None, a no-op)."""
    if cluster is None or cluster == "":
        return None, lambda: None
    if not isinstance(cluster, str):
        return cluster, lambda: None
    ex = open_executor(cluster, scratch=scratch)
    return ex, ex.close
