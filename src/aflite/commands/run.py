"""``aflite run`` and ``aflite demo``: load → Φ (featurize) → AFLite → write back, with a summary.

No logic beyond the paper's protocol: a warm-up Φ (``warmup``) trains on t rows, which are then neither filtered
nor written to the output.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Unpack

import numpy as np

from aflite import data
from aflite.atomic import write_text
from aflite.commands.filter import FilterResult, check_runtime, run_filter
from aflite.commands.run_params import (
    RunKeywords,
    estimator_params,
    run_keywords,
    scaled_defaults,
    scaled_for,
)
from aflite.commands.summary_md import PROBE_MEANING, render_summary, run_verdict
from aflite.core.filter import AFLite
from aflite.data import images
from aflite.data.memory import FILTERED, check_writable, rows_sha256
from aflite.data.source import refuse_image_options
from aflite.defaults import SNLI_DEFAULTS
from aflite.errors import InputError, ParameterError, takes_mappings
from aflite.evaluate import compare_partial_input, probe_skip_reason
from aflite.evaluate.probe import ProbeResult
from aflite.features import Features, featurize_dataset
from aflite.features.registry import featurizer_options as featurizer_options_for
from aflite.features.registry import spec
from aflite.features.shards import ShardedTransform
from aflite.hashing import dataset_fingerprint, file_sha256
from aflite.links import check_link_dir, check_link_names
from aflite.option import OptionValue
from aflite.progress import tqdm  # Jupyter: a widget bar, or none without ipywidgets
from aflite.report.pages import Rows
from aflite.rundir.folder import RunFolder, claims
from aflite.rundir.lock import pause_point
from aflite.rundir.names import (
    CHECKPOINT,
    INSTANCES,
    KEPT_CSV,
    KEPT_IDS,
    PAGE,
    REMOVED_CSV,
    REMOVED_IDS,
    RESULTS,
    SUMMARY_MD,
    WARMUP_IDS,
)
from aflite.rundir.results import Table, recording_warnings
from aflite.rundir.schema import FeaturizerRecord, LabelShift, ProbeRecord, ProbeRow, RunBody
from aflite.threads import limited

__all__ = ["RunResult", "run", "scaled_defaults"]

@dataclass(repr=False)  # Result.__repr__: one line, not the arrays
class RunResult(FilterResult):
    """What a run left behind; ``dataset`` and ``rows`` give summary.md its examples and the page its texts.

    Parameters
    ----------
    out : Path or None
        The run folder (None: nothing was written).
    body : RunBody
        results.json's body (``summary``: as JSON).
    keep : numpy.ndarray
        The kept mask over the dataset's rows (warm-up rows are False).
    filtered_path : Path or None
        The filtered data file written.
    ids : numpy.ndarray
        The ids of the rows the filter saw, in its order.
    labels : numpy.ndarray
        Their labels.
    state : object
        The filter's final state (p̃, the phase each row was removed in).
    dataset : Dataset, optional
        The dataset read.
    rows : numpy.ndarray, optional
        The dataset rows the filter saw.
    warmup_rows : numpy.ndarray, optional
        The rows that trained a warm-up Φ (left out of the filter).
    """

    command: ClassVar[str] = "run"
    dataset: Any = None
    rows: np.ndarray | None = None
    warmup_rows: np.ndarray | None = None  # written as warmup_ids.txt

    @property
    def filtered(self) -> Any:
        """The kept rows of an in-memory input in its own type (a DataFrame keeps its index, column order and dtypes);
        None for a file or folder (see ``filtered_path``)."""
        if self.dataset is None or self.dataset.source.memory is None:
            return None
        return data.filtered_rows(self.dataset, self.keep)

    def scores_index(self) -> Any:
        """A DataFrame input's index labels of the filtered rows (:attr:`scores` is indexed by them)."""
        src = None if self.dataset is None else self.dataset.source
        if src is None or data.memory_kind(src.memory) != "pandas DataFrame" or self.rows is None:
            return None
        return src.memory.index[src.row_index[self.rows]]

    def page_rows(self, table: Table) -> Rows:
        """The per-row table plus, from the dataset in memory, the texts and warm-up slice or the image paths."""
        rows = super().page_rows(table)
        ds = rows.dataset = self.dataset
        if ds is not None and self.warmup_rows is not None:
            rows.warmup_ids = [str(i) for i in ds.ids[self.warmup_rows]]
        if ds is not None and ds.modality == "image" and self.rows is not None:
            paths = ds.other_columns.get("_path", ds.ids)  # what data.images writes to kept.csv/removed.csv
            rows.images, rows.image_paths = True, [str(paths[r]) for r in self.rows]
        return rows

    def summary_md(self) -> str:
        """summary.md, with the probe and examples of kept and removed rows."""
        assert self.state is not None and self.rows is not None
        return render_summary(self.body, self.dataset, self.rows, self.state.predictability, self.state.keep)


