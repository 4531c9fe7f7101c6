"""From a dataset file to a filtered dataset: load → Φ (featurize) → AFLite → write back, with a summary.

This is what ``aflite run`` and ``aflite demo`` do; it composes :mod:`aflite.data`, :mod:`aflite.features`,
:mod:`aflite.core.filter` and :mod:`aflite.rundir` without adding logic of its own beyond the paper's protocol:
with the ``warmup`` featurizer the warm-up slice (t rows, as in the paper) trains Φ and is then discarded —
it is neither filtered nor written to the output.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import write_json, write_text
from aflite.core.filter import AFLite
from aflite.defaults import SNLI_DEFAULTS
from aflite.errors import InputError, ParameterError
from aflite.results import recording_warnings
from aflite.runs.summaries import PROBE_MEANING, label_shift, render_filter_summary, render_summary
from aflite.threads import limited


@dataclass
class RunResult:
    """What a run left behind: its folder, its summary (also in ``out/summary.json``), the kept mask and the
    filtered dataset (``filtered.<ext>`` for ``run``; ``kept_ids.txt`` for ``filter_files``)."""

    out: Path
    summary: dict[str, Any]
    keep: np.ndarray  # over the dataset's rows: kept in D(Φ) (warm-up rows are False)
    filtered_path: Path


def scaled_defaults(n: int) -> dict[str, int | float]:
    """Table 8's SNLI parameters scaled by n / 550,152 (m and τ do not scale): :class:`AFLite`'s own defaults
    (fractions of |D|) resolved by its own rule, so the defaults live in one place. The floors t >= 2 and n >= 3
    keep what ``aflite run`` chose on tiny data (|D| <= 16); above that the counts are AFLite's exactly."""
    from aflite.core.phase import resolve_size

    d = AFLite().get_params()
    return {
        "n_partitions": d["n_partitions"],
        "train_size": max(2, resolve_size(d["train_size"], n, "train_size")),
        "slice_size": resolve_size(d["slice_size"], n, "slice_size"),
        "target_size": max(3, resolve_size(d["target_size"], n, "target_size")),
        "threshold": d["threshold"],
    }


def _out_name(src: Path) -> str:
    """filtered<suffixes of the input>, e.g. ``filtered.tsv.gz`` or a folder name for HF datasets."""
    suffixes = "".join(src.suffixes[-2:]) if src.suffix == ".gz" else src.suffix
    return "filtered" + suffixes


