"""A card folder written whole: README.md, the data file and manifest.json, with manifest.json as the commit.

Each file is written atomically, but a folder of several files is not one rename, so the folder has its own
protocol, the same as a run folder's (results.json last), in three steps:

1. ``manifest.json`` is first replaced by a *pending* one that lists every file the card is about to write or
   remove (and those of the card it replaces): from then on the folder is visibly uncommitted — every reader
   (:mod:`aflite.card.verify`) refuses it — and a later ``aflite card`` knows those files as its own;
2. the files of the card it replaces that the new one does not have are removed, the data file and README.md
   written;
3. ``manifest.json`` is written last with every file's size and sha256, sealed (the digest of the rest of it).

A kill before step 1's rename leaves the previous card whole; after it, a folder that says it is unfinished until
step 3's rename, after which it is the new card whole. Nothing the card did not write is replaced or removed: a
file under one of its names that no manifest of aflite card lists is refused, in one line naming it, before the
first write (unless it already holds the bytes the card would write there, e.g. the data file copied by hand),
and so is a file of an earlier card that was edited since (its bytes are no longer those its manifest lists).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aflite.atomic import atomic_path, json_text, write_text
from aflite.errors import OutputError
from aflite.hashing import file_sha256
from aflite.rundir.manifest import entry, seal
from aflite.rundir.names import CARD, MANIFEST

__all__ = ["FORMAT_PREFIX", "PENDING", "check_clashes", "commit_card", "edited_files", "manifest_text", "own_files",
           "planned_files", "read_card_manifest"]

FORMAT_PREFIX = "aflite-card/"
PENDING = "pending"  # the key of an uncommitted manifest.json: the files of the card being written


def read_card_manifest(out: Path) -> dict[str, Any] | None:
    """OUT/manifest.json when aflite card wrote it (committed or pending), else None (absent, or someone else's)."""
    path = out / MANIFEST
    if not path.is_file():
        return None
    with contextlib.suppress(OSError, ValueError):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and str(doc.get("format", "")).startswith(FORMAT_PREFIX):
            return doc
    return None


def own_files(out: Path) -> set[str]:
    """The files in OUT (POSIX paths below it) that aflite card wrote: those its manifest lists, committed or
    pending (a card of format /1 listed none: its README.md and manifest.json); empty when no card is there."""
    doc = read_card_manifest(out)
    if doc is None:
        return set()
    names = {MANIFEST, CARD}
    names |= {str(n) for n in doc.get("files") or {} if isinstance(n, str)}
    names |= {str(n) for n in doc.get(PENDING) or [] if isinstance(n, str)}
    return {n for n in names if _inside(n)} - edited_files(out, doc)


def edited_files(out: Path, doc: dict[str, Any] | None = None) -> set[str]:
    """The files a committed card lists that are no longer the bytes aflite card wrote (edited by hand since):
    they are the user's now, never replaced or removed."""
    doc = read_card_manifest(out) if doc is None else doc
    files = (doc or {}).get("files")
    if not isinstance(files, dict) or PENDING in (doc or {}):
        return set()
    edited = set()
    for name, want in files.items():
        path = out / str(name)
        if isinstance(want, dict) and _inside(str(name)) and path.is_file() and not path.is_symlink() and (
                path.stat().st_size != want.get("size") or file_sha256(path) != want.get("sha256")):
            edited.add(str(name))
    return edited


def _inside(name: str) -> bool:
    """A listed name that stays inside the folder (a tampered manifest must not make the card touch ../x)."""
    parts = Path(name).parts
    return bool(parts) and not Path(name).is_absolute() and ".." not in parts


def planned_files(data: Path) -> dict[str, Path]:
    """The card's copy of the run's data file (or of each file of a saved dataset folder): name in OUT -> source."""
    if not data.is_dir():
        return {data.name: data}
    return {f"{data.name}/{f.relative_to(data).as_posix()}": f for f in sorted(data.rglob("*")) if f.is_file()}


def check_clashes(out: Path, sources: Mapping[str, Path | str], ours: set[str]) -> None:
    """Refuse, before anything is written, a path the card would write that holds a file aflite card did not
    write (not in ``ours``), unless it holds those very bytes; and a file where the card needs a folder."""
    for name in sorted({*sources, MANIFEST}):
        path = out / name
        for parent in list(Path(name).parents)[:-1]:
            if (out / parent).exists() and not (out / parent).is_dir():
                raise OutputError(f"{out / parent}: a file where the card writes the folder {parent}; move it away "
                                  f"or choose another --out")
        if name in ours or not (path.exists() or path.is_symlink()):
            continue
        src = sources.get(name)
        if isinstance(src, Path) and path.is_file() and not path.is_symlink() and file_sha256(path) == \
                file_sha256(src):
            continue
        why = "changed since aflite card wrote it (its sha256 differs from manifest.json's)" if name in \
            edited_files(out) else "not written by aflite card"
        raise OutputError(f"{path}: {why}, and aflite card never replaces a file it did not write; move it away or "
                          f"choose another --out")


def _write(path: Path, src: Path | str) -> None:
    if isinstance(src, str):
        write_text(path, src)
        return
    if path.is_file() and not path.is_symlink() and file_sha256(path) == file_sha256(src):
        return  # already those bytes (a rerun, or the file copied by hand): nothing to replace
    with atomic_path(path) as tmp:
        shutil.copyfile(src, tmp)


def _remove_stale(out: Path, names: set[str]) -> None:
    """Remove the earlier card's files the new card does not write (and its folders left empty), and the temporary
    files of a killed ``aflite card`` beside the card's names."""
    for name in sorted(names, reverse=True):
        path = out / name
        if path.is_file() or path.is_symlink():
            path.unlink()
        for parent in Path(name).parents:
            if parent != Path("."):
                with contextlib.suppress(OSError):
                    (out / parent).rmdir()  # only when empty


def _remove_temporaries(out: Path, names: set[str]) -> None:
    for name in names:
        path = out / name
        if path.parent.is_dir():
            for tmp in path.parent.glob(f".{path.name}.*.tmp"):
                with contextlib.suppress(OSError):
                    tmp.unlink()


def commit_card(out: Path, sources: Mapping[str, Path | str], facts: dict[str, Any], fmt: str) -> dict[str, Any]:
    """Write the card's files (name in OUT -> a source file to copy, or the text of README.md) and, last, its
    manifest: ``facts`` with ``files`` (each file's size and sha256) and the seal; return the manifest written.
    The caller has checked everything; :func:`check_clashes` is called here again, first."""
    ours = own_files(out)
    check_clashes(out, sources, ours)
    out.mkdir(parents=True, exist_ok=True)
    _remove_temporaries(out, ours | set(sources) | {MANIFEST})
    pending = sorted((ours | set(sources) | {MANIFEST}) - {MANIFEST}) + [MANIFEST]
    write_text(out / MANIFEST, json_text({"format": fmt, PENDING: pending}))
    _remove_stale(out, ours - set(sources) - {MANIFEST})
    data = [n for n in sources if n != CARD]
    for name in [*data, CARD] if CARD in sources else data:
        _write(out / name, sources[name])
    files = {name: entry(out / name) for name in sorted(sources)}
    manifest = seal({**facts, "files": files})
    write_text(out / MANIFEST, manifest_text(manifest))
    return manifest


def manifest_text(manifest: dict[str, Any]) -> str:
    """manifest.json's bytes: sorted keys, UTF-8 as itself, so that the same card gives the same bytes."""
    return json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
