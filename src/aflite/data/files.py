"""What every reader shares: existence, gzip (by magic bytes), the format's extension, UTF-8 decoding with the
line number, raw lines kept byte for byte, and the one message for missing columns."""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections.abc import Sequence
from pathlib import Path

from aflite.data.keywords import _opt
from aflite.errors import InputError

PathLike = str | os.PathLike[str]

_GZIP_MAGIC = b"\x1f\x8b"
_INT_RE = re.compile(r"^[+-]?\d+$")


def _check_exists(path: Path) -> None:
    if not path.exists():
        raise InputError(f"{path}: no such file")


def _is_gzip(path: Path) -> bool:
    """Gzip is recognised by its magic bytes, not only by the name, so a mis-named file still reads."""
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == _GZIP_MAGIC
    except IsADirectoryError:
        return False
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _base_suffix(path: Path) -> str:
    """The extension that says the format, looking through a trailing `.gz`."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def read_file_bytes(path: Path) -> tuple[bytes, bool]:
    """Whole file content (decompressed) and whether it was gzip; truncated/corrupt gzip is an InputError."""
    _check_exists(path)
    gz = _is_gzip(path)
    try:
        if gz:
            with gzip.open(path, "rb") as fh:
                return fh.read(), True
        return path.read_bytes(), False
    except (EOFError, OSError, zlib.error) as exc:
        raise InputError(f"{path}: unreadable or truncated {'gzip ' if gz else ''}file: {exc}") from None


def split_lines(data: bytes) -> list[bytes]:
    """Physical lines (split at LF only; CRLF is stripped later) with their endings kept, so that kept rows
    can be written back byte for byte."""
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def decode_line(path: Path, raw: bytes, lineno: int) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: line {lineno}: not valid UTF-8 (byte {raw[exc.start]:#04x} at position {exc.start})"
        ) from None
    if lineno == 1 and text.startswith("\ufeff"):
        text = text[1:]  # a BOM written by spreadsheet programs
    return text


def _strip_eol(text: str) -> str:
    return text.rstrip("\r\n")


MEMORY_PREFIX = "in-memory "  # how aflite.data.memory.source_name names data given as an object, not a file


def holder(where: str | os.PathLike[str]) -> str:
    """What holds the columns a message lists: "the file", or for data given in memory what it is ("the pandas
    DataFrame"), so that a DataFrame's user is not sent looking for a file."""
    name = str(where)
    return "the " + name[len(MEMORY_PREFIX):] if name.startswith(MEMORY_PREFIX) else "the file"


def _missing_columns(path: Path, wanted: Sequence[str], present: Sequence[str], what: str = "column") -> None:
    missing = [c for c in wanted if c not in present]
    if missing:
        raise InputError(
            f"{path}: missing {what}{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}; "
            f"{holder(path)} has: {', '.join(map(repr, present)) or '(none)'}"
        )


def _parse_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def detect_format(path: Path) -> str:
    """The format of ``path`` (tsv, csv, jsonl, parquet, hf) from its extension, a ``.txt`` by its header, a folder
    by its ``save_to_disk`` files; anything else is refused naming ``--format``."""
    if path.is_dir():
        if (
            (path / "dataset_info.json").exists()
            or (path / "state.json").exists()
            or (path / "dataset_dict.json").exists()
        ):
            return "hf"
        raise InputError(
            f"{path}: a folder, but not a Hugging Face dataset saved with save_to_disk "
            "(no dataset_info.json / state.json)"
        )
    suffix = _base_suffix(path)
    by_suffix = {
        ".tsv": "tsv",
        ".csv": "csv",
        ".jsonl": "jsonl",
        ".ndjson": "jsonl",
        ".json": "jsonl",
        ".parquet": "parquet",
        ".pq": "parquet",
    }
    if suffix in by_suffix:
        return by_suffix[suffix]
    if suffix == ".txt":  # GLUE distributes some TSVs as .txt; decide by the header
        data, _ = read_file_bytes(path)
        first = data.split(b"\n", 1)[0]
        if first.lstrip().startswith(b"{"):
            return "jsonl"
        return "tsv" if b"\t" in first else "csv"
    raise InputError(
        f"{path}: cannot tell the format from the extension {suffix or '(none)'!r}; "
        f"pass {_opt('format')} (tsv, csv, jsonl, parquet or hf)"
    )
