"""Benchmark jobs in a fresh process, so that the peak memory a job reports is its own."""

from __future__ import annotations

import multiprocessing as mp
from typing import Any


def in_child(spec: dict[str, Any], target: Any) -> dict[str, Any]:
    """Run ``target(conn, spec)`` in a fresh (spawned) process and return what it sends back on ``conn``."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(child, spec))
    proc.start()
    child.close()
    try:
        result: dict[str, Any] = parent.recv()
    except EOFError:
        proc.join()
        raise RuntimeError(f"benchmark child failed (exit code {proc.exitcode}); see the messages above") from None
    proc.join()
    return result
