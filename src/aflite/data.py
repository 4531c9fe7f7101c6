"""Reading the user's data: feature matrices, labels, ids, and text datasets (with writing kept rows back).

Every problem with the input is raised as :class:`~aflite.errors.InputError` with a one-line message that
names the file and, where it applies, the line (1-based, counting the header), the row (0-based data row)
and the column, so that the user can go straight to the bad value.
"""

from __future__ import annotations

import contextlib
import contextvars
import csv
import gzip
import io
import json
import math
import os
import re
import shutil
import tempfile
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import atomic_open
from aflite.errors import InputError, ParameterError

__all__ = [
    "SourceInfo",
    "TextDataset",
    "check_aligned",
    "demo_dataset_path",
    "encode_labels",
    "load_dataset",
    "load_features",
    "load_ids",
    "load_labels",
    "write_filtered",
]

PathLike = str | os.PathLike[str]

# Columns never taken as features unless named: a label or id column silently used as a feature would make
# every row "predictable" and wreck the filtering.
_NON_FEATURE_COLUMNS = frozenset({"id", "idx", "index", "label", "labels", "gold_label", "pairid", "promptid"})
_GZIP_MAGIC = b"\x1f\x8b"
# Raw label values that mean "no gold label" (SNLI/MNLI `-`; the HF datasets SNLI/MNLI use -1).
_NO_GOLD = "-"
_INT_RE = re.compile(r"^[+-]?\d+$")


# How messages name the loader's options: the library's keyword (``text_a=``) or, under the command line, its
# flag (``--text-a``); the CLI sets this once (see :func:`option_names`), so every message names what the user typed.
_CLI_NAMES = contextvars.ContextVar("aflite_cli_option_names", default=False)
_FLAGS = {"text_a": "--text-a", "text_b": "--text-b", "label": "--label", "id": "--id", "groups": "--groups",
          "format": "--format"}


def option_names(cli: bool) -> contextvars.Token[bool]:
    """Name options as command-line flags (``cli=True``) or as keywords in error messages."""
    return _CLI_NAMES.set(cli)


def _opt(role: str) -> str:
    return _FLAGS.get(role, role) if _CLI_NAMES.get() else f"{role}="


# =============================================================================================== helpers
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


def _read_bytes(path: Path) -> tuple[bytes, bool]:
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


def _split_lines(data: bytes) -> list[bytes]:
    """Physical lines (split at LF only; CRLF is stripped later) with their endings kept, so that kept rows
    can be written back byte for byte."""
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _decode(path: Path, raw: bytes, lineno: int) -> str:
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


def _missing_columns(path: Path, wanted: Sequence[str], present: Sequence[str], what: str = "column") -> None:
    missing = [c for c in wanted if c not in present]
    if missing:
        raise InputError(
            f"{path}: missing {what}{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}; "
            f"the file has: {', '.join(map(repr, present)) or '(none)'}"
        )


@dataclass
class _Table:
    """Rows of a line-based file: header, string cells, and each record's raw bytes and first line number."""

    columns: list[str]
    rows: list[list[str]]
    raw: list[bytes]
    linenos: list[int]
    header_raw: bytes
    gzip: bool


def _read_delimited(path: Path, delimiter: str, quoting: bool) -> _Table:
    """Read a CSV (quoted, records may span lines) or TSV (no quoting: one record per line) with a header."""
    data, gz = _read_bytes(path)
    lines = _split_lines(data)
    if not lines or not lines[0].strip():
        raise InputError(f"{path}: empty file (a header line is required)")
    texts = [_decode(path, raw, i + 1) for i, raw in enumerate(lines)]
    if quoting:
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


def _read_csv_records(path: Path, lines: list[bytes], texts: list[str], delimiter: str, gz: bool) -> _Table:
    """csv.reader pulls exactly the physical lines of one record at a time; record them to keep raw bytes."""
    consumed: list[int] = []

    def feed() -> Iterator[str]:
        for i, text in enumerate(texts):
            consumed.append(i)
            yield text

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


def _check_header(path: Path, header: list[str]) -> None:
    dup = [c for c, n in Counter(header).items() if n > 1]
    if dup:
        raise InputError(f"{path}: line 1: duplicate column name(s) in the header: {', '.join(map(repr, dup))}")


def _parse_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# ============================================================================================ features
def load_features(path: PathLike, columns: Sequence[str] | None = None, mmap: bool = False) -> np.ndarray:
    """Load a 2-D float32 feature matrix from .npy, .csv/.tsv (header required) or .parquet.

    Without ``columns``, CSV/TSV/Parquet use every numeric column except id/label-like ones (``id``,
    ``label``, ``gold_label``, ``index``, ...), or, in Parquet, one list-of-floats column (``embedding``).
    ``mmap`` memory-maps a float32 .npy instead of reading it (large matrices); other inputs are read.
    The matrix is checked: 2-D, at least one row, every value finite.
    """
    p = Path(path)
    _check_exists(p)
    suffix = _base_suffix(p)
    if suffix == ".npy":
        X = _load_npy(p, mmap)
        col_names: list[str] | None = None
    elif suffix in (".csv", ".tsv"):
        X, col_names = _features_from_delimited(p, columns, "\t" if suffix == ".tsv" else ",")
    elif suffix in (".parquet", ".pq"):
        X, col_names = _features_from_parquet(p, columns)
    else:
        raise InputError(
            f"{p}: unsupported feature file type {suffix or '(no extension)'!r}; use .npy, .csv, .tsv or .parquet"
        )
    if X.ndim != 2:
        raise InputError(f"{p}: features must be a 2-D array (rows x features), got shape {X.shape}")
    if X.shape[0] == 0:
        raise InputError(f"{p}: no rows")
    if X.shape[1] == 0:
        raise InputError(f"{p}: no feature columns")
    _check_finite(p, X, col_names)
    return X


