"""Text datasets: :class:`Dataset`, :func:`load_dataset` (SNLI/MNLI JSONL, GLUE TSVs, the project's
premise/hypothesis TSV, generic CSV/TSV/JSONL/Parquet/HF), which columns hold what, groups, and the bundled demo
sample."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from aflite.data.cells import check_cell_limit, check_label_apart, label_of, row_id, text_of
from aflite.data.columnar import _hf_label_names, _load_hf, _read_parquet
from aflite.data.delimited import _read_jsonl, read_delimited
from aflite.data.families import twin_families
from aflite.data.files import PathLike, _check_exists, detect_format, holder
from aflite.data.keywords import _CLI_NAMES, _opt
from aflite.errors import InputError, ParameterError


@dataclass
class SourceInfo:
    """Where a dataset came from, so that :func:`write_filtered` can write kept rows back in that format.

    ``schema`` says how the columns were understood (``snli-jsonl``, ``glue-mnli``, ``nli-tsv``, ``generic``, ...);
    ``row_index`` maps each row to its 0-based record in the file (dropped records leave gaps); ``raw_records`` are
    the kept records' bytes (line formats); ``memory`` the in-memory object (``path`` is then its name).
    """

    path: Path
    format: str
    schema: str
    gzip: bool
    columns: dict[str, str | None]
    row_index: np.ndarray
    header_raw: bytes | None = None
    raw_records: list[bytes] | None = field(default=None, repr=False)
    memory: Any = field(default=None, repr=False)  # the caller's DataFrame, Table or datasets.Dataset (in memory)


@dataclass
class Dataset:
    """A classification / NLI dataset of any modality: inputs, labels (str), unique ids (str) and groups.

    Parameters
    ----------
    texts_a : numpy.ndarray
        The inputs (``inputs``): first texts, or image references (paths or ``hf:`` references of
        :mod:`aflite.data.images`), so that Φ, the filter and the run folder treat both alike.
    texts_b : numpy.ndarray or None
        The second texts of pairs.
    labels : numpy.ndarray
        The labels, as str.
    ids : numpy.ndarray
        Unique ids, as str.
    groups : numpy.ndarray or None
        Group ids (rows kept on one side of every partition).
    source : object
        Where the rows came from (file, format, columns; or the object in memory).
    n_dropped : int
        Rows dropped at load (no gold label).
    dropped : dict
        Those rows counted by reason.
    other_columns : dict
        The columns aflite does not read, by name.
    modality : str
        ``text`` or ``image``.
    bad_inputs : list
        Inputs left out as unreadable (``--skip-bad-images``).
    empty_texts : dict
        Empty cells counted per column.
    """

    texts_a: list[str]
    texts_b: list[str] | None
    labels: np.ndarray
    ids: np.ndarray
    groups: np.ndarray | None
    source: SourceInfo
    n_dropped: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    other_columns: dict[str, list[str]] = field(default_factory=dict)
    modality: str = "text"
    bad_inputs: list[str] = field(default_factory=list)
    empty_texts: dict[str, int] = field(default_factory=dict)  # column -> rows whose text is empty (or blank)

    def __len__(self) -> int:
        return len(self.texts_a)

    @property
    def is_pair(self) -> bool:
        return self.texts_b is not None

    @property
    def inputs(self) -> list[str]:
        """The first (or only) input of each row: a text, or an image reference."""
        return self.texts_a

    @property
    def bad_images(self) -> list[str]:
        """The unreadable images left out (``bad_inputs`` of an image dataset)."""
        return self.bad_inputs if self.modality == "image" else []


_FORMATS = ("auto", "tsv", "csv", "jsonl", "parquet", "hf")
# The most UTF-8 bytes of one text cell: far beyond what an encoder reads (MiniLM: 256 tokens), far below what
# n-gram features of one cell can hold in memory (a 200 MB cell was killed for memory after 219 s).
MAX_CELL_BYTES = 8 << 20


def load_dataset(
    path: PathLike,
    file_format: str = "auto",
    text_a: str | None = None,
    text_b: str | None = None,
    label: str | None = None,
    id_column: str | None = None,
    label_map: dict[Any, str] | None = None,
    group_by_premise: bool = True,
    groups: str | None = None,
    max_cell_bytes: int | None = MAX_CELL_BYTES,
) -> Dataset:
    """Load a text dataset: SNLI/MNLI JSONL, GLUE TSVs (MNLI, QNLI, RTE), the project's premise/hypothesis TSV
    and generic CSV/TSV/JSONL/Parquet/HF datasets. A TSV keeps its quotes as text unless it was written with CSV
    quoting (:mod:`aflite.data.delimited`). Rows whose gold label is ``-`` (no consensus; -1 in HF datasets) are
    dropped and counted in ``dropped``; every cell is checked before anything is featurized.

    Parameters
    ----------
    path : path
        The file or folder.
    file_format : str, default "auto"
        ``auto`` (from the name and content), or one of the formats above.
    text_a, text_b : str, optional
        The first and second text columns (default: detected).
    label : str, optional
        The label column (default: detected).
    id_column : str, optional
        The id column (default: the row numbers).
    label_map : dict, optional
        Raw label -> class name (e.g. 0/1/2 to names); a raw label absent from it is an error.
    group_by_premise : bool, default True
        Rows of pair data that share a premise share a group.
    groups : str, optional
        Overrides ``group_by_premise``: ``premise`` (the default; no groups for single texts), ``none``, ``twins``
        (rows joined by a shared premise or hypothesis, :func:`aflite.data.twin_families`), or the name of a
        column whose value is the group (e.g. the family id of counterfactual twins).
    max_cell_bytes : int or None, default 8 MiB
        The largest text cell read (:data:`MAX_CELL_BYTES`; None: no limit): a larger one is refused naming its
        line and column.

    Returns
    -------
    Dataset
        The rows, their labels, ids and groups.
    """
    if groups is not None and groups not in ("premise", "none", "twins") and not str(groups).strip():
        raise ParameterError(f"{_opt('groups')}: give premise, none, twins or a column name")
    p = Path(path)
    if file_format not in _FORMATS:
        raise ParameterError(f"unknown dataset format {file_format!r}; choose one of {', '.join(_FORMATS)}")
    _check_exists(p)
    fmt = file_format if file_format != "auto" else detect_format(p)
    roles = {"text_a": text_a, "text_b": text_b, "label": label, "id": id_column}
    check_cell_limit(max_cell_bytes)
    return _from_records(p, _READERS[fmt](p, fmt, roles), label_map, group_by_premise, groups, max_cell_bytes)


def _from_records(p: Path, rec: _Records, label_map: dict[Any, str] | None, group_by_premise: bool,
                  groups: str | None, max_cell_bytes: int | None = MAX_CELL_BYTES) -> Dataset:
    """The :class:`Dataset` of any reader's records (a file's, or :mod:`aflite.data.memory`'s)."""
    ds = _build(p, rec, rec.label_map if label_map is None else label_map, group_by_premise and groups != "none",
                max_cell_bytes)
    if _CLI_NAMES.get() and ds.n_dropped:  # on screen, so that a smaller |D| than the file's is never a surprise
        why = ", ".join(f"{n:,} {k.replace('_', ' ')}" for k, n in sorted(ds.dropped.items()))
        print(f"{p}: dropped {ds.n_dropped:,} row(s) on load ({why}, e.g. SNLI's '-'); {len(ds):,} rows kept",
              file=sys.stderr)
    ds.empty_texts = _count_empty(ds)
    partly = {c: n for c, n in ds.empty_texts.items() if n < len(ds)}
    if _CLI_NAMES.get() and partly:  # a column empty in every row is refused (or noted) where it is read
        print(f"warning: {p}: " + "; ".join(f"{n:,} of {len(ds):,} rows have an empty {c!r} text" for c, n in
                                             partly.items()) + " (featurized as empty: nothing for Φ to read there)",
              file=sys.stderr)
    if groups == "twins":
        ds.groups = twin_families(ds.texts_a, ds.texts_b)
    elif groups not in (None, "premise", "none"):
        ds.groups = _column_groups(p, ds, str(groups), rec.all_cols)
    return ds  # "premise" on single texts: no groups (there is no premise), as documented


