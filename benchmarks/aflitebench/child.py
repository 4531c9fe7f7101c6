"""Benchmark jobs in a fresh process, so that the peak memory a job reports is its own."""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

from aflite.atomic import JSON


def in_child(spec: JSON, target: Any) -> JSON:
    """Run ``target(conn, spec)`` in a fresh (spawned) process and return what it sends back on ``conn``."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(child, spec))
    proc.start()
    child.close()
    try:
        result: JSON = parent.recv()
    except EOFError:
        proc.join()
        raise RuntimeError(f"benchmark child failed (exit code {proc.exitcode}); see the messages above") from None
    proc.join()
    return result


def own_peak_gib() -> float:
    """This process's own peak resident memory, GiB: ``VmHWM`` of /proc/self/status where there is one.

    Not ``getrusage``'s ``ru_maxrss``: Linux carries the high-water mark across ``exec``, so a spawned child's
    ``ru_maxrss`` is at least the parent's resident memory when it was forked (the benchmark's parent holds
    the data of the phase comparison), whatever the child itself uses."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
