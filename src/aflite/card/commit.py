"""A card folder written whole: README.md, the data file(s) and manifest.json, with manifest.json as the commit.

Each file is written atomically, but a folder of several files is not one rename, so the folder has its own
protocol, the same as a run folder's (results.json last):

1. ``manifest.json`` is first replaced by a *pending* one that lists every file the card is about to write or
   remove with the sha256 of each content aflite may leave under that name (the card it replaces, the new one,
   the placeholder below): from then on the folder is visibly uncommitted — every reader
   (:mod:`aflite.card.verify`) refuses it — and a later ``aflite card`` knows those files as its own;
2. README.md is replaced by a placeholder whose ``configs`` names a data file that does not exist, so that
   ``datasets.load_dataset`` fails on the folder instead of reading the old card's metadata over new data;
3. the files of the card it replaces that the new one does not have are removed, the data files written, then
   README.md;
4. ``manifest.json`` is written last with every file's size and sha256, sealed (the digest of the rest of it).

A kill before step 1's rename leaves the previous card whole; after it, a folder that says it is unfinished until
step 4's rename, after which it is the new card whole; ``load_dataset`` reads the previous card until step 2 and
the new one from step 3's README.md on, and fails in between.

What aflite card may replace or remove is one rule (issue 55): a name the card's manifest (committed or pending)
records, that stays inside the folder with no symlink on its way, holding a regular file whose bytes are still
one of the contents recorded for it. Anything else under a recorded name is the user's: left alone, and named in a
note; one under a name the new card writes is refused, in one line naming it, before the first write (unless it
already holds the bytes the card would write there).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from collections.abc import Mapping
from pathlib import Path

from aflite.atomic import atomic_open, atomic_path, json_text, write_text
from aflite.card.schema import CardManifest
from aflite.errors import OutputError
from aflite.hashing import file_sha256
from aflite.rundir.manifest import SEAL, entry, seal
from aflite.rundir.names import CARD, MANIFEST

__all__ = ["FORMAT_PREFIX", "PENDING", "PLACEHOLDER", "Source", "check_clashes", "commit_card", "edited_files",
           "left_alone", "manifest_text", "own_files", "planned_files", "recorded"]

FORMAT_PREFIX = "aflite-card/"
PENDING = "pending"  # the key of an uncommitted manifest.json: name -> the sha256s aflite may leave there
Source = Path | bytes  # what the card writes under a name: a file to copy, or the bytes themselves
# README.md while the card is uncommitted: its configs names a file that is never written, so that a loader fails
PLACEHOLDER = ("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: "
               "unfinished-card/no-such-file.parquet\n---\n\n# Unfinished card\n\naflite card was "
               "interrupted while writing this folder: its files may be of two cards. Run aflite card again.\n")


def recorded(out: Path) -> dict[str, set[str]] | None:
    """What OUT/manifest.json records when aflite card wrote it (committed or pending): each name it lists -> the
    sha256s of the contents aflite wrote (or may have left, for a pending one) under it; None when the file is
    absent or someone else's. A pending list of names without hashes (aflite 0.4's) records no content."""
    path = out / MANIFEST
    if not path.is_file() or path.is_symlink():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not str(doc.get("format", "")).startswith(FORMAT_PREFIX):
        return None
    got: dict[str, set[str]] = {}
    files, pending = doc.get("files"), doc.get(PENDING)
    if isinstance(files, dict):
        for name, want in files.items():
            if isinstance(want, dict) and isinstance(want.get("sha256"), str):
                got.setdefault(str(name), set()).add(want["sha256"])
    if isinstance(pending, dict):
        for name, shas in pending.items():
            listed = got.setdefault(str(name), set())
            if isinstance(shas, list):
                listed.update(str(h) for h in shas if isinstance(h, str))
    return got


def _plain(out: Path, name: str) -> bool:
    """A recorded name that is a plain path below OUT: relative, no ``..`` or ``.``, and no symlink on its way
    (a tampered manifest must not make the card touch ../x, nor a file through a link)."""
    parts = Path(name).parts
    if not parts or Path(name).is_absolute() or any(p in ("..", ".") for p in parts) or "\\" in name:
        return False
    return not any((out / Path(*parts[:i])).is_symlink() for i in range(1, len(parts) + 1))


def _holds(path: Path, shas: set[str]) -> bool:
    """A regular file (no link) holding one of the contents ``shas``: one that aflite may replace or need not."""
    return path.is_file() and not path.is_symlink() and file_sha256(path) in shas


def own_files(out: Path) -> set[str]:
    """The files in OUT (POSIX paths below it) that aflite card wrote and may replace or remove: manifest.json of
    aflite card, and each name its manifest records that is plain and holds one of the recorded contents (or is
    absent); empty when no card manifest is there."""
    listed = recorded(out)
    if listed is None:
        return set()
    own = {MANIFEST}
    for name, shas in listed.items():
        if _plain(out, name) and (_holds(out / name, shas) or not (out / name).exists() and
                                  not (out / name).is_symlink()):
            own.add(name)
    return own


def left_alone(out: Path) -> list[str]:
    """The names the card's manifest records whose entry is not aflite's (not plain, or other bytes), sorted:
    the card never touches them and says so."""
    ours = own_files(out)
    return sorted(n for n in recorded(out) or {} if n not in ours and n != MANIFEST
                  and ((out / n).exists() or (out / n).is_symlink() or not _plain(out, n)))


def edited_files(out: Path) -> set[str]:
    """The recorded files that are there but are no longer bytes aflite card wrote (edited by hand since): they
    are the user's now, never replaced or removed."""
    return {n for n, shas in (recorded(out) or {}).items() if _plain(out, n) and (out / n).is_file()
            and not _holds(out / n, shas)}