@dataclass
class _Records:
    """A reader's records: how to get a cell, where each sits (for messages), raw bytes (line formats), every
    column, and the labels' names where the file has them."""

    src: SourceInfo
    records: Sequence[Any]
    get: Any
    where: list[str]
    raw: list[bytes] | None
    all_cols: list[str]
    label_map: dict[Any, str] | None = None


def _table_records(p: Path, fmt: str, roles: dict[str, str | None]) -> _Records:
    table = read_delimited(p, "\t" if fmt == "tsv" else ",", quoting=True if fmt == "csv" else None)
    if not table.rows:
        raise InputError(f"{p}: no data rows (only a header)")
    schema, cols = _resolve_columns(p, fmt, table.columns, roles)
    idx = {c: table.columns.index(c) for c in table.columns}
    src = SourceInfo(p, fmt, schema, table.gzip, cols, np.empty(0, np.int64), table.header_raw, [])
    return _Records(src, table.rows, lambda rec, col: rec[idx[col]], [f"line {ln}" for ln in table.linenos],
                    table.raw, table.columns)


def _jsonl_records(p: Path, fmt: str, roles: dict[str, str | None]) -> _Records:
    js = _read_jsonl(p)
    if not js.records:
        raise InputError(f"{p}: empty file (no JSON records)")
    all_cols = list(dict.fromkeys(k for rec in js.records[:100] for k in rec))
    schema, cols = _resolve_columns(p, fmt, all_cols, roles)
    src = SourceInfo(p, fmt, schema, js.gzip, cols, np.empty(0, np.int64), None, [])
    return _Records(src, js.records, dict.get, [f"line {ln}" for ln in js.linenos], js.raw, all_cols)