@limited  # one thread policy (aflite.threads)
@recording_warnings()  # scikit-learn's warnings counted in results.json (aflite.results)
def run(
    data_path: str | Path,
    out: str | Path,
    *,
    featurizer: str = "ngram",
    view: str = "pair",
    params: dict[str, Any] | None = None,
    strategy: str = "slicing",
    seed: int = 0,
    groups: bool | str = True,
    cache_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    show_progress: bool = True,
    probe: bool = True,
    dataset_options: dict[str, Any] | None = None,
    featurizer_options: dict[str, Any] | None = None,
    device: str = "auto",
    storage: str = "float32",
    image_options: dict[str, Any] | None = None,
    link_dir: str | Path | None = None,
    aflite: AFLite | None = None,
    title: str | None = None,
    cluster: Any = None,
    cluster_scratch: str | Path | None = None,
) -> RunResult:
    """Filter a dataset file end to end. ``params`` overrides the scaled Table 8 defaults (counts or
    fractions of |D|: target_size, n_partitions, train_size, slice_size, threshold); ``device`` and ``storage``
    choose where the encoder and the ensemble run (see :class:`aflite.core.filter.AFLite`). Instead of ``params``,
    ``strategy``, ``seed``, ``device`` and ``storage``, an ``aflite=AFLite(...)`` may be given, as to
    :func:`filter_files`: its parameters are used (its default sizes, fractions of |D|, resolve to the same counts
    as the scaled defaults). ``groups``: True or
    ``"premise"`` (rows with one premise stay on one side of every partition), False or ``"none"``, or a column
    of the file (e.g. a counterfactual family id). ``overwrite`` starts over in an ``out`` that holds a run.
    ``title`` names the data in summary.md's heading (default: its path). ``cluster`` (``local``, ``local:N``, a
    scheduler address or an open :class:`aflite.core.backends.dask.DaskExecutor`) embeds Φ's chunks as shards on
    Dask workers (:mod:`aflite.runs.shards`; the same features, bit for bit) and fits the partitions there;
    ``cluster_scratch`` is the workers' shared folder for the filter's features (default a temporary folder)."""
    base: dict[str, Any] = {}
    if aflite is not None:  # one parameter space with filter_files: the estimator's own keywords
        if params is not None:
            raise ParameterError("give the AFLite parameters either as aflite= or as params=, not both")
        base = aflite.get_params()
        defaults = AFLite().get_params()  # a size left at its default is the scaled default (same counts)
        params = {k: base.pop(k) for k in ("target_size", "n_partitions", "train_size", "slice_size", "threshold")}
        params = {k: v for k, v in params.items() if v != defaults[k]}
        strategy, device, storage = base.pop("strategy"), base.pop("device"), base.pop("storage")
        rs = base.pop("random_state")
        if rs is not None:
            if isinstance(rs, bool) or not isinstance(rs, int | np.integer):
                raise ParameterError(f"aflite.random_state must be an int seed for run(), not {rs!r}")
            seed = int(rs)
    from aflite import data, features
    from aflite.rundir import run_filter

    out = Path(out)
    timings: dict[str, float] = {}
    t0 = t_call = time.perf_counter()
    group_spec = "premise" if groups is True else "none" if groups is False else str(groups)
    dopts = dict(dataset_options or {})
    if group_spec != "premise":  # premise is the loader's own default for pairs (no groups for single texts)
        dopts["groups"] = group_spec
    from aflite.data import images

    # images: an image folder, or an image featurizer on a table / HF folder of image paths (aflite.data.images)
    is_images = images.wants_images(data_path, featurizer)
    ds = (images.load_image_dataset(data_path, **(image_options or {})) if is_images
          else data.load_dataset(data_path, **dopts))
    timings["load_seconds"] = time.perf_counter() - t0
    n = len(ds)
    if link_dir is not None:  # checked now, not after the filter has run for an hour
        if not is_images:
            raise ParameterError("--link-dir builds links to kept images; this dataset holds text")
        from aflite.links import check_link_dir, check_link_names

        check_link_dir(link_dir)
        check_link_names(ds, by_label=ds.source.format != "imagefolder")
    if view in ("hypothesis",) and not ds.is_pair:
        raise ParameterError("view 'hypothesis' needs a pair dataset")
    if not is_images:
        data.check_view_texts(ds, view)  # a column empty in every row: nothing for Φ (before anything is written)
    # checks that need no features come before featurizing (minutes) and before anything is written
    classes, counts = np.unique(ds.labels, return_counts=True)
    if len(classes) < 2:
        raise InputError(f"{data_path}: every one of the {n:,} rows has the label {str(classes[0])!r}; AFLite needs at "
                         f"least two classes")
    probe_skipped = None
    if probe and not is_images:  # a probe D itself cannot train is known now, not after the filter
        from aflite.evaluate import probe_skip_reason

        probe_skipped = probe_skip_reason(ds.labels)
        probe_col = ds.source.columns.get("text_b" if ds.is_pair else "text_a")
        if probe_skipped is None and ds.empty_texts.get(str(probe_col), 0) == n:
            probe_skipped = f"column {probe_col!r} is empty in every row: the probe has no text to read"
        if probe_skipped is not None:
            probe = False
            print(f"note: the hypothesis-only probe is skipped: {probe_skipped}", file=sys.stderr)
    grp_all = ds.groups if group_spec != "none" else None
    if grp_all is not None:
        data.warn_twins(ds, {"pair": ("pair", "hypothesis")}.get(view, (view,)), group_spec)
    chosen = scaled_defaults(n)
    given = {k: v for k, v in (params or {}).items() if v is not None}
    af = AFLite(**{**base, **chosen, **given}, strategy=strategy, random_state=seed,  # type: ignore[arg-type]
                device=device, storage=storage)
    resolved = af.resolved_params(n)  # validates against |D| before any expensive step
    t = resolved["train_size"]

    from aflite.hashing import dataset_fingerprint, file_sha256
    from aflite.rundir import check_resume_dataset

    dataset_fp = dataset_fingerprint(ds.ids, ds.labels, ds.texts_a, ds.texts_b)
    if resume:  # another dataset is refused now, before anything is computed or cached
        check_resume_dataset(out, dataset_fp)
    texts_b = ds.texts_b
    fopts = dict(featurizer_options or {})
    if is_images:
        from aflite.features.registry import image_featurizer_options

        fopts = image_featurizer_options(featurizer, fopts)
    t0 = time.perf_counter()
    cache_path = Path(cache_dir) if cache_dir else out / "cache"
    cached_before = _files(cache_path) if resume else None
    from aflite.runs.shards import SHARDED_FEATURIZERS, ShardedTransform, use_cluster

    executor, release = use_cluster(cluster, cluster_scratch)
    if executor is not None:
        if featurizer not in SHARDED_FEATURIZERS:
            print(f"note: --featurizer {featurizer} runs in this process (no shards); the filter runs on the cluster",
                  file=sys.stderr)
        if af.executor is None:
            af.set_params(executor=executor)
    shards = ShardedTransform(executor) if executor is not None else None
    try:
        feats = features.featurize(
            ds.texts_a, texts_b, featurizer, view,
            cache_dir=cache_path,
            y=ds.labels.tolist() if featurizer == "warmup" else None,
            ids=ds.ids.tolist() if featurizer == "precomputed" else None,
            warmup_size=t if featurizer == "warmup" else 0.1,
            warmup_seed=seed,
            show_progress=show_progress,
            shards=shards,
            **fopts,
        )
    except BaseException:
        release()
        raise
    timings["featurize_seconds"] = time.perf_counter() - t0
    rows = np.asarray(feats.rows)
    X = feats.X
    if hasattr(X, "toarray"):
        release()
        raise ParameterError("AFLite needs dense features: use the ngram featurizer's default (dense) output")

    # the filter runs on D minus the warm-up slice, with the sizes chosen for D
    filt_params = {
        "target_size": resolved["target_size"],
        "n_partitions": resolved["n_partitions"],
        "train_size": t,
        "slice_size": resolved["slice_size"],
        "threshold": resolved["threshold"],
    }
    af.set_params(**filt_params)
    grp = grp_all[rows] if grp_all is not None else None
    y = ds.labels[rows]
    ids = ds.ids[rows]
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    extra = {
        # resolved, and relative to the run folder: report.html finds the texts from any current directory
        "dataset": str(Path(data_path).resolve()),
        "dataset_relative": os.path.relpath(Path(data_path).resolve(), out.resolve()),
        "dataset_fingerprint": dataset_fp,
        "dataset_sha256": file_sha256(data_path),  # the input's bytes, for a dataset card (aflite card)
        "dataset_size": n,
        "dropped_at_load": ds.dropped,
        **({"empty_texts_at_load": dict(ds.empty_texts)} if getattr(ds, "empty_texts", None) else {}),
        "featurizer": {"name": featurizer, "view": view, "options": feats.options, "dim": int(X.shape[1]),
                       "from_cache": feats.from_cache, "info": feats.info,
                       **({"cluster": shards.report.as_dict()} if shards is not None and shards.report else {})},
        "warmup_rows": int(len(feats.warmup_rows)),
        "scaled_defaults": {"scale": n / SNLI_DEFAULTS["dataset_size"], **chosen},
        "overrides": given,
    }
    extra["groups"] = group_spec if grp is not None else "none"
    try:
        summary = run_filter(af, X, y, ids, out, groups=grp, resume=resume, overwrite=overwrite,
                             show_progress=show_progress, extra=extra)
    except (InputError, ParameterError):
        if cached_before is not None:  # a refused --resume leaves the run's folder as it was found
            for f in sorted(_files(cache_path) - cached_before, key=lambda q: -len(q.parts)):
                if f.is_dir():
                    f.rmdir()
                else:
                    f.unlink(missing_ok=True)
        raise
    finally:
        release()  # the cluster opened here (an executor passed in is its owner's to close)
    if len(feats.warmup_rows):  # after the filter accepted the folder: a refused --resume writes nothing
        write_text(out / "warmup_ids.txt", "".join(f"{i}\n" for i in ds.ids[feats.warmup_rows]))
    else:  # an --overwrite of a warm-up run: its slice is not this run's
        (out / "warmup_ids.txt").unlink(missing_ok=True)
    timings["filter_seconds"] = time.perf_counter() - t0

    keep = np.zeros(n, dtype=bool)
    keep[rows[af.keep_mask_]] = True
    t0 = time.perf_counter()
    if is_images:
        removed = np.zeros(n, dtype=bool)
        removed[rows[~af.keep_mask_]] = True
        filtered_path = images.write_outputs(ds, keep, removed, out, _out_name(Path(data_path)), link_dir)
    else:
        filtered_path = data.write_filtered(ds, keep, out / _out_name(Path(data_path)))
    timings["write_seconds"] = time.perf_counter() - t0
    timings["featurize_rows_per_second"] = len(rows) / max(timings["featurize_seconds"], 1e-9)

    if probe and not is_images:  # the probe is a TF-IDF text model
        from aflite.evaluate import compare_partial_input

        t0 = time.perf_counter()
        probe_texts = texts_b if texts_b is not None else ds.texts_a
        sub = [probe_texts[i] for i in rows]
        from tqdm import tqdm

        # 5-fold CV on D, D(Φ) and 3 random subsets of |D(Φ)| rows: minutes on large sets, so it shows progress
        bar = tqdm(total=5, desc="probe (D, D(Φ), 3 random subsets)", unit="set", disable=not show_progress,
                   file=sys.stderr, dynamic_ncols=True)
        try:
            res = compare_partial_input(sub, y, af.keep_mask_, random_state=seed, progress=bar, groups=grp)
        finally:
            bar.close()
        summary["partial_input_probe"] = {
            "model": "TF-IDF word 1-2-gram logistic regression, 5-fold CV, on the "
            + ("hypothesis only" if texts_b is not None else "text")
            + (f"; folds keep each {group_spec} group on one side, as the filter's partitions do" if grp is not None
               else ""),
            "groups": group_spec if grp is not None else "none",
            "results": [_probe_row(r) for r in res],
            "meaning": PROBE_MEANING,
        }
        timings["probe_seconds"] = time.perf_counter() - t0
    elif probe_skipped is not None:
        summary["partial_input_probe"] = {"skipped": probe_skipped, "results": [], "meaning": PROBE_MEANING}
    summary["label_shift"] = label_shift(summary["label_counts_before"], summary["label_counts_after"])
    summary["timings"] = timings
    summary["filtered_dataset"] = str(filtered_path)
    from aflite.verdict import run_verdict

    if title:
        summary["title"] = title
    # the whole call (load, Φ, filter, probe, writing), not only the filter's part of it
    summary["filter_wall_seconds_this_call"] = summary.get("wall_seconds_this_call")
    summary["wall_seconds_this_call"] = time.perf_counter() - t_call
    summary["verdict"] = run_verdict(summary)
    write_json(out / "summary.json", summary)
    write_text(out / "summary.md", render_summary(summary, ds, rows, af))
    finish_folder(out, summary, command="run", dataset=ds)
    return RunResult(out, summary, keep, filtered_path)


