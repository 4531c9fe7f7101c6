"""A Dask cluster as aflite uses it: a client on a scheduler (a real cluster) or on a local cluster of processes with
one thread each (tests and laptops), and a scratch folder every worker can read at the same path.

Why Dask (``dask.distributed``) rather than Ray: it is pure Python and small to install (no native wheels of its
own), it starts a local cluster of processes with one call, and a real cluster is two commands (``dask scheduler``
and ``dask worker ADDRESS`` on each machine) or any of its deployment tools (SSH, Kubernetes, SLURM via
dask-jobqueue). aflite's work is coarse-grained — a block of partitions for one filtering phase, a shard of Φ — so
it needs a task scheduler, not an actor framework.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from aflite.errors import ParameterError
from aflite.threads import budget

__all__ = ["Cluster", "local_workers"]


def local_workers(address: str) -> int | None:
    """N of ``local:N`` (None for plain ``local``); a :class:`ParameterError` for anything else after ``local:``."""
    try:
        workers = int(address.split(":", 1)[1]) if ":" in address else None
    except ValueError:
        raise ParameterError(f"--cluster {address!r}: use local or local:N with N a number") from None
    if workers is not None and workers < 1:
        raise ParameterError(f"--cluster {address!r}: N must be at least 1")
    return workers


class Cluster:
    """A Dask client and its scratch folder.

    ``address`` is a scheduler address (``tcp://host:8786``); without one a local cluster of ``n_workers``
    processes with one thread each is started (and closed by :meth:`close`). ``scratch`` must be a folder all
    workers can read at the same path (shared storage on a real cluster); by default a temporary folder, which only
    suits a local cluster. A scheduler that does not answer within ``connect_timeout`` seconds (default Dask's
    ``distributed.comm.timeouts.connect``, 30 s) is a :class:`ParameterError`.
    """

    def __init__(self, address: str | None = None, n_workers: int | None = None,
                 scratch: str | os.PathLike[str] | None = None,
                 connect_timeout: float | None = None):
        try:
            from dask.distributed import Client
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
            except (OSError, TimeoutError, ValueError) as exc:  # a line for the user, not a traceback (exit 2)
                self._remove_own_scratch()
                why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise ParameterError(f"--cluster {address}: no Dask scheduler answered ({why})") from None
        else:
            self._cluster = _local_cluster(n_workers or min(4, budget()))  # budget: the one thread policy
            self.client = Client(self._cluster)

    def __deepcopy__(self, memo: dict[int, Any]) -> Cluster:
        """A handle on a running cluster, not data: copies (``sklearn.base.clone(AFLite(executor=...))``) share it."""
        return self

    @property
    def n_workers(self) -> int:
        return len(self.client.scheduler_info()["workers"])

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()
        self._remove_own_scratch()

    def _remove_own_scratch(self) -> None:
        if self._own_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _local_cluster(workers: int) -> Any:
    """A local cluster of ``workers`` processes with one thread and one BLAS thread each."""
    import dask
    from dask.distributed import LocalCluster

    # without Dask's fixed MALLOC_TRIM_THRESHOLD_, which turns off glibc's dynamic mmap threshold: with it every
    # torch activation over 128 KiB is a fresh mmap (MiniLM on torch measured 1.3-1.4x slower)
    environ = {k: v for k, v in (dask.config.get("distributed.nanny.pre-spawn-environ", None) or {}).items()
               if k != "MALLOC_TRIM_THRESHOLD_"}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        return LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0", scheduler_port=0,
            silence_logs=40,
            # one BLAS thread per worker process, set before numpy loads there
            env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        )
