"""Columnar inputs: Parquet files (read with pyarrow, numeric and list-of-number columns) and Hugging Face
dataset folders saved with ``save_to_disk`` (read with the optional ``datasets`` package)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from aflite.data.files import _check_exists
from aflite.errors import InputError


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
