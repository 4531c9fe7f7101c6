"""Image datasets: loading them as AFLite inputs, reading images safely, and writing filtered outputs.

Three layouts are read (:func:`load_image_dataset`):

- an **image folder** with one sub-folder per class (``DATA/<label>/<file>.png``), the layout image
  classifiers use; ids are the paths relative to DATA;
- a **table** (CSV/TSV/JSONL/Parquet, read by :func:`aflite.data.load_dataset`) with a path column (relative
  to the table's folder, or absolute) and a label column;
- a **Hugging Face** ``datasets`` folder (``save_to_disk``) with an ``Image`` column; images are read from the
  Arrow files row by row (references ``hf:<row>:<column>:<folder>``), never all at once.

The result is an :class:`aflite.data.TextDataset` whose ``texts_a`` are image references (absolute paths),
so that the featurize cache, the filter and the run directory work unchanged. A corrupt or unreadable image is
a one-line :class:`~aflite.errors.InputError` naming the file; with ``skip_bad_images`` every image is decoded
once at load time and the unreadable ones are dropped, counted and listed (``bad_images``).

Outputs follow the input's form: a folder gets ``kept.csv`` / ``removed.csv`` (path relative to the folder,
label) and optionally a tree of symlinks to the kept images (:func:`write_folder_outputs`); a table or HF
folder gets the filtered table (:func:`aflite.data.write_filtered`).

The label-leakage audit's non-text parts run on images (:func:`audit_image_file`, what ``aflite audit`` calls
through :func:`aflite.pipeline.audit_file`; :func:`audit_image_dataset` in memory): the colour histogram plays
the single-sentence input, the image embedding the full input.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aflite.errors import InputError, ParameterError
from aflite.threads import limited

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm")
PATH_COLUMNS = ("path", "image_path", "image", "file", "filename", "filepath", "img")
IMAGE_FEATURIZERS = ("efficientnet-lite0", "hf-image")
_HF_PREFIX = "hf:"


def _pil() -> Any:
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ParameterError("reading images needs Pillow: pip install aflite[images]") from exc
    return Image


def is_image_ref(ref: str) -> bool:
    return ref.startswith(_HF_PREFIX) or ref.lower().endswith(IMAGE_SUFFIXES)


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
                raise InputError(f"{where}: no image (the cell is empty)")
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
                         "out") from None
    except Exception as exc:  # PIL raises assorted errors on corrupt files
        raise InputError(f"{where}: not a readable image ({type(exc).__name__}); use --skip-bad-images to leave "
                         f"such files out") from None


def files_fingerprint(refs: Sequence[str]) -> str:
    """sha256 over each reference and its file's size and modification time (cheap: no pixel is read), so
    that a cached Φ is recomputed when an image file is replaced. HF references use their folder's Arrow files."""
    from aflite.hashing import files_fingerprint as fingerprint

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
    label_column: str | None = None,
    id_column: str | None = None,
    skip_bad_images: bool = False,
) -> Any:
    """Load an image folder, a table with a path column, or a HF dataset folder with an Image column (see the
    module docstring) as a :class:`aflite.data.TextDataset` of image references."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or folder")
    if p.is_dir() and is_image_folder(p):
        ds = _load_folder(p)
    elif p.is_dir():
        ds = _load_hf(p, path_column, label_column, id_column)
    else:
        ds = _load_table(p, path_column, label_column, id_column)
    bad: list[str] = []
    if skip_bad_images:
        ok = np.ones(len(ds), dtype=bool)
        for i, ref in enumerate(ds.texts_a):
            try:
                open_image(ref)
            except InputError as exc:
                ok[i] = False
                bad.append(str(exc).split(": not a readable image")[0])
        if bad:
            ds = _select(ds, np.flatnonzero(ok))
            ds.dropped = {**ds.dropped, "unreadable_image": len(bad)}
            ds.n_dropped += len(bad)
        if not len(ds):
            raise InputError(f"{p}: no readable image")
    ds.bad_images = bad
    return ds


def _select(ds: Any, rows: np.ndarray) -> Any:
    import dataclasses

    src = dataclasses.replace(ds.source, row_index=ds.source.row_index[rows],
                              raw_records=None if ds.source.raw_records is None else
                              [ds.source.raw_records[i] for i in rows])
    return dataclasses.replace(
        ds, texts_a=[ds.texts_a[i] for i in rows], labels=ds.labels[rows], ids=ds.ids[rows],
        groups=None if ds.groups is None else ds.groups[rows], source=src,
        extra={k: [v[i] for i in rows] for k, v in ds.extra.items()})


def _load_folder(p: Path) -> Any:
    from aflite.data import SourceInfo, TextDataset

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
    return TextDataset(refs, None, np.asarray(labels, dtype=str), np.asarray(ids, dtype=str), None, src)


def _table_columns(p: Path) -> list[str]:
    """The column names of a table, from its schema or first line only (no need to read a large file)."""
    import gzip

    from aflite.data.files import _base_suffix, _is_gzip

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


def _load_table(p: Path, path_column: str | None, label_column: str | None, id_column: str | None) -> Any:
    from aflite.data import load_dataset

    cols = _table_columns(p)
    pcol = _pick(cols, path_column, PATH_COLUMNS, "path", p)
    lcol = _pick(cols, label_column, ("label", "class", "target", "y"), "label", p)
    ds = load_dataset(p, text_a=pcol, label=lcol, id=id_column, group_by_premise=False, groups="none")
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
    ds.extra = {**ds.extra, "_path": list(ds.texts_a)}
    ds.texts_a = refs
    ds.groups = None
    return ds


def _load_hf(p: Path, image_column: str | None, label_column: str | None, id_column: str | None) -> Any:
    from aflite.data import SourceInfo, TextDataset
    from aflite.data.columnar import _hf_label_names

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
                         "--label-column")
    names = _hf_label_names(hf, lcol) or {}
    raw_labels = hf[lcol]
    keep = [i for i, v in enumerate(raw_labels) if v is not None and v != -1]
    labels = [str(names.get(raw_labels[i], raw_labels[i])) for i in keep]
    ids = [str(hf[id_column][i]) for i in keep] if id_column else [str(i) for i in keep]
    if len(set(ids)) != len(ids):
        raise InputError(f"{p}: column {id_column!r} has duplicate ids")
    folder = p.resolve()
    refs = [_hf_ref(i, col, folder) for i in keep]
    src = SourceInfo(folder, "hf", "hf-image", False, {"text_a": col, "text_b": None, "label": lcol,
                                                      "id": id_column}, np.asarray(keep, dtype=np.int64))
    dropped = len(raw_labels) - len(keep)
    return TextDataset(refs, None, np.asarray(labels, dtype=str), np.asarray(ids, dtype=str), None, src,
                       n_dropped=dropped, dropped={"no_label": dropped} if dropped else {})


# ------------------------------------------------------------------------------------------------- writing


def write_folder_outputs(ds: Any, keep: np.ndarray, out: str | os.PathLike[str],
                         removed: np.ndarray | None = None, link_dir: str | os.PathLike[str] | None = None) -> Path:
    """``OUT/kept.csv`` and ``OUT/removed.csv`` (columns ``path`` — relative to the image folder — and
    ``label``), written atomically; with ``link_dir``, a ``<label>/<file>`` tree of symlinks to the kept images
    (a folder that must not exist yet, or be empty). Rows not in either file were the warm-up slice."""
    from aflite.atomic import write_text

    out = Path(out)
    keep = np.asarray(keep, dtype=bool)
    rem = ~keep if removed is None else np.asarray(removed, dtype=bool)

    def table(mask: np.ndarray) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["path", "label"])
        paths = ds.extra.get("_path", ds.ids)  # a table's own path values; a folder's paths relative to it
        for i in np.flatnonzero(mask):
            w.writerow([paths[i], ds.labels[i]])
        return buf.getvalue()

    write_text(out / "kept.csv", table(keep))
    write_text(out / "removed.csv", table(rem))
    if link_dir is not None:
        link_tree(ds, keep, link_dir)
    return out / "kept.csv"


def link_tree(ds: Any, keep: np.ndarray, link_dir: str | os.PathLike[str], by_label: bool = False) -> Path:
    """Symlinks ``LINK_DIR/<id>`` (``by_label``: ``LINK_DIR/<label>/<id>_<file name>``) → each kept image,
    built in a temporary folder and renamed into place. HF dataset images have no file to link to."""
    import shutil
    import tempfile

    from aflite.links import check_link_dir, check_link_names

    dest = check_link_dir(link_dir)
    check_link_names(ds, keep, by_label)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    from aflite.atomic import umask

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


def wants_images(path: str | os.PathLike[str], featurizer: str) -> bool:
    """Whether ``aflite run`` should read ``path`` as images: an image folder, or an image featurizer."""
    return featurizer in IMAGE_FEATURIZERS or is_image_folder(path)


def featurizer_options(featurizer: str, options: dict[str, Any]) -> dict[str, Any]:
    """Featurizer options for image inputs: ``warmup`` fine-tunes an image network (EfficientNet-Lite0, or the
    HF vision model at ``model_path``); text-only featurizers are refused with a one-line error."""
    if featurizer == "warmup":
        out = dict(options)
        out.setdefault("image_model", "hf-image" if out.get("model_path") else "efficientnet-lite0")
        return out
    if featurizer in ("ngram", "minilm"):
        raise ParameterError(f"--featurizer {featurizer} reads text; for images use efficientnet-lite0, hf-image "
                             "(--model-path), warmup or precomputed")
    return dict(options)


def write_outputs(ds: Any, keep: np.ndarray, removed: np.ndarray, out: Path, filtered_name: str,
                  link_dir: str | os.PathLike[str] | None = None) -> Path:
    """The run's output in the input's form: kept.csv/removed.csv (+ symlink tree) for a folder, the filtered
    table (or HF folder) otherwise; ``bad_images.txt`` lists images skipped as unreadable."""
    from aflite.atomic import write_text
    from aflite.data import write_filtered

    bad = getattr(ds, "bad_images", [])
    if bad:
        write_text(out / "bad_images.txt", "".join(f"{b}\n" for b in bad))
    if ds.source.format == "imagefolder":
        return write_folder_outputs(ds, keep, out, removed, link_dir)
    if link_dir is not None:
        link_tree(ds, keep, link_dir, by_label=True)
    write_folder_outputs(ds, keep, out, removed)
    return write_filtered(ds, keep, out / filtered_name)


# ------------------------------------------------------------------------------------------- aflite embed


def embed_to_npy(refs: Sequence[str], featurizer: Any, dest: str | os.PathLike[str], *, chunk_size: int = 4096,
                 key: str = "", show_progress: bool = True) -> Path:
    """Embed ``refs`` chunk by chunk straight into a memory-mapped ``dest`` .npy (float32, never all in memory).

    Rows go to ``dest.partial``; after each chunk is flushed, ``dest.progress.json`` records it, so an interrupted
    run (same ``key``: inputs and options) resumes at the first chunk not yet recorded. When every chunk is in,
    the file is renamed to ``dest`` (atomically) and the progress file removed. ImageNet-sized runs
    (1.28M × 1,280 float32 ≈ 6.6 GB) then go to ``aflite filter --mmap``.
    """
    import math

    from aflite.atomic import write_json
    from aflite.features import _progress_bar

    if chunk_size < 1:
        raise ParameterError(f"chunk_size must be >= 1, got {chunk_size}")
    dest = Path(dest)
    partial = dest.with_name(dest.name + ".partial")
    prog = dest.with_name(dest.name + ".progress.json")
    n = len(refs)
    if n == 0:
        raise InputError("no images to embed")
    n_chunks = math.ceil(n / chunk_size)
    done: set[int] = set()
    mm: Any = None
    if prog.is_file() and partial.is_file():
        try:
            state = json.loads(prog.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = {}
        if state.get("key") == key and state.get("n") == n and state.get("chunk_size") == chunk_size:
            mm = np.lib.format.open_memmap(partial, mode="r+")
            if mm.shape != (n, state.get("dim")):
                mm, state = None, {}
            else:
                done = {int(c) for c in state.get("done", [])}
    bar = _progress_bar(n, getattr(featurizer, "name", "embed"), show_progress,
                        initial=sum(min(chunk_size, n - c * chunk_size) for c in done), unit="image")
    try:
        for c in range(n_chunks):
            if c in done:
                continue
            lo, hi = c * chunk_size, min(n, (c + 1) * chunk_size)
            part = np.asarray(featurizer.transform(list(refs[lo:hi]), None, progress=bar), dtype=np.float32)
            if mm is None:
                dest.parent.mkdir(parents=True, exist_ok=True)
                mm = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float32, shape=(n, part.shape[1]))
            mm[lo:hi] = part
            mm.flush()
            done.add(c)
            write_json(prog, {"key": key, "n": n, "dim": int(mm.shape[1]), "chunk_size": chunk_size,
                              "done": sorted(done)})
    finally:
        if bar is not None:
            bar.close()
    assert mm is not None
    mm.flush()
    del mm
    os.replace(partial, dest)
    prog.unlink(missing_ok=True)
    return dest


def cli_embed(args: Any, out: Path) -> int:
    """``aflite embed`` for images: OUT/features.npy written chunk by chunk (memory-mapped; an interrupted run
    resumes when the same command is run again), OUT/ids.txt and OUT/labels.txt, ready for
    ``aflite filter --features OUT/features.npy --mmap``."""
    import time

    from aflite.atomic import write_text
    from aflite.cli.embed import FEATURES, write_outputs
    from aflite.features import IMAGE_FEATURIZERS as FEATS
    from aflite.features import make_featurizer
    from aflite.hashing import json_digest

    if args.featurizer not in FEATS:
        raise ParameterError(f"--featurizer {args.featurizer} on images: aflite embed takes "
                             f"{' or '.join(FEATS)} (the warm-up Φ runs inside aflite run)")
    ds = load_image_dataset(args.data, path_column=getattr(args, "path_column", None),
                            label_column=getattr(args, "label", None), id_column=getattr(args, "id", None),
                            skip_bad_images=getattr(args, "skip_bad_images", False))
    opts: dict[str, Any] = {"device": args.device, "image_size": args.image_size,
                            "show_progress": not args.quiet}
    if args.model_path:
        opts["model_path"] = args.model_path
    feat = make_featurizer(args.featurizer, **opts)
    key = json_digest({"files": files_fingerprint(ds.texts_a), "options": feat.get_options()})
    t0 = time.perf_counter()
    dest = embed_to_npy(ds.texts_a, feat, out / FEATURES, chunk_size=args.chunk_size, key=key,
                        show_progress=not args.quiet)
    secs = time.perf_counter() - t0
    write_text(out / "ids.txt", "".join(f"{i}\n" for i in ds.ids))
    write_text(out / "labels.txt", "".join(f"{lab}\n" for lab in ds.labels))
    bad = getattr(ds, "bad_images", [])
    more: dict[str, Any] = {}
    if bad:
        write_text(out / "bad_images.txt", "".join(f"{b}\n" for b in bad))
        more["bad_images"] = {"count": len(bad), "file": "bad_images.txt"}
        import sys

        print(f"{len(bad)} unreadable image(s) left out, listed in {out / 'bad_images.txt'}", file=sys.stderr)
    shape = np.load(dest, mmap_mode="r").shape
    write_outputs(args, out, rows=int(shape[0]), dim=int(shape[1]), seconds=secs, **more)
    return 0


# --------------------------------------------------------------------------------------------------- audit


def colour_histograms(refs: Sequence[str], bins: int = 4) -> np.ndarray:
    """A colour-only view of each image: the normalised joint RGB histogram (``bins``³ cells) of its non-black
    pixels, shape and position thrown away. It plays the part of the hypothesis-only input in the audit: a
    model that does well from it alone has found a colour artifact."""
    if bins < 2:
        raise ParameterError(f"bins must be >= 2, got {bins}")
    out = np.zeros((len(refs), bins**3), dtype=np.float32)
    for r, ref in enumerate(refs):
        px = np.asarray(open_image(ref), dtype=np.int64).reshape(-1, 3)
        px = px[px.max(axis=1) > 32]  # ink, not background
        if len(px) == 0:
            continue
        q = px * bins // 256
        cells = np.bincount((q[:, 0] * bins + q[:, 1]) * bins + q[:, 2], minlength=bins**3)
        out[r] = cells / cells.sum()
    return out


IMAGE_VIEW = "colour"  # the biased condition of an image audit: the colour histogram alone
BIASED_VIEW_NAME = "colour histogram (4×4×4 RGB cells of the non-black pixels)"
IMAGE_AUDIT_FEATURIZERS = ("efficientnet-lite0", "hf-image", "precomputed")


@limited  # one thread policy (aflite.threads)
def audit_image_dataset(refs: Sequence[str], labels: Any, embeddings: np.ndarray, config: Any = None, *,
                        ids: Sequence[str] | None = None, name: str = "D",
                        colour: np.ndarray | None = None) -> Any:
    """The parts of the label-leakage audit that are not text-specific, for images, as an
    :class:`aflite.audit.AuditResult` with one condition, ``colour``:

    - a *biased* model (L2 logistic regression, ``config.n_folds``-fold out of fold) on the colour-only view
      (:func:`colour_histograms`, or ``colour`` when already computed), against the majority rate, and the
      *normal* model on the image embeddings; NBA/NBR between them (:class:`aflite.audit.LeakageMetrics`);
    - PECO on the embeddings (PCA → k-means → cluster label divergence) with its label-shuffle null;
    - 2-D t-SNE coordinates of a seeded sample (``config.tsne_sample``) and the most label-skewed clusters,
      listed by image id.

    Images have no second input and no groups, so there is no TRA and no token table (both read text).
    """
    from aflite.audit import AuditConfig, AuditResult, LeakageMetrics, ViewAudit, cv_predict, peco, peco_null
    from aflite.audit.runner import _examples, _tsne

    cfg = config if config is not None else AuditConfig()
    y = np.asarray(labels).astype(str)
    X = np.asarray(embeddings, dtype=np.float32)
    n = len(y)
    if len(X) != n or len(refs) != n or (ids is not None and len(ids) != n):
        raise InputError(f"{len(refs)} images, {n} labels and {len(X)} embedding rows: they must be equal")
    if n < 10:
        raise InputError(f"too few images to audit ({n}); need at least 10")
    classes, counts = np.unique(y, return_counts=True)
    if len(classes) < 2:
        raise InputError("the audit needs at least 2 label classes")
    import time

    timings: dict[str, float] = {}
    t = time.perf_counter()
    H = colour_histograms(refs) if colour is None else np.asarray(colour, dtype=np.float32)
    if len(H) != n:
        raise InputError(f"{len(H)} colour histograms for {n} images")
    timings["colour_histograms"] = time.perf_counter() - t
    t = time.perf_counter()
    pred_b = classes[cv_predict(H, y, None, cfg.n_folds, cfg.C, cfg.seed)]
    timings["biased_models"] = time.perf_counter() - t
    t = time.perf_counter()
    pred_n = classes[cv_predict(X, y, None, cfg.n_folds, cfg.C, cfg.seed)]
    timings["normal_model"] = time.perf_counter() - t
    t = time.perf_counter()
    pr = peco(X, y, cfg.n_components, cfg.n_clusters, cfg.seed)
    null = peco_null(pr, y, cfg.peco_shuffles, cfg.seed)
    timings["peco"] = time.perf_counter() - t
    t = time.perf_counter()
    xy, rows = _tsne(pr, cfg)
    timings["tsne"] = time.perf_counter() - t
    names = [str(i) for i in (ids if ids is not None else refs)]
    va = ViewAudit(IMAGE_VIEW, LeakageMetrics.compute(y, pred_b, pred_n), pr, xy, rows, {},
                   examples=_examples(pr, names, y, cfg), peco_null=null, biased_pred=pred_b, normal_pred=pred_n)
    timings["total"] = sum(timings.values())
    return AuditResult(name, n, {str(c): int(k) for c, k in zip(classes, counts, strict=True)}, {IMAGE_VIEW: va},
                       cfg, timings, y, np.asarray(names, dtype=str), f"image embeddings ({cfg.featurizer})")


def audit_images(refs: Sequence[str], labels: Any, embeddings: np.ndarray, *, n_folds: int = 5, seed: int = 0,
                 n_components: int = 30, n_clusters: int = 50, tsne_sample: int = 2000) -> dict[str, Any]:
    """:func:`audit_image_dataset` with its figures as a flat dict (biased/normal accuracies against the majority
    rate, NBA/NBR, PECO and its null, biased clusters, t-SNE sample rows and coordinates)."""
    from aflite.audit import AuditConfig

    cfg = AuditConfig(featurizer="precomputed", n_folds=n_folds, seed=seed, n_components=n_components,
                      n_clusters=n_clusters, tsne_sample=tsne_sample, show_progress=False)
    va = audit_image_dataset(refs, labels, embeddings, cfg).views[IMAGE_VIEW]
    null = va.peco_null
    return {"n": int(len(refs)), "biased_view": BIASED_VIEW_NAME, **va.metrics.to_dict(), "peco": va.peco.score,
            "peco_fraction20": va.peco.score_fraction20, "peco_null_mean": null.mean, "peco_excess": null.excess,
            "peco_p_value": null.p_value, "biased_clusters": int(len(va.peco.biased_clusters())),
            "tsne": None if va.tsne is None or va.tsne_rows is None else
            {"rows": va.tsne_rows.tolist(), "xy": np.round(va.tsne, 3).tolist()}}


def is_image_input(path: str | os.PathLike[str], featurizer: str | None = None,
                   path_column: str | None = None) -> bool:
    """Whether ``aflite audit`` reads ``path`` as images: an image featurizer or a path column was named, or it
    is an image folder, a HF dataset folder with an Image column, or a table with a path column (``path``,
    ``image``, ...) and no sentence-pair columns."""
    if featurizer in IMAGE_FEATURIZERS or path_column or is_image_folder(path):
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


def resolve_audit_featurizer(featurizer: str | None, model_path: str | None = None) -> str:
    """The Φ of an image audit: ``efficientnet-lite0`` by default (``hf-image`` when a model folder is given, as
    also for the text default ``minilm``); ``hf-image``/``precomputed`` as asked; text and warm-up Φ refused."""
    if featurizer in (None, "minilm") and model_path is None:
        return "efficientnet-lite0"
    if featurizer in (None, "minilm"):
        return "hf-image"
    if featurizer not in IMAGE_AUDIT_FEATURIZERS:
        raise ParameterError(f"--featurizer {featurizer} on images: the audit takes "
                             f"{', '.join(IMAGE_AUDIT_FEATURIZERS)} (frozen features; the warm-up Φ runs inside "
                             "aflite run)")
    if model_path is not None and featurizer != "hf-image":
        raise ParameterError(f"--model-path names a Hugging Face vision model folder, which --featurizer "
                             f"{featurizer} does not use; give --featurizer hf-image (or drop --model-path)")
    return featurizer


@limited  # one thread policy (aflite.threads)
def audit_image_file(data_path: str | os.PathLike[str], out: str | os.PathLike[str], config: Any = None, *,
                     compare: str | os.PathLike[str] | None = None, sample: int | None = None,
                     title: str | None = None, image_options: dict[str, Any] | None = None,
                     featurizer_options: dict[str, Any] | None = None, show_progress: bool = True) -> Any:
    """``aflite audit`` on an image dataset (any layout :func:`load_image_dataset` reads): featurize once
    (``config.featurizer``: efficientnet-lite0, hf-image with ``config.model_path``, or precomputed with
    ``featurizer_options['path']``; cached in ``config.cache_dir``, default ``out/cache``), audit D — and with
    ``compare`` the kept ids of an AFLite run on the same data as D(Φ) — with :func:`audit_image_dataset`, and
    write ``out/metrics.json``, ``out/report.html`` and a t-SNE map per set (``tsne.png``, ``tsne_kept.png``).
    Returns an :class:`aflite.pipeline.AuditRun`. Nothing is written before every image has been read."""
    import dataclasses
    import time

    from aflite import audit as A
    from aflite.atomic import atomic_open, write_json, write_text
    from aflite.features import featurize
    from aflite.pipeline import AuditRun, check_audit_config
    from aflite.report import png_bytes, tsne_figure, write_image_report
    from aflite.rundir import read_kept_ids

    out = Path(out)
    cfg = config if config is not None else A.AuditConfig()
    cfg = dataclasses.replace(cfg, featurizer=resolve_audit_featurizer(cfg.featurizer, cfg.model_path),
                              views=(IMAGE_VIEW,), tra=False)
    check_audit_config(cfg)
    kept = read_kept_ids(Path(compare)) if compare is not None else None
    t0 = time.perf_counter()
    ds = load_image_dataset(data_path, **(image_options or {}))
    classes = np.unique(ds.labels)
    if len(classes) < 2:
        raise InputError(f"{data_path}: every one of the {len(ds):,} images has the label {str(classes[0])!r}; an "
                         "audit needs at least two classes")
    if compare is not None:
        from aflite.hashing import dataset_fingerprint
        from aflite.rundir import check_run_dataset

        check_run_dataset(compare, dataset_fingerprint(ds.ids, ds.labels, ds.texts_a, ds.texts_b), data_path)
    if cfg.cache_dir is None:
        cfg = dataclasses.replace(cfg, cache_dir=str(out / "cache"))
    full = ds
    filtered = A.subset(full, kept) if kept is not None else None
    base = full
    if sample is not None:
        ds = A.sample_rows(ds, sample, cfg.seed)
        filtered = None if filtered is None else A.sample_rows(filtered, sample, cfg.seed)
        union = set(ds.ids.astype(str)) | (set() if filtered is None else set(filtered.ids.astype(str)))
        base = A.subset(full, sorted(union))
    fopts = dict(featurizer_options or {})
    if cfg.featurizer == "precomputed":
        if not fopts.get("path"):
            raise ParameterError("--featurizer precomputed needs --embeddings FILE")
        fopts = {k: v for k, v in fopts.items() if k in ("path", "ids_path")}  # no encoder: no size, no device
    else:
        fopts = {**fopts, "device": cfg.device}
        if cfg.featurizer == "hf-image":
            fopts["model_path"] = cfg.model_path
        fopts.pop("path", None)
        fopts.pop("ids_path", None)
    t_feat = time.perf_counter()
    H = colour_histograms(base.texts_a)  # decodes every image: a corrupt one stops the audit here, before any work
    feats = featurize(base.texts_a, None, cfg.featurizer, cache_dir=cfg.cache_dir,
                      ids=base.ids.tolist() if cfg.featurizer == "precomputed" else None,
                      show_progress=show_progress, **fopts)
    X = np.asarray(feats.X.toarray() if hasattr(feats.X, "toarray") else feats.X, dtype=np.float32)
    t_feat = time.perf_counter() - t_feat
    row_of = {str(i): r for r, i in enumerate(base.ids.astype(str))}

    def audit_set(sub: Any, name: str) -> Any:
        rows = np.fromiter((row_of[str(i)] for i in sub.ids), dtype=np.int64, count=len(sub))
        return audit_image_dataset(sub.texts_a, sub.labels, X[rows], cfg, ids=sub.ids.astype(str).tolist(),
                                   name=name, colour=H[rows])

    results = [audit_set(ds, "D")]
    results[0].add_time("features", t_feat)
    notes = [f"Data: {data_path} ({len(full):,} images)", f"Embeddings: {cfg.featurizer}"
             + (f" ({cfg.model_path})" if cfg.model_path else "") + f", {X.shape[1]} dimensions"]
    if filtered is not None:
        results.append(audit_set(filtered, "D(Φ)"))
        notes.append(f"D(Φ): the {len(kept or []):,} kept ids of the AFLite run {compare}"
                     + ("" if sample is None else f" (a random sample of {len(filtered):,})"))
    if sample is not None:
        notes.append(f"D: a random sample of {len(ds):,} of the {len(full):,} images (seed {cfg.seed})")
    bad = list(getattr(full, "bad_images", []))
    out.mkdir(parents=True, exist_ok=True)
    if bad:
        write_text(out / "bad_images.txt", "".join(f"{b}\n" for b in bad))
        notes.append(f"{len(bad)} unreadable image(s) left out (bad_images.txt)")
    plots: dict[str, str] = {}
    for r, fname in zip(results, ("tsne.png", "tsne_kept.png"), strict=False):
        fig = tsne_figure(r, IMAGE_VIEW, cfg.bias_threshold, what="image embeddings")
        if fig is not None:
            with atomic_open(out / fname, "wb") as fh:
                fh.write(png_bytes(fig))
            plots[r.name] = fname
    metrics = {
        "data": str(data_path), "modality": "image", "compare": None if compare is None else str(compare),
        "biased_view": BIASED_VIEW_NAME, "featurizer": cfg.featurizer, "embedding_dim": int(X.shape[1]),
        "bad_images": {"count": len(bad), "file": "bad_images.txt"} if bad else None,
        "tsne_plots": plots, "results": [r.to_dict() for r in results],
        "seconds": round(time.perf_counter() - t0, 2),
    }
    from aflite.verdict import audit_verdict

    metrics["verdict"] = audit_verdict(metrics)
    write_json(out / "metrics.json", metrics)
    write_image_report(out / "report.html", results, title=title or f"Label-leakage audit of {Path(data_path).name}",
                       notes=notes)
    return AuditRun(out, results, metrics, notes)
