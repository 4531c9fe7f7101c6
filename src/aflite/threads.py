"""One thread policy for every command and library entry point.

Why: BLAS (OpenBLAS) and OpenMP (scikit-learn, PyTorch) start one thread per core and spin-wait at every
barrier. On a machine where another job holds a core, many small fits with the default pools ran 10-60x slower
than with one thread each (one scikit-learn logistic regression: 16.2 s against 0.64 s on 2 shared cores).
The policy, decided here and nowhere else:

* **Budget.** Never more threads than the CPUs this process may use: its affinity mask
  (``os.sched_getaffinity``) and, inside a container, the cgroup CPU quota. ``--threads N`` (every CLI
  command) or the environment variable ``AFLITE_NUM_THREADS`` lower it; a value above the budget is capped.
* **Many small fits** (CV folds, seeds, ensemble blocks, per-class models, PECO, the n-gram SVD): one BLAS and
  one OpenMP thread per fit, and fits side by side (:func:`map_fits`, the ensemble's blocks) with up to
  ``budget()`` at a time. One thread per fit also makes results independent of ``--threads``.
* **One large pass** (the fast solver's compiled kernel, :mod:`aflite.core.kernels`): the chunks of S side by side,
  one thread each, their sums added in chunk order (the same bits for any ``--threads``).
* **Encoders** (PyTorch inference): batches side by side (:func:`map_inference`), one intra-op thread each;
  other PyTorch work gets ``budget()`` intra-op threads (:func:`configure_torch`).

:func:`thread_policy` applies it (a context manager); :func:`limited` is the same as a decorator for library
entry points. The budget is a deterministic function of the affinity mask, the quota and the overrides, never of
the machine's momentary load, so a run's layout (and its floating-point results) can be reproduced.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from aflite.errors import ParameterError

__all__ = [
    "ENV_VAR",
    "available_cpus",
    "requested",
    "budget",
    "fit_workers",
    "torch_threads",
    "configure_torch",
    "thread_policy",
    "prepare_process",
    "limited",
    "map_fits",
    "map_inference",
    "describe",
]

ENV_VAR = "AFLITE_NUM_THREADS"

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
R = TypeVar("R")

# the --threads values of the active policies, innermost last (None: not given); a stack so that policies nest.
# Module-wide rather than a ContextVar so that worker threads see it; entries are removed by identity.
_overrides: list[list[int | None]] = []
_lock = threading.Lock()


def _cgroup_quota(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """CPUs allowed by a cgroup CPU quota (v2 ``cpu.max`` or v1 ``cfs_quota_us``), rounded up; None: no quota."""
    try:
        text = (root / "cpu.max").read_text().split()
        if len(text) == 2 and text[0] != "max":
            return max(1, math.ceil(int(text[0]) / int(text[1])))
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        if quota > 0 and period > 0:
            return max(1, math.ceil(quota / period))
    except (OSError, ValueError):
        pass
    return None


def available_cpus() -> int:
    """CPUs this process may run on: the affinity mask, capped by a container's CPU quota."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    quota = _cgroup_quota()
    return max(1, n if quota is None else min(n, quota))


