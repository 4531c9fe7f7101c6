""":class:`RunFolder`: the output folder of one command, from its claim to its last files.

The CLI claims the folder before any work (checked, marked as the command's own and locked:
:mod:`aflite.rundir.lock`) and passes it, with the argv it parsed, to the library function as ``out``; a Python
caller passes a path and gets an unclaimed folder. Either way the command writes its own files as it goes (the
filter's checkpoint after every phase, filtered.*, features.npy, ...) and ends with :meth:`RunFolder.finish`,
which writes the :class:`~aflite.rundir.results.Result`'s files, then ``results.json``, ``summary.md`` and
``report.html``, once each and in that order."""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aflite.atomic import atomic_open, write_text
from aflite.core.phase import FilterState
from aflite.errors import AfliteError, OutputWriteError
from aflite.report import write_page
from aflite.rundir import checkpoint
from aflite.rundir.lock import OutputFolder, claim_output
from aflite.rundir.names import CHECKPOINT, PAGE, RESULTS, SUMMARY, SUMMARY_MD
from aflite.rundir.results import Result, write_results_json

__all__ = ["RunFolder"]


class RunFolder:
    """An output folder: its path, the command that writes it, the argv results.json records (None: the process's
    own) and, when the CLI claimed it, the claim (released when the ``with`` block ends)."""

    def __init__(self, path: str | os.PathLike[str], command: str, *, argv: Sequence[str] | None = None,
                 claim: OutputFolder | None = None) -> None:
        self.path = Path(path)
        self.command = command
        self.argv = None if argv is None else list(argv)
        self._claim = claim

    @classmethod
    def claim(cls, path: str | os.PathLike[str], command: str, *, overwrite: bool = False, resume: bool = False,
              argv: Sequence[str] | None = None) -> RunFolder:
        """Check, create, mark and lock ``path`` for ``aflite COMMAND`` (:func:`aflite.rundir.lock.claim_output`),
        before any computation."""
        held = claim_output(path, command, overwrite=overwrite, resume=resume)
        return cls(held.path, command, argv=argv, claim=held)

    @classmethod
    def of(cls, out: str | os.PathLike[str] | RunFolder, command: str) -> RunFolder:
        """``out`` itself when it is a folder already (the CLI's claimed one), else an unclaimed folder at that path
        for ``command``."""
        return out if isinstance(out, RunFolder) else cls(out, command)

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

    # ------------------------------------------------------------------------------------------------ checkpoints
    def holds_run(self) -> bool:
        """Whether a filtering run has written here (a checkpoint or its summary)."""
        return (self.path / CHECKPOINT).exists() or (self.path / SUMMARY).exists()

    def save_checkpoint(self, state: FilterState, params: dict[str, Any], fp: str,
                        dataset_fp: str | None = None) -> None:
        checkpoint.save_checkpoint(self.path, state, params, fp, dataset_fp)

    def load_checkpoint(self, params: dict[str, Any], fp: str) -> FilterState | None:
        return checkpoint.load_checkpoint(self.path, params, fp)

    # ------------------------------------------------------------------------------------------------ last files
    def finish(self, result: Result) -> dict[str, Any]:
        """Write ``result``'s own files and per-row table, then results.json, summary.md and report.html (once
        each, in that order); returns results.json as written."""
        self.path.mkdir(parents=True, exist_ok=True)
        result.out = self.path
        result.write_files(self.path)
        table = result.table()
        if table is not None:
            with atomic_open(self.path / table.name) as fh:
                w = csv.writer(fh, lineterminator="\n")
                w.writerow(table.columns)
                w.writerows(table.rows)
        summary = result.summary_md()  # rendered first: what it warns about is listed in results.json too
        document = write_results_json(self.path, result.to_json(), command=self.command, argv=self.argv,
                                      seed=result.seed)
        write_text(self.path / SUMMARY_MD, summary)
        if result.has_page:
            html = result.page_html(document)
            if html is None:
                write_page(self.path, dataset=result.dataset, results=document)
            else:
                write_text(self.path / PAGE, html)
        return document

    @property
    def results_path(self) -> Path:
        return self.path / RESULTS
