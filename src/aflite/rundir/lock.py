"""Claiming an output folder: every command that writes a folder claims it first.

The path is checked before any computation, a marker file names the command that owns the folder (so that
another command, or ``demo``'s clean start, never overwrites or deletes what it did not make), and a lock keeps a
second process out while the first writes. :meth:`aflite.rundir.folder.RunFolder.claim` claims with these
checks, and the :class:`~aflite.rundir.folder.RunFolder` holds the claim.

The marker also lists what aflite wrote there (``"written"``: top-level names, recorded before each is created), so
that aflite removes or replaces only its own files: everything else in the folder is the user's, whenever it came.
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
           "clear_own_folder", "foreign_of", "forget_files", "holding_lock", "holds_run", "identity", "is_run_folder",
           "lock_folder", "plain_name", "previous_run", "read_marker", "record_files", "record_of", "record_written",
           "recorded_files", "spelled_path", "unchanged", "write_marker", "written_of"]

RUN_FILES = (CHECKPOINT, RESULTS)  # a run directory holds one of these once a run has written it
# what an aflite < 0.3 wrote into a folder it claimed (its marker did not list the user's own entries)
_OLD_NAMES = frozenset({CHECKPOINT, INSTANCES, KEPT_IDS, REMOVED_IDS, WARMUP_IDS, KEPT_CSV, REMOVED_CSV, TOKENS,
                        WEIGHTS, FEATURES, PAGE, SUMMARY_MD, "summary.json", "metrics.json", "cache"})


class FileRecord(TypedDict, total=False):
    """What the marker records of one entry aflite wrote (:func:`record_of`): a file's sha256 and size, or a
    folder's digest."""

    sha256: str
    size: int
    folder: bool


class Marker(TypedDict, total=False):
    """The owner marker (``.aflite``), as :func:`write_marker` writes it; a marker is a file people copy and edit,
    so every reader checks each key's type before it trusts it (``foreign``: aflite 0.3.0's list of the user's
    entries)."""

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
    """An output path as the one rule of the command line and the library spells it: ``..`` resolved as the
    kernel resolves it (the part up to the last ``..`` taken to its real folder, the rest appended), so that the
    folder aflite claims is the one it writes, and a component too long for the file system refused in one line
    (:class:`~aflite.errors.ParameterError`) before anything is touched."""
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
    """Whether ``name`` can only mean an entry directly inside the folder: a non-empty string that is not ``.``,
    ``..`` or absolute, holds no separator nor NUL, and is not the marker or the lock. A marker is a file of the
    folder, which people copy and share: any other name it lists is never taken as a path."""
    return (isinstance(name, str) and name not in ("", ".", "..", MARKER, LOCK) and "/" not in name
            and "\\" not in name and "\0" not in name and not os.path.isabs(name))


def recorded_files(marker: Marker | None) -> dict[str, FileRecord]:
    """What the marker records of each file aflite wrote (plain name -> its sha256 and size; a folder's digest),
    entries of any other shape left out."""
    files = marker.get("files") if marker is not None else None
    if not isinstance(files, dict):
        return {}
    return {n: v for n, v in files.items() if plain_name(n) and isinstance(v, dict)
            and isinstance(v.get("sha256"), str)}


def record_of(path: Path) -> FileRecord | None:
    """What the marker records of an entry aflite has just written: a plain file's sha256 and size, a folder's
    digest (:func:`aflite.hashing.file_sha256`); None for anything else (a link, nothing)."""
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
    """Whether ``folder/name`` is exactly what aflite recorded writing there: a plain name the marker records, the
    entry of the kind it recorded (never a link), its size and sha256 as recorded."""
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
    """The top-level entries of ``folder`` that aflite wrote (whatever else is there is the user's): the marker's
    ``"written"`` list; for a marker of aflite 0.3.0 (which listed the user's entries of the claim instead) or older,
    the entries present that its committed manifest lists or that it writes under its own names, less what that
    marker lists as the user's; nothing without a marker."""
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
    """The refusal of a folder that holds a run, neither resumed nor overwritten (``flag``: ``--out`` names the
    CLI's options, ``out`` the Python keywords)."""
    res, over = ("--resume", "--overwrite") if flag.startswith("-") else ("resume=True", "overwrite=True")
    return OutputError(f"{flag} {folder}: holds a previous run: pass {res} to continue it, {over} to start over, or "
                       f"choose another {flag}")


def foreign_of(folder: Path, marker: Marker | None) -> list[str]:
    """The entries of ``folder`` that aflite did not write (the user's own, there before aflite claimed it or added
    since), sorted; the marker and the lock aside."""
    ours = written_of(folder, marker)
    try:
        return sorted(e.name for e in folder.iterdir() if e.name not in ours and e.name not in (MARKER, LOCK))
    except OSError:
        return []


def record_written(folder: Path, names: Iterable[str]) -> None:
    """Add ``names`` to what the marker says aflite wrote, before they are created (a kill in between leaves a
    name listed whose file is missing, never a file of aflite's that the marker does not claim)."""
    marker = read_marker(folder)
    if marker is None:
        return
    had = written_of(folder, marker)
    if set(names) <= had and isinstance(marker.get("written"), list):
        return
    marker.pop("foreign", None)
    write_json(folder / MARKER, {**marker, "written": sorted(had | set(names))})


