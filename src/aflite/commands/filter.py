"""``aflite filter`` as a library call (:func:`filter_files`), and the filtering step every run shares
(:func:`run_filter`). The folder a filter leaves (each file atomic: a killed run leaves none half-written):

* ``kept_ids.txt`` / ``removed_ids.txt`` — one id per line, in dataset order;
* ``instances.csv`` — id, label, kept, predictability (last p̃; empty if never scored), removed_at;
* ``results.json`` — parameters, seed, per-iteration sizes and timings, stop reason, label counts, versions;
* ``checkpoint.npz`` — the filter state after the last completed phase (plain arrays, no pickles);
* ``results.json``, ``summary.md`` and ``report.html`` (:meth:`aflite.rundir.folder.RunFolder.finish`).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from aflite import data
from aflite.atomic import JsonObject, atomic_open
from aflite.commands.summary_md import filter_verdict, render_filter_summary
from aflite.core.backends.dask import use_cluster
from aflite.core.backends.torch import STORAGE_DTYPES
from aflite.core.filter import AFLite
from aflite.core.phase import FilterState, RunParameters, validate_inputs
from aflite.device import ensemble_device
from aflite.errors import InputError, ParameterError
from aflite.hashing import inputs_fingerprint
from aflite.progress import tqdm  # Jupyter: a widget bar, or none without ipywidgets
from aflite.report import thumbs
from aflite.report.explorer import render
from aflite.report.pages import Rows, run_page
from aflite.report.rows import table_columns
from aflite.rundir.folder import RunFolder, claims
from aflite.rundir.names import (
    INSTANCES,
    KEPT_CSV,
    KEPT_IDS,
    REMOVED_CSV,
    REMOVED_IDS,
    RUN_COMMANDS,
    WARMUP_IDS,
)
from aflite.rundir.page import PageData
from aflite.rundir.read import read_columns, read_id_list
from aflite.rundir.results import Result, Table, recording_warnings
from aflite.rundir.schema import Document, RunBody

__all__ = ["FilterResult", "check_runtime", "filter_files", "run_filter"]

INSTANCE_COLUMNS = ("id", "label", "kept", "predictability", "removed_at")


@dataclass(repr=False)  # Result.__repr__: one line, not the arrays
class FilterResult(Result):
    """What a filter left behind; ``ids``, ``labels`` and ``state`` are the filtered rows and the final state."""

    command: ClassVar[str] = "filter"
    page_commands: ClassVar[tuple[str, ...]] = RUN_COMMANDS
    out: Path | None  # None: computed without a folder (``run(..., out=None)``)
    body: RunBody
    keep: np.ndarray
    filtered_path: Path | None
    ids: NDArray[Any] | None = None
    labels: NDArray[Any] | None = None
    state: FilterState | None = None

    @property
    def summary(self) -> JsonObject:
        """results.json's body as JSON (verdict, sizes, parameters, stop reason, label counts, ...)."""
        return self.body.to_json()

    def to_json(self) -> JsonObject:
        return self.body.to_json()

    @property
    def seed(self) -> int | None:
        """The envelope's seed: the filter's."""
        return self.body.parameters.random_state

    @property
    def verdict(self) -> list[str]:
        """The verdict's sentences (results.json's ``verdict``)."""
        return self.verdict_sentences()

    @property
    def scores(self) -> Any:
        """instances.csv as a pandas DataFrame (``aflite[hf]``), indexed by a DataFrame input's own index;
        ``predictability`` is NaN if never scored, ``removed_at`` -1 if kept."""
        import pandas as pd

        if self.state is None or self.ids is None or self.labels is None:
            raise ValueError("this result holds no filter state")
        st = self.state
        return pd.DataFrame({"id": self.ids.astype(str), "label": self.labels.astype(str),
                             "kept": np.asarray(st.keep, dtype=bool), "predictability": st.predictability,
                             "removed_at": np.asarray(st.removed_at, dtype=np.int64)}, index=self.scores_index())

    def scores_index(self) -> Any:
        """The index of :attr:`scores` (None: 0, 1, 2, ...)."""
        return None

    def summary_md(self) -> str:
        """summary.md: the verdict, the sizes and why the filter stopped."""
        return render_filter_summary(self.body)

    def table(self) -> Table | None:
        if self.state is None or self.ids is None or self.labels is None:
            return None
        st = self.state
        rows = ([i, lab, int(k), "" if np.isnan(p) else f"{p:.6f}", int(r)] for i, lab, k, p, r in
                zip(self.ids, self.labels, st.keep, st.predictability, st.removed_at, strict=True))
        return Table(INSTANCE_COLUMNS, rows, INSTANCES)

    def page_rows(self, table: Table) -> Rows:
        """The page's rows from the result in memory (a run adds its texts, warm-up slice and images)."""
        return Rows(table_columns(table.columns, table.rows), f"{self.out or 'the result'}/{table.name}")

    def page(self, document: Document) -> str | None:
        """The run's page from the result in memory (:func:`aflite.report.pages.run_page`)."""
        table = self.table()
        if table is None or self.out is None:
            return None
        return render(run_page(document, self.out, self.page_rows(table)))

    @classmethod
    def page_of(cls, folder: Path, document: Document) -> PageData:
        """The same page from a verified run folder (an image run adds kept.csv and removed.csv)."""
        if not (folder / INSTANCES).is_file():
            raise InputError(f"{folder / INSTANCES}: not found (is {folder} a complete run folder?)")
        body = document.body
        images = isinstance(body, RunBody) and body.modality == "image"
        files = None
        if images and (folder / KEPT_CSV).is_file() and (folder / REMOVED_CSV).is_file():
            files = (thumbs.read_paths(folder / KEPT_CSV), thumbs.read_paths(folder / REMOVED_CSV))
        rows = Rows(read_columns(folder / INSTANCES), folder / INSTANCES, images=images, image_files=files,
                    warmup_ids=read_id_list(folder / WARMUP_IDS))
        return run_page(document, folder, rows)

    def write_files(self, out: Path) -> None:
        """kept and removed ids, one per line in dataset order."""
        if self.state is not None and self.ids is not None:
            keep = self.state.keep
            with atomic_open(out / KEPT_IDS) as fh:
                fh.writelines(f"{i}\n" for i in self.ids[keep])
            with atomic_open(out / REMOVED_IDS) as fh:
                fh.writelines(f"{i}\n" for i in self.ids[~keep])