def planned_files(data: Path) -> dict[str, Path]:
    """The card's copy of each file of a saved dataset folder: name in OUT -> source."""
    if not data.is_dir():
        return {data.name: data}
    return {f"{data.name}/{f.relative_to(data).as_posix()}": f for f in sorted(data.rglob("*")) if f.is_file()}


def _sha(src: Source) -> str:
    return hashlib.sha256(src).hexdigest() if isinstance(src, bytes) else file_sha256(src)


def check_clashes(out: Path, sources: Mapping[str, Source], ours: set[str]) -> None:
    """Refuse, before anything is written, a path the card would write that holds a file aflite card did not
    write (not in ``ours``), unless it holds those very bytes; and a file where the card needs a folder."""
    for name in sorted({*sources, MANIFEST}):
        path = out / name
        for parent in list(Path(name).parents)[:-1]:
            if (out / parent).is_symlink() or (out / parent).exists() and not (out / parent).is_dir():
                raise OutputError(f"{out / parent}: a {'link' if (out / parent).is_symlink() else 'file'} where "
                                  f"the card writes the folder {parent}; move it away or choose another --out")
        if name in ours or not (path.exists() or path.is_symlink()):
            continue
        src = sources.get(name)
        if src is not None and _holds(path, {_sha(src)}):
            continue
        why = "changed since aflite card wrote it (its sha256 differs from manifest.json's)" if name in \
            edited_files(out) else "not written by aflite card"
        raise OutputError(f"{path}: {why}, and aflite card never replaces a file it did not write; move it away or "
                          f"choose another --out")


def _write(path: Path, src: Source) -> None:
    if path.is_file() and not path.is_symlink() and file_sha256(path) == _sha(src):
        return  # already those bytes (a rerun, or the file copied by hand): nothing to replace
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(src, bytes):
        with atomic_open(path, "wb", encoding=None) as fh:
            fh.write(src)
        return
    with atomic_path(path) as tmp:
        shutil.copyfile(src, tmp)


def _remove_stale(out: Path, names: set[str]) -> None:
    """Remove the earlier card's files the new card does not write (and its folders left empty)."""
    for name in sorted(names, reverse=True):
        path = out / name
        if path.is_file() and not path.is_symlink():
            path.unlink()
        for parent in Path(name).parents:
            if parent != Path("."):
                with contextlib.suppress(OSError):
                    (out / parent).rmdir()  # only when empty


def _remove_temporaries(out: Path, names: set[str]) -> None:
    """The temporary files of a killed ``aflite card`` beside the card's names."""
    for name in names:
        path = out / name
        if path.parent.is_dir() and not path.parent.is_symlink():
            for tmp in path.parent.glob(f".{path.name}.*.tmp"):
                with contextlib.suppress(OSError):
                    tmp.unlink()


def commit_card(out: Path, sources: Mapping[str, Source], facts: CardManifest, fmt: str) -> CardManifest:
    """Write the card's files (name in OUT -> a source file to copy, or the bytes) and, last, its manifest:
    ``facts`` with ``files`` (each file's size and sha256) and the seal; return the manifest written. The caller
    has checked everything and holds the folder's lock; :func:`check_clashes` is called here again, first."""
    ours = own_files(out)
    check_clashes(out, sources, ours)
    before = recorded(out) or {}
    out.mkdir(parents=True, exist_ok=True)
    _remove_temporaries(out, ours | set(sources) | {MANIFEST})
    names = (ours | set(sources)) - {MANIFEST}
    placeholder = PLACEHOLDER.encode("utf-8")
    pending = {n: sorted((before.get(n, set()) if n in ours else set())
                         | ({_sha(sources[n])} if n in sources else set())
                         | ({_sha(placeholder)} if n == CARD else set())) for n in sorted(names)}
    write_text(out / MANIFEST, json_text({"format": fmt, PENDING: pending}))
    if CARD in sources:  # ours, absent, or already the new card's bytes (check_clashes)
        _write(out / CARD, placeholder)
    _remove_stale(out, ours - set(sources) - {MANIFEST})
    data = [n for n in sources if n != CARD]
    for name in [*data, CARD] if CARD in sources else data:
        _write(out / name, sources[name])
    manifest: CardManifest = {**facts, "files": {name: entry(out / name) for name in sorted(sources)}}
    manifest["sealed"] = seal(dict(manifest))[SEAL]
    write_text(out / MANIFEST, manifest_text(manifest))
    return manifest


def manifest_text(manifest: CardManifest) -> str:
    """manifest.json's bytes: sorted keys, UTF-8 as itself, so that the same card gives the same bytes."""
    return json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
