"""In-memory data: a pandas ``DataFrame``, a pyarrow ``Table`` or a Hugging Face ``datasets.Dataset`` read as the
same :class:`~aflite.data.Dataset` a file gives (the same column options, the same column detection, the same
checks and messages), and the kept rows given back in the caller's own type.

Ids: an id column when one is named or detected, as for a file; else a DataFrame's index (an integer index numbers
the rows, ``row-<n>``, as a file's rows are numbered, so that a DataFrame read from a file keeps the file's ids; any
other index is the id itself); a Table or a datasets.Dataset has no index: ``row-<n>`` by position. ``id_column``
may also name a DataFrame's index (its ``name``). pandas, pyarrow and datasets are imported only when such an
object is given (pandas and datasets come with ``aflite[hf]``).
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import JSON, atomic_open
from aflite.data.cells import check_cell_limit
from aflite.data.columnar import _hf_label_names
from aflite.data.files import MEMORY_PREFIX
from aflite.data.text import (
    MAX_CELL_BYTES,
    Dataset,
    SourceInfo,
    _from_records,
    _Records,
    _resolve_columns,
)
from aflite.errors import InputError, ParameterError

__all__ = ["MEMORY_TYPES", "check_writable", "filtered_rows", "memory_kind", "rows_sha256", "source_name",
           "write_memory"]

# (top-level package, class name) -> what messages and results.json call it
MEMORY_TYPES = {("pandas", "DataFrame"): "pandas DataFrame", ("pyarrow", "Table"): "pyarrow Table",
                ("datasets", "Dataset"): "datasets.Dataset"}
FORMATS = {"pandas DataFrame": "dataframe", "pyarrow Table": "arrow", "datasets.Dataset": "hf"}
FILTERED = "filtered.parquet"  # what a folder written from in-memory data holds (see write_memory)
_INDEX = "(index)"  # the id column's name when the ids are a DataFrame's unnamed index


def memory_kind(obj: Any) -> str | None:
    """``"pandas DataFrame"``, ``"pyarrow Table"`` or ``"datasets.Dataset"`` (subclasses too), else None; read from
    the type's module, so that nothing is imported to tell."""
    for klass in type(obj).__mro__:
        found = MEMORY_TYPES.get((klass.__module__.split(".")[0], klass.__name__))
        if found is not None:
            return found
    return None


def source_name(source: Any) -> str:
    """How messages and results.json name the data: ``in-memory pandas DataFrame`` (...), else the path."""
    kind = memory_kind(source)
    return f"{MEMORY_PREFIX}{kind}" if kind is not None else str(source)


def load_memory(obj: Any, *, text_a: str | None = None, text_b: str | None = None, label: str | None = None,
                id_column: str | None = None, label_map: dict[Any, str] | None = None,
                group_by_premise: bool = True, groups: str | None = None,
                file_format: str | None = None, max_cell_bytes: int | None = MAX_CELL_BYTES) -> Dataset:
    """``obj`` (see :func:`memory_kind`) as a text :class:`~aflite.data.Dataset`, with the keywords of
    :func:`aflite.data.load_dataset`; ``ds.source.memory`` keeps ``obj`` for :func:`filtered_rows`."""
    kind = memory_kind(obj)
    if kind is None:
        raise ParameterError(f"data must be a file or folder path, a pandas DataFrame, a pyarrow Table or a "
                             f"datasets.Dataset, not {type(obj).__name__}")
    if file_format not in (None, "auto"):
        raise ParameterError(f"file_format={file_format!r} is for files; the {kind} is read as it is")
    name = Path(source_name(obj))
    columns, records, where, index_ids = _records(obj, kind, name)
    text_a, text_b, label, id_column, groups = (_column_name(obj, kind, v) for v in (text_a, text_b, label,
                                                                                   id_column, groups))
    if kind == "datasets.Dataset" and _has_image_column(obj) and text_a is None:
        raise ParameterError(f"{name}: an Image column; in-memory data are read as text (save the dataset with "
                             f"save_to_disk and pass its folder to read the images)")
    roles = {"text_a": text_a, "text_b": text_b, "label": label, "id": id_column}
    named_index = (kind == "pandas DataFrame" and id_column is not None and id_column not in columns
                   and obj.index.name is not None and id_column == str(obj.index.name))
    if named_index:
        index_ids = [str(v) for v in obj.index]  # the index named as the id column: its values as they are
        roles["id"] = None
    fmt = FORMATS[kind]
    schema, cols = _resolve_columns(name, fmt, columns, roles)
    if index_ids is not None and (cols["id"] is None or named_index):
        key = obj.index.name if isinstance(obj.index.name, str) and obj.index.name not in columns else _INDEX
        for rec, i in zip(records, index_ids, strict=True):
            rec[key] = i
        cols["id"] = key
    src = SourceInfo(name, fmt, schema, False, cols, np.empty(0, np.int64), memory=obj)
    label_names = _hf_label_names(obj, cols["label"]) if kind == "datasets.Dataset" else None
    check_cell_limit(max_cell_bytes)
    return _from_records(name, _Records(src, records, _cell, where, None, columns, label_names), label_map,
                         group_by_premise, groups, max_cell_bytes)


