"""Commit a folder whose files a test wrote by hand, through the one commit path (:meth:`RunFolder.finish`), as
if the command had written them: claimed, its files recorded as aflite's, begun keeping them, then finished with
results.json (the envelope, ``body`` and the manifest, sealed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from aflite.rundir.folder import RunFolder
from aflite.rundir.lock import LOCK, MARKER, record_files, record_of, record_written
from aflite.rundir.names import SUMMARY_MD
from aflite.rundir.results import Result


@dataclass(repr=False)
class _ByHand(Result):
    command: ClassVar[str] = ""
    out: Path | None
    body: dict[str, Any]
    given_seed: Any = None

    @property
    def seed(self) -> Any:
        return self.given_seed if self.given_seed is not None else self.body.get("seed")

    def to_json(self) -> dict[str, Any]:
        return self.body

    def summary_md(self) -> str:
        assert self.out is not None
        md = self.out / SUMMARY_MD
        return md.read_text(encoding="utf-8") if md.is_file() else "# by hand\n"


def commit(out: str | Path, body: dict[str, Any], *, command: str, argv: Sequence[str] | None = None,
           seed: Any = None) -> dict[str, Any]:
    """Commit ``out`` as ``aflite COMMAND`` would have (every file in it listed as the command's); returns
    results.json as written."""
    out = Path(out)
    RunFolder.claim(out, command, overwrite=True, resume=True).release()  # the marker, then what the test wrote in it:
    names = [e.name for e in out.iterdir() if e.name not in (MARKER, LOCK)]
    record_written(out, names)
    record_files(out, {n: r for n in names if (r := record_of(out / n)) is not None})  # each file as it is now
    with RunFolder.claim(out, command, overwrite=True, resume=True, argv=argv) as folder:
        folder.begin(keep=names)
        return folder.finish(_ByHand(out, body, seed))