def _read_npy(path: Path, mmap: bool, object_hint: str) -> np.ndarray:
    """np.load without pickles; every failure becomes a one-line InputError naming the file."""
    try:
        arr = np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
    except ValueError as exc:
        msg = str(exc)
        if "allow_pickle" in msg or "Object arrays" in msg:
            raise InputError(
                f"{path}: holds Python objects (dtype=object); refused: {object_hint} (no pickles)"
            ) from None
        raise InputError(f"{path}: unreadable or truncated .npy file: {msg}") from None
    except (EOFError, OSError) as exc:
        raise InputError(f"{path}: unreadable or truncated .npy file: {exc}") from None
    if not isinstance(arr, np.ndarray):  # np.load returns NpzFile for a zip archive
        raise InputError(f"{path}: not a .npy array file")
    return arr


def _load_npy(path: Path, mmap: bool) -> np.ndarray:
    arr = _read_npy(path, mmap, "only numeric arrays can be loaded")
    if arr.dtype.kind not in "biuf":
        raise InputError(f"{path}: dtype {arr.dtype} is not numeric")
    if arr.dtype == np.float32:
        return arr
    if arr.ndim == 2 and arr.shape[0] and mmap:
        # Convert block by block so that a memory-mapped float64 file is not doubled in memory at once.
        out = np.empty(arr.shape, dtype=np.float32)
        step = max(1, (1 << 24) // max(1, arr.shape[1]))
        for s in range(0, arr.shape[0], step):
            out[s : s + step] = arr[s : s + step]
        return out
    return np.asarray(arr, dtype=np.float32)


def _check_finite(path: Path, X: np.ndarray, col_names: list[str] | None) -> None:
    """Name the first NaN/inf by row and column; blockwise so a memory-mapped matrix is not read at once."""
    step = max(1, (1 << 22) // max(1, X.shape[1]))
    for s in range(0, X.shape[0], step):
        block = np.asarray(X[s : s + step])
        bad = ~np.isfinite(block)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            value = block[r, c]
            col = repr(col_names[c]) if col_names else str(int(c))
            raise InputError(
                f"{path}: row {s + int(r)}, column {col}: {value} (features must be finite; "
                "NaN and inf are not allowed)"
            )


def _features_from_delimited(path: Path, columns: Sequence[str] | None, delimiter: str) -> tuple[np.ndarray, list[str]]:
    table = _read_delimited(path, delimiter, quoting=delimiter == ",")
    if not table.rows:
        raise InputError(f"{path}: no rows (only a header)")
    if columns is not None:
        _missing_columns(path, list(columns), table.columns)
        names = list(columns)
    else:
        first = table.rows[0]
        names = [
            c
            for c, v in zip(table.columns, first, strict=True)
            if c.lower() not in _NON_FEATURE_COLUMNS and _parse_float(v) is not None
        ]
        if not names:
            raise InputError(f"{path}: no numeric feature columns (columns: {', '.join(table.columns)})")
    idx = [table.columns.index(c) for c in names]
    X = np.empty((len(table.rows), len(idx)), dtype=np.float32)
    step = max(1, (1 << 20) // len(idx))  # parse in blocks: a string array of the whole file would be huge
    for s in range(0, len(table.rows), step):
        cells = [[row[ci] for ci in idx] for row in table.rows[s : s + step]]
        try:
            X[s : s + step] = np.asarray(cells, dtype=str).astype(np.float64)
        except ValueError:
            # numpy says only that some value is bad: find the first one to name its line and column.
            for r, row in enumerate(cells):
                for j, v in enumerate(row):
                    if _parse_float(v) is None:
                        raise InputError(
                            f"{path}: line {table.linenos[s + r]}, column {names[j]!r}: non-numeric value {v!r}"
                        ) from None
            X[s : s + step] = np.asarray([[float(v) for v in row] for row in cells], dtype=np.float64)
    return X, names


def _features_from_parquet(path: Path, columns: Sequence[str] | None) -> tuple[np.ndarray, list[str]]:
    import pyarrow as pa

    table = _read_parquet(path)
    names_all = table.column_names
    if columns is not None:
        _missing_columns(path, list(columns), names_all)
        names = list(columns)
    else:
        list_cols = [c for c in names_all if _is_numeric_list(table.schema.field(c).type)]
        scalar_cols = [
            c for c in names_all if c.lower() not in _NON_FEATURE_COLUMNS and _is_numeric(table.schema.field(c).type)
        ]
        if len(list_cols) > 1:
            raise InputError(f"{path}: several list columns ({', '.join(list_cols)}); name the feature column(s)")
        names = list_cols if list_cols else scalar_cols
        if not names:
            raise InputError(f"{path}: no numeric feature columns (columns: {', '.join(names_all)})")
    if table.num_rows == 0:
        raise InputError(f"{path}: no rows")
    parts: list[np.ndarray] = []
    col_names: list[str] = []
    for name in names:
        col = table.column(name).combine_chunks()
        typ = col.type
        if _is_numeric_list(typ):
            parts.append(_list_column_to_matrix(path, name, col))
            col_names += [f"{name}[{k}]" for k in range(parts[-1].shape[1])]
        elif _is_numeric(typ):
            if col.null_count:
                r = int(np.flatnonzero(~np.asarray(col.is_valid()))[0])
                raise InputError(f"{path}: row {r}, column {name!r}: missing value (null)")
            parts.append(np.asarray(col.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float32)[:, None])
            col_names.append(name)
        else:
            raise InputError(f"{path}: column {name!r} has non-numeric type {typ}")
    return np.ascontiguousarray(np.hstack(parts), dtype=np.float32), col_names


def _read_parquet(path: Path) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    _check_exists(path)
    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"{path}: unreadable or corrupt Parquet file: {exc}") from None


def _is_numeric(typ: Any) -> bool:
    import pyarrow.types as pt

    return bool(pt.is_integer(typ) or pt.is_floating(typ) or pt.is_boolean(typ))


def _is_numeric_list(typ: Any) -> bool:
    import pyarrow.types as pt

    return bool(
        (pt.is_list(typ) or pt.is_large_list(typ) or pt.is_fixed_size_list(typ)) and _is_numeric(typ.value_type)
    )


def _list_column_to_matrix(path: Path, name: str, col: Any) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    if col.null_count:
        r = int(np.flatnonzero(~np.asarray(col.is_valid()))[0])
        raise InputError(f"{path}: row {r}, column {name!r}: missing value (null)")
    lengths = np.asarray(pc.list_value_length(col).to_numpy(zero_copy_only=False))
    if len(lengths) and (lengths != lengths[0]).any():
        r = int(np.flatnonzero(lengths != lengths[0])[0])
        raise InputError(
            f"{path}: row {r}, column {name!r}: list of length {lengths[r]}, but row 0 has length {lengths[0]}"
        )
    values = pc.list_flatten(col)
    if values.null_count:
        k = int(np.flatnonzero(~np.asarray(values.is_valid()))[0])
        width = int(lengths[0]) if len(lengths) else 1
        raise InputError(f"{path}: row {k // width}, column {name!r}[{k % width}]: missing value (null)")
    flat = np.asarray(values.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float32)
    width = int(lengths[0]) if len(lengths) else 0
    return flat.reshape(len(col), width)


# ====================================================================================== labels and ids
def load_labels(path: PathLike, column: str | None = None) -> np.ndarray:
    """Load one label per row: .npy (1-D, not object), or a column (default ``label``) of a
    .csv/.tsv/.jsonl/.parquet file, or a .txt file with one label per line.

    Values are kept as they are: integers stay integers (a text column whose values are all integers
    becomes int64), anything else becomes a string array.
    """
    return _load_column(Path(path), column or "label", "label")


def load_ids(path: PathLike, column: str | None = None) -> np.ndarray:
    """Load one id per row, like :func:`load_labels` (default column ``id``); ids must be unique."""
    p = Path(path)
    ids = _load_column(p, column or "id", "id")
    uniq, first, counts = np.unique(ids, return_index=True, return_counts=True)
    if (counts > 1).any():
        k = int(np.flatnonzero(counts > 1)[0])
        rows = np.flatnonzero(ids == uniq[k])[:2]
        raise InputError(f"{p}: duplicate id {uniq[k].item()!r} (rows {rows[0]} and {rows[1]}); ids must be unique")
    return ids


def _load_column(path: Path, column: str, what: str) -> np.ndarray:
    _check_exists(path)
    suffix = _base_suffix(path)
    if suffix == ".npy":
        arr = _load_vector_npy(path)
    elif suffix in (".csv", ".tsv"):
        table = _read_delimited(path, "," if suffix == ".csv" else "\t", quoting=suffix == ".csv")
        _missing_columns(path, [column], table.columns)
        ci = table.columns.index(column)
        values = [row[ci] for row in table.rows]
        for v, ln in zip(values, table.linenos, strict=True):
            if v.strip() == "":
                raise InputError(f"{path}: line {ln}, column {column!r}: empty {what}")
        arr = _strings_to_array(values)
    elif suffix == ".txt":
        data, _ = _read_bytes(path)
        lines = [_strip_eol(_decode(path, raw, i + 1)) for i, raw in enumerate(_split_lines(data))]
        for i, v in enumerate(lines):
            if v.strip() == "":
                raise InputError(f"{path}: line {i + 1}: empty {what} (one {what} per line)")
        arr = _strings_to_array(lines)
    elif suffix in (".jsonl", ".ndjson", ".json"):
        records = _read_jsonl(path)
        vals: list[Any] = []
        for rec, ln in zip(records.records, records.linenos, strict=True):
            if column not in rec:
                raise InputError(f"{path}: line {ln}: no key {column!r}; the record has: {', '.join(map(repr, rec))}")
            v = rec[column]
            if v is None or (isinstance(v, str) and v.strip() == "") or isinstance(v, dict | list):
                raise InputError(f"{path}: line {ln}, key {column!r}: missing or non-scalar {what} {v!r}")
            vals.append(v)
        if vals and all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
            arr = np.asarray(vals, dtype=np.int64)
        else:
            arr = np.asarray([str(v) for v in vals], dtype=str)
    elif suffix in (".parquet", ".pq"):
        table = _read_parquet(path)
        _missing_columns(path, [column], table.column_names)
        col = table.column(column).combine_chunks()
        if col.null_count:
            r = int(np.flatnonzero(~np.asarray(col.is_valid()))[0])
            raise InputError(f"{path}: row {r}, column {column!r}: missing {what} (null)")
        import pyarrow.types as pt

        if pt.is_integer(col.type):
            arr = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)
        elif pt.is_dictionary(col.type) or pt.is_string(col.type) or pt.is_large_string(col.type):
            arr = np.asarray([str(v) for v in col.to_pylist()], dtype=str)
        else:
            arr = np.asarray(col.to_numpy(zero_copy_only=False))
    else:
        raise InputError(
            f"{path}: unsupported {what} file type {suffix or '(no extension)'!r}; use .npy, .csv, "
            ".tsv, .jsonl, .parquet or .txt"
        )
    if arr.ndim != 1:
        raise InputError(f"{path}: {what}s must be 1-D, got shape {arr.shape}")
    if len(arr) == 0:
        raise InputError(f"{path}: no {what}s")
    _refuse_nan(path, arr, column, what)
    return arr


def _refuse_nan(path: Path, arr: np.ndarray, column: str, what: str) -> None:
    """A NaN (a float NaN, or the text 'nan' that a float column with gaps becomes) is a missing value, not a
    class: refuse it instead of training on a class called 'nan'."""
    if np.issubdtype(arr.dtype, np.floating):
        bad = np.flatnonzero(np.isnan(arr))
    elif arr.dtype.kind in "US":
        bad = np.flatnonzero(np.char.lower(np.char.strip(arr.astype(str))) == "nan")
    else:
        return
    if len(bad):
        raise InputError(f"{path}: row {int(bad[0])} (0-based), column {column!r}: missing {what} (NaN); "
                         f"{len(bad)} row(s) have no {what}")


def _load_vector_npy(path: Path) -> np.ndarray:
    return _read_npy(path, False, "save labels as an int or str array")


def _strings_to_array(values: list[str]) -> np.ndarray:
    """Integers written as text become int64 (so 0/1/2 labels from a CSV match those from a .npy)."""
    if values and all(_INT_RE.match(v.strip()) for v in values):
        try:
            return np.asarray([int(v) for v in values], dtype=np.int64)
        except OverflowError:
            pass
    return np.asarray(values, dtype=str)


def encode_labels(y: np.ndarray | Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Map labels to 0..K-1 codes (int64) and the sorted unique classes, like sklearn's LabelEncoder."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise InputError(f"labels must be 1-D, got shape {arr.shape}")
    if arr.dtype == object:
        arr = arr.astype(str)
    classes, codes = np.unique(arr, return_inverse=True)
    return codes.astype(np.int64).reshape(-1), classes


def check_aligned(n_features: int, n_labels: int, n_ids: int | None = None) -> None:
    """Features, labels and ids must describe the same rows: refuse differing lengths before any work."""
    if n_features != n_labels:
        raise InputError(f"features have {n_features} rows but labels have {n_labels}; they must be equal")
    if n_ids is not None and n_ids != n_features:
        raise InputError(f"features have {n_features} rows but ids have {n_ids}; they must be equal")


# ======================================================================================= text datasets
@dataclass
class SourceInfo:
    """Where a dataset came from and what :func:`write_filtered` needs to write kept rows in that format.

    ``format`` is the file format (``tsv``, ``csv``, ``jsonl``, ``parquet``, ``hf``); ``schema`` says how the
    columns were understood (``snli-jsonl``, ``snli-tsv``, ``glue-mnli``, ``glue-qnli``, ``glue-rte``,
    ``nli-tsv``, ``generic``). ``row_index`` maps each dataset row to its 0-based record in the file (dropped records
    leave gaps); ``raw_records`` holds each kept record's original bytes for line-based formats.
    """

    path: Path
    format: str
    schema: str
    gzip: bool
    columns: dict[str, str | None]
    row_index: np.ndarray
    header_raw: bytes | None = None
    raw_records: list[bytes] | None = field(default=None, repr=False)


@dataclass
class TextDataset:
    """A text classification / NLI dataset: texts, labels (str), unique ids (str) and premise groups."""

    texts_a: list[str]
    texts_b: list[str] | None
    labels: np.ndarray
    ids: np.ndarray
    groups: np.ndarray | None
    source: SourceInfo
    n_dropped: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    extra: dict[str, list[str]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.texts_a)

    @property
    def is_pair(self) -> bool:
        return self.texts_b is not None


_FORMATS = ("auto", "tsv", "csv", "jsonl", "parquet", "hf")


def load_dataset(
    path: PathLike,
    format: str = "auto",
    text_a: str | None = None,
    text_b: str | None = None,
    label: str | None = None,
    id: str | None = None,
    label_map: dict[Any, str] | None = None,
    group_by_premise: bool = True,
    groups: str | None = None,
) -> TextDataset:
    """Load a text dataset, recognising SNLI/MNLI JSONL, GLUE TSVs (MNLI, QNLI, RTE), the project's
    premise/hypothesis TSV (gzip, no quoting) and generic CSV/TSV/JSONL/Parquet/HF datasets with named
    columns.

    Rows whose gold label is ``-`` (no annotator consensus; -1 in HF datasets) are dropped and counted in
    ``dropped``. ``label_map`` turns raw labels (e.g. 0/1/2) into names; a raw label absent from it is an
    error. For pair data, rows with the same premise text share a group id (``group_by_premise``).
    ``groups`` overrides that: ``"premise"`` (the default; no groups for single texts), ``"none"``, or the name
    of a column whose value is the group (e.g. the family id of counterfactual twins).
    """
    if groups is not None and groups not in ("premise", "none") and not str(groups).strip():
        raise ParameterError(f"{_opt('groups')}: give premise, none or a column name")
    p = Path(path)
    if format not in _FORMATS:
        raise ParameterError(f"unknown dataset format {format!r}; choose one of {', '.join(_FORMATS)}")
    _check_exists(p)
    fmt = format if format != "auto" else _detect_format(p)
    roles = {"text_a": text_a, "text_b": text_b, "label": label, "id": id}
    if fmt in ("tsv", "csv"):
        table = _read_delimited(p, "\t" if fmt == "tsv" else ",", quoting=fmt == "csv")
        if not table.rows:
            raise InputError(f"{p}: no data rows (only a header)")
        schema, cols = _resolve_columns(p, fmt, table.columns, roles)
        idx = {c: table.columns.index(c) for c in table.columns}
        records: Sequence[Any] = table.rows
        get = _cell_getter(idx)
        where = [f"line {ln}" for ln in table.linenos]
        src = SourceInfo(p, fmt, schema, table.gzip, cols, np.empty(0, np.int64), table.header_raw, [])
        raw: list[bytes] | None = table.raw
        all_cols = table.columns
    elif fmt == "jsonl":
        js = _read_jsonl(p)
        if not js.records:
            raise InputError(f"{p}: empty file (no JSON records)")
        all_cols = list(dict.fromkeys(k for rec in js.records[:100] for k in rec))
        schema, cols = _resolve_columns(p, fmt, all_cols, roles)
        records = js.records
        get = _json_getter
        where = [f"line {ln}" for ln in js.linenos]
        src = SourceInfo(p, fmt, schema, js.gzip, cols, np.empty(0, np.int64), None, [])
        raw = js.raw
    elif fmt == "parquet":
        tbl = _read_parquet(p)
        if tbl.num_rows == 0:
            raise InputError(f"{p}: no rows")
        all_cols = list(tbl.column_names)
        schema, cols = _resolve_columns(p, fmt, all_cols, roles)
        records = tbl.to_pylist()
        get = _json_getter
        where = [f"row {i}" for i in range(tbl.num_rows)]
        src = SourceInfo(p, fmt, schema, False, cols, np.empty(0, np.int64))
        raw = None
    else:  # hf
        hf = _load_hf(p)
        all_cols = list(hf.column_names)
        schema, cols = _resolve_columns(p, fmt, all_cols, roles)
        records = hf.to_list() if hasattr(hf, "to_list") else [hf[i] for i in range(len(hf))]
        get = _json_getter
        where = [f"row {i}" for i in range(len(records))]
        src = SourceInfo(p, "hf", schema, False, cols, np.empty(0, np.int64))
        raw = None
        if label_map is None:
            label_map = _hf_label_names(hf, cols["label"])
    ds = _build(p, src, records, get, where, raw, all_cols, label_map, group_by_premise and groups != "none")
    if _CLI_NAMES.get() and ds.n_dropped:  # on screen, so that a smaller |D| than the file's is never a surprise
        import sys

        why = ", ".join(f"{n:,} {k.replace('_', ' ')}" for k, n in sorted(ds.dropped.items()))
        print(f"{p}: dropped {ds.n_dropped:,} row(s) on load ({why}, e.g. SNLI's '-'); {len(ds):,} rows kept",
              file=sys.stderr)
    if groups not in (None, "premise", "none"):
        ds.groups = _column_groups(p, ds, str(groups), all_cols)
    return ds  # "premise" on single texts: no groups (there is no premise), as documented


def _detect_format(path: Path) -> str:
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
        data, _ = _read_bytes(path)
        first = data.split(b"\n", 1)[0]
        if first.lstrip().startswith(b"{"):
            return "jsonl"
        return "tsv" if b"\t" in first else "csv"
    raise InputError(
        f"{path}: cannot tell the format from the extension {suffix or '(none)'!r}; "
        "pass format= (tsv, csv, jsonl, parquet or hf)"
    )


def _resolve_columns(
    path: Path, fmt: str, columns: Sequence[str], roles: dict[str, str | None]
) -> tuple[str, dict[str, str | None]]:
    """Decide which columns hold text_a/text_b/label/id: the user's names first, else a known header.

    Returns a schema name (informational, see :class:`SourceInfo`) and the role -> column mapping.
    """
    have = set(columns)
    schema = "generic"
    guess: dict[str, str | None] = {"text_a": None, "text_b": None, "label": None, "id": None}
    if {"sentence1", "sentence2"} <= have:  # SNLI/MNLI JSONL, GLUE MNLI and RTE
        guess.update(text_a="sentence1", text_b="sentence2")
        guess["label"] = next((c for c in ("gold_label", "label") if c in have), None)
        guess["id"] = next((c for c in ("pairID", "id", "idx", "index") if c in have), None)
        if fmt == "jsonl" and "gold_label" in have:
            schema = "snli-jsonl"
        elif "genre" in have:
            schema = "glue-mnli"
        elif "gold_label" in have:
            schema = "snli-tsv"  # SNLI's own snli_1.0_*.txt (tab-separated, gold_label, pairID)
        else:
            schema = "glue-rte"
    elif {"question", "sentence"} <= have:  # GLUE QNLI
        guess.update(text_a="question", text_b="sentence", label="label" if "label" in have else None)
        guess["id"] = next((c for c in ("index", "idx", "id") if c in have), None)
        schema = "glue-qnli"
    elif {"premise", "hypothesis"} <= have:  # the project's shared TSV format (also HF-style NLI)
        guess.update(text_a="premise", text_b="hypothesis", label="label" if "label" in have else None)
        guess["id"] = "id" if "id" in have else None
        schema = "nli-tsv"
    else:  # single-text classification
        guess["text_a"] = next((c for c in ("text", "sentence", "document", "content") if c in have), None)
        guess["label"] = "label" if "label" in have else None
        guess["id"] = "id" if "id" in have else None
    if roles["text_a"] is not None:
        # The user named the text: a named text_a without text_b means single-text classification.
        guess["text_b"] = None
        schema = "generic"
    guess.update({k: v for k, v in roles.items() if v is not None})
    if guess["text_a"] is None:
        raise InputError(
            f"{path}: cannot tell which column holds the text; the file has columns "
            f"{', '.join(map(repr, columns))}; name it with {_opt('text_a')} (and {_opt('text_b')}, {_opt('label')})"
        )
    if guess["label"] is None:
        raise InputError(
            f"{path}: no label column found; the file has columns {', '.join(map(repr, columns))}; name it with "
            f"{_opt('label')}"
        )
    for role, col in guess.items():
        if col is not None and col not in columns:
            given = f" (given by {_opt(role)})" if roles.get(role) is not None else ""
            raise InputError(f"{path}: missing column {col!r}{given}; the file has: {', '.join(map(repr, columns))}")
    return schema, guess


def _cell_getter(idx: dict[str, int]) -> Any:
    def get(rec: list[str], col: str) -> Any:
        return rec[idx[col]]

    return get


def _json_getter(rec: dict[str, Any], col: str) -> Any:
    return rec.get(col)


def _build(
    path: Path,
    src: SourceInfo,
    records: Sequence[Any],
    get: Any,
    where: list[str],
    raw: list[bytes] | None,
    all_cols: list[str],
    label_map: dict[Any, str] | None,
    group_by_premise: bool,
) -> TextDataset:
    cols = src.columns
    ca, cb, cl, ci = cols["text_a"], cols["text_b"], cols["label"], cols["id"]
    assert ca is not None and cl is not None
    used = {c for c in cols.values() if c is not None}
    extra_cols = [c for c in all_cols if c not in used]
    texts_a: list[str] = []
    texts_b: list[str] | None = [] if cb is not None else None
    labels: list[str] = []
    ids: list[str] = []
    extra: dict[str, list[str]] = {c: [] for c in extra_cols}
    keep_index: list[int] = []
    dropped: Counter[str] = Counter()
    for i, rec in enumerate(records):
        lab = get(rec, cl)
        if lab is None or (isinstance(lab, str) and lab.strip() == ""):
            raise InputError(f"{path}: {where[i]}, column {cl!r}: missing label")
        no_gold = isinstance(lab, str) and lab.strip() == _NO_GOLD
        if no_gold or (src.format == "hf" and isinstance(lab, int) and lab == -1):
            dropped["no_gold_label"] += 1
            continue
        if label_map is not None:
            key: Any = lab
            if key not in label_map and isinstance(lab, str) and _INT_RE.match(lab.strip()):
                key = int(lab)
            if key not in label_map and str(lab) in label_map:
                key = str(lab)
            if key not in label_map:
                raise InputError(
                    f"{path}: {where[i]}, column {cl!r}: label {lab!r} is not in the label map "
                    f"({', '.join(map(repr, label_map))})"
                )
            lab = label_map[key]
        if isinstance(lab, float) and math.isnan(lab) or isinstance(lab, str) and lab.strip().lower() == "nan":
            raise InputError(f"{path}: {where[i]}, column {cl!r}: missing label (NaN); give every row a label or "
                             f"remove the row")
        if isinstance(lab, dict | list) or isinstance(lab, float) and not math.isfinite(lab):
            raise InputError(f"{path}: {where[i]}, column {cl!r}: invalid label {lab!r}")
        labels.append(str(lab))
        texts_a.append(_text(path, where[i], ca, get(rec, ca)))
        if texts_b is not None and cb is not None:
            texts_b.append(_text(path, where[i], cb, get(rec, cb)))
        if ci is not None:
            v = get(rec, ci)
            if v is None or str(v).strip() == "":
                raise InputError(f"{path}: {where[i]}, column {ci!r}: missing id")
            ids.append(str(v))
        else:
            ids.append(f"row-{i}")
        for c in extra_cols:
            v = get(rec, c)
            extra[c].append(v if isinstance(v, str) else ("" if v is None else json.dumps(v)))
        keep_index.append(i)
    if not labels:
        raise InputError(f"{path}: no usable rows ({sum(dropped.values())} dropped without a gold label)")
    id_arr = np.asarray(ids, dtype=str)
    counts = Counter(ids)
    dup = next((k for k, n in counts.items() if n > 1), None)
    if dup is not None:
        first = [where[keep_index[j]] for j, v in enumerate(ids) if v == dup][:2]
        raise InputError(f"{path}: duplicate id {dup!r} ({first[0]} and {first[1]}); ids must be unique")
    groups = None
    if texts_b is not None and group_by_premise:
        seen: dict[str, int] = {}
        groups = np.asarray([seen.setdefault(t, len(seen)) for t in texts_a], dtype=np.int64)
    src.row_index = np.asarray(keep_index, dtype=np.int64)
    if raw is not None:
        src.raw_records = [raw[i] for i in keep_index]
    return TextDataset(
        texts_a=texts_a,
        texts_b=texts_b,
        labels=np.asarray(labels, dtype=str),
        ids=id_arr,
        groups=groups,
        source=src,
        n_dropped=sum(dropped.values()),
        dropped=dict(dropped),
        extra=extra,
    )


def _column_groups(path: Path, ds: TextDataset, column: str, all_cols: list[str]) -> np.ndarray:
    """Group codes from a column of the file (rows with equal values share a group)."""
    cols = ds.source.columns
    if column in ds.extra:
        values = ds.extra[column]
    elif column == cols.get("id"):
        values = [str(v) for v in ds.ids]
    elif column == cols.get("text_a"):
        values = list(ds.texts_a)
    elif column == cols.get("text_b") and ds.texts_b is not None:
        values = list(ds.texts_b)
    elif column == cols.get("label"):
        raise ParameterError(f"{_opt('groups')} {column!r}: the label column cannot be the group")
    else:
        raise InputError(f"{path}: missing column {column!r} (given by {_opt('groups')}); the file has: "
                         f"{', '.join(map(repr, all_cols))}")
    empty = [i for i, v in enumerate(values) if v is None or str(v).strip() == ""]
    if empty:
        raise InputError(f"{path}: row {empty[0]} (0-based, after dropped rows), column {column!r}: missing group "
                         f"(given by {_opt('groups')}); {len(empty)} row(s) have none")
    return np.unique(np.asarray([str(v) for v in values], dtype=str), return_inverse=True)[1].astype(np.int64)


def counterfactual_twins(
    texts: Sequence[Any], labels: Sequence[Any] | np.ndarray, groups: Sequence[Any] | np.ndarray | None
) -> tuple[int, int, Any]:
    """Texts that occur with different labels in different groups: (how many such texts, the rows that carry
    them, one example).

    Grouped folds keep a group on one side, not a text: a twin's text can be learned with one label and tested
    with another, which pulls a probe below the majority rate. Grouping by the twins' family fixes that.
    """
    if groups is None:
        return 0, 0, None
    seen: dict[Any, set[tuple[Any, Any]]] = {}
    count: Counter[Any] = Counter()
    for t, lab, g in zip(texts, np.asarray(labels).tolist(), np.asarray(groups).tolist(), strict=True):
        seen.setdefault(t, set()).add((lab, g))
        count[t] += 1
    bad = [t for t, pairs in seen.items() if len(pairs) > 1
           and any(a[0] != b[0] and a[1] != b[1] for a in pairs for b in pairs)]
    return len(bad), sum(count[t] for t in bad), bad[0] if bad else None


# Twins on fewer than this share of the rows (or fewer than TWINS_WARN_TEXTS texts) are ordinary duplicates: the
# bundled SNLI sample has 6 short hypotheses such as "A person in a shirt" under several premises with different
# labels (< 1 % of its rows); a counterfactually augmented set has twins on nearly every row.
TWINS_WARN_SHARE = 0.02
TWINS_WARN_TEXTS = 3


def twins_warning(what: str, n_twins: int, n_rows: int, example: Any, group_by: str, n_total: int) -> str:
    """The one-paragraph warning for :func:`counterfactual_twins` (empty when they are under TWINS_WARN_SHARE)."""
    if n_twins < TWINS_WARN_TEXTS or n_rows < TWINS_WARN_SHARE * n_total:
        return ""
    ex = example if isinstance(example, str) else " / ".join(map(str, example))
    ex = ex if len(ex) <= 80 else ex[:77] + "..."
    return (f"warning: {n_twins:,} {what} text(s) ({n_rows:,} of {n_total:,} rows) occur with different labels in "
            f"different {group_by} groups "
            f"(counterfactual twins, e.g. {ex!r}); folds grouped by {group_by} can train on such a text with one "
            f"label and test it with another, which pulls accuracy below the majority rate. Group the twins "
            f"together with {_opt('groups')} COLUMN (a family id column).")


def warn_twins(ds: TextDataset, views: Sequence[str], group_by: str, file: Any = None) -> list[str]:
    """Print (to stderr) and return one :func:`twins_warning` per side a view uses that has twins."""
    import sys

    if ds.groups is None or ds.texts_b is None:
        return []
    sides: dict[str, Sequence[Any]] = {}
    for v in views:
        if v == "pair":
            sides["pair"] = list(zip(ds.texts_a, ds.texts_b, strict=True))
        elif v == "hypothesis":
            sides["hypothesis"] = ds.texts_b
        elif v == "premise":
            sides["premise"] = ds.texts_a
    msgs = []
    for what, texts in sides.items():
        msg = twins_warning(what, *counterfactual_twins(texts, ds.labels, ds.groups), group_by, len(ds))
        if msg:
            print(msg, file=file or sys.stderr)
            msgs.append(msg)
    return msgs


def _text(path: Path, where: str, col: str, v: Any) -> str:
    if v is None:
        raise InputError(f"{path}: {where}, column {col!r}: missing text")
    if not isinstance(v, str):
        raise InputError(f"{path}: {where}, column {col!r}: text must be a string, got {type(v).__name__}")
    return v


@dataclass
class _Jsonl:
    records: list[dict[str, Any]]
    raw: list[bytes]
    linenos: list[int]
    gzip: bool


def _read_jsonl(path: Path) -> _Jsonl:
    data, gz = _read_bytes(path)
    records: list[dict[str, Any]] = []
    raw: list[bytes] = []
    linenos: list[int] = []
    for i, line in enumerate(_split_lines(data)):
        text = _decode(path, line, i + 1)
        if not text.strip():
            continue
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: line {i + 1}: malformed JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(rec, dict):
            raise InputError(f"{path}: line {i + 1}: expected a JSON object, got {type(rec).__name__}")
        records.append(rec)
        raw.append(line)
        linenos.append(i + 1)
    if not records:
        raise InputError(f"{path}: empty file (no JSON records)")
    return _Jsonl(records, raw, linenos, gz)


def _load_hf(path: Path) -> Any:
    try:
        import datasets
    except ImportError:
        raise InputError(
            f"{path}: a Hugging Face dataset folder; reading it needs the optional package "
            "'datasets' (pip install datasets)"
        ) from None
    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as exc:  # the library raises many kinds; all mean "cannot read this folder"
        raise InputError(f"{path}: cannot load the Hugging Face dataset: {exc}") from None
    if isinstance(ds, datasets.DatasetDict):
        raise InputError(f"{path}: a DatasetDict with splits {', '.join(ds.keys())}; pass the folder of one split")
    return ds


def _hf_label_names(ds: Any, label_col: str | None) -> dict[Any, str] | None:
    """HF ClassLabel features store ints; map them to their names so labels are readable strings."""
    feat = getattr(ds, "features", {}).get(label_col) if label_col else None
    names = getattr(feat, "names", None)
    if names:
        mapping: dict[Any, str] = {i: str(n) for i, n in enumerate(names)}
        return mapping
    return None


# ============================================================================================== writing
def write_filtered(dataset: TextDataset, keep: np.ndarray | Sequence[Any], out_path: PathLike) -> Path:
    """Write the kept rows in the input's own format, each record byte for byte as it was (atomically).

    ``keep`` is a boolean mask over the dataset rows, or a collection of ids to keep. Line-based formats copy
    the header and the original record bytes (gzip in, gzip out); Parquet keeps the schema; HF datasets are
    saved with ``save_to_disk``. Rows dropped at load time (no gold label) are not written.
    """
    out = Path(out_path)
    mask = _keep_mask(dataset, keep)
    src = dataset.source
    rows = np.flatnonzero(mask)
    if src.format in ("tsv", "csv", "jsonl"):
        if src.raw_records is None:
            raise InputError(f"{src.path}: the original records are not available to write back")
        parts: list[bytes] = [src.header_raw] if src.header_raw else []
        parts += [src.raw_records[i] for i in rows]
        eol = _eol(parts)
        for k in range(len(parts) - 1):
            if not parts[k].endswith(b"\n"):
                parts[k] = parts[k] + eol
        payload = b"".join(parts)
        with atomic_open(out, "wb") as fh:
            if src.gzip:
                with gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
                    gz.write(payload)
            else:
                fh.write(payload)
    elif src.format == "parquet":
        import pyarrow.parquet as pq

        table = _read_parquet(src.path)
        kept = table.take(src.row_index[rows])
        buf = io.BytesIO()
        pq.write_table(kept, buf)
        with atomic_open(out, "wb") as fh:
            fh.write(buf.getvalue())
    elif src.format == "hf":
        ds = _load_hf(src.path).select(src.row_index[rows].tolist())
        _save_dir_atomically(ds, out)
    else:
        raise InputError(f"{src.path}: cannot write format {src.format!r}")
    return out


def _keep_mask(dataset: TextDataset, keep: np.ndarray | Sequence[Any]) -> np.ndarray:
    arr = np.asarray(keep)
    n = len(dataset)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise ParameterError(f"keep mask has shape {arr.shape}, but the dataset has {n} rows")
        return arr
    wanted = arr.astype(str).ravel()
    mask = np.isin(dataset.ids, wanted)
    unknown = np.setdiff1d(wanted, dataset.ids)
    if unknown.size:
        raise InputError(f"{unknown.size} id(s) to keep are not in {dataset.source.path}, e.g. {unknown[0].item()!r}")
    return mask


def _eol(parts: list[bytes]) -> bytes:
    for part in parts:
        if part.endswith(b"\r\n"):
            return b"\r\n"
        if part.endswith(b"\n"):
            return b"\n"
    return b"\n"


def _save_dir_atomically(ds: Any, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        ds.save_to_disk(str(tmp))
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.replace(out, old / "x")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(tmp)
        raise


# ================================================================================================ demo
def demo_dataset_path() -> Path:
    """The SNLI sample shipped with the package (~3,000 dev pairs; CC BY-SA 4.0, see its license file)."""
    ref = resources.files("aflite").joinpath("resources/snli_sample.tsv.gz")
    path = Path(str(ref))
    if not path.exists():
        raise InputError(f"{path}: the demo sample is missing from this installation")
    return path
