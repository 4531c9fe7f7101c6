"""Image datasets: loading them as AFLite inputs, reading images safely, and writing filtered outputs.

Three layouts are read (:func:`load_image_dataset`):

- an **image folder** with one sub-folder per class (``DATA/<label>/<file>.png``), the layout image
  classifiers use; ids are the paths relative to DATA;
- a **table** (CSV/TSV/JSONL/Parquet, read by :func:`aflite.data.load_dataset`) with a path column (relative
  to the table's folder, or absolute) and a label column;
- a **Hugging Face** ``datasets`` folder (``save_to_disk``) with an ``Image`` column; images are read from the
  Arrow files row by row (references ``hf:<row>:<column>:<folder>``), never all at once.

The result is an :class:`aflite.data.Dataset` whose ``texts_a`` are image references (absolute paths),
so that the featurize cache, the filter and the run directory work unchanged. A corrupt or unreadable image is
a one-line :class:`~aflite.errors.InputError` naming the file; with ``skip_bad_images`` every image is decoded
once at load time and the unreadable ones are dropped, counted and listed (``bad_images``).

Outputs follow the input's form: a folder gets ``kept.csv`` / ``removed.csv`` (path relative to the folder,
label) and optionally a tree of symlinks to the kept images (:func:`write_folder_outputs`); a table or HF
folder gets the filtered table (:func:`aflite.data.write_filtered`).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import gzip
import io
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import umask, write_text
from aflite.data.cells import row_id
from aflite.data.columnar import _hf_label_names
from aflite.data.files import _base_suffix, _is_gzip
from aflite.data.text import Dataset, SourceInfo, load_dataset
from aflite.data.write import write_filtered
from aflite.errors import InputError, ParameterError
from aflite.hashing import files_fingerprint as fingerprint
from aflite.links import check_link_dir, check_link_names

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm")
PATH_COLUMNS = ("path", "image_path", "image", "file", "filename", "filepath", "img")
_HF_PREFIX = "hf:"


def _pil() -> Any:
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ParameterError("reading images needs Pillow: pip install aflite[images]") from exc
    return Image


def _hf_ref(row: int, column: str, folder: Path) -> str:
    return f"{_HF_PREFIX}{row}:{column}:{folder}"


def _parse_hf_ref(ref: str) -> tuple[int, str, str]:
    row, column, folder = ref[len(_HF_PREFIX):].split(":", 2)
    return int(row), column, folder


@functools.lru_cache(maxsize=4)
def _hf_images(folder: str, column: str) -> Any:
    """The HF dataset's image column with decoding off (raw bytes / paths), memory-mapped from its Arrow files."""
    import datasets

    ds = datasets.load_from_disk(folder)
    return ds.cast_column(column, datasets.Image(decode=False))


def open_image(ref: str) -> Any:
    """An image reference (a path, or an ``hf:`` reference) decoded to an RGB PIL image; InputError naming the
    file when it cannot be read."""
    image = _pil()
    where = ref
    try:
        if ref.startswith(_HF_PREFIX):
            row, column, folder = _parse_hf_ref(ref)
            where = f"{folder}: row {row} column {column!r}"
            cell = _hf_images(folder, column)[row][column]
            if cell.get("bytes") is not None:
                src: Any = io.BytesIO(cell["bytes"])
            elif cell.get("path"):
                src = cell["path"]
                where = f"{cell['path']} ({where})"
            else:
                raise InputError(f"{where}: no image (the cell is empty)", path=where)
        else:
            src = ref
        with image.open(src) as im:
            im.load()
            return im.convert("RGB")
    except InputError:
        raise
    except (OSError, ValueError, SyntaxError, image.DecompressionBombError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{where}: not a readable image ({msg}); use --skip-bad-images to leave such files "
                         "out", path=where) from None
    except Exception as exc:  # PIL raises assorted errors on corrupt files
        raise InputError(f"{where}: not a readable image ({type(exc).__name__}); use --skip-bad-images to leave "
                         f"such files out", path=where) from None


def files_fingerprint(refs: Sequence[str]) -> str:
    """sha256 over each reference and its file's size and modification time (cheap: no pixel is read), so
    that a cached Φ is recomputed when an image file is replaced. HF references use their folder's Arrow files."""
    return fingerprint(refs, lambda ref: _parse_hf_ref(ref)[2] if ref.startswith(_HF_PREFIX) else None)


