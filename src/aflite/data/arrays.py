"""Precomputed inputs: a feature matrix (.npy, CSV/TSV, Parquet), one label or id per row, label codes, and the
check that they describe the same rows."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aflite.data.cells import row_id
from aflite.data.columnar import _is_numeric, _is_numeric_list, _list_column_to_matrix, _read_parquet
from aflite.data.delimited import _read_jsonl, read_delimited
from aflite.data.files import (
    _INT_RE,
    PathLike,
    _base_suffix,
    _check_exists,
    _missing_columns,
    _parse_float,
    _strip_eol,
    decode_line,
    read_file_bytes,
    split_lines,
)
from aflite.errors import InputError

# Columns never taken as features unless named: a label or id column silently used as a feature would make
# every row "predictable" and wreck the filtering.
_NON_FEATURE_COLUMNS = frozenset({"id", "idx", "index", "label", "labels", "gold_label", "pairid", "promptid"})


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
    table = read_delimited(path, delimiter, quoting=delimiter == ",")
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
    for r, v in enumerate(ids.tolist()):  # ids are written one per line (kept_ids.txt): as a dataset's ids are
        row_id(p, f"row {r + 1}", column or "id", v)
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
        arr = _read_npy(path, False, "save labels as an int or str array")
    elif suffix in (".csv", ".tsv"):
        table = read_delimited(path, "," if suffix == ".csv" else "\t", quoting=suffix == ".csv")
        _missing_columns(path, [column], table.columns)
        ci = table.columns.index(column)
        values = [row[ci] for row in table.rows]
        for v, ln in zip(values, table.linenos, strict=True):
            if v.strip() == "":
                raise InputError(f"{path}: line {ln}, column {column!r}: empty {what}")
        arr = _strings_to_array(values)
    elif suffix == ".txt":
        data, _ = read_file_bytes(path)
        lines = [_strip_eol(decode_line(path, raw, i + 1)) for i, raw in enumerate(split_lines(data))]
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


def check_aligned(n_features: int, n_labels: int, n_ids: int | None = None, *,
                  files: Sequence[Any] | None = None) -> None:
    """Features, labels and ids must describe the same rows: refuse differing lengths before any work.
    ``files`` (features, labels, ids) names the files in the message."""
    fl = list(files or []) + [None, None, None]
    feat = f"features {fl[0]}" if fl[0] is not None else "features"
    lab = f"labels {fl[1]}" if fl[1] is not None else "labels"
    ids = f"ids {fl[2]}" if fl[2] is not None else "ids"
    if n_features != n_labels:
        raise InputError(f"{feat} have {n_features} rows but {lab} have {n_labels}; they must be equal")
    if n_ids is not None and n_ids != n_features:
        raise InputError(f"{feat} have {n_features} rows but {ids} have {n_ids}; they must be equal")