def filter_summary(labels: NDArray[Any], state: FilterState, params: RunParameters) -> RunBody:
    """results.json's body of a filter: parameters, sizes, stop, label counts and per-phase records."""
    keep = state.keep
    return RunBody(parameters=params, size_before=int(len(keep)), size_after=int(keep.sum()),
                   n_iterations=state.iteration, stop_reason=state.stop_reason,
                   label_counts_before=dict(sorted(Counter(map(str, labels)).items())),
                   label_counts_after=dict(sorted(Counter(map(str, labels[keep])).items())),
                   sizes=[len(keep)] + [r.size_after for r in state.history],
                   seconds_total=float(sum(r.seconds for r in state.history)), iterations=list(state.history))


def check_runtime(af: Any, cluster: Any = None) -> str:
    """Where the fit will run, resolved now, so that what the fit would refuse is refused before the folder is
    begun and the last good run there stays as it was."""
    if af.storage not in STORAGE_DTYPES:
        raise ParameterError(f"storage must be one of {', '.join(STORAGE_DTYPES)}, not {af.storage!r}")
    return ensemble_device(af.device, af.executor or cluster) if af.model == "logistic" else "cpu"


def run_filter(af: Any, X: Any, y: np.ndarray, ids: np.ndarray, folder: RunFolder | None, *,
               groups: np.ndarray | None = None, resume: bool = False, overwrite: bool = False,
               show_progress: bool = True, dataset_fp: str | None = None) -> FilterResult:
    """Fit ``af`` with a progress bar and a checkpoint in ``folder`` after every phase (``folder.finish`` writes
    the files; None: nothing written); ``dataset_fp`` must match a resumed checkpoint's."""
    validate_inputs(X, y, groups)  # everything is validated before the output folder is touched
    params = af.resolved_params(len(y))
    if groups is not None:
        params = dataclasses.replace(params, groups=True)
    check_runtime(af)
    fp = inputs_fingerprint(X, y)
    # checked, resumed from its checkpoint or started over, then begun (results.json goes, and what is not resumed)
    state = None if folder is None else folder.resume(params, fp, resume=resume, dataset_fp=dataset_fp)

    total = params.dataset_size - params.target_size
    done0 = 0 if state is None else int((~state.keep).sum())
    bar = tqdm(total=total, initial=done0, unit="inst", desc="removed", disable=not show_progress, file=sys.stderr,
               dynamic_ncols=True)

    def on_phase(record: Any, st: Any) -> None:
        if folder is not None:
            folder.save_checkpoint(st, params, fp, dataset_fp)
        bar.update(record.n_removed)
        bar.set_postfix(iter=record.iteration, S=record.size_after, eligible=record.n_eligible,
                        s_per_phase=f"{record.seconds:.1f}")

    resumed_from = None if state is None else int(state.iteration)
    start = time.perf_counter()
    try:
        af.fit(X, y, groups, resume=state, callback=on_phase)
        if bar.n < bar.total:  # stopped before n (k-rule, no eligible instance): the bar ends at 100 % of what ran
            bar.total = bar.n
            bar.set_postfix_str(f"stopped: {af.state_.stop_reason}"[:60], refresh=False)
            bar.refresh()
    finally:
        bar.close()
    labels = np.asarray(y)
    body = dataclasses.replace(filter_summary(labels, af.state_, params), resumed_from_iteration=resumed_from,
                               wall_seconds_this_call=time.perf_counter() - start)
    where = None if folder is None else folder.path
    return FilterResult(where, body, np.asarray(af.keep_mask_), None if where is None else where / KEPT_IDS,
                        np.asarray(ids), labels, af.state_)


