"""Claiming an output folder (:meth:`aflite.rundir.folder.RunFolder.claim`): checked before any computation,
marked as its command's and locked against a second process.

The marker lists what aflite wrote there (``"written"``, each name recorded before it is created), so that aflite
removes or replaces only its own files: everything else in the folder is the user's, whenever it came.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, TypedDict, cast

from aflite import __version__
from aflite.atomic import check_output_path, write_json
from aflite.errors import OutputError, ParameterError
from aflite.hashing import file_sha256
from aflite.rundir.names import (
    CHECKPOINT,
    FEATURES,
    INSTANCES,
    KEPT_CSV,
    KEPT_IDS,
    LOCK,
    MARKER,
    PAGE,
    REMOVED_CSV,
    REMOVED_IDS,
    RESULTS,
    RUN_COMMANDS,
    SUMMARY_MD,
    TOKENS,
    WARMUP_IDS,
    WEIGHTS,
)

__all__ = ["LOCK", "MARKER", "FileRecord", "Marker", "check_cache_dir", "check_claim", "check_outside_runs",
           "clear_own_folder", "forget_files", "holding_lock", "holds_run", "identity", "is_run_folder",
           "lock_folder", "plain_name", "previous_run", "read_marker", "record_files", "record_of", "record_written",
           "recorded_files", "spelled_path", "unchanged", "write_marker", "written_of"]

RUN_FILES = (CHECKPOINT, RESULTS)  # a run directory holds one of these once a run has written it
# what an aflite < 0.3 wrote into a folder it claimed (its marker did not list the user's own entries)
_OLD_NAMES = frozenset({CHECKPOINT, INSTANCES, KEPT_IDS, REMOVED_IDS, WARMUP_IDS, KEPT_CSV, REMOVED_CSV, TOKENS,
                        WEIGHTS, FEATURES, PAGE, SUMMARY_MD, "summary.json", "metrics.json", "cache"})


class FileRecord(TypedDict, total=False):
    """What the marker records of one entry aflite wrote: a file's sha256 and size, or a folder's digest."""

    sha256: str
    size: int
    folder: bool


class Marker(TypedDict, total=False):
    """The owner marker, as :func:`write_marker` writes it; people copy and edit it, so every reader checks each
    key's type before it trusts it (``foreign``: aflite 0.3.0's list of the user's entries)."""

    command: str
    created: bool
    written: list[str]
    files: dict[str, FileRecord]
    aflite: str
    time: str
    foreign: list[str]