def _out_name(src: Path) -> str:
    """filtered<suffixes of the input>, e.g. ``filtered.tsv.gz`` or a folder name for HF datasets."""
    suffixes = "".join(src.suffixes[-2:]) if src.suffix == ".gz" else src.suffix
    return "filtered" + suffixes


def _featurizer_options(featurizer: str, given: dict[str, OptionValue] | None,
                        ) -> tuple[dict[str, OptionValue], OptionValue]:
    """The featurizer's options (an untaken one refused), and the image size: checked against the data later."""
    given = dict(given or {})
    return featurizer_options_for(featurizer, **given), given.get("image_size")


def _open(data_path: Any, featurizer: str, group_spec: str, dataset_options: dict[str, Any] | None,
          image_size: Any = None) -> Any:
    """The dataset as the featurizer reads it; image options on text data are refused (they would go unread)."""
    loader = {k: v for k, v in (dataset_options or {}).items() if v is not None}
    if group_spec != "premise":  # premise is the loader's own default for pairs (no groups for single texts)
        loader["groups"] = group_spec
    ds = data.open_dataset(data_path, reads=spec(featurizer).modality, **loader)
    refuse_image_options(data_path, ds.modality, {"skip_bad_images": loader.get("skip_bad_images"),
                                                  "image_size": image_size})
    return ds


@contextlib.contextmanager
def _refused_resume_leaves_no_cache(cache: Path | None, before: set[Path] | None) -> Iterator[None]:
    """A refused ``--resume`` leaves the folder as found: the cache files this call made are removed."""
    try:
        yield
    except (InputError, ParameterError):
        if before is not None and cache is not None:
            _remove_new(cache, before)
        raise


def _check_before_features(ds: Any, data_path: Any, view: str, link_dir: Any, probe: bool,
                           writes: bool) -> str | None:
    """Every check that needs no features, before Φ (minutes) and any write; returns why the probe is skipped."""
    is_images = ds.modality == "image"
    if writes and ds.source.memory is not None:
        check_writable(ds)  # a DataFrame Parquet cannot hold is refused now, not after the filter
    if link_dir is not None:  # checked now, not after the filter has run for an hour
        if not is_images:
            raise ParameterError("--link-dir builds links to kept images; this dataset holds text")
        check_link_dir(link_dir)
        check_link_names(ds, by_label=ds.source.format != "imagefolder")
    if view in ("hypothesis",) and not ds.is_pair:
        raise ParameterError("view 'hypothesis' needs a pair dataset")
    if not is_images:
        data.check_view_texts(ds, view)  # a column empty in every row: nothing for Φ (before anything is written)
    classes = np.unique(ds.labels)
    if len(classes) < 2:
        raise InputError(f"{data_path}: every one of the {len(ds):,} rows has the label {str(classes[0])!r}; AFLite "
                         f"needs at least two classes")
    if not probe or is_images:  # the probe is a TF-IDF text model
        return None
    skipped = probe_skip_reason(ds.labels)  # a probe D itself cannot train is known now, not after the filter
    probe_col = ds.source.columns.get("text_b" if ds.is_pair else "text_a")
    if skipped is None and ds.empty_texts.get(str(probe_col), 0) == len(ds):
        skipped = f"column {probe_col!r} is empty in every row: the probe has no text to read"
    if skipped is not None:
        print(f"note: the hypothesis-only probe is skipped: {skipped}", file=sys.stderr)
    return skipped