def _files(folder: Path) -> set[Path]:
    """Every file and folder under ``folder`` (the folder itself too, when it exists)."""
    return {folder, *folder.rglob("*")} if folder.is_dir() else set()


def _probe_row(r: Any) -> dict[str, Any]:
    """One probe result as JSON: a set that could not be probed has no accuracy (null) and says why."""
    row = {**r.to_dict(), "delta_majority": r.accuracy - r.majority}
    if r.skipped is not None:
        row.update(accuracy=None, accuracy_std=None, delta_majority=None)
    return row


@recording_warnings()  # scikit-learn's warnings counted in results.json (aflite.results)
def filter_files(
    features: str | Path,
    labels: str | Path,
    out: str | Path,
    *,
    aflite: AFLite | None = None,
    ids: str | Path | None = None,
    groups: str | Path | None = None,
    feature_columns: list[str] | None = None,
    label: str | None = None,
    id_column: str | None = None,
    mmap: bool = False,
    resume: bool = False,
    overwrite: bool = False,
    show_progress: bool = True,
    extra: dict[str, Any] | None = None,
    cluster: Any = None,
    cluster_scratch: str | Path | None = None,
) -> RunResult:
    """AFLite on precomputed features and labels read from files (what ``aflite filter`` does).

    Reads the feature matrix (``.npy``, memory-mapped with ``mmap``, or numeric table columns), the labels
    and optional ids and groups (column ``group``), checks they line up, and runs ``aflite`` (default:
    :class:`AFLite` with its defaults) into the run directory ``out`` (see :mod:`aflite.rundir`). ``cluster``
    and ``cluster_scratch`` fit the partitions on a Dask executor, as in :func:`run` (an executor already set on
    ``aflite`` wins).
    """
    from aflite import data
    from aflite.rundir import run_filter

    out = Path(out)
    t_call = time.perf_counter()
    X = data.load_features(features, columns=feature_columns, mmap=mmap)
    y = data.load_labels(labels, column=label)
    id_arr = data.load_ids(ids, column=id_column) if ids is not None else np.arange(len(y))
    grp = data.load_labels(groups, column="group") if groups is not None else None
    data.check_aligned(X.shape[0], len(y), len(id_arr), files=(features, labels, ids))
    if grp is not None and len(grp) != len(y):
        raise InputError(f"{groups}: {len(grp)} groups for {len(y)} labels")
    if len(np.unique(id_arr)) != len(id_arr):
        raise InputError(f"{ids}: ids are not unique")
    af = aflite if aflite is not None else AFLite()
    from aflite.device import ensemble_device
    from aflite.runs.shards import use_cluster

    on = ensemble_device(af.device, af.executor or cluster) if af.model == "logistic" else "cpu"  # as the fit will
    info = {"inputs": {"features": str(features), "labels": str(labels), "ids": None if ids is None else str(ids)},
            "device": on, **(extra or {})}
    # where the partitions were fitted: an executor's type, a scheduler address, or None (this process)
    info.setdefault("cluster", type(cluster).__name__ if cluster is not None and not isinstance(cluster, str)
                    else cluster or None)
    executor, release = use_cluster(cluster, cluster_scratch) if af.executor is None else (None, lambda: None)
    try:
        if executor is not None:
            af.set_params(executor=executor)
        summary = run_filter(af, X, y, id_arr, out, groups=grp, resume=resume, overwrite=overwrite,
                             show_progress=show_progress, extra=info)
    finally:
        if executor is not None:
            af.set_params(executor=None)  # the caller's estimator does not keep an executor closed here
        release()
    from aflite.verdict import filter_verdict

    summary["filter_wall_seconds_this_call"] = summary.get("wall_seconds_this_call")
    summary["wall_seconds_this_call"] = time.perf_counter() - t_call  # the whole call, reading included
    summary["verdict"] = filter_verdict(summary)
    write_json(out / "summary.json", summary)
    write_text(out / "summary.md", render_filter_summary(summary))
    finish_folder(out, summary, command="filter")
    return RunResult(out, summary, np.asarray(af.keep_mask_), out / "kept_ids.txt")


def finish_folder(out: Path, summary: dict[str, Any], *, command: str, dataset: Any = None) -> None:
    """The last files of a run folder, the same from Python as from the CLI: ``results.json`` (the envelope of
    :mod:`aflite.results` and the summary; the CLI then stamps its argv) and ``report.html``, the explorer page
    built from them (``dataset``: the rows already loaded, so that the page does not read the file again)."""
    from aflite.report import write_page
    from aflite.results import write_results_json

    write_results_json(out, summary, command=command, seed=summary.get("seed"))
    write_page(out, dataset=dataset)