def is_run_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` is a run folder: marked by ``aflite run``/``filter``/``demo``, or (no marker) holding a
    checkpoint or a run's results.json."""
    p = Path(folder)
    if not p.is_dir():
        return False
    marker = read_marker(p)
    if marker is not None:
        return marker["command"] in RUN_COMMANDS
    if (p / CHECKPOINT).is_file():
        return True
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return json.loads((p / RESULTS).read_text(encoding="utf-8")).get("command") in RUN_COMMANDS
    return False


NAME_MAX = 255  # bytes in one path component on the usual file systems (ext4, xfs, btrfs, tmpfs)


def spelled_path(out: str | os.PathLike[str]) -> Path:
    """An output path by the one rule of the command line and the library: ``..`` resolved as the kernel does
    (so the folder claimed is the one written), a component too long for the file system refused."""
    p = Path(out).expanduser()
    for part in p.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise ParameterError(f"{p}: a path component of {len(part):,} characters ({part[:24]}...); a file "
                                 f"system takes at most {NAME_MAX} bytes per name")
    parts = p.parts
    if ".." not in parts:
        return p
    last = max(i for i, part in enumerate(parts) if part == "..")
    return Path(os.path.realpath(Path(*parts[:last + 1]))).joinpath(*parts[last + 1:])


def plain_name(name: Any) -> bool:
    """Whether ``name`` can only mean an entry directly inside the folder (not the marker or the lock): a marker
    is copied and shared, so any other name it lists is never taken as a path."""
    return (isinstance(name, str) and name not in ("", ".", "..", MARKER, LOCK) and "/" not in name
            and "\\" not in name and "\0" not in name and not os.path.isabs(name))


def recorded_files(marker: Marker | None) -> dict[str, FileRecord]:
    """The marker's file records (plain name -> :class:`FileRecord`), entries of any other shape left out."""
    files = marker.get("files") if marker is not None else None
    if not isinstance(files, dict):
        return {}
    return {n: v for n, v in files.items() if plain_name(n) and isinstance(v, dict)
            and isinstance(v.get("sha256"), str)}


def record_of(path: Path) -> FileRecord | None:
    """The record of an entry aflite has just written; None for a link or nothing."""
    try:
        st = path.lstat()
        if stat.S_ISREG(st.st_mode):
            return {"sha256": file_sha256(path), "size": st.st_size}
        if stat.S_ISDIR(st.st_mode):
            return {"sha256": file_sha256(path), "folder": True}
    except OSError:
        pass
    return None


def unchanged(folder: Path, name: str, marker: Marker | None) -> bool:
    """Whether ``folder/name`` is exactly what aflite recorded writing there (its kind, never a link, size and
    sha256)."""
    want = recorded_files(marker).get(name) if plain_name(name) else None
    if want is None:
        return False
    path = folder / name
    try:
        st = path.lstat()
    except OSError:
        return False
    if want.get("folder") is True:
        return stat.S_ISDIR(st.st_mode) and file_sha256(path) == want["sha256"]
    return (stat.S_ISREG(st.st_mode) and st.st_size == want.get("size")
            and file_sha256(path) == want["sha256"])


def record_files(folder: Path, records: dict[str, FileRecord]) -> None:
    """Add to the marker what aflite wrote (plain name -> :func:`record_of`), right after writing it."""
    marker = read_marker(folder)
    records = {n: r for n, r in records.items() if plain_name(n)}
    if marker is None or not records:
        return
    files = recorded_files(marker)
    if all(files.get(n) == r for n, r in records.items()):
        return
    write_json(folder / MARKER, {**marker, "files": dict(sorted({**files, **records}.items()))})


def forget_files(folder: Path, names: Iterable[str]) -> None:
    """Drop from the marker the records of ``names`` (removed by aflite, or about to be written again)."""
    marker = read_marker(folder)
    files = recorded_files(marker)
    gone = set(names) & set(files)
    if marker is None or not gone:
        return
    write_json(folder / MARKER, {**marker, "files": {n: r for n, r in files.items() if n not in gone}})


def written_of(folder: Path, marker: Marker | None) -> set[str]:
    """The top-level entries aflite wrote: the marker's ``"written"``; for a marker of aflite 0.3.0 or older (no
    such list), the entries its manifest lists or under its own names, less what it lists as the user's."""
    if marker is None:
        return set()
    listed = marker.get("written")
    if isinstance(listed, list):
        return {n for n in listed if plain_name(n)}
    foreign = marker.get("foreign")
    users = {str(n) for n in foreign} if isinstance(foreign, list) else set()
    known = set(_OLD_NAMES) | {RESULTS, PAGE}
    with contextlib.suppress(OSError, ValueError, AttributeError):
        manifest = json.loads((folder / RESULTS).read_text(encoding="utf-8")).get("manifest")
        known |= {str(k).split("/", 1)[0] for k in manifest} if isinstance(manifest, dict) else set()
    try:
        present = [e.name for e in folder.iterdir()]
    except OSError:
        return set()
    return {n for n in present if (n in known or n.startswith("filtered")) and n not in users}


def holds_run(folder: Path) -> bool:
    """Whether a filtering run has written ``folder`` (a checkpoint, or a committed run's results.json)."""
    return any((folder / f).exists() for f in RUN_FILES)


def previous_run(folder: Path, flag: str = "--out") -> OutputError:
    """The refusal of a folder holding a run, neither resumed nor overwritten, in the CLI's or Python's words."""
    res, over = ("--resume", "--overwrite") if flag.startswith("-") else ("resume=True", "overwrite=True")
    return OutputError(f"{flag} {folder}: holds a previous run: pass {res} to continue it, {over} to start over, or "
                       f"choose another {flag}")


def record_written(folder: Path, names: Iterable[str]) -> None:
    """Add ``names`` to the marker's ``"written"`` before they are created (a kill in between leaves a name without
    its file, never a file of aflite's unclaimed)."""
    marker = read_marker(folder)
    if marker is None:
        return
    had = written_of(folder, marker)
    if set(names) <= had and isinstance(marker.get("written"), list):
        return
    marker.pop("foreign", None)
    write_json(folder / MARKER, {**marker, "written": sorted(had | set(names))})


def check_outside_runs(path: str | os.PathLike[str], runs: Any = (), *, flag: str = "--out") -> None:
    """Refuse an output or cache path of a command that reads run folders when it is in one of ``runs`` or in any
    run folder: a run folder is written by its run only, so what it recorded stays what the run did."""
    resolved = Path(path).expanduser().resolve()
    inputs = [Path(r).expanduser().resolve() for r in runs]
    for run in inputs:
        if resolved == run or run in resolved.parents:
            where = "is" if resolved == run else "is inside"
            raise OutputError(f"{flag} {path} {where} the run folder {run}, which this command reads: a run folder "
                              f"is written by its run only; choose another {flag}")
    _refuse_in_run(path, resolved, flag)


def check_cache_dir(cache: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
                    flag: str = "--cache-dir") -> None:
    """Refuse, before ``out`` is claimed, a cache folder the command could not write (a dangling link, a file, a
    read-only folder) or must not (inside a run folder other than its own ``out``)."""
    p = _refuse_dangling(spelled_path(cache), flag)
    check_output_path(p, flag=flag, folder=True)
    _refuse_in_run(cache, p.resolve(), flag, None if out is None else spelled_path(out).resolve())


def _refuse_dangling(p: Path, flag: str) -> Path:
    if p.is_symlink() and not p.exists():
        raise OutputError(f"{flag} {p}: a link to {os.readlink(p)}, which does not exist; give an existing folder "
                          f"or a new path")
    return p


def _refuse_in_run(given: Any, resolved: Path, flag: str, own: Path | None = None) -> None:
    """``resolved`` in a run folder (below ``own``, the command's own folder, is allowed) refused."""
    for folder in (resolved, *resolved.parents):
        if folder == own:
            return
        if is_run_folder(folder):
            where = "is" if folder == resolved else "is inside"
            raise OutputError(f"{flag} {given} {where} the run folder {folder}: a run folder is written by its run "
                              f"only; choose another {flag}")


def read_marker(folder: str | os.PathLike[str]) -> Marker | None:
    """The owner marker of a folder (command, whether that command created the folder), or None."""
    path = Path(folder) / MARKER
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(obj, dict) and isinstance(obj.get("command"), str)):
        return None
    return cast(Marker, obj)  # its other keys are checked where they are read (recorded_files, written_of)


def identity(path: Path) -> tuple[int, int] | None:
    """The (device, inode) the path leads to now; None when nothing is there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def check_claim(out: str | os.PathLike[str], command: str, *, overwrite: bool = False, resume: bool = False,
                flag: str = "--out") -> tuple[Path, Marker | None, list[Path]]:
    """The refusals of a claim, before anything is created (an empty path is not the current folder by accident);
    ``flag`` names ``out`` as the CLI or Python does. Returns the path, its marker and its entries."""
    over = "--overwrite" if flag.startswith("-") else "overwrite=True"  # the CLI names its flags, Python keywords
    if not str(out).strip():
        raise ParameterError(f"{flag}: an empty path; give the folder to write into (\".\" for the current one)")
    try:
        spelled = spelled_path(out)
    except ParameterError as exc:
        raise ParameterError(f"{flag} {exc}") from None
    p = check_output_path(_refuse_dangling(spelled, flag), flag=flag, folder=True)
    if not p.exists():
        return p, None, []
    entries = [e for e in p.iterdir() if e.name not in (MARKER, LOCK)]
    marker = read_marker(p)
    owner = None if marker is None else marker["command"]
    if entries and owner != command and not overwrite:
        made = f"made by `aflite {owner}`" if owner else f"not made by `aflite {command}`"
        kept = (f"the files `aflite {owner}` wrote are replaced, every other entry stays" if owner else
                "every entry there stays")
        raise OutputError(f"{flag} {p}: folder is not empty ({len(entries)} entr"
                          f"{'y' if len(entries) == 1 else 'ies'}) and was {made}; pass {over} to write "
                          f"into it anyway ({kept}; a name clash with one of them is refused), or choose "
                          f"another {flag}")
    if not resume and not overwrite and holds_run(p) and command in ("run", "filter"):
        raise previous_run(p, flag)
    return p, marker, entries


def write_marker(folder: Path, command: str, marker: Marker | None, existed: bool) -> None:
    """Mark ``folder`` as ``aflite COMMAND``'s, keeping what an earlier marker says aflite wrote and created."""
    created = not existed if marker is None else marker.get("created") is True
    ours = written_of(folder, marker)
    write_json(folder / MARKER, {"command": command, "created": created, "written": sorted(ours),
                                 "files": {n: r for n, r in recorded_files(marker).items() if n in ours},
                                 "aflite": __version__, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")})


@contextlib.contextmanager
def holding_lock(folder: str | os.PathLike[str], flag: str = "DIR") -> Iterator[None]:
    """Hold the folder's lock while the block runs (``aflite report``: never a page written while a command builds
    the folder, nor the reverse)."""
    fh = lock_folder(Path(folder), flag)
    try:
        yield
    finally:
        if fh is not None:
            fh.close()


def lock_folder(folder: Path, flag: str) -> IO[str] | None:
    """An exclusive, non-blocking lock on FOLDER/.aflite.lock held while the returned file stays open."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock (documented)
        return None
    try:
        fh = open(folder / LOCK, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the lock's lifetime
    except OSError as exc:
        raise OutputError(f"{flag} {folder}: cannot write into the folder: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        pid = fh.read().strip() or "?"
        fh.close()
        raise OutputError(f"{flag} {folder}: in use by another aflite process (pid {pid}); wait for it to "
                          f"finish or choose another {flag}") from None
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
    except OSError as exc:  # disk full or quota: the lock file cannot even hold a pid
        fh.close()
        raise OutputError(f"{flag} {folder}: cannot write into the folder: {exc.strerror or exc}") from None
    return fh


def clear_own_folder(folder: Path, command: str) -> bool:
    """Empty a folder ``aflite COMMAND`` created of what aflite provably wrote (unchanged files, Φ's cache); the
    user's entries stay. Returns whether it was cleared."""
    marker = read_marker(folder)
    if marker is None or marker.get("command") != command or marker.get("created") is not True:
        return False
    ours = written_of(folder, marker)
    for entry in folder.iterdir():
        if entry.name in (MARKER, LOCK) or entry.name not in ours:
            continue
        if entry.name == "cache" and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)  # Φ's cache, which the demo made
        elif entry.is_file() and not entry.is_symlink() and unchanged(folder, entry.name, marker):
            entry.unlink()
        else:  # a link, a folder, a file changed since aflite wrote it: not provably aflite's
            print(f"warning: {entry}: left as it is: not a file aflite recorded writing, unchanged",
                  file=sys.stderr)
    return True


PAUSE_AT = "AFLITE_PAUSE_AT"  # NAME or NAME#N: the process stops at the N-th time it passes the point NAME
PAUSE_FILE = "AFLITE_PAUSE_FILE"  # where it says so (its pid and the point), for the test that then kills it
# a file whose appearance lets the paused process go on (a test that acts on the folder mid-run, then lets it finish)
PAUSE_UNTIL = "AFLITE_PAUSE_UNTIL"
_passed: dict[str, int] = {}


def pause_point(name: str) -> None:
    """A named moment of a command's writes: when ``AFLITE_PAUSE_AT`` names it, the process writes its pid to
    ``AFLITE_PAUSE_FILE`` and waits (forever, or until ``AFLITE_PAUSE_UNTIL`` exists), so that a test can kill it
    at exactly that moment or act on the folder mid-run."""
    want = os.environ.get(PAUSE_AT)
    if not want:
        return
    point, _, nth = want.partition("#")
    if point != name:
        return
    _passed[name] = _passed.get(name, 0) + 1
    if _passed[name] != (int(nth) if nth.isdigit() else 1):
        return
    signal_file = os.environ.get(PAUSE_FILE)
    if signal_file:
        Path(signal_file).write_text(f"{os.getpid()} {name}\n", encoding="utf-8")
    until = os.environ.get(PAUSE_UNTIL)
    while not (until and Path(until).exists()):  # pragma: no cover - a test's SIGKILL, or its go-on file, ends this
        time.sleep(0.05 if until else 60)