def _featurize(ds: Any, featurizer: str, view: str, af: AFLite, t: int, seed: int, cache: Path | None, *,
               show_progress: bool, options: dict[str, OptionValue]) -> tuple[Features, ShardedTransform | None]:
    """Φ of the dataset, in shards on ``af.executor``'s workers when it has one; also the shards' runner."""
    if af.executor is not None and not spec(featurizer).shards:
        print(f"note: --featurizer {featurizer} runs in this process (no shards); the filter runs on the cluster",
              file=sys.stderr)
    shards = ShardedTransform(af.executor) if af.executor is not None else None
    feats = featurize_dataset(ds, featurizer, view, cache, warmup_size=t, warmup_seed=seed,
                              show_progress=show_progress, shards=shards, **options)
    if hasattr(feats.X, "toarray"):
        raise ParameterError("AFLite needs dense features: use the ngram featurizer's default (dense) output")
    return feats, shards


PROBE_FOLDS = 5  # the probe's k: its bar has 5 sets · k folds, one step per fold


def _probe(ds: Any, rows: np.ndarray, res: FilterResult, seed: int, show_progress: bool, grp: np.ndarray | None,
           group_spec: str) -> ProbeRecord:
    """summary.md's hypothesis-only probe: 5-fold CV on D, D(Φ) and 3 random |D(Φ)|-row subsets (minutes, so a
    bar), its folds keeping the run's groups."""
    assert res.labels is not None
    probe_texts = ds.texts_b if ds.texts_b is not None else ds.texts_a
    bar = tqdm(total=5 * PROBE_FOLDS, desc="probe (D, D(Φ), 3 random subsets)", unit="fold", disable=not show_progress,
               file=sys.stderr, dynamic_ncols=True)
    try:
        found = compare_partial_input([probe_texts[i] for i in rows], res.labels, res.keep, random_state=seed,
                                      folds=PROBE_FOLDS, progress=bar, groups=grp)
    finally:
        bar.close()
    model = ("TF-IDF word 1-2-gram logistic regression, 5-fold CV, on the "
             + ("hypothesis only" if ds.texts_b is not None else "text")
             + (f"; folds keep each {group_spec} group on one side, as the filter's partitions do"
                if grp is not None else ""))
    return ProbeRecord([_probe_row(r) for r in found], PROBE_MEANING, model=model,
                       groups=group_spec if grp is not None else "none")


def _run_body(body: RunBody, data_path: Any, out: Path | None, ds: Any, dataset_fp: str, featurizer: str, view: str,
              feats: Features, shards: ShardedTransform | None, chosen: dict[str, float],
              given: dict[str, OptionValue], groups: str, dataset_options: dict[str, Any] | None = None,
              ) -> RunBody:
    """The filter's body plus the data read (a file also relative to the run folder, so the page finds the texts
    from anywhere; its sha256 for a card), its column options (the page reads the rows back with them), Φ and the
    parameters' origin."""
    memory = ds.source.memory is not None
    where = None if memory else Path(data_path).resolve()
    return dataclasses.replace(
        body, dataset=data.source_name(data_path) if where is None else str(where),
        dataset_relative=None if where is None or out is None else os.path.relpath(where, out.resolve()),
        dataset_fingerprint=dataset_fp, dataset_sha256=rows_sha256(ds) if memory else file_sha256(data_path),
        dataset_sha256_of="rows" if memory else None,
        dataset_options={k: v for k, v in (dataset_options or {}).items() if isinstance(v, str)},
        dataset_size=len(ds), dropped_at_load=ds.dropped,
        empty_texts_at_load=dict(ds.empty_texts) if getattr(ds, "empty_texts", None) else None,
        featurizer=FeaturizerRecord(featurizer, view, feats.options, int(feats.X.shape[1]), feats.from_cache,
                                    feats.info, shards.report.as_dict() if shards is not None and shards.report
                                    else None),
        warmup_rows=int(len(feats.warmup_rows)), modality=ds.modality,
        scaled_defaults={"scale": len(ds) / SNLI_DEFAULTS["dataset_size"], **chosen}, overrides=given, groups=groups)


