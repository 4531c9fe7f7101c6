""":class:`RunFolder`: the output folder of one command, its whole life in one object.

Every command claims its folder before any work (checked, marked as the command's own and locked:
:mod:`aflite.rundir.lock`): the CLI claims ``--out`` and passes the :class:`RunFolder`, with the argv it parsed,
to the library function as ``out``; a Python caller passes a path and the function claims it the same way
(:func:`claims`: the same refusals, ``overwrite=True`` and ``resume=True`` for ``--overwrite``/``--resume``).
The folder's life (docs/architecture.md): **claim** (a folder holding a run that is neither resumed nor
overwritten is refused here); **check** — :meth:`RunFolder.check_start` refuses a resume from other data and
:meth:`RunFolder.check_writes` a name the command will write that is the user's, both before anything is
computed; **build** — :meth:`RunFolder.begin` (or :meth:`RunFolder.resume`, the filter's: the checkpoint
loaded, then begun), before the first write, takes results.json away (the folder is unfinished from then on) and
removes what aflite wrote there before except what the command resumes from; then the command writes its files
(the filter's checkpoint after every phase, filtered.*, features.npy, ...); **commit** —
:meth:`RunFolder.finish` writes the :class:`~aflite.rundir.results.Result`'s files, ``summary.md`` and
``report.html`` (the page, as HTML, from the result in memory: ``Result.page``), then ``results.json`` last, with
the manifest of every file aflite wrote but the page, which is derived from them (:mod:`aflite.rundir.manifest`);
**verify** — every reader checks the files against that manifest (:mod:`aflite.rundir.read`).

aflite removes or replaces only what it wrote: the marker lists those names (each recorded before its file is
created; every atomic write into the folder passes :meth:`RunFolder._check_write` while it is claimed), and any
other entry is the user's, whenever it came — a write onto one is refused in one line naming it.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import inspect
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

from aflite.atomic import atomic_open, guarded, storage_errors, write_text
from aflite.core.phase import FilterState, RunParameters
from aflite.data.keywords import option_label
from aflite.errors import AfliteError, InputError, OutputError, OutputWriteError
from aflite.rundir import checkpoint
from aflite.rundir.lock import (
    Marker,
    check_claim,
    forget_files,
    holds_run,
    identity,
    lock_folder,
    pause_point,
    read_marker,
    record_files,
    record_of,
    record_written,
    recorded_files,
    unchanged,
    write_marker,
    written_of,
)
from aflite.rundir.manifest import listing
from aflite.rundir.names import CACHE, CHECKPOINT, LOCK, MARKER, PAGE, RESULTS, SUMMARY_MD
from aflite.rundir.read import recorded_dataset_fingerprint
from aflite.rundir.results import Result, results_document, write_results_json
from aflite.rundir.schema import parse

__all__ = ["RunFolder", "claims"]

F = TypeVar("F", bound=Callable[..., Any])


class RunFolder:
    """An output folder: its path, the command that writes it, the argv results.json records (None: the process's
    own) and its claim (:meth:`claim`: checked, created if needed, marked as the command's own and locked; released
    when the ``with`` block ends). On an :class:`~aflite.errors.AfliteError` inside the block, a folder the claim
    created is removed again and an existing one left as it was found (nothing is left behind by a refused input);
    any other exit keeps it (an interrupted run stays resumable)."""

    def __init__(self, path: str | os.PathLike[str], command: str, *, argv: Sequence[str] | None = None,
                 created: bool = False, lock_fh: IO[str] | None = None) -> None:
        self.path = Path(path)
        self.command = command
        self.argv = None if argv is None else list(argv)
        self.created = created  # whether the claim created the folder (removed again on a refused input)
        self.marked = False  # whether the claim wrote the marker (and the lock file) into an existing folder
        self.replaced: str | None = None  # the marker of another command the claim replaced (restored on failure)
        self.lost_marker = False  # whether the folder held entries but no readable marker when claimed
        self._lock_fh = lock_fh
        self._begun = False
        self._mine: set[str] = set()  # names recorded as aflite's by this process
        self._users: set[str] | None = None  # the user's entries when the command claimed the folder
        self._guard: contextlib.ExitStack | None = None
        self._identity = identity(self.path)  # the folder claimed: (device, inode) of where the path leads now

    @classmethod
    def claim(cls, path: str | os.PathLike[str], command: str, *, overwrite: bool = False, resume: bool = False,
              argv: Sequence[str] | None = None, flag: str = "--out") -> RunFolder:
        """Check, create, mark and lock ``path`` for ``aflite COMMAND``, before any computation: the refusals of
        :func:`aflite.rundir.lock.check_claim` (another command's folder without ``overwrite``, a run neither
        resumed nor overwritten), then a folder locked by a live process; ``flag`` names ``path`` in messages."""
        p, marker, entries = check_claim(path, command, overwrite=overwrite, resume=resume, flag=flag)
        existed = p.exists()
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{flag} {p}: cannot create the folder: {exc.strerror or exc}") from None
        had_lock = (p / LOCK).exists()
        try:
            lock_fh = lock_folder(p, flag)
        except OutputError:
            if not existed:
                shutil.rmtree(p, ignore_errors=True)
            raise
        folder = cls(p, command, argv=argv, created=not existed, lock_fh=lock_fh)
        folder.lost_marker = existed and marker is None and bool(entries)
        try:
            if marker is None or marker.get("command") != command or not isinstance(marker.get("written"), list):
                folder.marked = existed and marker is None and not had_lock
                if marker is not None:
                    folder.replaced = (p / MARKER).read_text(encoding="utf-8")
                write_marker(p, command, marker, existed)
        except OSError as exc:
            folder.release(failed=True)
            raise OutputError(f"{flag} {p}: cannot write into the folder: {exc.strerror or exc}") from None
        pause_point("claimed")
        return folder

    @classmethod
    def of(cls, out: str | os.PathLike[str] | RunFolder, command: str) -> RunFolder:
        """``out`` itself: the folder the CLI or :func:`claims` claimed; a bare path here means a command function
        that does not claim its folder, which is a bug."""
        if not isinstance(out, RunFolder):
            raise TypeError(f"aflite {command}: the output folder was not claimed (decorate with rundir.folder.claims)")
        return out

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r}, {self.command!r})"

    # ------------------------------------------------------------------------------------------------ claim
    def release(self, failed: bool = False) -> None:
        """Stop guarding the folder's writes and release its lock; ``failed`` (a refused input): undo the claim,
        a created folder removed, an existing one's marker and lock removed or the replaced marker restored, only
        while the path still leads to the folder claimed."""
        if self._guard is not None:
            self._guard.close()
            self._guard = None
        if self._lock_fh is not None:
            with contextlib.suppress(OSError):
                self._lock_fh.close()  # closing the descriptor releases the flock
            self._lock_fh = None
        if not failed or identity(self.path) != self._identity:
            return  # the path leads elsewhere now (a parent deleted or replaced by a link): nothing there is ours
        if self.created:
            shutil.rmtree(self.path, ignore_errors=True)
        elif self.marked:  # an existing folder that was not ours: leave it as it was found
            for name in (MARKER, LOCK):
                with contextlib.suppress(OSError):
                    (self.path / name).unlink()
        elif self.replaced is not None:  # another command's folder, refused: its owner stays
            with contextlib.suppress(OSError):
                write_text(self.path / MARKER, self.replaced)

    def __enter__(self) -> RunFolder:
        self.users()  # taken now: what appears from here on is the command's
        self._guard = contextlib.ExitStack()
        self._guard.enter_context(guarded(self.path, self._check_write, self._wrote))
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # a refused input leaves nothing behind; a write that failed part-way (disk full) keeps what was
        # completed (each file is whole), so that the run can be resumed once there is room
        self.release(failed=exc_type is not None and issubclass(exc_type, AfliteError)
                     and not issubclass(exc_type, OutputWriteError))

    # ------------------------------------------------------------------------------------------------ ownership
    def written(self) -> set[str]:
        """The top-level names aflite wrote here (the marker's plain names, and this process's own writes)."""
        return written_of(self.path, read_marker(self.path)) | self._mine

    def _own(self, name: str, marker: Marker | None) -> bool:
        """Whether aflite may replace or remove the entry ``name``: written by this process, or a plain name the
        marker lists whose entry is exactly what aflite recorded writing (or absent; Φ's cache folder, which is
        content-addressed and never removed, is aflite's when the marker lists it)."""
        if name in self._mine:
            return True
        if name not in written_of(self.path, marker):
            return False
        entry = self.path / name
        if not (entry.exists() or entry.is_symlink()):
            return True
        if name == CACHE and entry.is_dir() and not entry.is_symlink():
            return True
        return unchanged(self.path, name, marker)

    def users(self) -> set[str]:
        """The entries here that are not aflite's: not listed in the marker, or listed but no longer what aflite
        recorded writing (judged when the command claimed the folder), and whatever appears while the command runs
        that it did not write itself: aflite never adopts what it finds."""
        marker = read_marker(self.path)
        try:
            present = {e.name for e in self.path.iterdir()} - {MARKER, LOCK}
        except OSError:
            return set()
        if self._users is None:
            self._users = {n for n in present if not self._own(n, marker)}
        ours = written_of(self.path, marker) | self._mine
        return ((present & self._users) | (present - ours)) - self._mine

    def _why_not_ours(self, name: str) -> str:
        """Why ``name`` is not aflite's, in words: what the marker says of it (a hint at the marker when that is the
        cause, and how to recover)."""
        marker = read_marker(self.path)
        if self.lost_marker:
            return (f"the folder had no readable {MARKER} (aflite's record of what it wrote) when this command "
                    f"claimed it, so every entry there counts as yours; if it is aflite's own output of an earlier "
                    f"run, move or delete it yourself, or choose another {option_label('--out', 'out')}")
        if name in written_of(self.path, marker):
            why = ("its bytes differ from what aflite recorded writing" if name in recorded_files(marker) else
                   f"{MARKER} lists the name but records no sha256 of it")
            return f"{why}, so aflite cannot tell it is its own; if it is, move or delete it yourself"
        return ""

    def _refusal(self, name: str, *, begun: bool = False) -> OutputError:
        out = option_label("--out", "out")
        kept = ("it stays as it is, as does every other file of yours; the folder holds no committed run until the "
                "command runs again" if begun else
                "nothing was replaced or removed: your files and the last committed run stay as they are")
        entry = self.path / name
        mine = "a folder" if entry.is_dir() and not entry.is_symlink() else "a file"
        theirs = "a folder" if name == CACHE else "a file"
        why = self._why_not_ours(name)
        return OutputError(f"{entry}: {mine} not written by aflite, and `aflite {self.command}` writes {theirs} of "
                           f"that name; {kept}. {why + '. ' if why else ''}Move it away or choose another {out}")

    def check_writes(self, names: Iterable[str], *, inputs: Iterable[Any] = ()) -> None:
        """Refuse, before anything is computed or written, a top-level name the command will write that is the
        user's, and an input file inside the folder that the command would write over or remove."""
        names = list(names)
        users = self.users()
        for name in names:
            if name in users:
                raise self._refusal(name)
        here = self.path.resolve()
        for given in inputs:
            with contextlib.suppress(TypeError, OSError):
                p = Path(given).resolve()
                if p.parent == here and (p.name in set(names) or p.name in self.written()):
                    raise OutputError(f"{given}: an input inside {option_label('--out', 'out')} {self.path} under a "
                                      f"name aflite writes there; nothing was replaced or removed: copy the input "
                                      f"elsewhere or choose another {option_label('--out', 'out')}")

    def _check_write(self, path: Path) -> None:
        """Before every atomic write below the folder: a user's entry is refused, a new name recorded as aflite's
        before its file is created."""
        self.check_same_folder()
        name = Path(os.path.abspath(path)).relative_to(os.path.abspath(self.path)).parts[0]
        if name in self._mine or name in (MARKER, LOCK):
            return
        if name in self.users():
            raise self._refusal(name, begun=self._begun)
        record_written(self.path, [name])
        self._mine.add(name)

    def check_same_folder(self) -> None:
        """Refuse to write or commit once the path leads elsewhere than the folder claimed (its parent deleted,
        moved, or replaced by a link since): aflite writes only into the folder it claimed and locked."""
        if self._identity is not None and identity(self.path) != self._identity:
            raise OutputError(f"{option_label('--out', 'out')} {self.path}: no longer the folder this command claimed "
                              f"(it or a parent was deleted, moved or replaced by a link while the command ran); "
                              f"nothing more was written or committed: run the command again")

    def _wrote(self, path: Path) -> None:
        """After every atomic write directly inside the folder: its sha256 and size recorded in the marker, so that
        a later command replaces or removes it only while it is still exactly that."""
        where = Path(os.path.abspath(self.path))
        if Path(os.path.abspath(path)).parent == where and path.name in self._mine:
            record = record_of(path)
            if record is not None:
                record_files(self.path, {path.name: record})

    # ------------------------------------------------------------------------------------------------ build
    def holds_run(self) -> bool:
        """Whether a filtering run has written here (a checkpoint, or a committed run's results.json)."""
        return holds_run(self.path)

    def check_start(self, *, resume: bool = False, dataset_fp: str | None = None) -> None:
        """Refuse, before anything is computed, a resume of a run made from another dataset (``dataset_fp``: the
        one given now). A run neither resumed nor overwritten was refused by the claim
        (:func:`aflite.rundir.lock.previous_run`)."""
        saved = recorded_dataset_fingerprint(self.path) if resume and dataset_fp is not None else None
        if saved is not None and saved != dataset_fp:
            raise InputError(f"{self.path}: the run there was made from a different dataset (its ids, labels or texts "
                             f"differ); use another {option_label('--out', 'out')}")

    def begin(self, *, keep: Sequence[str] = (), writes: Iterable[str] = ()) -> None:
        """Start building, right before the command's first write: a name in ``writes`` that is the user's is
        refused first; then results.json goes (from then on the folder is unfinished, and every reader says so),
        then whatever aflite wrote here before except ``keep`` (what the command resumes from: the filter's
        checkpoint, embed's partial matrix) and Φ's cache. The user's entries stay. Once per folder; :meth:`finish`
        calls it when the command has not."""
        if self._begun:
            return
        writes = list(writes)
        self.check_same_folder()
        self.check_writes([*writes, RESULTS, SUMMARY_MD])  # every command commits these two
        self._begun = True
        marker = read_marker(self.path)
        earlier = self.written() - self._mine  # what aflite wrote before this command (its own writes stay)
        with storage_errors(self.path / RESULTS):
            self.path.mkdir(parents=True, exist_ok=True)
            record_written(self.path, [*writes, RESULTS])
            self._mine.update([*writes, RESULTS])
            with contextlib.suppress(FileNotFoundError):
                (self.path / RESULTS).unlink()
        pause_point("begun")
        removed = []
        for name in sorted(earlier - {*keep, RESULTS, CACHE, MARKER, LOCK}):
            entry = self.path / name
            if not (entry.exists() or entry.is_symlink()):
                continue
            if entry.is_file() and not entry.is_symlink() and unchanged(self.path, name, marker):
                entry.unlink()
                removed.append(name)
                continue
            why = ("not a plain file (a folder or a link), and aflite removes only plain files it wrote"
                   if entry.is_dir() or entry.is_symlink() else self._why_not_ours(name))
            print(f"warning: {entry}: left as it is: {why}", file=sys.stderr)
        forget_files(self.path, removed)

    def resume(self, params: RunParameters, fp: str, *, resume: bool = False,
               dataset_fp: str | None = None) -> FilterState | None:
        """The filter's start: the folder checked (:meth:`check_start`), its checkpoint loaded when ``resume``
        (refused when made from other features, labels or parameters), then begun, keeping that checkpoint.
        Returns the state to resume from (None: from the start)."""
        self.check_start(resume=resume, dataset_fp=dataset_fp)
        state = checkpoint.load_checkpoint(self.path, params, fp) if resume else None
        self.begin(keep=(CHECKPOINT,) if state is not None else ())
        return state

    def save_checkpoint(self, state: FilterState, params: RunParameters, fp: str,
                        dataset_fp: str | None = None) -> None:
        checkpoint.save_checkpoint(self.path, state, params, fp, dataset_fp)
        pause_point("checkpoint")

    # ------------------------------------------------------------------------------------------------ commit
    def finish(self, result: Result) -> dict[str, Any]:
        """Write ``result``'s own files and per-row table, summary.md and report.html (its page, built from the
        result in memory), then commit: results.json with the manifest of every file aflite wrote here (the user's
        entries, Φ's cache and the page left out). Returns results.json as written."""
        table = result.table()
        last = [SUMMARY_MD, PAGE, RESULTS, *result.file_names, *([table.name] if table is not None else [])]
        self.check_writes(last)
        self.begin()
        result.out = self.path
        result.write_files(self.path)
        summary = result.summary_md()  # rendered first: what it warns about is listed in results.json too
        document = results_document(self.path, result.to_json(), command=self.command, argv=self.argv,
                                    seed=result.seed)
        typed = parse(document, self.path / RESULTS, manifest=False)  # the body's types, as every reader checks them
        if table is not None:
            with atomic_open(self.path / table.name) as fh:
                w = csv.writer(fh, lineterminator="\n")
                w.writerow(table.columns)
                w.writerows(table.rows)
        write_text(self.path / SUMMARY_MD, summary)
        page = result.page(typed)  # HTML from the result in memory, its results.json typed as page_of reads it
        if page is not None:
            write_text(self.path / PAGE, page)
        pause_point("files")
        self.check_same_folder()
        files = listing(self.path, self.written() - self.users())  # what the marker lists but is not aflite's: left out
        self._record_folders()
        written = write_results_json(self.path, document, files)
        pause_point("committed")
        return written

    def _record_folders(self) -> None:
        """Record the digest of each folder this command wrote directly inside (a Hugging Face dataset saved in
        place), so that a later command can tell it is still aflite's; Φ's cache aside."""
        records = {}
        for name in sorted(self._mine - {CACHE}):
            entry = self.path / name
            if entry.is_dir() and not entry.is_symlink():
                record = record_of(entry)
                if record is not None:
                    records[name] = record
        record_files(self.path, records)

    @property
    def results_path(self) -> Path:
        return self.path / RESULTS


def claims(command: str, *, param: str = "out") -> Callable[[F], F]:
    """Decorate a command's library function so that a path given as ``param`` is claimed as the CLI claims
    ``--out`` (with the function's ``overwrite`` and ``resume`` keywords), held while it runs and released after:
    a refused input leaves nothing behind. A :class:`RunFolder` (the CLI's claim) or None passes through."""

    def decorate(fn: F) -> F:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind(*args, **kwargs)
            out = bound.arguments.get(param)
            if out is None or isinstance(out, RunFolder):
                return fn(*args, **kwargs)
            given = bound.arguments
            with RunFolder.claim(out, command, overwrite=bool(given.get("overwrite", False)),
                                 resume=bool(given.get("resume", False)), flag=param) as folder:
                given[param] = folder
                return fn(*bound.args, **bound.kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