def check_outside_runs(path: str | os.PathLike[str], runs: Any = (), *, flag: str = "--out") -> None:
    """Refuse (one line, before anything is written) an output or cache path of a command that reads run folders
    (explain, evaluate, audit --compare) when it is one of the input ``runs``, inside one, or inside any other run
    folder: a run folder is written by its run only, so that what it recorded stays what the run did."""
    resolved = Path(path).expanduser().resolve()
    inputs = [Path(r).expanduser().resolve() for r in runs]
    for run in inputs:
        if resolved == run or run in resolved.parents:
            where = "is" if resolved == run else "is inside"
            raise OutputError(f"{flag} {path} {where} the run folder {run}, which this command reads: a run folder "
                              f"is written by its run only; choose another {flag}")
    for folder in (resolved, *resolved.parents):
        if is_run_folder(folder):
            where = "is" if folder == resolved else "is inside"
            raise OutputError(f"{flag} {path} {where} the run folder {folder}: a run folder is written by its run "
                              f"only; choose another {flag}")


def check_cache_dir(cache: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
                    flag: str = "--cache-dir") -> None:
    """Refuse, in one line and before ``out`` is claimed, a cache folder the command could not write or must not:
    a dangling link, a regular file, a read-only folder (or one under a file), or a folder inside a run folder
    other than the command's own ``out`` (a run folder is written by its run only)."""
    p = spelled_path(cache)
    if p.is_symlink() and not p.exists():
        raise OutputError(f"{flag} {p}: a link to {os.readlink(p)}, which does not exist; give an existing folder "
                          f"or a new path")
    check_output_path(p, flag=flag, folder=True)
    resolved, own = p.resolve(), None if out is None else spelled_path(out).resolve()
    for folder in (resolved, *resolved.parents):
        if folder == own:
            return
        if is_run_folder(folder):
            where = "is" if folder == resolved else "is inside"
            raise OutputError(f"{flag} {cache} {where} the run folder {folder}: a run folder is written by its run "
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
    """The refusals of a claim of ``out`` for ``aflite COMMAND``, before anything is created: an empty path (it is
    not the current folder by accident), a dangling link, a non-empty folder whose marker names another command
    (unless ``overwrite``, the user's ``--overwrite``), a folder holding a run neither resumed nor overwritten.
    ``flag``: how messages name ``out`` (``--out`` under the command line, ``out`` for a Python caller, whose
    messages then name ``overwrite=True``). Returns the path, its marker and its entries (marker and lock aside)."""
    over = "--overwrite" if flag.startswith("-") else "overwrite=True"  # the CLI names its flags, Python keywords
    if not str(out).strip():
        raise ParameterError(f"{flag}: an empty path; give the folder to write into (\".\" for the current one)")
    try:
        spelled = spelled_path(out)
    except ParameterError as exc:
        raise ParameterError(f"{flag} {exc}") from None
    if spelled.is_symlink() and not spelled.exists():
        raise OutputError(f"{flag} {spelled}: a link to {os.readlink(spelled)}, which does not exist; give an "
                          f"existing folder or a new path")
    p = check_output_path(spelled, flag=flag, folder=True)
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
    """Mark ``folder`` as ``aflite COMMAND``'s, keeping what an earlier marker says aflite wrote there (none in a
    folder it did not make: the one thing it may replace or remove) and whether aflite created the folder."""
    created = not existed if marker is None else marker.get("created") is True
    ours = written_of(folder, marker)
    write_json(folder / MARKER, {"command": command, "created": created, "written": sorted(ours),
                                 "files": {n: r for n, r in recorded_files(marker).items() if n in ours},
                                 "aflite": __version__, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")})


@contextlib.contextmanager
def holding_lock(folder: str | os.PathLike[str], flag: str = "DIR") -> Iterator[None]:
    """Hold the folder's lock while the block runs (``aflite report``: a page is never written while a command
    builds the folder, nor a command begun while the page of the old folder is written); a folder in use by
    another process is refused in one line."""
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
    """Empty a folder that ``aflite COMMAND`` created and marked as its own of what aflite wrote there (its marker
    and lock stay, and whatever the user added): the files the marker records, while unchanged, and Φ's cache;
    anything else is left alone. Returns whether it was cleared."""
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
    """A named moment of a command's writes (``claimed``, ``begun``, ``checkpoint``, ``filtered``, ``files``,
    ``committed``; ``page``: ``aflite report``'s page rendered, not yet written):
    when the environment names it in ``AFLITE_PAUSE_AT``, the process writes its pid to ``AFLITE_PAUSE_FILE`` and
    waits there forever, so that a test can kill it with SIGKILL at exactly that moment (tests/test_commit.py), or
    (``AFLITE_PAUSE_UNTIL``) until that file exists, so that a test can act on the folder mid-run.
    Nothing happens otherwise."""
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
