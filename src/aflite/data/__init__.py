"""Reading the user's data: feature matrices, labels, ids, and text datasets (with writing kept rows back).

Every problem with the input is raised as :class:`~aflite.errors.InputError` with a one-line message that
names the file and, where it applies, the line (1-based, counting the header), the row (0-based data row)
and the column, so that the user can go straight to the bad value.

:func:`open_dataset` (:mod:`~aflite.data.source`) is the one entry point: it decides text or images once and
returns the :class:`Dataset`.

The modules: :mod:`~aflite.data.text` (text datasets: :func:`load_dataset`, :class:`Dataset`, the demo
sample), :mod:`~aflite.data.arrays` (precomputed features, labels, ids), :mod:`~aflite.data.write`
(:func:`write_filtered`), :mod:`~aflite.data.twins` (counterfactual twins), and the readers they share:
:mod:`~aflite.data.delimited` (CSV/TSV/JSONL), :mod:`~aflite.data.columnar` (Parquet, Hugging Face folders),
:mod:`~aflite.data.files` (bytes, gzip, lines) and :mod:`~aflite.data.keywords` (how messages name options);
:mod:`~aflite.data.memory` reads a pandas DataFrame, a pyarrow Table or a ``datasets.Dataset`` and gives the kept
rows back in their own type.
Everything public is importable from ``aflite.data`` itself.
"""

from __future__ import annotations

from aflite.data.arrays import check_aligned, encode_labels, load_features, load_ids, load_labels
from aflite.data.families import twin_families
from aflite.data.files import PathLike
from aflite.data.keywords import COLUMNS, Columns, option_label, option_names, with_columns
from aflite.data.memory import filtered_rows, memory_kind, source_name
from aflite.data.source import modality_of, open_dataset
from aflite.data.text import Dataset, SourceInfo, check_view_texts, demo_dataset_path, load_dataset
from aflite.data.twins import TWINS_WARN_SHARE, TWINS_WARN_TEXTS, counterfactual_twins, twins_warning, warn_twins
from aflite.data.write import write_filtered

__all__ = [
    "COLUMNS",
    "Columns",
    "with_columns",
    "TWINS_WARN_SHARE",
    "TWINS_WARN_TEXTS",
    "PathLike",
    "SourceInfo",
    "Dataset",
    "check_aligned",
    "check_view_texts",
    "counterfactual_twins",
    "demo_dataset_path",
    "encode_labels",
    "filtered_rows",
    "load_dataset",
    "load_features",
    "load_ids",
    "load_labels",
    "memory_kind",
    "modality_of",
    "open_dataset",
    "option_label",
    "option_names",
    "source_name",
    "twin_families",
    "twins_warning",
    "warn_twins",
    "write_filtered",
]