def _records(obj: Any, kind: str, name: Path) -> tuple[list[str], list[JSON], list[str], list[str] | None]:
    """(column names, one dict per row, where each row is for messages, the ids a DataFrame's index gives)."""
    if kind == "pandas DataFrame":
        columns = [str(c) for c in obj.columns]
        if len(set(columns)) != len(columns):
            dup = next(c for c in columns if columns.count(c) > 1)
            raise InputError(f"{name}: two columns are named {dup!r}; column names must be unique")
        records = obj.set_axis(columns, axis=1).to_dict("records")
        where = [f"row {i}" for i in range(len(records))]
        index_ids = None
        if not _is_default_index(obj.index):
            index_ids = [f"row-{v}" if _is_int(v) else str(v) for v in obj.index]
            where = [f"row {i} (index {v!r})" for i, v in enumerate(obj.index)]
        return columns, records, where, index_ids
    columns = [str(c) for c in obj.column_names]
    records = obj.to_pylist() if kind == "pyarrow Table" else obj.to_list()
    return columns, records, [f"row {i}" for i in range(len(records))], None


def _column_name(obj: Any, kind: str, given: Any) -> Any:
    """A column option as the loader names columns (their ``str``): a DataFrame's columns may be ints
    (``df.columns = [0, 1, 2]``, ``text_a=0``) or other labels; a value that names no column stays as given, so
    that the loader's message names it."""
    if given is None or isinstance(given, str) or kind != "pandas DataFrame":
        return given
    try:
        found = given in obj.columns or given == obj.index.name
    except TypeError:  # an unhashable value (a list, say): no column; the loader says so
        found = False
    return str(given) if found else given


def _is_default_index(index: Any) -> bool:
    """A RangeIndex 0, 1, 2, ...: the ids are the file route's ``row-<n>`` already."""
    return type(index).__name__ == "RangeIndex" and index.start == 0 and index.step == 1


def _is_int(v: Any) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


def _cell(rec: JSON, col: str) -> Any:
    """A cell, pandas' missing values (``pd.NA``, ``NaT``) as None, as a file's missing values are."""
    v = rec.get(col)
    return None if type(v).__name__ in ("NAType", "NaTType") else v


def _has_image_column(obj: Any) -> bool:
    return any(type(f).__name__ == "Image" for f in (getattr(obj, "features", None) or {}).values())


def _positions(ds: Dataset, keep: np.ndarray) -> np.ndarray:
    """The positions in the caller's object of the dataset rows ``keep`` marks (rows dropped on load skipped)."""
    return np.asarray(ds.source.row_index[np.asarray(keep, dtype=bool)], dtype=np.int64)


