"""The card's data file: the run's filtered rows as Parquet, where ``datasets.load_dataset`` reads every value as
it was written instead of guessing types from text.

A CSV/TSV/JSONL file gives a table of strings only (an id ``007`` stays ``"007"``, labels ``0.5`` and ``0.50`` stay
two strings, an empty cell stays ``""``): the cells as aflite's own reader splits them
(:mod:`aflite.data.delimited`), a JSON number as the digits written (``parse_float=str``). A Parquet file (the
input's, or the one aflite writes for in-memory data) keeps its typed schema, without pandas' metadata: the
columns pandas stores for a DataFrame's index become ordinary columns named as ``DataFrame.reset_index`` names
them (``index``, ``level_0``, ...), so that no ``__index_level_0__`` column reaches the loader. The layout is the
one ``push_to_hub`` writes (``data/train-00000-of-00001.parquet``); the bytes depend on the rows alone.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from aflite.data.delimited import read_delimited
from aflite.data.files import decode_line, read_file_bytes, split_lines
from aflite.errors import InputError

__all__ = ["DATA_FILE", "parquet_of"]

DATA_FILE = "data/train-00000-of-00001.parquet"  # the Hub's layout of one train split in one shard


def _text(value: Any) -> str | None:
    """A JSON value as text: strings and numbers as written, true/false as JSON spells them, null as missing,
    an object or a list as compact JSON."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _jsonl_table(path: Path) -> tuple[list[str], list[list[str | None]]]:
    data, _ = read_file_bytes(path)
    records = []
    for i, line in enumerate(split_lines(data)):
        text = decode_line(path, line, i + 1)
        if text.strip():
            rec = json.loads(text, parse_float=str, parse_int=str)
            if not isinstance(rec, dict):
                raise InputError(f"{path}: line {i + 1}: expected a JSON object, got {type(rec).__name__}")
            records.append(rec)
    columns = list(dict.fromkeys(k for rec in records for k in rec))
    return columns, [[_text(rec.get(c)) for c in columns] for rec in records]


def _strings(columns: list[str], rows: list[list[str | None]]) -> Any:
    import pyarrow as pa

    schema = pa.schema([pa.field(c, pa.string()) for c in columns])
    return pa.table({c: pa.array([r[i] for r in rows], pa.string()) for i, c in enumerate(columns)}, schema=schema)


def _without_pandas(table: Any) -> Any:
    """``table`` with pandas' index columns as ordinary columns and no schema metadata."""
    meta = (table.schema.metadata or {}).get(b"pandas")
    names = list(table.column_names)
    if meta:
        index = [c for c in json.loads(meta).get("index_columns") or [] if isinstance(c, str)]
        single = len(index) == 1
        for i, col in enumerate(index):
            if col.startswith("__index_level_") and col in names:
                new = "index" if single else f"level_{i}"
                while new in names:
                    new = f"_{new}"
                names[names.index(col)] = new
        table = table.rename_columns(names)
    return table.replace_schema_metadata(None)


def parquet_of(path: Path, fmt: str | None) -> tuple[bytes, list[str] | None]:
    """The card's Parquet bytes of the run's filtered data file ``path`` (its ``datasets`` format ``fmt``), and its
    columns when every one is a string column (the card then declares them so), else None."""
    import pyarrow.parquet as pq

    if fmt in ("tsv", "csv"):
        t = read_delimited(path, "\t" if fmt == "tsv" else ",", quoting=fmt == "csv")
        table = _strings(t.columns, [list(r) for r in t.rows])
    elif fmt == "json":
        table = _strings(*_jsonl_table(path))
    elif fmt == "parquet":
        table = _without_pandas(pq.read_table(path))
    else:
        raise InputError(f"{path}: aflite card writes Parquet from CSV, TSV, JSONL or Parquet, not {fmt!r}")
    buf = io.BytesIO()
    pq.write_table(table, buf)
    strings = all(str(f.type) == "string" for f in table.schema)
    return buf.getvalue(), list(table.column_names) if strings else None
