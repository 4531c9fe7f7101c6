"""``aflite verify DIR``: check a downloaded card (or an aflite output folder) against the manifest it carries.

A card folder's ``manifest.json`` lists every file aflite card wrote with its size and sha256 and is sealed (the
digest of the rest of it), so the person who downloaded a release can check, on their own copy in any path, that
every file is there and is the one that was published: each problem is one line naming the file (missing,
changed, a file the card's ``configs`` would load that the manifest does not list, a manifest edited after it was
written, a card that was never committed). An output folder of any other command is checked the same way
against its results.json (:func:`aflite.rundir.read.read_folder`). Only paths are read; nothing is written.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from aflite.card.commit import FORMAT_PREFIX, PENDING
from aflite.card.croissant import CROISSANT
from aflite.card.facts import FORMAT
from aflite.card.html import split_front_matter
from aflite.errors import InputError
from aflite.features.base import JsonValue
from aflite.hashing import file_sha256
from aflite.rundir.manifest import check_seal, verify
from aflite.rundir.names import CARD, MANIFEST, MARKER, RESULTS
from aflite.rundir.read import read_folder

__all__ = ["Verified", "verify_folder"]


@dataclass
class Verified:
    """What :func:`verify_folder` found: the folder, what it is (``card``, or the command that wrote it), how many
    files were checked, and one line per problem (none: every file is the one that was written)."""

    folder: Path
    kind: str
    checked: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_folder(folder: str | os.PathLike[str]) -> Verified:
    """Check every file of the card (or aflite output folder) ``folder`` against its manifest. A folder that is
    neither (no manifest.json of aflite card, no results.json) is refused: :class:`~aflite.errors.InputError`."""
    p = Path(folder)
    if not p.is_dir():
        raise InputError(f"{p}: not a folder (expected a folder written by aflite card, or another aflite command)")
    if (p / MANIFEST).is_file() and not (p / RESULTS).is_file():
        doc = _card_manifest(p / MANIFEST)
        return _verify_card(p, doc)
    if (p / RESULTS).is_file() or (p / MARKER).is_file():
        return _verify_output(p)
    if _is_card(p / CARD):
        raise InputError(f"{p / MANIFEST}: missing: {p} holds a card of aflite card ({CARD}) without its manifest, so "
                         f"its files cannot be checked; download the whole folder again, or make the card again")
    raise InputError(f"{p}: neither {MANIFEST} (a card of aflite card) nor {RESULTS} (an aflite output folder): "
                     f"nothing to verify it against")


def _is_card(readme: Path) -> bool:
    """Whether ``readme`` is a dataset card aflite card wrote: YAML front matter tagged ``aflite``."""
    try:
        meta, _ = split_front_matter(readme.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta.get("tags"), list) and "aflite" in meta["tags"]


def _card_manifest(path: Path) -> dict[str, JsonValue]:
    """manifest.json parsed, as far as it is a card's (a JSON object whose format is aflite card's): refused in one
    line otherwise; every other key is checked where it is read."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a manifest of aflite card ({exc})") from None
    if not isinstance(doc, dict) or not str(doc.get("format", "")).startswith(FORMAT_PREFIX):
        raise InputError(f"{path}: not a manifest of aflite card (no \"format\": \"{FORMAT}\")")
    return doc


def _verify_card(folder: Path, doc: dict[str, JsonValue]) -> Verified:
    where = folder / MANIFEST
    if PENDING in doc:
        return Verified(folder, "card", 0, [f"{where}: the card was never committed (aflite card was interrupted "
                                            f"while writing it): its files may be of two cards; run aflite card "
                                            f"again"])
    if doc.get("format") != FORMAT:
        return Verified(folder, "card", 0, [f"{where}: format {doc.get('format')!r}, written by an older aflite "
                                            f"card that listed no file hashes: make the card again with this one"])
    files = doc.get("files")
    if not isinstance(files, dict) or not files:
        return Verified(folder, "card", 0, [f"{where}: no \"files\" listed: not a manifest aflite card wrote"])
    problems = []
    try:
        check_seal(doc, where)
    except InputError as exc:
        problems.append(str(exc))
    bad = set()
    for name in sorted(files):
        problem = _check_file(folder, name, files[name], where)
        if problem:
            problems.append(problem)
            bad.add(name)
    problems += _unlisted(folder, doc, files, where)
    if CROISSANT in files and (folder / CROISSANT).is_file():
        problems += _croissant(folder, bad)
    return Verified(folder, "card", len(files), problems)


def _croissant(folder: Path, bad: set[str]) -> list[str]:
    """croissant.json's FileObjects: each one a file of the card whose sha256 is the one Croissant lists (a file
    already found changed against the manifest, in ``bad``, is not named twice)."""
    path = folder / CROISSANT
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        objects = [d for d in doc.get("distribution") or [] if isinstance(d, dict)]
    except (OSError, ValueError, AttributeError) as exc:
        return [f"{path}: not a Croissant file ({exc})"]
    problems = []
    for obj in objects:
        url, want = str(obj.get("contentUrl") or ""), obj.get("sha256")
        if url in bad:
            continue  # already named (missing or changed against the manifest)
        parts = Path(url).parts
        if not url or Path(url).is_absolute() or ".." in parts or not (folder / url).is_file():
            problems.append(f"{path}: its FileObject {obj.get('@id')!r} names {url!r}, not a file of the card")
        elif file_sha256(folder / url) != want:
            problems.append(f"{folder / url}: its sha256 differs from the one {path} lists")
    return problems


def _check_file(folder: Path, name: str, want: JsonValue, where: Path) -> str | None:
    """One listed file: None when it is the one the manifest lists, else the line that says how it differs."""
    path = folder / name
    parts = Path(name).parts
    if not isinstance(want, dict) or Path(name).is_absolute() or ".." in parts:
        return f"{where}: the entry {name!r} is not a file of the card"
    if not path.is_file():
        return f"{path}: missing (listed in {where})"
    size = path.stat().st_size
    if size != want.get("size"):
        listed = want.get("size")
        listed_text = f"{listed:,}" if isinstance(listed, int) else repr(listed)  # both sizes written alike
        return f"{path}: changed: {size:,} bytes, but {where} lists {listed_text}"
    if file_sha256(path) != want.get("sha256"):
        return f"{path}: changed: its sha256 differs from the one {where} lists"
    return None


def _unlisted(folder: Path, doc: dict[str, JsonValue], files: dict[str, JsonValue], where: Path) -> list[str]:
    """Files the card's ``configs`` would load (inside a saved dataset folder) that the manifest does not list:
    they would change the dataset. Other files beside the card (a .gitattributes, a .git folder) are not its."""
    out = doc.get("output")
    name = str(out.get("file") or "") if isinstance(out, dict) else ""
    if not isinstance(out, dict) or not out.get("is_folder") or not name or not (folder / name).is_dir():
        return []
    extra = sorted(f.relative_to(folder).as_posix() for f in (folder / name).rglob("*") if f.is_file())
    return [f"{folder / n}: not listed in {where}: a file the card did not publish, inside its data folder"
            for n in extra if n not in files]


def _verify_output(folder: Path) -> Verified:
    """An output folder of another command: its results.json read (format, seal) and each listed file checked."""
    try:
        doc = read_folder(folder, names=[])
    except InputError as exc:
        return Verified(folder, "folder", 0, [str(exc)])
    listed = doc.envelope.manifest
    problems = []
    for name in sorted(listed):
        try:
            verify(folder, listed, [name])
        except InputError as exc:
            problems.append(str(exc))
    return Verified(folder, doc.command, len(listed), problems)
