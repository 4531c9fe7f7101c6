""":class:`RunFolder`: the output folder of one command, from its claim to its commit.

Every command claims its folder before any work (checked, marked as the command's own and locked:
:mod:`aflite.rundir.lock`): the CLI claims ``--out`` and passes the :class:`RunFolder`, with the argv it parsed,
to the library function as ``out``; a Python caller passes a path and the function claims it the same way
(:func:`claims`: the same refusals, ``overwrite=True`` and ``resume=True`` for ``--overwrite``/``--resume``).
The folder's life (docs/architecture.md): **claim**; **build** — :meth:`RunFolder.begin`, before the first write,
takes results.json away (the folder is unfinished from then on) and removes what an earlier command wrote
there but what the command resumes from (never the user's own entries, never Φ's cache); then the command writes
its files (the filter's checkpoint after every phase, filtered.*, features.npy, ...); **commit** —
:meth:`RunFolder.finish` writes the :class:`~aflite.rundir.results.Result`'s files, ``summary.md`` and
``report.html`` (the page from the result in memory: ``Result.page``), then ``results.json`` last, with the manifest
of every file but the page, which is derived from them (:mod:`aflite.rundir.manifest`);
**verify** — every reader checks the files against that manifest (:mod:`aflite.rundir.read`)."""

from __future__ import annotations

import contextlib
import csv
import functools
import inspect
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from aflite.atomic import atomic_open, storage_errors, write_text
from aflite.core.phase import FilterState
from aflite.errors import AfliteError, OutputWriteError
from aflite.report.explorer import render
from aflite.rundir import checkpoint
from aflite.rundir.bodies import parse
from aflite.rundir.lock import OutputFolder, claim_output, foreign_of, pause_point, read_marker
from aflite.rundir.manifest import listing, own_entries
from aflite.rundir.names import CHECKPOINT, PAGE, RESULTS, SUMMARY_MD
from aflite.rundir.results import Result, results_document, write_results_json

__all__ = ["RunFolder", "claims"]

F = TypeVar("F", bound=Callable[..., Any])


class RunFolder:
    """An output folder: its path, the command that writes it, the argv results.json records (None: the process's
    own) and its claim (released when the ``with`` block ends)."""

    def __init__(self, path: str | os.PathLike[str], command: str, *, argv: Sequence[str] | None = None,
                 claim: OutputFolder | None = None) -> None:
        self.path = Path(path)
        self.command = command
        self.argv = None if argv is None else list(argv)
        self._claim = claim
        self._begun = False

    @classmethod
    def claim(cls, path: str | os.PathLike[str], command: str, *, overwrite: bool = False, resume: bool = False,
              argv: Sequence[str] | None = None, flag: str = "--out") -> RunFolder:
        """Check, create, mark and lock ``path`` for ``aflite COMMAND`` (:func:`aflite.rundir.lock.claim_output`),
        before any computation."""
        held = claim_output(path, command, overwrite=overwrite, resume=resume, flag=flag)
        pause_point("claimed")
        return cls(held.path, command, argv=argv, claim=held)

    @classmethod
    def of(cls, out: str | os.PathLike[str] | RunFolder, command: str) -> RunFolder:
        """``out`` itself: the folder the CLI or :func:`claims` claimed; a bare path here means a command function
        that does not claim its folder, which is a bug."""
        if not isinstance(out, RunFolder):
            raise TypeError(f"aflite {command}: the output folder was not claimed (decorate with runs.folder.claims)")
        return out

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r}, {self.command!r})"

    # ------------------------------------------------------------------------------------------------ claim
    def release(self, failed: bool = False) -> None:
        if self._claim is not None:
            self._claim.release(failed=failed)

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # a refused input leaves nothing behind; a write that failed part-way (disk full) keeps what was
        # completed (each file is whole), so that the run can be resumed once there is room
        self.release(failed=exc_type is not None and issubclass(exc_type, AfliteError)
                     and not issubclass(exc_type, OutputWriteError))

    # ------------------------------------------------------------------------------------------------ build
    def begin(self, *, keep: Sequence[str] = ()) -> None:
        """Start building, right before the command's first write: results.json goes first (from then on the
        folder is unfinished, and every reader says so), then whatever an earlier command wrote here except
        ``keep`` (what the command resumes from: the filter's checkpoint, embed's partial matrix); the user's own
        entries and Φ's cache stay. Once per folder; :meth:`finish` calls it when the command has not."""
        if self._begun:
            return
        self._begun = True
        with storage_errors(self.path / RESULTS):
            self.path.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                (self.path / RESULTS).unlink()
        pause_point("begun")
        for entry in own_entries(self.path, [*foreign_of(self.path, read_marker(self.path)), *keep]):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink(missing_ok=True)

    # ------------------------------------------------------------------------------------------------ checkpoints
    def holds_run(self) -> bool:
        """Whether a filtering run has written here (a checkpoint, or a committed run's results.json)."""
        return (self.path / CHECKPOINT).exists() or (self.path / RESULTS).exists()

    def save_checkpoint(self, state: FilterState, params: dict[str, Any], fp: str,
                        dataset_fp: str | None = None) -> None:
        checkpoint.save_checkpoint(self.path, state, params, fp, dataset_fp)
        pause_point("checkpoint")

    def load_checkpoint(self, params: dict[str, Any], fp: str) -> FilterState | None:
        return checkpoint.load_checkpoint(self.path, params, fp)

    # ------------------------------------------------------------------------------------------------ commit
    def finish(self, result: Result) -> dict[str, Any]:
        """Write ``result``'s own files and per-row table, summary.md and report.html (its page, built from the
        result in memory), then commit: results.json with the manifest of every file the command wrote (the user's
        own entries, Φ's cache and the page left out).
        Returns results.json as written."""
        self.begin()
        result.out = self.path
        result.write_files(self.path)
        table = result.table()
        if table is not None:
            with atomic_open(self.path / table.name) as fh:
                w = csv.writer(fh, lineterminator="\n")
                w.writerow(table.columns)
                w.writerows(table.rows)
        summary = result.summary_md()  # rendered first: what it warns about is listed in results.json too
        document = results_document(self.path, result.to_json(), command=self.command, argv=self.argv,
                                    seed=result.seed)
        parse(document, self.path / RESULTS, manifest=False)  # the body's types, as every reader will check them
        write_text(self.path / SUMMARY_MD, summary)
        page = result.page(document)  # from the result in memory: nothing just written is read back
        if page is not None:
            write_text(self.path / PAGE, page if isinstance(page, str) else render(page))
        pause_point("files")
        files = listing(self.path, foreign_of(self.path, read_marker(self.path)))
        written = write_results_json(self.path, document, files)
        pause_point("committed")
        return written

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