def _complete(body: RunBody, timings: dict[str, float], filtered_path: Path | None, title: str | None,
              t_call: float) -> RunBody:
    """The body's last fields; the wall time is the whole call's, not only the filter's."""
    body = dataclasses.replace(
        body, label_shift=LabelShift.between(body.label_counts_before, body.label_counts_after), timings=timings,
        filtered_dataset=None if filtered_path is None else str(filtered_path), title=title or None,
        filter_wall_seconds_this_call=body.wall_seconds_this_call, wall_seconds_this_call=time.perf_counter() - t_call)
    return dataclasses.replace(body, verdict=run_verdict(body))


def _write_data(ds: Any, rows: np.ndarray, feats: Features, res: FilterResult, out: Path | None, data_path: Any,
                link_dir: Any) -> tuple[np.ndarray, Path | None]:
    """Writes the warm-up ids and the kept rows (in-memory data: Parquet); returns (kept mask, filtered file)."""
    keep = np.zeros(len(ds), dtype=bool)
    keep[rows[res.keep]] = True
    if out is None:
        return keep, None
    if len(feats.warmup_rows):  # after the filter accepted the folder: a refused --resume writes nothing
        write_text(out / WARMUP_IDS, "".join(f"{i}\n" for i in ds.ids[feats.warmup_rows]))
    if ds.modality == "image":
        removed = np.zeros(len(ds), dtype=bool)
        removed[rows[~res.keep]] = True
        return keep, images.write_outputs(ds, keep, removed, out, _out_name(Path(data_path)), (KEPT_CSV, REMOVED_CSV),
                                           link_dir)
    name = FILTERED if ds.source.memory is not None else _out_name(Path(data_path))
    return keep, data.write_filtered(ds, keep, out / name)