# ------------------------------------------------------------------------------------------------- loading


def is_image_folder(path: str | os.PathLike[str]) -> bool:
    """A folder (not a HF dataset) whose sub-folders hold image files."""
    p = Path(path)
    if not p.is_dir() or any((p / f).exists() for f in ("dataset_info.json", "state.json", "dataset_dict.json")):
        return False
    for sub in p.iterdir():
        if sub.is_dir() and not sub.name.startswith("."):
            for f in sub.iterdir():
                if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES:
                    return True
    return False


def _hf_image_column(path: Path) -> str | None:
    try:
        import datasets
    except ImportError:
        return None
    try:
        ds = datasets.load_from_disk(str(path))
    except Exception:
        return None
    for name, feat in getattr(ds, "features", {}).items():
        if isinstance(feat, datasets.Image):
            return str(name)
    return None


def load_image_dataset(
    path: str | os.PathLike[str],
    *,
    path_column: str | None = None,
    label: str | None = None,
    id_column: str | None = None,
    skip_bad_images: bool = False,
) -> Dataset:
    """Load an image folder, a table with a path column, or a HF dataset folder with an Image column (see the
    module docstring) as a :class:`aflite.data.Dataset` of image references (``modality == "image"``).
    ``label`` is the label column, as in :func:`aflite.data.load_dataset`."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or folder")
    if p.is_dir() and is_image_folder(p):
        ds = _load_folder(p)
    elif p.is_dir():
        ds = _load_hf(p, path_column, label, id_column)
    else:
        ds = _load_table(p, path_column, label, id_column)
    bad: list[str] = []
    if skip_bad_images:
        ok = np.ones(len(ds), dtype=bool)
        for i, ref in enumerate(ds.texts_a):
            try:
                open_image(ref)
            except InputError as exc:
                ok[i] = False
                bad.append(exc.path if exc.path is not None else str(exc))
        if bad:
            ds = _select(ds, np.flatnonzero(ok))
            ds.dropped = {**ds.dropped, "unreadable_image": len(bad)}
            ds.n_dropped += len(bad)
        if not len(ds):
            raise InputError(f"{p}: no readable image")
    ds.modality = "image"
    ds.bad_inputs = bad
    return ds


def _select(ds: Dataset, rows: np.ndarray) -> Dataset:

    src = dataclasses.replace(ds.source, row_index=ds.source.row_index[rows],
                              raw_records=None if ds.source.raw_records is None else
                              [ds.source.raw_records[i] for i in rows])
    return dataclasses.replace(
        ds, texts_a=[ds.texts_a[i] for i in rows], labels=ds.labels[rows], ids=ds.ids[rows],
        groups=None if ds.groups is None else ds.groups[rows], source=src,
        other_columns={k: [v[i] for i in rows] for k, v in ds.other_columns.items()})


def _load_folder(p: Path) -> Dataset:
    refs: list[str] = []
    labels: list[str] = []
    ids: list[str] = []
    root = p.resolve()
    for sub in sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")):
        for f in sorted(x for x in sub.rglob("*") if x.is_file() and x.suffix.lower() in IMAGE_SUFFIXES):
            refs.append(str(f))
            labels.append(sub.name)
            ids.append(f.relative_to(root).as_posix())
    if not refs:
        raise InputError(f"{p}: no image files ({', '.join(IMAGE_SUFFIXES)}) in its sub-folders")
    if len(set(labels)) < 2:
        raise InputError(f"{p}: one class folder only ({labels[0]!r}); AFLite needs at least 2 labels")
    src = SourceInfo(root, "imagefolder", "imagefolder", False, {"text_a": "path", "text_b": None,
                                                                 "label": "label", "id": "path"},
                     np.arange(len(refs), dtype=np.int64))
    return Dataset(refs, None, np.asarray(labels, dtype=str), np.asarray(ids, dtype=str), None, src)


def _table_columns(p: Path) -> list[str]:
    """The column names of a table, from its schema or first line only (no need to read a large file)."""

    suffix = _base_suffix(p)
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        return list(pq.read_schema(p).names)
    try:
        with (gzip.open(p, "rb") if _is_gzip(p) else open(p, "rb")) as fh:
            raw = fh.readline(1 << 20)
    except (EOFError, OSError) as exc:
        raise InputError(f"{p}: unreadable file: {exc}") from None
    first = raw.split(b"\n", 1)[0].decode("utf-8", "replace").strip("\r\ufeff")
    if suffix in (".jsonl", ".ndjson", ".json"):
        try:
            rec = json.loads(first)
        except ValueError:
            return []
        return list(rec) if isinstance(rec, dict) else []
    delim = "\t" if suffix == ".tsv" or ("\t" in first and suffix != ".csv") else ","
    return next(csv.reader([first], delimiter=delim), [])


def _pick(columns: list[str], given: str | None, candidates: Sequence[str], what: str, p: Path) -> str:
    if given is not None:
        return given
    lower = {c.lower(): c for c in columns}
    for c in candidates:
        if c in lower:
            return lower[c]
    raise InputError(f"{p}: no {what} column (looked for {', '.join(candidates)}; the file has "
                     f"{', '.join(map(repr, columns))}); name it with --{what}-column")


def _load_table(p: Path, path_column: str | None, label_column: str | None, id_column: str | None) -> Dataset:
    cols = _table_columns(p)
    pcol = _pick(cols, path_column, PATH_COLUMNS, "path", p)
    lcol = _pick(cols, label_column, ("label", "class", "target", "y"), "label", p)
    ds = load_dataset(p, text_a=pcol, label=lcol, id_column=id_column, group_by_premise=False, groups="none")
    base = p.resolve().parent
    refs = []
    for j, v in enumerate(ds.texts_a):
        f = Path(v)
        if not f.is_absolute():
            f = base / f
        if not f.is_file():
            where = f"row {int(ds.source.row_index[j]) + 1}"
            raise InputError(f"{p}: {where}, column {pcol!r}: no image file {str(f)!r}")
        refs.append(str(f))
    ds.other_columns = {**ds.other_columns, "_path": list(ds.texts_a)}
    ds.texts_a = refs
    ds.groups = None
    return ds


def _load_hf(p: Path, image_column: str | None, label_column: str | None, id_column: str | None) -> Dataset:
    try:
        import datasets
    except ImportError as exc:
        raise ParameterError("a Hugging Face dataset folder needs the datasets package: pip install aflite[hf]") \
            from exc
    try:
        hf = datasets.load_from_disk(str(p))
    except Exception as exc:
        raise InputError(f"{p}: not an image folder (one sub-folder per class) nor a Hugging Face dataset "
                         f"folder ({type(exc).__name__})") from None
    if isinstance(hf, datasets.DatasetDict):
        raise InputError(f"{p}: a DatasetDict with splits {sorted(hf)}; give one split's folder")
    col = image_column or _hf_image_column(p)
    if col is None or col not in hf.column_names:
        raise InputError(f"{p}: no Image column (columns: {', '.join(hf.column_names)})")
    lcol = label_column or next((c for c in ("label", "labels", "class", "target") if c in hf.column_names), None)
    if lcol is None or lcol not in hf.column_names:
        raise InputError(f"{p}: no label column (columns: {', '.join(hf.column_names)}); name it with "
                         "--label")
    names = _hf_label_names(hf, lcol) or {}
    raw_labels = hf[lcol]
    keep = [i for i, v in enumerate(raw_labels) if v is not None and v != -1]
    labels = [str(names.get(raw_labels[i], raw_labels[i])) for i in keep]
    id_values = hf[id_column] if id_column else None
    ids = [row_id(p, f"row {i}", str(id_column), id_values[i]) for i in keep] if id_values is not None else [
        str(i) for i in keep]
    if len(set(ids)) != len(ids):
        raise InputError(f"{p}: column {id_column!r} has duplicate ids")
    folder = p.resolve()
    refs = [_hf_ref(i, col, folder) for i in keep]
    src = SourceInfo(folder, "hf", "hf-image", False, {"text_a": col, "text_b": None, "label": lcol,
                                                      "id": id_column}, np.asarray(keep, dtype=np.int64))
    dropped = len(raw_labels) - len(keep)
    return Dataset(refs, None, np.asarray(labels, dtype=str), np.asarray(ids, dtype=str), None, src,
                       n_dropped=dropped, dropped={"no_label": dropped} if dropped else {})


# ------------------------------------------------------------------------------------------------- writing


def write_folder_outputs(ds: Any, keep: np.ndarray, out: str | os.PathLike[str], names: tuple[str, str],
                         removed: np.ndarray | None = None, link_dir: str | os.PathLike[str] | None = None) -> Path:
    """``OUT/kept.csv`` and ``OUT/removed.csv`` (``names``: the folder's names for them, from
    :mod:`aflite.rundir.names`, which this layer may not import; columns ``path`` — relative to the image folder —
    and ``label``), written atomically; with ``link_dir``, a ``<label>/<file>`` tree of symlinks to the kept images
    (a folder that must not exist yet, or be empty). Rows not in either file were the warm-up slice."""
    out = Path(out)
    keep = np.asarray(keep, dtype=bool)
    rem = ~keep if removed is None else np.asarray(removed, dtype=bool)

    def table(mask: np.ndarray) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["path", "label"])
        paths = ds.other_columns.get("_path", ds.ids)  # a table's own path values; a folder's paths relative to it
        for i in np.flatnonzero(mask):
            w.writerow([paths[i], ds.labels[i]])
        return buf.getvalue()

    write_text(out / names[0], table(keep))
    write_text(out / names[1], table(rem))
    if link_dir is not None:
        link_tree(ds, keep, link_dir)
    return out / names[0]


def link_tree(ds: Any, keep: np.ndarray, link_dir: str | os.PathLike[str], by_label: bool = False) -> Path:
    """Symlinks ``LINK_DIR/<id>`` (``by_label``: ``LINK_DIR/<label>/<id>_<file name>``) → each kept image,
    built in a temporary folder and renamed into place. HF dataset images have no file to link to."""

    dest = check_link_dir(link_dir)
    check_link_names(ds, keep, by_label)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))

    os.chmod(tmp, 0o777 & ~umask())  # mkdtemp makes it 0700; the folder gets the mode a plain mkdir would
    try:
        for i in np.flatnonzero(np.asarray(keep, dtype=bool)):
            ref = ds.texts_a[i]
            if ref.startswith(_HF_PREFIX):
                raise ParameterError("--link-dir needs image files; a Hugging Face dataset keeps its images "
                                     "inside Arrow files")
            target = Path(ref)
            link = tmp / (f"{ds.labels[i]}/{ds.ids[i]}_{target.name}" if by_label else str(ds.ids[i]))
            if tmp.resolve() not in link.parent.resolve().parents and link.parent.resolve() != tmp.resolve():
                raise InputError(f"id {ds.ids[i]!r}: would be linked outside --link-dir")  # see check_link_names
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target.resolve())
        if dest.exists():
            dest.rmdir()
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


# ------------------------------------------------------------------------------------------------ pipeline


def write_outputs(ds: Any, keep: np.ndarray, removed: np.ndarray, out: Path, filtered_name: str,
                  names: tuple[str, str], link_dir: str | os.PathLike[str] | None = None) -> Path:
    """The run's output in the input's form: kept.csv/removed.csv (``names``; + symlink tree) for a folder, the
    filtered table (or HF folder) otherwise; ``bad_images.txt`` lists images skipped as unreadable."""
    bad = getattr(ds, "bad_images", [])
    if bad:
        write_text(out / "bad_images.txt", "".join(f"{b}\n" for b in bad))
    if ds.source.format == "imagefolder":
        return write_folder_outputs(ds, keep, out, names, removed, link_dir)
    if link_dir is not None:
        link_tree(ds, keep, link_dir, by_label=True)
    write_folder_outputs(ds, keep, out, names, removed)
    return write_filtered(ds, keep, out / filtered_name)


def is_image_input(path: str | os.PathLike[str], path_column: str | None = None) -> bool:
    """Whether the data at ``path`` are images: a path column was named, or it is an image folder, a HF dataset
    folder with an Image column, or a table with a path column (``path``, ``image``, ...) and no sentence-pair
    columns (:func:`aflite.data.modality_of` adds what the featurizer reads)."""
    if path_column or is_image_folder(path):
        return True
    p = Path(path)
    if p.is_dir():
        return _hf_image_column(p) is not None
    if not p.is_file():
        return False
    try:
        cols = {c.strip().lower() for c in _table_columns(p)}
    except Exception:  # not a table this sniff can read: the text loader reports it properly
        return False
    pair = {"premise", "hypothesis", "sentence1", "sentence2", "question", "sentence", "text"}
    return bool(cols & set(PATH_COLUMNS)) and not cols & pair
