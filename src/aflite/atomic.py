"""Atomic file output: write to a temporary file in the same folder, then rename over the target.

A reader (or a killed run) never sees a half-written file: either the old content or the new one.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; on success rename it onto ``path``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    binary = "b" in mode
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; give the file the mode a plain open() would
    try:
        with os.fdopen(fd, mode, encoding=None if binary else encoding, newline=None if binary else "") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary sibling path to write by any means (e.g. a memory-mapped .npy); renamed onto ``path`` on
    success, removed on failure."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # as a plain open() would make it (cluster workers may be other users)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_open(path, "w") as fh:
        fh.write(text)


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def write_npz(path: str | os.PathLike[str], **arrays: np.ndarray) -> None:
    """Save arrays uncompressed (no pickles: object arrays are refused on load)."""
    with atomic_open(path, "wb") as fh:
        np.savez(fh, **arrays)  # type: ignore[arg-type]


def write_npy(path: str | os.PathLike[str], array: np.ndarray) -> None:
    with atomic_open(path, "wb") as fh:
        np.save(fh, array, allow_pickle=False)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