@claims("run")  # a path given as out is claimed as the CLI claims --out
@limited  # one thread policy (aflite.threads)
@recording_warnings()  # scikit-learn's warnings counted in results.json (aflite.rundir.results)
@takes_mappings("dataset_options", "featurizer_options")
def run(data_path: Any, out: str | os.PathLike[str] | RunFolder | None = None, *, featurizer: str = "ngram",
        view: str = "pair", params: AFLite | Mapping[str, Any] | None = None, groups: bool | str = True,
        cache_dir: str | os.PathLike[str] | None = None, resume: bool = False, overwrite: bool = False,
        show_progress: bool = True, probe: bool = True, dataset_options: dict[str, Any] | None = None,
        featurizer_options: dict[str, OptionValue] | None = None, link_dir: str | os.PathLike[str] | None = None,
        title: str | None = None, **keywords: Unpack[RunKeywords]) -> RunResult:
    """Filter a dataset end to end (``aflite run``): load, featurize (Φ), run AFLite, write the kept rows back.

    Parameters
    ----------
    data_path : path, pandas.DataFrame, pyarrow.Table or datasets.Dataset
        A dataset file or folder (SNLI/MNLI JSONL, GLUE TSV, CSV/TSV/JSONL/Parquet, a HF dataset folder, a folder of
        images), or rows in memory (read as text; ``filtered`` is then the kept rows in the same type, and ``out``
        gets filtered.parquet). Its columns are named by the column keywords or ``dataset_options``, else detected.
    out : path or RunFolder, optional
        The run folder to write (a path is claimed as the command line claims ``--out``). None writes nothing but
        Φ's cache in ``cache_dir``: the same result, its ``scores`` and ``verdict``.
    featurizer : str, default "ngram"
        The registered featurizer giving Φ (``aflite run --help`` lists them).
    view : str, default "pair"
        Which text Φ reads: "pair", "hypothesis" or "premise".
    params : AFLite or dict, optional
        AFLite's parameters: an :class:`AFLite` estimator, or a dict of its parameter names (``n_partitions``,
        ``strategy``, ``device``, ``storage``, ``random_state``, ``executor``, ...). Sizes left unset are Table 8's
        SNLI defaults scaled to |D| (:func:`scaled_defaults`); ``random_state`` (default 0) seeds every random
        choice of the run (the filter, a warm-up Φ, the probe); ``executor`` (a
        :class:`~aflite.core.backends.dask.DaskExecutor`, closed by its owner) embeds Φ in shards on its Dask
        workers and fits the partitions there.
    groups : bool or str, default True
        Rows kept on one side of every partition: True or "premise" (pairs sharing a premise), False or "none",
        "twins" (identical texts), or a column name.
    cache_dir : path, optional
        Where Φ is cached (default: ``out/cache``; nowhere without ``out``).
    resume : bool, default False
        Continue the run in ``out`` from its last checkpoint (same data and parameters).
    overwrite : bool, default False
        Start over in an ``out`` that holds a run (only what aflite wrote there is replaced).
    show_progress : bool, default True
        Show progress bars.
    probe : bool, default True
        Run the hypothesis-only probe on D, D(Φ) and random subsets (its table in summary.md).
    dataset_options : dict, optional
        The loader's keywords (:func:`aflite.data.open_dataset`): ``file_format``, ``max_cell_bytes``, and for
        images ``skip_bad_images``; the column keywords may be given here too.
    featurizer_options : dict, optional
        The featurizer's options (``model_path``, ``device``, ``image_size``, ...); one it does not take is
        refused.
    link_dir : path, optional
        Images only: also build a folder of symlinks to the kept images (a new or empty folder).
    title : str, optional
        What summary.md and the page call the data.
    **keywords
        The column keywords of :class:`aflite.data.Columns` (``text_a=``, ``text_b=``, ``label=``,
        ``id_column=``, ``path_column=``, ``label_map=``) and the sizes of :class:`FilterSizes`
        (``target_size=``, ``n_partitions=``, ``train_size=``, ``slice_size=``, ``threshold=``: counts, or fractions
        of |D| below 1), the same as in ``dataset_options`` and ``params``.

    Returns
    -------
    RunResult
        The kept mask, the scores, the filtered rows (``filtered``), the summary and the folder.
    """
    dataset_options, params = run_keywords(dataset_options, params, dict(keywords))
    base, given, fixed = estimator_params(params)
    seed = fixed["random_state"]
    featurizer_options, image_size = _featurizer_options(featurizer, featurizer_options)  # refused: untaken
    folder = None if out is None else RunFolder.of(out, "run")
    if folder is None and (resume or link_dir is not None):
        raise ParameterError("resume and link_dir need a run folder: give out")
    timings: dict[str, float] = {}
    t0 = t_call = time.perf_counter()
    group_spec = "premise" if groups is True else "none" if groups is False else str(groups)
    ds = _open(data_path, featurizer, group_spec, dataset_options, image_size)
    timings["load_seconds"] = time.perf_counter() - t0
    n = len(ds)
    probe_skipped = _check_before_features(ds, data.source_name(data_path), view, link_dir, probe, folder is not None)
    probe = probe and ds.modality != "image" and probe_skipped is None
    grp_all = ds.groups if group_spec != "none" else None
    if grp_all is not None:
        data.warn_twins(ds, {"pair": ("pair", "hypothesis")}.get(view, (view,)), group_spec)
    chosen = scaled_for(n, given, data.source_name(data_path))
    af = AFLite(**{**base, **chosen, **given}, **fixed)
    resolved = af.resolved_params(n)  # validates against |D| before any expensive step
    check_runtime(af)  # the device, storage and executor too: a refusal leaves the folder as it was
    dataset_fp = dataset_fingerprint(ds.ids, ds.labels, ds.texts_a, ds.texts_b)
    if folder is not None:  # a resume from another dataset, a file of the user's: refused now, not after Φ
        folder.check_start(resume=resume, dataset_fp=dataset_fp)
        folder.check_writes(_writes(ds, data_path, featurizer), inputs=[data_path])
    t0, cache_path = time.perf_counter(), _cache(cache_dir, folder)
    cached_before = _files(cache_path) if resume and cache_path is not None else None
    feats, shards = _featurize(ds, featurizer, view, af, resolved.train_size, seed, cache_path,
                               show_progress=show_progress, options=dict(featurizer_options or {}))
    timings["featurize_seconds"] = time.perf_counter() - t0
    rows = np.asarray(feats.rows)
    af.set_params(target_size=resolved.target_size, n_partitions=resolved.n_partitions,  # the filter runs on
                  train_size=resolved.train_size, slice_size=resolved.slice_size,  # D minus the warm-up slice
                  threshold=resolved.threshold)
    grp = grp_all[rows] if grp_all is not None else None
    where = None if folder is None else folder.path
    if where is not None:
        where.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with _refused_resume_leaves_no_cache(cache_path, cached_before):
        res = run_filter(af, feats.X, ds.labels[rows], ds.ids[rows], folder, groups=grp, resume=resume,
                         overwrite=overwrite, show_progress=show_progress, dataset_fp=dataset_fp)
    body = _run_body(res.body, data_path, where, ds, dataset_fp, featurizer, view, feats, shards, chosen, given,
                     group_spec if grp is not None else "none", dataset_options)
    timings["filter_seconds"], t0 = time.perf_counter() - t0, time.perf_counter()
    keep, filtered_path = _write_data(ds, rows, feats, res, where, data_path, link_dir)
    pause_point("filtered")  # a test's child stops here to be killed (aflite.rundir.lock.pause_point)
    timings["write_seconds"] = time.perf_counter() - t0
    timings["featurize_rows_per_second"] = len(rows) / max(timings["featurize_seconds"], 1e-9)
    if probe or probe_skipped is not None:
        t0 = time.perf_counter()
        body = dataclasses.replace(body, partial_input_probe=_probe(ds, rows, res, seed, show_progress, grp, group_spec)
                                   if probe else ProbeRecord([], PROBE_MEANING, skipped=probe_skipped))
        timings.update({"probe_seconds": time.perf_counter() - t0} if probe else {})
    body = _complete(body, timings, filtered_path, title, t_call)
    result = RunResult(where, body, keep, filtered_path, res.ids, res.labels, res.state, ds, rows, feats.warmup_rows)
    if folder is not None:
        folder.finish(result)
    return result