@claims("filter")  # a path given as out is claimed as the CLI claims --out
@recording_warnings()  # scikit-learn's warnings counted in results.json (aflite.rundir.results)
def filter_files(
    features: str | os.PathLike[str],
    labels: str | os.PathLike[str],
    out: str | os.PathLike[str] | RunFolder,
    *,
    aflite: AFLite | None = None,
    ids: str | os.PathLike[str] | None = None,
    groups: str | os.PathLike[str] | None = None,
    feature_columns: list[str] | None = None,
    label: str | None = None,
    id_column: str | None = None,
    mmap: bool = False,
    resume: bool = False,
    overwrite: bool = False,
    show_progress: bool = True,
    cluster: Any = None,
    cluster_scratch: str | os.PathLike[str] | None = None,
) -> FilterResult:
    """AFLite on precomputed features and labels read from files (what ``aflite filter`` does).

    An executor already set on ``aflite`` wins over ``cluster``.

    Parameters
    ----------
    features : path
        The feature matrix: a ``.npy`` file, or a table whose numeric columns are the features.
    labels : path
        One label per row (a text file, or a table column, ``label``).
    out : path or RunFolder
        The run directory to write.
    aflite : AFLite, optional
        The estimator (default: :class:`AFLite` with its defaults).
    ids : path, optional
        One id per row (default: the row numbers).
    groups : path, optional
        One group id per row (a table's ``group`` column).
    feature_columns : list of str, optional
        The feature columns of a table (default: every numeric column but the label and id).
    label : str, optional
        The label column of a table.
    id_column : str, optional
        The id column of a table.
    mmap : bool, default False
        Memory-map a ``.npy`` feature matrix instead of reading it.
    resume : bool, default False
        Continue the run in ``out`` from its last checkpoint.
    overwrite : bool, default False
        Start over in an ``out`` that holds a run.
    show_progress : bool, default True
        Show a progress bar.
    cluster : str or DaskExecutor, optional
        ``local``, ``local:N``, a scheduler address or an open executor: the partitions are fitted there.
    cluster_scratch : path, optional
        A folder every worker reads at the same path (for a scheduler's cluster).

    Returns
    -------
    FilterResult
        The kept mask, the scores, the summary and the folder.
    """
    folder = RunFolder.of(out, "filter")
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
    on = check_runtime(af, cluster)  # as the fit will
    executor, release = use_cluster(cluster, cluster_scratch) if af.executor is None else (None, lambda: None)
    try:
        if executor is not None:
            af.set_params(executor=executor)
        res = run_filter(af, X, y, id_arr, folder, groups=grp, resume=resume, overwrite=overwrite,
                         show_progress=show_progress)
    finally:
        if executor is not None:
            af.set_params(executor=None)  # the caller's estimator does not keep an executor closed here
        release()
    body = dataclasses.replace(
        res.body, inputs={"features": str(features), "labels": str(labels), "ids": None if ids is None else str(ids)},
        device=on, filter_wall_seconds_this_call=res.body.wall_seconds_this_call,
        # where the partitions were fitted: an executor's type, a scheduler address, or None (this process)
        cluster=type(cluster).__name__ if cluster is not None and not isinstance(cluster, str) else cluster or None,
        wall_seconds_this_call=time.perf_counter() - t_call)  # the whole call, reading included
    res.body = dataclasses.replace(body, verdict=filter_verdict(body))
    folder.finish(res)
    return res
