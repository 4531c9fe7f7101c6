"""``aflite embed`` as a library call: Φ of a dataset file (text or images), saved for ``filter``.

It writes ``OUT/features.npy`` (float32, memory-mappable), ``ids.txt``, ``labels.txt`` (``warmup_ids.txt`` for the
warm-up Φ, ``bad_images.txt`` for skipped images), ``results.json`` and ``summary.md``. Image runs are written
chunk by chunk and resume when called again; Dask shards (``cluster``) give the same features, bit for bit.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Unpack

import numpy as np

from aflite import data
from aflite.atomic import JSON, write_npy, write_text
from aflite.cluster.shards import run_shards, shards_to_npy
from aflite.core.backends.dask import use_cluster
from aflite.data import Columns, with_columns
from aflite.data.images import files_fingerprint
from aflite.data.source import refuse_image_options, refuse_text_options
from aflite.errors import InputError, OutputError, ParameterError, takes_mappings
from aflite.features import featurize_dataset, make_featurizer
from aflite.features.base import JsonValue
from aflite.features.npy import embed_to_npy
from aflite.features.registry import featurizer_names, spec
from aflite.features.registry import featurizer_options as featurizer_options_for
from aflite.features.shards import ShardedTransform, check_shardable
from aflite.hashing import json_digest
from aflite.option import OptionValue
from aflite.rundir.folder import RunFolder, claims
from aflite.rundir.names import FEATURES, WARMUP_IDS
from aflite.rundir.read import read_results
from aflite.rundir.results import Result, recording_warnings
from aflite.rundir.schema import EmbedBody

__all__ = ["FEATURES", "EmbedResult", "check_embed_out", "embed"]



@dataclass(repr=False)  # Result.__repr__: one line, not the arrays
class EmbedResult(Result):
    """What :func:`embed` wrote: the folder, the body of results.json and the one-line account printed by the CLI."""

    command: ClassVar[str] = "embed"
    out: Path
    body: EmbedBody
    line: str
    files: dict[str, str] = field(default_factory=dict)
    data: str = ""
    run_seed: int | None = None

    @property
    def seed(self) -> Any:
        return self.run_seed

    def to_json(self) -> dict[str, JsonValue]:
        return self.body.to_json()

    def summary_md(self) -> str:
        use = (f"aflite filter --features {self.out / FEATURES} --ids {self.out / 'ids.txt'}"
               + (f" --labels {self.out / 'labels.txt'}" if "labels" in self.files else "") + " --mmap --out RUN")
        return f"# aflite embed: {self.data}\n\n- {self.line}\n\nNext: `{use}`\n"


def check_embed_out(out: str | os.PathLike[str], overwrite: bool = False, resume: bool = False) -> None:
    """Refuse, before anything is computed, to replace finished features without ``overwrite`` or ``resume`` (an
    unfinished run is resumed by the same call instead)."""
    done = Path(out) / FEATURES
    if overwrite and resume:
        raise ParameterError("--resume continues the embedding in OUT and --overwrite starts it over: give one")
    if done.exists() and not overwrite and not resume:
        raise OutputError(f"--out {out}: {done} exists; pass --overwrite to replace it, --resume to go on from it "
                          f"(and what the cache holds), or choose another --out")


@claims("embed")  # a path given as out is claimed as the CLI claims --out
@recording_warnings()  # scikit-learn's warnings counted in results.json (aflite.rundir.results)
@takes_mappings("featurizer_options", "dataset_options")
def embed(data_path: Any, out: str | os.PathLike[str] | RunFolder, *, featurizer: str = "ngram",
          view: str = "pair", featurizer_options: dict[str, OptionValue] | None = None, warmup_size: float = 0.1,
          cache_dir: str | os.PathLike[str] | None = None, seed: int = 0, device: str = "auto",
          image_size: int = 224, chunk_size: int = 4096, skip_bad_images: bool = False,
          dataset_options: JSON | None = None, overwrite: bool = False, show_progress: bool = True,
          backend: str | None = None, cluster: Any = None, resume: bool = False,
          **columns: Unpack[Columns]) -> EmbedResult:
    """Featurize ``data_path`` with ``featurizer`` under ``view`` into ``out`` (the files of the module docstring).

    ``data_path`` is read as images (an image folder, or an image featurizer) or text; in-memory data are text.

    Parameters
    ----------
    data_path : path or data frame
        The data to featurize.
    out : path or RunFolder
        The folder to write.
    featurizer : str, default "ngram"
        The registered featurizer.
    view : str, default "pair"
        Which text Φ reads.
    featurizer_options : dict, optional
        The featurizer's own options (``model_path``, ``lr``, ...; an untaken one is refused).
    warmup_size : int or float, default 0.1
        The warm-up slice of a featurizer trained on labels (a count, or a fraction of the rows).
    cache_dir : path, optional
        Where Φ is cached (default ``out/cache``).
    seed : int, default 0
        The seed of the warm-up slice and of the featurizer.
    device : str, default "auto"
        Where every PyTorch step runs.
    image_size : int, default 224
        Images are resized to this square.
    chunk_size : int, default 4096
        Rows embedded (and cached) at a time.
    skip_bad_images : bool, default False
        Leave unreadable images out instead of stopping.
    dataset_options : dict, optional
        The loader's keywords.
    overwrite : bool, default False
        Start over in an ``out`` that holds features.
    show_progress : bool, default True
        Show progress bars.
    backend : str, optional
        The encoder's runtime: torch, onnx, onnx-int8 (default auto,
        :func:`aflite.encoders.onnx_text.resolve_backend`).
    cluster : str or DaskExecutor, optional
        ``local``, ``local:N``, a scheduler address or an open executor: the chunks are embedded as shards on
        its Dask workers (the cache must be storage every worker can write).
    resume : bool, default False
        Continue an interrupted call in ``out`` (as a plain call does) and accept finished features there: text
        is read back from the cache, a finished image matrix of the same inputs and options is kept.
    **columns
        The column keywords of :class:`aflite.data.Columns`.

    Returns
    -------
    EmbedResult
        The features and the files written.
    """
    dataset_options = with_columns(dataset_options, columns, "embed")
    path_column = dict(dataset_options or {}).get("path_column")
    modality = data.modality_of(data_path, reads=spec(featurizer).modality, path_column=path_column)
    refuse_image_options(data_path, modality, {"image_size": image_size, "skip_bad_images": skip_bad_images})
    if modality == "image":  # before the folder is touched (open_dataset refuses them too, later)
        refuse_text_options(data_path, dict(dataset_options or {}))
    folder = RunFolder.of(out, "embed")
    check_embed_out(folder.path, overwrite, resume)
    if cluster is not None:
        check_shardable(featurizer)
    options = featurizer_options_for(featurizer, **(featurizer_options or {}), device=device, backend=backend,
                                     image_size=image_size if image_size != 224 else None)
    cache = Path(cache_dir) if cache_dir is not None else folder.path / "cache"
    # the build starts: results.json goes first; a partial image run is kept to resume unless starting over
    partial = (FEATURES + ".partial", FEATURES + ".progress.json")
    done_key = _finished_key(folder.path) if resume else None  # read before the build takes results.json away
    folder.check_writes([FEATURES, "ids.txt", "labels.txt"])  # a file not aflite's: refused before the build
    folder.begin(keep=() if overwrite else (FEATURES, *partial))
    ds = data.open_dataset(data_path, reads=spec(featurizer).modality, skip_bad_images=skip_bad_images,
                           **dataset_options)
    data.check_view_texts(ds, view)  # a column empty in every row: nothing for Φ (images: no check)
    executor, release = use_cluster(cluster)
    try:
        if ds.modality == "image":
            res = _embed_images(ds, folder.path, featurizer=featurizer, options=options, chunk_size=chunk_size,
                                show_progress=show_progress, cache_dir=cache, executor=executor, done_key=done_key)
        else:
            res = _embed_text(ds, folder.path, featurizer=featurizer, view=view, options=options,
                              warmup_size=warmup_size, cache_dir=cache, seed=seed, show_progress=show_progress,
                              chunk_size=chunk_size, executor=executor)
    finally:
        release()
    result = _result(data.source_name(data_path), seed, folder.path, res)
    folder.finish(result)
    return result


def _embed_text(ds: Any, out: Path, *, featurizer: str, view: str, options: JSON, warmup_size: float,
                cache_dir: Path, seed: int, show_progress: bool, chunk_size: int, executor: Any) -> EmbedBody:
    ws: float | int = warmup_size if warmup_size < 1 else int(warmup_size)
    shards = ShardedTransform(executor) if executor is not None else None
    t0 = time.perf_counter()
    f = featurize_dataset(ds, featurizer, view, cache_dir, warmup_size=ws, warmup_seed=seed,
                          show_progress=show_progress, chunk_size=chunk_size, shards=shards, **options)
    secs = time.perf_counter() - t0
    X = f.X.toarray() if hasattr(f.X, "toarray") else f.X
    write_npy(out / FEATURES, X)
    write_text(out / "ids.txt", "".join(f"{i}\n" for i in ds.ids[f.rows]))
    write_text(out / "labels.txt", "".join(f"{lab}\n" for lab in ds.labels[f.rows]))
    if len(f.warmup_rows):
        write_text(out / WARMUP_IDS, "".join(f"{i}\n" for i in ds.ids[f.warmup_rows]))
    cluster: dict[str, int | float | dict[str, int] | list[float]] | None = (
        None if shards is None else shards.report.as_dict() if shards.report is not None else {"shards": 0})
    return EmbedBody(featurizer=featurizer, rows=int(X.shape[0]), dim=int(X.shape[1]), seconds=secs, view=view,
                     from_cache=bool(f.from_cache), cluster=cluster,
                     warmup_ids=WARMUP_IDS if len(f.warmup_rows) else None)


def _embed_images(ds: Any, out: Path, *, featurizer: str, options: JSON, chunk_size: int,
                  show_progress: bool, cache_dir: Path, executor: Any, done_key: str | None = None) -> EmbedBody:
    """OUT/features.npy written chunk by chunk (resumable), ids.txt and labels.txt; on a cluster the chunks are
    shards in ``cache_dir/shards/`` (resumed there), assembled and then removed."""
    if featurizer not in (images := featurizer_names("embed", "image", only=True)):
        raise ParameterError(f"--featurizer {featurizer} on images: aflite embed takes "
                             f"{' or '.join(images)} (the warm-up Φ runs inside aflite run)")
    feat = make_featurizer(featurizer, **{"image_size": 224, **options}, show_progress=show_progress)
    feat.fit(list(ds.texts_a))  # the int8 backend's calibration sample: all rows, the same on every shard
    key = json_digest({"files": files_fingerprint(ds.texts_a), "options": feat.get_options()})
    t0 = time.perf_counter()
    cluster = None
    if done_key == key and _rows(out) == len(ds):  # --resume of a call that had finished: the matrix is kept
        dest = out / FEATURES
    elif executor is None:
        dest = embed_to_npy(ds.texts_a, feat, out / FEATURES, chunk_size=chunk_size, key=key,
                            show_progress=show_progress)
    else:
        folder = cache_dir / "shards" / f"{featurizer}-{key[:20]}"
        paths, report = run_shards(executor, feat, list(ds.texts_a), None, folder, key, chunk_size,
                                   show_progress=show_progress, unit="image")
        dest = shards_to_npy(paths, out / FEATURES)
        shutil.rmtree(folder, ignore_errors=True)
        cluster = report.as_dict()
    secs = time.perf_counter() - t0
    write_text(out / "ids.txt", "".join(f"{i}\n" for i in ds.ids))
    write_text(out / "labels.txt", "".join(f"{lab}\n" for lab in ds.labels))
    bad = getattr(ds, "bad_images", [])
    if bad:
        write_text(out / "bad_images.txt", "".join(f"{b}\n" for b in bad))
        print(f"{len(bad)} unreadable image(s) left out, listed in {out / 'bad_images.txt'}", file=sys.stderr)
    shape = np.load(dest, mmap_mode="r").shape
    return EmbedBody(featurizer=featurizer, rows=int(shape[0]), dim=int(shape[1]), seconds=secs, features_key=key,
                     cluster=cluster, bad_images={"count": len(bad), "file": "bad_images.txt"} if bad else None)


def _finished_key(out: Path) -> str | None:
    """The key (inputs and options) results.json records for a finished, verified features.npy; else None."""
    try:
        res = read_results(out, names=(FEATURES,))
    except InputError:
        return None
    key = res.get("features_key")
    return key if isinstance(key, str) else None


def _rows(out: Path) -> int:
    try:
        return int(np.load(out / FEATURES, mmap_mode="r").shape[0])
    except (OSError, ValueError):
        return -1


def _result(data_path: str, seed: int, out: Path, found: EmbedBody) -> EmbedResult:
    """results.json's body and the one-line account, the same for text and images."""
    files = {"features": FEATURES, "ids": "ids.txt"}
    if (out / "labels.txt").exists():
        files["labels"] = "labels.txt"
    seconds = found.seconds or 0.0
    body = dataclasses.replace(found, data=data_path, seconds=round(seconds, 3), files=files)
    line = (f"{body.rows} x {body.dim} features ({body.featurizer}"
            f"{', view ' + body.view if body.view is not None else ''}) in {seconds:.1f} s "
            f"({body.rows / max(seconds, 1e-9):.0f} rows/s{', from cache' if body.from_cache else ''}"
            f"{_cluster_note(body.cluster)}) -> "
            f"{out / FEATURES}")
    return EmbedResult(out, body, line, files, data_path, seed)


def _cluster_note(report: dict[str, int | float | dict[str, int] | list[float]] | None) -> str:
    """``, 6 shards on 2 workers (2 reused)`` for the one-line account of a cluster run."""
    if not report or not report.get("shards"):
        return ""
    reused = f" ({report['reused']} reused)" if report.get("reused") else ""
    return f", {report['shards']} shards on {report.get('workers', 0)} worker(s){reused}"