def _parquet_records(p: Path, fmt: str, roles: dict[str, str | None]) -> _Records:
    tbl = _read_parquet(p)
    if tbl.num_rows == 0:
        raise InputError(f"{p}: no rows")
    all_cols = list(tbl.column_names)
    schema, cols = _resolve_columns(p, fmt, all_cols, roles)
    src = SourceInfo(p, fmt, schema, False, cols, np.empty(0, np.int64))
    return _Records(src, tbl.to_pylist(), dict.get, [f"row {i}" for i in range(tbl.num_rows)], None, all_cols)


def _hf_records(p: Path, fmt: str, roles: dict[str, str | None]) -> _Records:
    hf = _load_hf(p)
    all_cols = list(hf.column_names)
    schema, cols = _resolve_columns(p, fmt, all_cols, roles)
    records = hf.to_list() if hasattr(hf, "to_list") else [hf[i] for i in range(len(hf))]
    src = SourceInfo(p, "hf", schema, False, cols, np.empty(0, np.int64))
    return _Records(src, records, dict.get, [f"row {i}" for i in range(len(records))], None, all_cols,
                    _hf_label_names(hf, cols["label"]))


_READERS = {"tsv": _table_records, "csv": _table_records, "jsonl": _jsonl_records, "parquet": _parquet_records,
            "hf": _hf_records}


def _count_empty(ds: Dataset) -> dict[str, int]:
    """Per text column, the rows whose text is empty or only whitespace (columns with none are left out)."""
    out = {}
    for role, texts in (("text_a", ds.texts_a), ("text_b", ds.texts_b)):
        col = ds.source.columns.get(role)
        n = 0 if texts is None else sum(not t.strip() for t in texts)
        if n and col is not None:
            out[col] = n
    return out


VIEW_SIDES = {"pair": ("text_a", "text_b"), "hypothesis": ("text_b",), "premise": ("text_a",)}


def check_view_texts(ds: Dataset, view: str, what: str | None = None) -> None:
    """Refuse, before anything is computed or written, a view that reads a column whose text is empty in every
    row: Φ would have nothing to featurize there (n-gram Φ has no vocabulary; an encoder would embed nothing)."""
    if ds.modality != "text":
        return
    for role in VIEW_SIDES.get(view, ("text_a",)) if ds.is_pair else ("text_a",):
        col = ds.source.columns.get(role) or role
        if ds.empty_texts.get(col, 0) == len(ds) and len(ds):
            other = ("; --view premise reads the other column" if role == "text_b" else
                     "; --view hypothesis reads the other column" if ds.is_pair else "")
            raise InputError(f"{ds.source.path}: column {col!r} is empty in all {len(ds):,} rows, so "
                             f"{what or '--view ' + view} has nothing to featurize{other if what is None else ''}")


def _resolve_columns(
    path: Path, fmt: str, columns: Sequence[str], roles: dict[str, str | None]
) -> tuple[str, dict[str, str | None]]:
    """The schema name (:class:`SourceInfo`) and which columns hold text_a/text_b/label/id: the user's names
    first, else a known header's."""
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
            f"{path}: cannot tell which column holds the text; {holder(path)} has columns "
            f"{', '.join(map(repr, columns))}; name it with {_opt('text_a')} (and {_opt('text_b')}, {_opt('label')})"
        )
    if guess["label"] is None:
        raise InputError(
            f"{path}: no label column found; {holder(path)} has columns {', '.join(map(repr, columns))}; name it with "
            f"{_opt('label')}"
        )
    for role, col in guess.items():
        if col is not None and col not in columns:
            given = f" (given by {_opt(role)})" if roles.get(role) is not None else ""
            raise InputError(f"{path}: missing column {col!r}{given}; {holder(path)} has: "
                             f"{', '.join(map(repr, columns))}")
    return schema, guess


