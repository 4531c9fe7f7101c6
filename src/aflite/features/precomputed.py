"""``precomputed``: the user's own embeddings (.npy + ids, .npz, .parquet), aligned to the dataset by id."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aflite.data.keywords import option_label
from aflite.errors import InputError, ParameterError
from aflite.features.base import BaseFeaturizer


def load_embeddings(
    path: str | os.PathLike[str],
    ids_path: str | os.PathLike[str] | None = None,
    id_column: str = "id",
    embedding_column: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Read (ids, float32 matrix) from .npy (+ ids file), .npz (arrays ``ids``, ``embeddings``) or .parquet.

    ids files: .npy, or text with one id per line. Parquet: an ``id_column`` plus either one list column
    (``embedding_column``, or the only other column) or several numeric columns (one per dimension).
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: embeddings file not found")
    suffix = p.suffix.lower()
    try:
        if suffix == ".npy":
            x = np.load(p, allow_pickle=False)
            if ids_path is None:
                raise ParameterError(f"{p}: a .npy embeddings file needs its ids file "
                                     f"({option_label('--embedding-ids', 'embedding_ids=')}: one id per row)")
            ids = _load_ids(Path(ids_path))
        elif suffix == ".npz":
            with np.load(p, allow_pickle=False) as z:
                if "embeddings" not in z or "ids" not in z:
                    raise InputError(
                        f"{p}: .npz must hold arrays 'embeddings' and 'ids', has {sorted(z.files)}"
                    )
                x, ids = z["embeddings"], z["ids"].astype(str)
        elif suffix == ".parquet":
            x, ids = _load_parquet(p, id_column, embedding_column)
        else:
            raise InputError(f"{p}: unsupported embeddings format {suffix!r} (use .npy, .npz or .parquet)")
    except (OSError, ValueError) as exc:
        if isinstance(exc, InputError | ParameterError):
            raise
        raise InputError(f"{p}: cannot read embeddings: {exc}") from exc
    if x.ndim != 2:
        raise InputError(f"{p}: embeddings must be a 2-D matrix, got shape {x.shape}")
    if len(ids) != x.shape[0]:
        raise InputError(f"{p}: {x.shape[0]} embedding rows but {len(ids)} ids")
    if not np.issubdtype(x.dtype, np.number):
        raise InputError(f"{p}: embeddings are not numeric ({x.dtype})")
    x = np.asarray(x, dtype=np.float32)
    if not np.isfinite(x).all():
        bad = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
        raise InputError(f"{p}: embedding row {bad} (id {ids[bad]!r}) has a NaN or infinite value")
    return np.asarray(ids, dtype=str), x


def _load_ids(path: Path) -> np.ndarray:
    if not path.is_file():
        raise InputError(f"{path}: ids file not found")
    if path.suffix.lower() == ".npy":
        return np.load(path, allow_pickle=False).astype(str)
    with open(path, encoding="utf-8") as fh:
        return np.asarray([line.rstrip("\r\n") for line in fh if line.strip()], dtype=str)


def _load_parquet(p: Path, id_column: str, embedding_column: str | None) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow.parquet as pq

    table = pq.read_table(p)
    names = table.column_names
    if id_column not in names:
        raise InputError(f"{p}: no id column {id_column!r} (columns: {', '.join(names)})")
    ids = np.asarray([str(v) for v in table.column(id_column).to_pylist()], dtype=str)
    others = [c for c in names if c != id_column]
    if embedding_column is not None:
        if embedding_column not in names:
            raise InputError(f"{p}: no embedding column {embedding_column!r}")
        others = [embedding_column]
    if len(others) == 1:
        col = table.column(others[0]).combine_chunks()
        import pyarrow as pa

        if (
            pa.types.is_list(col.type)
            or pa.types.is_large_list(col.type)
            or pa.types.is_fixed_size_list(col.type)
        ):
            rows = col.to_pylist()
            if any(r is None for r in rows) or len({len(r) for r in rows}) > 1:
                raise InputError(f"{p}: column {others[0]!r} has missing or ragged embeddings")
            return np.asarray(rows, dtype=np.float32).reshape(len(rows), -1), ids
    if not others:
        raise InputError(f"{p}: no embedding columns besides {id_column!r}")
    cols = [np.asarray(table.column(c).to_numpy(zero_copy_only=False), dtype=np.float64) for c in others]
    return np.column_stack(cols).astype(np.float32), ids


class PrecomputedFeaturizer(BaseFeaturizer):
    """The user's embeddings, reordered to the dataset's ids (``ids``, one per row of the dataset).

    Texts are ignored (only their count is checked); every dataset id must have an embedding.
    """

    name = "precomputed"
    output_params = ("embeddings", "embedding_ids")

    def __init__(
        self,
        embeddings: str | os.PathLike[str] | None = None,
        ids: Sequence[Any] | None = None,
        embedding_ids: str | os.PathLike[str] | None = None,
        id_column: str = "id",
        embedding_column: str | None = None,
    ) -> None:
        if embeddings is None:
            raise ParameterError(f"precomputed features need {option_label('--embeddings', 'embeddings=')} (a "
                                 f".npy/.npz/.parquet file)")
        self.embeddings = embeddings
        self.ids = ids
        self.embedding_ids = embedding_ids
        self.id_column = id_column
        self.embedding_column = embedding_column

    def transform(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None) -> np.ndarray:
        if self.ids is None:
            raise ParameterError("precomputed features need the dataset's ids to align rows (ids=...)")
        ids = np.asarray([str(i) for i in self.ids], dtype=str)
        if len(texts_a) != len(ids):
            raise InputError(f"{len(texts_a)} rows but {len(ids)} ids")
        return align_embeddings(
            ids,
            *load_embeddings(self.embeddings, self.embedding_ids, self.id_column, self.embedding_column),
            source=str(self.embeddings),
        )


def align_embeddings(
    dataset_ids: Sequence[Any] | np.ndarray,
    file_ids: Sequence[Any] | np.ndarray,
    matrix: np.ndarray,
    source: str = "embeddings",
) -> np.ndarray:
    """Rows of ``matrix`` reordered to ``dataset_ids``; InputError on missing or duplicated ids."""
    want = np.asarray([str(i) for i in dataset_ids], dtype=str)
    have = np.asarray([str(i) for i in file_ids], dtype=str)
    if len(np.unique(want)) != len(want):
        raise InputError("dataset ids are not unique; precomputed embeddings are aligned by id")
    uniq, counts = np.unique(have, return_counts=True)
    if (counts > 1).any():
        dup = uniq[counts > 1]
        raise InputError(
            f"{source}: {len(dup)} id(s) appear more than once, e.g. {', '.join(map(repr, dup[:5]))}"
        )
    pos = {v: i for i, v in enumerate(have.tolist())}
    missing = [v for v in want.tolist() if v not in pos]
    if missing:
        raise InputError(
            f"{source}: no embedding for {len(missing)} of {len(want)} dataset ids, "
            f"e.g. {', '.join(map(repr, missing[:5]))}"
        )
    take = np.fromiter((pos[v] for v in want.tolist()), dtype=np.int64, count=len(want))
    return np.ascontiguousarray(matrix[take], dtype=np.float32)
