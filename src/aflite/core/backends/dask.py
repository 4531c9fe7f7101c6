"""Filtering on more than one process or machine: the ensemble's blocks of partitions as Dask tasks.

Why Dask (``dask.distributed``) rather than Ray: it is pure Python and small to install (no native
wheels of its own), it starts a local cluster of processes with one call for tests and laptops, and a real
cluster is two commands (``dask scheduler`` and ``dask worker ADDRESS`` on each machine) or any of its
deployment tools (SSH, Kubernetes, SLURM via dask-jobqueue). Our work is coarse-grained — one task fits a
block of partitions for one filtering phase — so we need a task scheduler, not an actor framework.

Features travel through shared storage, not the network: :meth:`DaskExecutor.prepare` writes the whitened
features once as a .npy under ``scratch`` (a folder every worker can read at the same path), and each
worker memory-maps it. A task carries only the rows of S, its block of the training mask and the starting
weights. Each block is fitted with one BLAS thread, exactly as in a single process, so a cluster run gives
the same models, predictions and removed set as ``aflite filter`` without ``--cluster`` (on workers with the
same numpy/BLAS build and CPU kind).
"""

from __future__ import annotations

import dataclasses
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import atomic_path, new_memmap, write_npz
from aflite.core.blocks import BlockResult, BlockTask
from aflite.core.solver import fit_block_local
from aflite.core.store import FeatureStore, Whitening, chunk_rows, whiten_into
from aflite.errors import ParameterError

__all__ = ["DaskExecutor", "StoreSpec", "open_executor"]


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


class DaskExecutor:
    """Runs the ensemble's blocks on a Dask cluster.

    ``address`` is a scheduler address (``tcp://host:8786``); without one a local cluster of ``n_workers``
    processes with one thread each is started (and closed by :meth:`close`). ``scratch`` must be a folder
    all workers can read at the same path (shared storage on a real cluster); by default a temporary folder,
    which only suits a local cluster. A scheduler that does not answer within ``connect_timeout`` seconds (default
    Dask's ``distributed.comm.timeouts.connect``, 30 s) is a :class:`ParameterError`.
    """

    def __init__(self, address: str | None = None, n_workers: int | None = None, scratch: str | Path | None = None,
                 connect_timeout: float | None = None):
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError as exc:
            raise ParameterError("--cluster needs Dask: pip install 'aflite[cluster]'") from exc
        self._own_scratch = scratch is None
        self.scratch = Path(tempfile.mkdtemp(prefix="aflite-cluster-")) if scratch is None else Path(scratch)
        self.scratch.mkdir(parents=True, exist_ok=True)
        self._cluster: Any = None
        if address:
            try:
                wait = {} if connect_timeout is None else {"timeout": connect_timeout}
                self.client = Client(address, **wait)
            except (OSError, TimeoutError) as exc:  # a line for the user, not a traceback (the CLI exits 2)
                self._remove_own_scratch()
                why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise ParameterError(f"--cluster {address}: no Dask scheduler answered ({why})") from None
        else:
            import dask

            from aflite.threads import budget  # the one thread policy: affinity, quota, --threads

            workers = n_workers or min(4, budget())
            # without Dask's fixed MALLOC_TRIM_THRESHOLD_, which turns off glibc's dynamic mmap threshold: with it
            # every torch activation over 128 KiB is a fresh mmap (MiniLM on torch measured 1.3-1.4x slower)
            environ = {k: v for k, v in (dask.config.get("distributed.nanny.pre-spawn-environ", None) or {}).items()
                       if k != "MALLOC_TRIM_THRESHOLD_"}
            with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
                self._cluster = LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                    scheduler_port=0, silence_logs=40,
                    # one BLAS thread per worker process, set before numpy loads there
                    env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
                )
            self.client = Client(self._cluster)
        self.spec: StoreSpec | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> DaskExecutor:
        """A handle on a running cluster, not data: copies (``sklearn.base.clone(AFLite(executor=...))``) share it."""
        return self

    @property
    def n_workers(self) -> int:
        return len(self.client.scheduler_info()["workers"])

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
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()
        self._remove_own_scratch()

    def _remove_own_scratch(self) -> None:
        if self._own_scratch:
            import shutil

            shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_executor(address: str, scratch: str | Path | None = None) -> DaskExecutor:
    """The executor of a ``--cluster`` value: ``local`` or ``local:N`` starts N local worker processes (default
    :class:`DaskExecutor`'s), anything else is a scheduler address (``tcp://host:8786``)."""
    if address == "local" or address.startswith("local:"):
        try:
            workers = int(address.split(":", 1)[1]) if ":" in address else None
        except ValueError:
            raise ParameterError(f"--cluster {address!r}: use local or local:N with N a number") from None
        if workers is not None and workers < 1:
            raise ParameterError(f"--cluster {address!r}: N must be at least 1")
        return DaskExecutor(n_workers=workers, scratch=scratch)
    return DaskExecutor(address=address, scratch=scratch)