def _parse(value: Any, what: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ParameterError(f"{what}: expected a positive integer number of threads, got {value!r}") from None
    if n < 1:
        raise ParameterError(f"{what}: expected a positive integer number of threads, got {value!r}")
    return n


def requested() -> int | None:
    """The user's choice: ``--threads`` of the innermost active policy, else ``AFLITE_NUM_THREADS``, else None."""
    for (value,) in reversed(_overrides):
        if value is not None:
            return value
    env = os.environ.get(ENV_VAR, "").strip()
    return _parse(env, ENV_VAR) if env else None


def budget() -> int:
    """How many threads this process runs at once: the user's choice capped by :func:`available_cpus`."""
    cpus = available_cpus()
    r = requested()
    return cpus if r is None else min(r, cpus)


def fit_workers(n_fits: int) -> int:
    """How many of ``n_fits`` small fits run side by side (each with one BLAS/OpenMP thread)."""
    return max(1, min(budget(), int(n_fits)))


def torch_threads() -> int:
    """PyTorch intra-op threads for one large batched computation (an encoder forward pass)."""
    return budget()


def configure_torch(torch: Any = None, threads: int | None = None) -> int:
    """Set PyTorch's intra-op threads to the policy (or ``threads``); returns the number set. Call it where an
    encoder is loaded: ``torch.set_num_threads`` is process-wide and torch's default is every core."""
    if torch is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return 0
    n = torch_threads() if threads is None else min(_parse(threads, "threads"), available_cpus())
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


def prepare_process() -> None:
    """For a fresh process (the CLI), before numpy/scikit-learn/torch load: OpenMP's default thread count is 1
    unless the user set ``OMP_NUM_THREADS``. OpenMP keeps its thread count per thread, and a thread that a library
    starts (a thread pool of ours or of a dependency) begins at the process default, which only the environment
    sets; threadpoolctl's limits reach the calling thread alone. Child processes inherit it too. PyTorch is then
    given its threads explicitly (:func:`configure_torch`)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def _load_pools() -> None:
    """Load the thread pools we limit (numpy/scipy OpenBLAS, scikit-learn's OpenMP) before limiting them:
    threadpoolctl only reaches libraries already loaded, and a pool loaded later would keep its default."""
    import numpy  # noqa: F401
    import scipy.linalg  # noqa: F401

    try:
        import sklearn.utils._openmp_helpers  # noqa: F401
    except ImportError:  # pragma: no cover - scikit-learn is a dependency
        pass


@contextmanager
def thread_policy(threads: int | None = None) -> Iterator[int]:
    """Apply the policy inside the block: BLAS and OpenMP pools at one thread per fit, PyTorch (if loaded) at
    :func:`torch_threads`. ``threads`` (e.g. ``--threads``) overrides ``AFLITE_NUM_THREADS`` for the block and for
    every policy nested in it. Yields the budget. Restores the previous limits on exit."""
    from threadpoolctl import threadpool_limits

    entry = [None if threads is None else _parse(threads, "--threads")]  # a new object: removed by identity
    with _lock:
        _overrides.append(entry)
    try:
        n = budget()
        _load_pools()
        torch = sys.modules.get("torch")
        before = torch.get_num_threads() if torch is not None else None
        with threadpool_limits(limits=1):
            if torch is not None:
                configure_torch(torch)
            try:
                yield n
            finally:
                if torch is not None and before is not None and torch.get_num_threads() != before:
                    torch.set_num_threads(before)
    finally:
        with _lock:  # remove this policy's own entry (policies in other threads may have ended in between)
            for i in range(len(_overrides) - 1, -1, -1):
                if _overrides[i] is entry:
                    del _overrides[i]
                    break


def limited(fn: F) -> F:
    """Decorator form of :func:`thread_policy` for library entry points (``AFLite.fit``, ``audit``, ...)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with thread_policy():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _one_thread_here() -> None:
    """Worker-thread initializer: OpenMP's thread count is per calling thread (omp_set_num_threads), so a limit
    set in the main thread does not reach a new worker thread; BLAS (OpenBLAS) limits are process-wide."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="openmp")  # never restored: the setting dies with the thread


def map_fits(fn: Callable[[T], R], items: Iterable[T], workers: int | None = None) -> list[R]:
    """``[fn(x) for x in items]`` with up to :func:`fit_workers` fits side by side in threads, each with one
    BLAS/OpenMP thread; results in input order. For fits that release the GIL (BLAS, scikit-learn's Cython)."""
    todo = list(items)
    n = fit_workers(len(todo)) if workers is None else max(1, min(int(workers), budget(), len(todo)))
    if n <= 1:
        return [fn(x) for x in todo]

    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(n, initializer=_one_thread_here) as pool:
        return list(pool.map(fn, todo))


def map_inference(torch: Any, fn: Callable[[T], R], items: Iterable[T], *, device: Any = "cpu") -> list[R]:
    """``[fn(x) for x in items]`` in torch inference mode. On CPU with a budget > 1, up to :func:`fit_workers`
    batches run side by side in threads, each with one intra-op thread: no barrier for a core that another job
    holds to stall (MiniLM on a busy 2-core machine: 12-14 pairs/s this way, 5-6 with two intra-op threads,
    7-11 with one), and each batch's result independent of the thread count (a lone batch, or a budget of 1, runs
    in order with one intra-op thread too). Elsewhere (GPU), in order."""
    todo = list(items)
    cpu = str(device).split(":")[0] == "cpu"
    n = fit_workers(len(todo)) if cpu else 1

    def run(x: T) -> R:
        with torch.inference_mode():  # thread-local: each worker enters it
            return fn(x)

    before = torch.get_num_threads()
    if cpu:  # one intra-op thread for a lone batch too: its bits do not depend on the budget (cluster shards)
        torch.set_num_threads(1)
    try:
        if n <= 1:
            return [run(x) for x in todo]
        with ThreadPoolExecutor(n) as pool:
            return list(pool.map(run, todo))
    finally:
        if cpu and torch.get_num_threads() != before:
            torch.set_num_threads(before)


@dataclass(frozen=True)
class Policy:
    """The thread policy in force (:func:`describe`): CPUs, budget, where it came from, the pools' thread counts
    and torch's (None while torch is not imported)."""

    available_cpus: int
    budget: int
    source: str
    pools: list[tuple[Any, Any, Any]]
    torch_threads: int | None = None


def describe() -> Policy:
    """The policy in force, for run summaries: CPUs, budget, where it came from and the pools' thread counts."""
    from threadpoolctl import threadpool_info

    r = requested()
    torch = sys.modules.get("torch")
    return Policy(
        available_cpus(), budget(),
        "default" if r is None else ("--threads" if any(v is not None for (v,) in _overrides) else ENV_VAR),
        sorted({(i.get("user_api"), i.get("internal_api"), i.get("num_threads")) for i in threadpool_info()}, key=str),
        None if torch is None else int(torch.get_num_threads()))
