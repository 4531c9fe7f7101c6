"""``aflite embed`` as a library call: compute Φ for a dataset file (text or images) and save it for ``filter``.

:func:`embed` writes ``OUT/features.npy`` (float32, memory-mappable), ``OUT/ids.txt``, ``OUT/labels.txt``
(``warmup_ids.txt`` for the warm-up Φ, ``bad_images.txt`` for skipped images), ``OUT/results.json`` and
``OUT/summary.md``: the same files whether it is called from Python or from the command line. Image runs are
written chunk by chunk into a memory-mapped file and an interrupted run resumes when called again. With
``cluster`` the chunks are shards embedded by Dask workers (:mod:`aflite.runs.shards`): the same features, bit
for bit, as one process on the same backend.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aflite.errors import OutputError, ParameterError
from aflite.results import recording_warnings

__all__ = ["FEATURES", "EmbedResult", "check_embed_out", "embed"]

FEATURES = "features.npy"  # OUT/features.npy: the one file `aflite filter --features` reads


@dataclass
class EmbedResult:
    """What :func:`embed` wrote: the folder, the body of results.json and the one-line account printed by the CLI."""

    out: Path
    results: dict[str, Any]
    line: str
    files: dict[str, str] = field(default_factory=dict)


def check_embed_out(out: str | os.PathLike[str], overwrite: bool = False, resume: bool = False) -> None:
    """Refuse, before anything is computed, to replace finished features without ``overwrite`` or ``resume`` (an
    unfinished run, OUT/features.npy.partial or the chunks in the cache, is resumed by the same call instead)."""
    done = Path(out) / FEATURES
    if overwrite and resume:
        raise ParameterError("--resume continues the embedding in OUT and --overwrite starts it over: give one")
    if done.exists() and not overwrite and not resume:
        raise OutputError(f"--out {out}: {done} exists; pass --overwrite to replace it, --resume to go on from it "
                          f"(and what the cache holds), or choose another --out")


@recording_warnings()  # scikit-learn's warnings counted in results.json (aflite.results)
def embed(data: str | os.PathLike[str], out: str | os.PathLike[str], *, featurizer: str = "ngram",
          view: str = "pair", model_path: str | None = None, warmup_size: float = 0.1, lr: float | None = None,
          cache_dir: str | os.PathLike[str] | None = None, seed: int = 0, device: str = "auto",
          image_size: int = 224, path_column: str | None = None, chunk_size: int = 4096,
          skip_bad_images: bool = False, dataset_options: dict[str, Any] | None = None,
          overwrite: bool = False, show_progress: bool = True, backend: str | None = None,
          cluster: Any = None, resume: bool = False) -> EmbedResult:
    """Featurize ``data`` with ``featurizer`` under ``view`` and write the files listed in the module docstring.

    ``data`` is read as images when it is an image folder or ``featurizer`` is an image featurizer
    (``efficientnet-lite0``, ``hf-image``); otherwise as a text dataset (``dataset_options``: the column keywords
    of :func:`aflite.data.load_dataset`). ``warmup_size`` is a count, or a fraction of the rows when below 1;
    ``cache_dir`` defaults to ``out/cache``; ``backend`` is the encoder's runtime
    (torch, onnx, onnx-int8; default auto, :func:`aflite.features.onnx_backend.resolve_backend`); ``chunk_size``
    rows are embedded (and cached) at a time. ``cluster`` (``local``, ``local:N``, a scheduler address or an open
    :class:`aflite.core.backends.dask.DaskExecutor`) embeds the chunks as shards on Dask workers
    (:mod:`aflite.runs.shards`; the cache must be storage every worker can write). ``resume`` continues an
    interrupted call in ``out`` (as a plain call again does) and also accepts finished features there: text is
    read back from the cache, a finished image matrix of the same inputs and options is kept. Returns an
    :class:`EmbedResult`.
    """
    from aflite.data import images

    out = Path(out)
    check_embed_out(out, overwrite, resume)
    if cluster is not None:
        from aflite.runs.shards import check_shardable

        check_shardable(featurizer)
    from aflite.features.registry import check_backend

    check_backend(featurizer, backend)
    cache_dir = Path(cache_dir) if cache_dir is not None else out / "cache"
    if overwrite:  # start over: no partial image run is resumed
        for name in (FEATURES + ".partial", FEATURES + ".progress.json"):
            (out / name).unlink(missing_ok=True)
    from aflite.runs.shards import use_cluster

    executor, release = use_cluster(cluster)
    try:
        if images.wants_images(data, featurizer):
            opts = dict(dataset_options or {})
            return _embed_images(data, out, featurizer=featurizer, model_path=model_path, device=device, resume=resume,
                                 image_size=image_size, chunk_size=chunk_size, seed=seed,
                                 show_progress=show_progress, cache_dir=cache_dir, executor=executor,
                                 backend=backend, image_options={"path_column": path_column, "label": opts.get("label"),
                                                "id_column": opts.get("id_column"),
                                                "skip_bad_images": skip_bad_images})
        return _embed_text(data, out, featurizer=featurizer, view=view, model_path=model_path, device=device,
                           warmup_size=warmup_size, lr=lr, cache_dir=cache_dir, seed=seed, backend=backend,
                           dataset_options=dataset_options, show_progress=show_progress, chunk_size=chunk_size,
                           executor=executor)
    finally:
        release()


def _embed_text(data: str | os.PathLike[str], out: Path, *, featurizer: str, view: str, model_path: str | None,
                device: str, warmup_size: float, lr: float | None, cache_dir: Path, seed: int,
                backend: str | None, dataset_options: dict[str, Any] | None, show_progress: bool,
                chunk_size: int, executor: Any) -> EmbedResult:
    from aflite import data as D
    from aflite import features
    from aflite.atomic import write_npy, write_text

    ds = D.load_dataset(data, **(dataset_options or {}))
    D.check_view_texts(ds, view)
    opts: dict[str, Any] = {}
    if model_path:
        opts["model_path"] = model_path
    if featurizer in ("minilm", "warmup"):
        opts["device"] = device
    if backend is not None and featurizer in ("minilm", "warmup", "efficientnet-lite0", "hf-image"):
        opts["backend"] = backend
    if lr is not None and featurizer == "warmup":
        opts["lr"] = lr
    ws: float | int = warmup_size if warmup_size < 1 else int(warmup_size)
    from aflite.runs.shards import ShardedTransform

    shards = ShardedTransform(executor) if executor is not None else None
    t0 = time.perf_counter()
    f = features.featurize(ds.texts_a, ds.texts_b, featurizer, view, cache_dir=cache_dir,
                           y=ds.labels.tolist() if featurizer == "warmup" else None,
                           warmup_size=ws, warmup_seed=seed, show_progress=show_progress, chunk_size=chunk_size,
                           shards=shards, **opts)
    secs = time.perf_counter() - t0
    X = f.X.toarray() if hasattr(f.X, "toarray") else f.X
    write_npy(out / FEATURES, X)
    write_text(out / "ids.txt", "".join(f"{i}\n" for i in ds.ids[f.rows]))
    write_text(out / "labels.txt", "".join(f"{lab}\n" for lab in ds.labels[f.rows]))
    extra: dict[str, Any] = {}
    if shards is not None:
        extra["cluster"] = shards.report.as_dict() if shards.report is not None else {"shards": 0}
    if len(f.warmup_rows):
        write_text(out / "warmup_ids.txt", "".join(f"{i}\n" for i in ds.ids[f.warmup_rows]))
        extra["warmup_ids"] = "warmup_ids.txt"
    return _write_outputs(data, featurizer, seed, out, rows=int(X.shape[0]), dim=int(X.shape[1]), seconds=secs,
                          view=view, from_cache=bool(f.from_cache), **extra)


def _embed_images(data: str | os.PathLike[str], out: Path, *, featurizer: str, model_path: str | None, device: str,
                  image_size: int, chunk_size: int, seed: int, show_progress: bool, cache_dir: Path, executor: Any,
                  backend: str | None, image_options: dict[str, Any], resume: bool = False) -> EmbedResult:
    """OUT/features.npy written chunk by chunk (memory-mapped; an interrupted run resumes when the same call is
    made again), OUT/ids.txt and OUT/labels.txt, ready for ``aflite filter --features OUT/features.npy --mmap``.
    On a cluster the chunks are shards in ``cache_dir/shards/`` (resumed there), assembled into
    OUT/features.npy and then removed."""
    from aflite.atomic import write_text
    from aflite.data.images import files_fingerprint, load_image_dataset
    from aflite.features import IMAGE_FEATURIZERS, make_featurizer
    from aflite.features.npy import embed_to_npy
    from aflite.hashing import json_digest

    if featurizer not in IMAGE_FEATURIZERS:
        raise ParameterError(f"--featurizer {featurizer} on images: aflite embed takes "
                             f"{' or '.join(IMAGE_FEATURIZERS)} (the warm-up Φ runs inside aflite run)")
    ds = load_image_dataset(data, **image_options)
    opts: dict[str, Any] = {"device": device, "image_size": image_size, "show_progress": show_progress}
    if model_path:
        opts["model_path"] = model_path
    if backend is not None:
        opts["backend"] = backend
    feat = make_featurizer(featurizer, **opts)
    feat.fit(list(ds.texts_a))  # the int8 backend's calibration sample: all rows, the same on every shard
    key = json_digest({"files": files_fingerprint(ds.texts_a), "options": feat.get_options()})
    t0 = time.perf_counter()
    more: dict[str, Any] = {"features_key": key}
    if resume and _finished(out, key, len(ds)):  # --resume of a call that had finished: the matrix is kept
        dest = out / FEATURES
    elif executor is None:
        dest = embed_to_npy(ds.texts_a, feat, out / FEATURES, chunk_size=chunk_size, key=key,
                            show_progress=show_progress)
    else:
        import shutil

        from aflite.runs.shards import run_shards, shards_to_npy

        folder = cache_dir / "shards" / f"{featurizer}-{key[:20]}"
        paths, report = run_shards(executor, feat, list(ds.texts_a), None, folder, key, chunk_size,
                                   show_progress=show_progress, unit="image")
        dest = shards_to_npy(paths, out / FEATURES)
        shutil.rmtree(folder, ignore_errors=True)
        more["cluster"] = report.as_dict()
    secs = time.perf_counter() - t0
    write_text(out / "ids.txt", "".join(f"{i}\n" for i in ds.ids))
    write_text(out / "labels.txt", "".join(f"{lab}\n" for lab in ds.labels))
    bad = getattr(ds, "bad_images", [])
    if bad:
        write_text(out / "bad_images.txt", "".join(f"{b}\n" for b in bad))
        more["bad_images"] = {"count": len(bad), "file": "bad_images.txt"}
        print(f"{len(bad)} unreadable image(s) left out, listed in {out / 'bad_images.txt'}", file=sys.stderr)
    shape = np.load(dest, mmap_mode="r").shape
    return _write_outputs(data, featurizer, seed, out, rows=int(shape[0]), dim=int(shape[1]), seconds=secs, **more)


def _finished(out: Path, key: str, rows: int) -> bool:
    """Whether OUT/features.npy is the finished matrix of these inputs and options (its results.json says so)."""
    import json

    try:
        res = json.loads((out / "results.json").read_text(encoding="utf-8"))
        shape = np.load(out / FEATURES, mmap_mode="r").shape
    except (OSError, ValueError):
        return False
    return isinstance(res, dict) and res.get("features_key") == key and shape[0] == rows


def _write_outputs(data: str | os.PathLike[str], featurizer: str, seed: int, out: Path, *, rows: int, dim: int,
                   seconds: float, **more: Any) -> EmbedResult:
    """OUT/results.json and OUT/summary.md, the same for text and images."""
    from aflite.atomic import write_text
    from aflite.results import write_results_json

    files = {"features": FEATURES, "ids": "ids.txt"}
    if (out / "labels.txt").exists():
        files["labels"] = "labels.txt"
    res = {"data": str(data), "featurizer": featurizer, "rows": rows, "dim": dim,
           "seconds": round(seconds, 3), "files": files, **more}
    write_results_json(out, {"seed": seed, **res}, command="embed")
    line = (f"{rows} x {dim} features ({featurizer}"
            f"{', view ' + str(more['view']) if 'view' in more else ''}) in {seconds:.1f} s "
            f"({rows / max(seconds, 1e-9):.0f} rows/s{', from cache' if more.get('from_cache') else ''}"
            f"{_cluster_note(more.get('cluster'))}) -> "
            f"{out / FEATURES}")
    use = (f"aflite filter --features {out / FEATURES} --ids {out / 'ids.txt'}"
           + (f" --labels {out / 'labels.txt'}" if "labels" in files else "") + " --mmap --out RUN")
    write_text(out / "summary.md", f"# aflite embed: {data}\n\n- {line}\n\nNext: `{use}`\n")
    return EmbedResult(out, res, line, files)


def _cluster_note(report: dict[str, Any] | None) -> str:
    """``, 6 shards on 2 workers (2 reused)`` for the one-line account of a cluster run."""
    if not report or not report.get("shards"):
        return ""
    reused = f" ({report['reused']} reused)" if report.get("reused") else ""
    return f", {report['shards']} shards on {report.get('workers', 0)} worker(s){reused}"
