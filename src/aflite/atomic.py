"""Atomic file output: write to a temporary file in the same folder, then rename over the target.

A reader (or a killed run) never sees a half-written file: either the old content or the new one.

An output folder being built guards its writes (:func:`guarded`, set by :class:`aflite.rundir.folder.RunFolder`):
every path about to be written below it is shown to the folder first, which refuses a file that is not aflite's
and records the name as aflite's before it is created.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeAlias

import numpy as np

from aflite.errors import OutputError, OutputWriteError

JSON: TypeAlias = dict[str, Any]
"""A JSON object as a file holds it (results.json, a cache record, a page's data): the one untyped shape, for the
boundary only; inside, the data travels as dataclasses and TypedDicts that say their fields."""

if TYPE_CHECKING:
    JsonValue: TypeAlias = "str | int | float | bool | None | list[JsonValue] | dict[str, JsonValue]"
else:  # typing.get_type_hints cannot resolve the recursive alias; what json.load returns is one by construction
    JsonValue = Any
"""A value a JSON file holds as it is (recorded options, a cache key's facts, a check's summary as written)."""
JsonObject: TypeAlias = dict[str, JsonValue]
"""A JSON object whose values are typed as JSON values (what a ``to_json`` returns): typed to the leaves, unlike
:data:`JSON`."""

# errors of the storage, not of the program: reported as one line (exit 2) instead of a traceback
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EACCES, errno.EPERM})


# numpy's ``tofile`` (under ``np.save``) checks the count its ``fwrite`` returned and raises a plain OSError
# without an errno when a full file system took only part of the bytes: "307200 requested and 74720 written"
_SHORT_WRITE = re.compile(r"(\d+) requested and (\d+) written")
# PyTorch's zip writer (``torch.save``) reports the same event as a RuntimeError
_TORCH_SHORT_WRITE = "file write failed"


def short_write(exc: BaseException) -> str | None:
    """Why ``exc`` is a write the file system cut short (numpy's or PyTorch's own report of a full disk, which
    carries no errno), in words; None for anything else."""
    if isinstance(exc, OSError) and exc.errno is None:
        m = _SHORT_WRITE.search(str(exc))
        if m:
            return (f"No space left on device (the file system took {int(m.group(2)):,} of {int(m.group(1)):,} "
                    f"bytes)")
    if isinstance(exc, RuntimeError) and _TORCH_SHORT_WRITE in str(exc):
        return "No space left on device (the file system took only part of the file)"
    return None


def is_storage_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the storage refusing a write (WRITE_ERRNOS, or a short write), not a program error."""
    return (isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS) or short_write(exc) is not None


def write_failed(path: str | os.PathLike[str], exc: BaseException) -> OutputWriteError:
    """The one-line error for a write of ``path`` that the storage refused (disk full, quota, read-only)."""
    short = short_write(exc)
    code = errno.ENOSPC if short else getattr(exc, "errno", None)
    why = short or getattr(exc, "strerror", None) or str(exc)
    hint = "; free some space (files written so far are complete) and run again" if code in (
        errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else ""
    return OutputWriteError(f"cannot write {path}: {why}{hint}", code)


@contextlib.contextmanager
def storage_errors(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn a storage error raised inside the block (an OSError of WRITE_ERRNOS, or a short write: see
    :func:`short_write`) into :class:`OutputWriteError`."""
    try:
        yield
    except OutputWriteError:
        raise
    except (OSError, RuntimeError) as exc:
        if is_storage_error(exc):
            raise write_failed(path, exc) from None
        raise


# an absolute folder -> its check of a path about to be written, and what it does once the path is written
_GUARDS: dict[str, tuple[Callable[[Path], None], Callable[[Path], None] | None]] = {}


@contextlib.contextmanager
def guarded(folder: str | os.PathLike[str], check: Callable[[Path], None],
            done: Callable[[Path], None] | None = None) -> Iterator[None]:
    """While the block runs, ``check(path)`` is called before every atomic write of a path below ``folder`` (it
    raises to refuse the write), and ``done(path)`` once the path holds its new content (the folder records what
    it wrote, byte for byte)."""
    key = os.path.abspath(folder)
    _GUARDS[key] = (check, done)
    try:
        yield
    finally:
        _GUARDS.pop(key, None)


# the temporary siblings atomic_path has handed out: a write into one (a memory map) is part of that guarded write
_TEMPS: set[str] = set()


def announce(target: str | os.PathLike[str]) -> None:
    """Show a guarded folder a path about to be written (by :func:`atomic_path` or by other means: a memory map, a
    folder renamed into place): refused or recorded there like an atomic write."""
    where = os.path.abspath(target)
    if where in _TEMPS:  # a write into a temporary sibling is part of the write that made it
        return
    for folder, (check, _) in list(_GUARDS.items()):
        if where.startswith(folder + os.sep):
            check(Path(where))


def wrote(target: str | os.PathLike[str]) -> None:
    """Tell a guarded folder that ``target`` now holds what aflite wrote (after the rename into place)."""
    where = os.path.abspath(target)
    for folder, (_, done) in list(_GUARDS.items()):
        if done is not None and where.startswith(folder + os.sep):
            done(Path(where))


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; on success rename it onto ``path``."""
    binary = "b" in mode
    with atomic_path(path) as tmp, open(tmp, mode, encoding=None if binary else encoding,
                                        newline=None if binary else "") as fh:
        yield fh
        fh.flush()
        os.fsync(fh.fileno())


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary sibling path to write by any means (e.g. a memory-mapped .npy); renamed onto ``path`` on
    success, removed on failure."""
    target = Path(path)
    announce(target)
    with storage_errors(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes it 0600: the mode a plain open() gives (cluster workers)
    _TEMPS.add(os.path.abspath(tmp))
    try:
        with storage_errors(target):
            yield Path(tmp)
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    finally:
        _TEMPS.discard(os.path.abspath(tmp))
    wrote(target)


def new_memmap(path: str | os.PathLike[str], shape: tuple[int, ...], dtype: Any = np.float32) -> np.memmap:
    """A new ``.npy`` memory map at ``path`` whose blocks are reserved on disk first (``posix_fallocate``): pages of
    a memory-mapped file are written back late, and on a full file system a write to one kills the process with
    SIGBUS instead of raising; reserving the space turns that into one :class:`OutputWriteError` now (the
    half-made file is removed)."""
    p = Path(path)
    announce(p)
    try:
        with storage_errors(p):
            mm = np.lib.format.open_memmap(p, mode="w+", dtype=dtype, shape=shape)
            fd = os.open(p, os.O_RDWR)
            try:
                os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
            finally:
                os.close(fd)
    except OutputWriteError:
        with contextlib.suppress(OSError):
            p.unlink()
        raise
    return mm


def umask() -> int:
    """The process's file mode creation mask (for files and folders made by other means than open() and mkdir)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_open(path, "w") as fh:
        fh.write(text)


def json_text(obj: Any) -> str:
    """``obj`` as the JSON text every aflite file holds (indented; numpy numbers as numbers, NaN as null)."""
    return json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n"


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    write_text(path, json_text(obj))


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


def load_cached_npy(path: str | os.PathLike[str], rows: int | None = None) -> np.ndarray | None:
    """A cache entry written by :func:`write_npy`, or None when it is absent or damaged (unreadable, or not
    ``rows`` long): a damaged entry is reported in one warning line and removed, so the caller recomputes it."""
    p = Path(path)
    if not p.is_file():
        return None
    try:
        arr = np.load(p, allow_pickle=False)
        if rows is not None and (arr.ndim == 0 or arr.shape[0] != rows):
            raise ValueError(f"{arr.shape[0] if arr.ndim else 0} rows, expected {rows}")
    except (OSError, ValueError, EOFError) as exc:

        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        logging.getLogger("aflite").warning("damaged cache entry %s (%s): recomputing it", p, why)
        with contextlib.suppress(OSError):
            p.unlink()
        return None
    return arr


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def check_output_path(out: str | os.PathLike[str], *, flag: str = "--out", folder: bool = True) -> Path:
    """Refuse an output path that cannot be written, before any work: a file where a folder should go (or the
    reverse), a path under a file, a folder (or the nearest existing parent) that is not writable."""
    p = Path(out)
    what = "folder" if folder else "file"
    if p.exists():
        if folder and not p.is_dir():
            raise OutputError(f"{flag} {p}: is a file, not a folder; choose a folder path")
        if not folder and p.is_dir():
            raise OutputError(f"{flag} {p}: is a folder, not a {what}")
        where = p if p.is_dir() else p.parent
        if not _writable(where):
            raise OutputError(f"{flag} {p}: {'folder ' if where == p else 'its folder '}is not writable "
                              f"(read-only or no permission)")
        return p
    anc = p.parent
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise OutputError(f"{flag} {p}: {anc} is a file, so nothing can be created under it")
    if not _writable(anc):
        raise OutputError(f"{flag} {p}: cannot create it: {anc} is not writable (read-only or no permission)")
    return p
