"""Writing kept rows back in the input's own format, each record byte for byte as it was (atomically)."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import announce, atomic_open, wrote
from aflite.data.columnar import _load_hf, _read_parquet
from aflite.data.files import PathLike
from aflite.data.memory import write_memory
from aflite.data.text import Dataset
from aflite.errors import InputError, ParameterError


def write_filtered(dataset: Dataset, keep: np.ndarray | Sequence[Any], out_path: PathLike) -> Path:
    """Write the kept rows in the input's own format, each record byte for byte as it was (atomically).

    Line-based formats copy the header and the original record bytes (gzip in, gzip out); Parquet keeps the
    schema; HF datasets are saved with ``save_to_disk``; in-memory data are written as Parquet. Rows dropped at load
    time (no gold label) are not written.

    Parameters
    ----------
    dataset : Dataset
        The dataset as loaded (its source is copied from).
    keep : numpy.ndarray or collection of str
        A boolean mask over the rows, or the ids to keep.
    out_path : path
        The file (or folder, for a HF dataset) to write.

    Returns
    -------
    Path
        The path written.
    """
    out = Path(out_path)
    mask = _keep_mask(dataset, keep)
    src = dataset.source
    rows = np.flatnonzero(mask)
    if src.memory is not None:  # in-memory data: Parquet (aflite.data.memory.write_memory says why)
        write_memory(dataset, mask, out)
    elif src.format in ("tsv", "csv", "jsonl"):
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


def _keep_mask(dataset: Dataset, keep: np.ndarray | Sequence[Any]) -> np.ndarray:
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
    announce(out)
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
    wrote(out)
