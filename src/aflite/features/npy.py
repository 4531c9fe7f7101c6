"""Φ of many images straight into a memory-mapped ``.npy``, chunk by chunk and resumable (``aflite embed``)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from aflite.atomic import announce, new_memmap, write_json, wrote
from aflite.errors import InputError, ParameterError
from aflite.features.base import log, progress_bar
from aflite.features.cache import values_sha256


class _Progress(TypedDict, total=False):
    """``dest.progress.json``: what the partial file holds (its inputs' key, shape, chunking), the chunks flushed
    and the sha256 of each one's values; total=False: a file left by another aflite may lack any of them."""

    key: str
    n: int
    dim: int
    chunk_size: int
    done: list[int]
    sha256: dict[str, str]


def embed_to_npy(refs: Sequence[str], featurizer: Any, dest: str | os.PathLike[str], *, chunk_size: int = 4096,
                 key: str = "", show_progress: bool = True) -> Path:
    """Embed ``refs`` chunk by chunk straight into a memory-mapped ``dest`` .npy (float32, never all in memory).

    Rows go to ``dest.partial``; after each chunk is flushed, ``dest.progress.json`` records it with the sha256 of
    its values, so an interrupted run (same ``key``: inputs and options) resumes at the chunks not yet recorded, and
    a recorded chunk whose rows in the partial file no longer match their sha256 (changed after the kill) is
    embedded again, never sealed into ``dest``. When every chunk is in, the file is renamed to ``dest``
    (atomically) and the progress file removed. ImageNet-sized runs (1.28M × 1,280 float32 ≈ 6.6 GB) then go to
    ``aflite filter --mmap``.
    """

    if chunk_size < 1:
        raise ParameterError(f"chunk_size must be >= 1, got {chunk_size}")
    dest = Path(dest)
    partial = dest.with_name(dest.name + ".partial")
    prog = dest.with_name(dest.name + ".progress.json")
    n = len(refs)
    if n == 0:
        raise InputError("no images to embed")
    n_chunks = math.ceil(n / chunk_size)
    done: set[int] = set()
    digests: dict[str, str] = {}  # chunk -> sha256 of its float32 values, as written
    mm: Any = None
    if prog.is_file() and partial.is_file():
        try:
            state: _Progress = json.loads(prog.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = {}
        if state.get("key") == key and state.get("n") == n and state.get("chunk_size") == chunk_size:
            mm = np.lib.format.open_memmap(partial, mode="r+")
            if mm.shape != (n, state.get("dim")):
                mm, state = None, {}
            else:
                done, digests = _verified(mm, state, chunk_size, partial)
    bar = progress_bar(n, getattr(featurizer, "name", "embed"), show_progress,
                        initial=sum(min(chunk_size, n - c * chunk_size) for c in done), unit="image")
    try:
        for c in range(n_chunks):
            if c in done:
                continue
            lo, hi = c * chunk_size, min(n, (c + 1) * chunk_size)
            part = np.asarray(featurizer.transform(list(refs[lo:hi]), None, progress=bar), dtype=np.float32)
            if mm is None:
                dest.parent.mkdir(parents=True, exist_ok=True)
                mm = new_memmap(partial, (n, part.shape[1]))
            mm[lo:hi] = part
            mm.flush()
            done.add(c)
            digests[str(c)] = values_sha256(part)
            write_json(prog, _Progress(key=key, n=n, dim=int(mm.shape[1]), chunk_size=chunk_size,
                                       done=sorted(done), sha256=digests))
    finally:
        if bar is not None:
            bar.close()
    assert mm is not None
    mm.flush()
    del mm
    announce(dest)
    os.replace(partial, dest)
    wrote(dest)
    prog.unlink(missing_ok=True)
    return dest


def _verified(mm: Any, state: _Progress, chunk_size: int, partial: Path) -> tuple[set[int], dict[str, str]]:
    """The chunks the progress file records whose rows in the partial file still have the sha256 it records (and
    those digests); each other recorded chunk (changed since, or recorded by an older aflite without a sha256) is
    named in a warning line and left out, so that it is embedded again."""
    found = state.get("sha256")
    recorded: dict[str, str] = found if isinstance(found, dict) else {}
    done: set[int] = set()
    digests: dict[str, str] = {}
    for c in sorted({int(c) for c in state.get("done", [])}):
        lo, hi = c * chunk_size, min(mm.shape[0], (c + 1) * chunk_size)
        want = recorded.get(str(c))
        if want is not None and lo < hi and values_sha256(mm[lo:hi]) == want:
            done.add(c)
            digests[str(c)] = want
            continue
        why = ("the progress file records no sha256 for it (an older aflite's)" if want is None else
               "its rows' sha256 differs from the one the progress file records: the bytes changed since")
        log.warning("damaged chunk %d (rows %d-%d) of %s (%s): embedding it again", c, lo, hi - 1, partial, why)
    return done, digests
