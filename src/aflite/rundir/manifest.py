"""The manifest of an output folder: every file a command wrote there, with its size and sha256, listed in
results.json under ``"files"`` when the command commits the folder (results.json is written last).

A folder's life is claim, build, commit, verify (docs/architecture.md): the claim's marker lists what aflite
wrote there (anything else is the user's, never listed, never removed); the build first takes results.json away
(the folder is then visibly unfinished) and, unless it resumes, removes what an earlier command left; the commit writes
results.json with this manifest; every reader checks the files it uses against it and refuses a file that is
missing or differs, in one line naming the file. A folder without results.json is an unfinished one, whatever
else it holds, so a killed command leaves the old complete folder, the new complete one, or an unfinished one —
never a mix that a reader takes for a run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypedDict, cast

from aflite.atomic import json_text
from aflite.errors import InputError
from aflite.hashing import file_sha256, json_digest
from aflite.rundir.names import CACHE, LOCK, MARKER, PAGE, RESULTS

__all__ = ["NOT_LISTED", "RESERVED", "ManifestEntry", "check_seal", "entry", "listing", "own_entries", "seal", "verify"]

RESERVED = (MARKER, LOCK, RESULTS, CACHE)  # never listed: the claim, the lock, the manifest itself, Φ's cache
# written by the command but not listed: the page, which ``aflite report`` rebuilds from the listed files at any
# time (atomically, leaving the committed folder as it is: a kill never puts the page out of step with the manifest)
NOT_LISTED = (PAGE,)


class ManifestEntry(TypedDict, total=False):
    """One file of the manifest (:func:`entry`): its size and sha256, or, a link, its target."""

    size: int
    sha256: str
    link: str


def _temporary(name: str) -> bool:
    """A temporary file of :mod:`aflite.atomic` (``.NAME.xxxx.tmp``), left behind only by a killed process."""
    return name.startswith(".") and name.endswith(".tmp")


def own_entries(folder: Path, own: Iterable[str]) -> list[Path]:
    """The top-level entries of ``folder`` that aflite wrote (``own``: the names its marker lists), but the
    reserved ones."""
    keep = set(own) - set(RESERVED)
    try:
        return sorted(e for e in folder.iterdir() if e.name in keep)
    except OSError:
        return []


def entry(path: Path) -> ManifestEntry:
    """One manifest line: a file's size and sha256 (a link: its target)."""
    if path.is_symlink():
        return {"link": os.readlink(path)}
    return {"size": path.stat().st_size, "sha256": file_sha256(path)}


def listing(folder: Path, own: Iterable[str]) -> dict[str, ManifestEntry]:
    """Every file aflite wrote below ``folder`` (``own``: the top-level names it wrote; relative POSIX path -> size
    and sha256), sorted by path; temporary files of a killed writer are left out."""
    files: dict[str, ManifestEntry] = {}
    for top in own_entries(folder, own):
        if _temporary(top.name) or top.name in NOT_LISTED:
            continue
        below = [top] if top.is_symlink() or not top.is_dir() else sorted(
            q for q in top.rglob("*") if q.is_symlink() or q.is_file())
        for f in below:
            if not _temporary(f.name):
                files[f.relative_to(folder).as_posix()] = entry(f)
    return dict(sorted(files.items()))


def verify(folder: Path, files: Any, names: Iterable[str] | None = None) -> None:
    """Refuse, in one line naming the file, a listed file (all, or those of ``names`` that are listed) that is
    missing or whose size or sha256 differs from the manifest ``files``; a name in ``names`` that the manifest
    does not list but the folder holds is refused too (it was not written by the command that committed the
    folder)."""
    where = folder / RESULTS
    if not isinstance(files, dict):
        raise InputError(f"{where}: \"manifest\" is not the folder's manifest (a JSON object of files)")
    wanted = sorted(files) if names is None else list(names)
    for name in wanted:
        path = folder / name
        want = files.get(name)
        if want is None:
            if path.exists() or path.is_symlink():
                raise InputError(f"{path}: not listed in {where}: it was not written by the command that made "
                                 f"the folder; move it away or run that command again")
            continue
        if not isinstance(want, dict):
            raise InputError(f"{where}: \"manifest\".{name!r} is not a manifest entry")
        _check(folder, name, cast(ManifestEntry, want))  # each key is checked as it is read


def _check(folder: Path, name: str, want: ManifestEntry) -> None:
    path = folder / name
    again = "the folder was changed after aflite wrote it; restore the file or run the command again"
    if "link" in want:
        if not path.is_symlink() or os.readlink(path) != want["link"]:
            raise InputError(f"{path}: not the link the manifest in {folder / RESULTS} lists; {again}")
        return
    if not path.is_file():
        raise InputError(f"{path}: missing (listed in {folder / RESULTS}); {again}")
    size = path.stat().st_size
    if size != want.get("size"):
        listed = want.get("size")
        raise InputError(f"{path}: {size:,} bytes, but the manifest in {folder / RESULTS} lists "
                         f"{f'{listed:,}' if isinstance(listed, int) else repr(listed)}; {again}")
    if file_sha256(path) != want.get("sha256"):
        raise InputError(f"{path}: its sha256 differs from the manifest in {folder / RESULTS}; {again}")


SEAL = "sealed"  # results.json's last key: the sha256 of the rest of the document (its keys sorted)


def seal(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with its seal last: results.json cannot list its own sha256, so it carries the digest of the
    rest of itself, and a hand-edited number (a label count, a size) is refused like a changed file."""
    body = {k: v for k, v in document.items() if k != SEAL}
    return {**body, SEAL: json_digest(json.loads(json_text(body)))}


def check_seal(document: dict[str, Any], path: Path) -> None:
    """Refuse a results.json whose content is not what aflite sealed."""
    body = {k: v for k, v in document.items() if k != SEAL}
    if document.get(SEAL) != json_digest(body):
        raise InputError(f"{path}: edited after aflite wrote it (its content no longer matches its {SEAL!r} "
                         f"digest); run the command again")