def filtered_rows(ds: Dataset, keep: np.ndarray) -> Any:
    """The rows of the caller's object that ``keep`` (a mask over ``ds``'s rows) marks, in the caller's type: a
    DataFrame with its index, column order and dtypes; a Table with its schema; a datasets.Dataset with its
    features."""
    obj, rows = ds.source.memory, _positions(ds, keep)
    kind = memory_kind(obj)
    if kind == "pandas DataFrame":
        return obj.iloc[rows]
    if kind == "pyarrow Table":
        return obj.take(rows)
    if kind == "datasets.Dataset":
        return obj.select(rows.tolist())
    raise ParameterError(f"{ds.source.path}: not in-memory data")


def check_writable(ds: Dataset) -> None:
    """Refuse, before any work, a DataFrame that Parquet cannot hold (a column mixing types, say), naming it."""
    obj = ds.source.memory
    if memory_kind(obj) != "pandas DataFrame":
        return
    import pyarrow as pa

    for col in obj.columns:
        try:
            pa.Schema.from_pandas(obj[[col]], preserve_index=False)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise InputError(f"{ds.source.path}: column {str(col)!r} cannot be written to {FILTERED} ({exc}); "
                             f"give it one type, or pass out=None (nothing written)") from None
    try:  # the index as write_memory writes it (pandas' metadata, or columns): checked on no column at all
        pa.Table.from_pandas(obj.iloc[:, :0])
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise InputError(f"{ds.source.path}: its index ({type(obj.index).__name__}, dtype {obj.index.dtype}) cannot "
                         f"be written to {FILTERED} ({_first_line(exc)}); give it one type (e.g. "
                         f"df.index = df.index.astype(str)), or pass out=None (nothing written)") from None


def _first_line(exc: BaseException) -> str:
    """An exception's message on one line (pyarrow's may hold a tuple of lines)."""
    text = str(exc.args[0]) if exc.args and isinstance(exc.args[0], str) else str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def write_memory(ds: Dataset, keep: np.ndarray, out: Path) -> Path:
    """The kept rows as Parquet at ``out`` (atomically): the one format that keeps a DataFrame's dtypes and index
    (pandas' metadata; ``pd.read_parquet`` gives them back), a Table's schema and a datasets.Dataset's features
    (``datasets.Dataset.from_parquet``), where JSONL would turn every column into JSON's few types."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sub = filtered_rows(ds, keep)
    kind = memory_kind(sub)
    buf = io.BytesIO()
    if kind == "datasets.Dataset":
        sub.to_parquet(buf)
    else:
        pq.write_table(pa.Table.from_pandas(sub) if kind == "pandas DataFrame" else sub, buf)
    with atomic_open(out, "wb") as fh:
        fh.write(buf.getvalue())
    return out


def rows_sha256(ds: Dataset) -> str:
    """The sha256 of the caller's rows (every row, those dropped on load too): the column names, then each row's
    id (a DataFrame's index label, else its position) and cells as one JSON line. It stands where a file's sha256
    stands in results.json (``dataset_sha256``), so that the same rows give the same hash whatever their chunks in
    memory."""
    obj = ds.source.memory
    kind = memory_kind(obj)
    h = hashlib.sha256()
    if kind == "pandas DataFrame":
        columns = [str(c) for c in obj.columns]
        keys: list[Any] = list(obj.index)
        records = obj.set_axis(columns, axis=1).to_dict("records")
    else:
        columns = [str(c) for c in obj.column_names]
        records = obj.to_pylist() if kind == "pyarrow Table" else obj.to_list()
        keys = list(range(len(records)))
    h.update((json.dumps(columns, ensure_ascii=False) + "\n").encode())
    for key, rec in zip(keys, records, strict=True):
        line = json.dumps([key, [rec.get(c) for c in columns]], ensure_ascii=False, default=str)
        h.update(line.encode("utf-8", "surrogatepass") + b"\n")
    return h.hexdigest()