def _build(path: Path, rec: _Records, label_map: dict[Any, str] | None, group_by_premise: bool,
           max_cell_bytes: int | None) -> Dataset:
    src, records, get, where = rec.src, rec.records, rec.get, rec.where
    cols = src.columns
    ca, cb, cl, ci = cols["text_a"], cols["text_b"], cols["label"], cols["id"]
    assert ca is not None and cl is not None
    used = {c for c in cols.values() if c is not None}
    other_cols = [c for c in rec.all_cols if c not in used]
    texts_a: list[str] = []
    texts_b: list[str] | None = [] if cb is not None else None
    labels: list[str] = []
    ids: list[str] = []
    others: dict[str, list[str]] = {c: [] for c in other_cols}
    keep_index: list[int] = []
    dropped: Counter[str] = Counter()
    seen_labels: dict[str, tuple[Any, str]] = {}  # a label's string -> (its first raw value, where)
    for i, row in enumerate(records):
        raw_lab = get(row, cl)
        lab = label_of(path, where[i], cl, raw_lab, label_map, src.format)
        if lab is None:  # no gold label (SNLI's '-', -1 in HF datasets)
            dropped["no_gold_label"] += 1
            continue
        if label_map is None:
            check_label_apart(path, where[i], cl, raw_lab, lab, seen_labels)
        labels.append(lab)
        texts_a.append(text_of(path, where[i], ca, get(row, ca), max_cell_bytes))
        if texts_b is not None and cb is not None:
            texts_b.append(text_of(path, where[i], cb, get(row, cb), max_cell_bytes))
        ids.append(row_id(path, where[i], ci, get(row, ci)) if ci is not None else f"row-{i}")
        for c in other_cols:
            v = get(row, c)
            others[c].append(v if isinstance(v, str) else ("" if v is None else json.dumps(v, default=str)))
        keep_index.append(i)
    if not labels:
        raise InputError(f"{path}: no usable rows ({sum(dropped.values())} dropped without a gold label)" if records
                         else f"{path}: no rows")
    id_arr = np.asarray(ids, dtype=str)
    dup = next((k for k, n in Counter(ids).items() if n > 1), None)
    if dup is not None:
        first = [where[keep_index[j]] for j, v in enumerate(ids) if v == dup][:2]
        raise InputError(f"{path}: duplicate id {dup!r} ({first[0]} and {first[1]}); ids must be unique")
    groups = None
    if texts_b is not None and group_by_premise:
        seen: dict[str, int] = {}
        groups = np.asarray([seen.setdefault(t, len(seen)) for t in texts_a], dtype=np.int64)
    src.row_index = np.asarray(keep_index, dtype=np.int64)
    if rec.raw is not None:
        src.raw_records = [rec.raw[i] for i in keep_index]
    return Dataset(
        texts_a=texts_a,
        texts_b=texts_b,
        labels=np.asarray(labels, dtype=str),
        ids=id_arr,
        groups=groups,
        source=src,
        n_dropped=sum(dropped.values()),
        dropped=dict(dropped),
        other_columns=others,
    )


def _column_groups(path: Path, ds: Dataset, column: str, all_cols: list[str]) -> np.ndarray:
    """Group codes from a column of the file (rows with equal values share a group)."""
    cols = ds.source.columns
    if column in ds.other_columns:
        values = ds.other_columns[column]
    elif column == cols.get("id"):
        values = [str(v) for v in ds.ids]
    elif column == cols.get("text_a"):
        values = list(ds.texts_a)
    elif column == cols.get("text_b") and ds.texts_b is not None:
        values = list(ds.texts_b)
    elif column == cols.get("label"):
        raise ParameterError(f"{_opt('groups')} {column!r}: the label column cannot be the group")
    else:
        raise InputError(f"{path}: missing column {column!r} (given by {_opt('groups')}); {holder(path)} has: "
                         f"{', '.join(map(repr, all_cols))}")
    empty = [i for i, v in enumerate(values) if v is None or str(v).strip() == ""]
    if empty:
        raise InputError(f"{path}: row {empty[0]} (0-based, after dropped rows), column {column!r}: missing group "
                         f"(given by {_opt('groups')}); {len(empty)} row(s) have none")
    return np.unique(np.asarray([str(v) for v in values], dtype=str), return_inverse=True)[1].astype(np.int64)


def demo_dataset_path() -> Path:
    """The SNLI sample shipped with the package (~3,000 dev pairs; CC BY-SA 4.0, see its license file).

    Returns
    -------
    Path
        The bundled SNLI sample (the first 1,000 premise groups of SNLI 1.0 dev, 2,949 pairs, gzipped TSV).
    """
    ref = resources.files("aflite").joinpath("resources/snli_sample.tsv.gz")
    path = Path(str(ref))
    if not path.exists():
        raise InputError(f"{path}: the demo sample is missing from this installation")
    return path
