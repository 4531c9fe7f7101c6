"""Line-based files: CSV (a quoted record may span lines), TSV and JSONL, each record kept with its raw bytes and
first line number so that kept rows can be written back byte for byte.

A TSV keeps its quotes as text (SNLI's and GLUE's hold ``"An egg has got to hatch," he said.``), unless it was
written with CSV quoting (pandas' ``to_csv(sep="\t")``): then it is read so (:func:`_tsv_is_quoted`)."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from aflite.atomic import JSON
from aflite.data.files import _strip_eol, decode_line, read_file_bytes, split_lines
from aflite.errors import InputError


@dataclass
class _Table:
    """Rows of a line-based file: header, string cells, and each record's raw bytes and first line number."""

    columns: list[str]
    rows: list[list[str]]
    raw: list[bytes]
    linenos: list[int]
    header_raw: bytes
    gzip: bool


def read_delimited(path: Path, delimiter: str, quoting: bool | None) -> _Table:
    """Read a CSV (quoted, records may span lines) or TSV with a header: ``quoting`` True reads CSV quoting, False
    none (one record per line), None decides from the file (a TSV, see the module's docstring)."""
    data, gz = read_file_bytes(path)
    lines = split_lines(data)
    if not lines or not lines[0].strip():
        raise InputError(f"{path}: empty file (a header line is required)")
    texts = [decode_line(path, raw, i + 1) for i, raw in enumerate(lines)]
    if quoting is None:
        quoted = _tsv_is_quoted(path, lines, texts, delimiter, gz)
        if quoted is not None:
            return quoted
    elif quoting:
        return _read_csv_records(path, lines, texts, delimiter, gz)
    header = _strip_eol(texts[0]).split(delimiter)
    _check_header(path, header)
    rows: list[list[str]] = []
    raw: list[bytes] = []
    linenos: list[int] = []
    for i in range(1, len(lines)):
        text = _strip_eol(texts[i])
        if not text and i == len(lines) - 1:
            continue
        cells = text.split(delimiter)
        if len(cells) != len(header):
            raise InputError(
                f"{path}: line {i + 1}: {len(cells)} fields, but the header has {len(header)} "
                f"(fields are separated by {'tabs' if delimiter == chr(9) else repr(delimiter)}, no quoting)"
            )
        rows.append(cells)
        raw.append(lines[i])
        linenos.append(i + 1)
    return _Table(header, rows, raw, linenos, lines[0], gz)


FIELD_SIZE_LIMIT = 1 << 30  # 1 GiB: a field as long as JSONL accepts (Python's csv default refuses 128 KiB)


def _read_csv_records(path: Path, lines: list[bytes], texts: list[str], delimiter: str, gz: bool) -> _Table:
    """csv.reader pulls exactly the physical lines of one record at a time; record them to keep raw bytes."""
    consumed: list[int] = []

    def feed() -> Iterator[str]:
        for i, text in enumerate(texts):
            consumed.append(i)
            yield text

    if csv.field_size_limit() < FIELD_SIZE_LIMIT:  # so that a long text reads from CSV/TSV as from JSONL
        csv.field_size_limit(FIELD_SIZE_LIMIT)
    reader = csv.reader(feed(), delimiter=delimiter, strict=True)
    header: list[str] | None = None
    rows: list[list[str]] = []
    raw: list[bytes] = []
    linenos: list[int] = []
    header_raw = b""
    while True:
        start = len(consumed)
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise InputError(f"{path}: line {reader.line_num}: malformed CSV: {exc}") from None
        idx = consumed[start:]
        chunk = b"".join(lines[j] for j in idx)
        if header is None:
            header, header_raw = cells, chunk
            _check_header(path, header)
            continue
        if not cells:  # a blank line: an empty value when there is one column (a float column's NaN), else nothing
            if len(header) != 1 or idx[0] == len(lines) - 1:
                continue
            cells = [""]
        if len(cells) != len(header):
            raise InputError(f"{path}: line {idx[0] + 1}: {len(cells)} fields, but the header has {len(header)}")
        rows.append(cells)
        raw.append(chunk)
        linenos.append(idx[0] + 1)
    if header is None:
        raise InputError(f"{path}: empty file (a header line is required)")
    return _Table(header, rows, raw, linenos, header_raw, gz)


def _tsv_is_quoted(path: Path, lines: list[bytes], texts: list[str], delimiter: str, gz: bool) -> _Table | None:
    """The table as the csv module reads it when the file was written with CSV quoting, else None (read it one
    record per line). Only a file with a field that starts with a quote can differ; it counts as CSV-quoted when
    the csv module reads all of it (strictly: a closing quote must end its field) with the header's number of
    fields in every record, which a file with quotes as text (a field ``"Hi," she said``) does not pass."""
    if not any(cell.startswith('"') for text in texts for cell in text.split(delimiter)):
        return None
    try:
        return _read_csv_records(path, lines, texts, delimiter, gz)
    except InputError:
        return None


def _check_header(path: Path, header: list[str]) -> None:
    dup = [c for c, n in Counter(header).items() if n > 1]
    if dup:
        raise InputError(f"{path}: line 1: duplicate column name(s) in the header: {', '.join(map(repr, dup))}")


@dataclass
class _Jsonl:
    records: list[JSON]
    raw: list[bytes]
    linenos: list[int]
    gzip: bool


def _read_jsonl(path: Path) -> _Jsonl:
    data, gz = read_file_bytes(path)
    records: list[JSON] = []
    raw: list[bytes] = []
    linenos: list[int] = []
    for i, line in enumerate(split_lines(data)):
        text = decode_line(path, line, i + 1)
        if not text.strip():
            continue
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as exc:
            keys = re.findall(r'"((?:[^"\\]|\\.)*)"\s*:', text[: exc.pos])
            where = f" after key {keys[-1]!r}" if keys else ""
            raise InputError(f"{path}: line {i + 1}: malformed JSON{where} (character {exc.colno} of the line): "
                             f"{exc.msg}") from None
        if not isinstance(rec, dict):
            raise InputError(f"{path}: line {i + 1}: expected a JSON object, got {type(rec).__name__}")
        records.append(rec)
        raw.append(line)
        linenos.append(i + 1)
    if not records:
        raise InputError(f"{path}: empty file (no JSON records)")
    return _Jsonl(records, raw, linenos, gz)