def _writes(ds: Any, data_path: Any, featurizer: str) -> list[str]:
    """The names a run writes, checked against the user's files before anything is written."""
    kept = [KEPT_CSV, REMOVED_CSV] if ds.modality == "image" else []
    name = FILTERED if ds.source.memory is not None else _out_name(Path(data_path))
    return [name, *kept, KEPT_IDS, REMOVED_IDS, INSTANCES, CHECKPOINT, SUMMARY_MD, PAGE, RESULTS,
            *([WARMUP_IDS] if spec(featurizer).needs_labels else [])]


def _cache(cache_dir: str | os.PathLike[str] | None, folder: RunFolder | None) -> Path | None:
    """Where Φ is cached: ``cache_dir``, else the run folder's ``cache/``; nowhere without either."""
    return Path(cache_dir) if cache_dir else None if folder is None else folder.path / "cache"


def _files(folder: Path) -> set[Path]:
    """``folder`` and everything under it."""
    return {folder, *folder.rglob("*")} if folder.is_dir() else set()


def _remove_new(folder: Path, before: set[Path]) -> None:
    """Remove what appeared under ``folder`` since ``before`` was taken (deepest first)."""
    for f in sorted(_files(folder) - before, key=lambda q: -len(q.parts)):
        if f.is_dir():
            f.rmdir()
        else:
            f.unlink(missing_ok=True)


def _probe_row(r: ProbeResult) -> ProbeRow:
    """One probe result for results.json: an unprobed set has null accuracy and says why."""
    if r.skipped is not None:
        return ProbeRow(r.name, r.size, None, None, r.majority, r.skipped, None)
    return ProbeRow(r.name, r.size, r.accuracy, r.accuracy_std, r.majority, None, r.accuracy - r.majority)
