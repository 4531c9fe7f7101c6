"""What models are trained and tested on: the benchmarks built from runs (D, D(Φ), random subsets, the
single-iteration set) and external evaluation sets (HANS, SNLI test, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.core.phase import predictability
from aflite.data import open_dataset
from aflite.data.keywords import option_label
from aflite.data.loader_options import LoaderOptions
from aflite.errors import InputError, ParameterError
from aflite.features import featurize_dataset
from aflite.features.cache import check_run_features
from aflite.features.registry import run_options
from aflite.rundir.evaluate_records import SingleIterationInfo
from aflite.rundir.names import KEPT_IDS, WARMUP_IDS
from aflite.rundir.read import read_run
from aflite.rundir.schema import RunBody
from aflite.splits import stratified_sample as _stratified_sample

HANS_PRED_MAP = {"entailment": "entailment", "neutral": "non-entailment", "contradiction": "non-entailment"}


@dataclass
class EvalSet:
    """A labelled evaluation set outside D. ``pred_map`` turns a model's predicted label into this set's label
    space (unmapped labels stay as they are); ``groups`` (optional) breaks accuracy down, e.g. HANS heuristics."""

    name: str
    texts_a: list[str]
    texts_b: list[str] | None
    labels: NDArray[Any]
    groups: NDArray[Any] | None = None
    pred_map: dict[str, str] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.texts_a)


def load_eval_set(
    paths: str | Path | Sequence[str | Path],
    name: str | None = None,
    *,
    label_map: dict[str, str] | None = None,
    pred_map: dict[str, str] | None = None,
    group_column: str | None = None,
    dataset_options: LoaderOptions | None = None,
    max_rows: int | None = None,
    sample_seed: int = 0,
) -> EvalSet:
    """Load one labelled evaluation set from one or more files (any format :func:`aflite.data.load_dataset`
    reads). ``label_map`` renames gold labels (e.g. ``{"0": "entailment"}``); files of one set must end up with
    the same label set. ``max_rows`` keeps a seeded sample stratified by group and label (for slow machines)."""
    plist = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    if not plist:
        raise ParameterError("an evaluation set needs at least one file")
    a: list[str] = []
    b: list[str] | None = []
    labels: list[str] = []
    groups: list[str] = []
    label_sets: list[tuple[Path, set[str]]] = []
    raw_seen: set[str] = set()
    for p in plist:
        # an image folder is an OOD image set (e.g. the cue-flipped test set of a coloured-MNIST experiment)
        ds = open_dataset(p, **(dataset_options or LoaderOptions()))
        labs = [str(x) for x in ds.labels.tolist()]
        raw_seen.update(labs)
        if label_map:
            labs = [label_map.get(x, x) for x in labs]
        label_sets.append((p, set(labs)))
        a += ds.texts_a
        if b is not None and ds.texts_b is not None:
            b += ds.texts_b
        else:
            b = None
        labels += labs
        if group_column is not None:
            if group_column not in ds.other_columns:
                raise InputError(f"{p}: no column {group_column!r} to group by (columns: {sorted(ds.other_columns)})")
            groups += [str(g) for g in ds.other_columns[group_column]]
    unmatched = sorted(set(label_map or {}) - raw_seen)
    if unmatched:
        where = ", ".join(str(p) for p in plist)
        raise InputError(f"{where}: label map entr{'y' if len(unmatched) == 1 else 'ies'} "
                         f"{', '.join(f'{k}={(label_map or {})[k]}' for k in unmatched)} match no label of "
                         f"{name or plist[0].name}; its labels are {sorted(raw_seen)}")
    first_path, first = label_sets[0]
    for p, other in label_sets[1:]:
        if other != first:
            raise InputError(f"evaluation files of one set have different label sets: {first_path} has "
                             f"{sorted(first)}, {p} has {sorted(other)}")
    es = EvalSet(name or plist[0].name.split(".")[0], a, b, np.asarray(labels, dtype=object).astype(str),
                 np.asarray(groups).astype(str) if group_column is not None else None,
                 dict(pred_map or {}), [str(p) for p in plist])
    if max_rows is not None:
        if max_rows < 1:
            raise ParameterError(f"max_rows must be >= 1, got {max_rows}")
        rows = _stratified_sample(es.labels, es.groups, max_rows, sample_seed)
        es = EvalSet(es.name, [es.texts_a[i] for i in rows], None if es.texts_b is None else
                     [es.texts_b[i] for i in rows], es.labels[rows], None if es.groups is None else es.groups[rows],
                     es.pred_map, es.sources + [f"stratified sample of {len(rows)} rows, seed {sample_seed}"])
    return es


def load_hans(path: str | Path, name: str = "HANS", max_rows: int | None = None) -> EvalSet:
    """HANS (McCoy et al. 2019): neutral and contradiction predictions count as non-entailment; accuracy is
    broken down by heuristic (lexical_overlap, subsequence, constituent)."""
    return load_eval_set(path, name, pred_map=HANS_PRED_MAP, group_column="heuristic", max_rows=max_rows)


@dataclass
class TrainingSet:
    """A benchmark: rows of D (train part ∩ rows trains, held-out part ∩ rows tests)."""

    name: str
    kind: str  # "D", "filtered", "random", "matched" (random, D(Φ)'s label counts), "single"
    rows: NDArray[np.intp]
    seed: int | None = None  # random subsets: one set per seed
    run: str | None = None
    info: SingleIterationInfo = field(default_factory=lambda: SingleIterationInfo())


@dataclass
class _Run:
    path: Path
    kept: NDArray[np.intp]
    body: RunBody  # the run's results.json body, typed
    name: str
    warmup: NDArray[np.intp] = field(default_factory=lambda: np.empty(0, dtype=np.intp))
    fingerprint: str | None = None  # of the Φ and labels the run filtered (its checkpoint's)
    seed: int | None = None  # the run's (its envelope's)


def _read_run(path: Path, id_to_row: dict[str, int], taken: set[str]) -> _Run:
    """A run folder as a benchmark: its kept rows, its summary, a unique name and its warm-up rows."""
    record = read_run(path)
    kept_file = path / KEPT_IDS
    ids = record.kept_ids()
    missing = [i for i in ids if i not in id_to_row]
    if missing:
        raise InputError(f"{kept_file}: {len(missing)} kept id(s) are not in the dataset, e.g. {missing[0]!r} "
                         "(was this run made from another file?)")
    f = record.body.featurizer  # None: a run of aflite filter
    name = f"D(Φ {f.name}{'' if f.view == 'pair' else '-' + f.view})" if f else f"D(Φ {path.name})"
    if name in taken:
        name = f"D(Φ {path.name})"
    taken.add(name)
    # the warm-up slice trained Φ (paper §4): it must stay out of D, D(Φ) and every comparison subset
    warm_ids = record.warmup_ids()
    unknown = [i for i in warm_ids if i not in id_to_row]
    if unknown:
        raise InputError(f"{path / WARMUP_IDS}: {len(unknown)} id(s) are not in the dataset, e.g. "
                         f"{unknown[0]!r} (was this run made from another file?)")
    warm = np.sort(np.asarray([id_to_row[i] for i in warm_ids], dtype=np.intp))
    return _Run(path, np.sort(np.asarray([id_to_row[i] for i in ids], dtype=np.intp)), record.body, name, warm,
                record.fingerprint(), record.seed)


def label_matched_rows(pool: NDArray[np.intp], labels: NDArray[Any], kept: NDArray[np.intp],
                       rng: np.random.Generator) -> NDArray[np.intp]:
    """A random subset of ``pool`` with the label counts of ``kept`` (a subset of ``pool``): per label, that many
    of the pool's rows of the label, drawn without replacement. AFLite shifts the label shares (on SNLI toward
    neutral); a model trained on this subset meets the same shares without the filter's choice of rows."""
    labels = np.asarray(labels)
    parts = [rng.choice(pool[labels[pool] == lab], size=int(count), replace=False)
             for lab, count in zip(*np.unique(labels[kept], return_counts=True), strict=True)]
    return np.sort(np.concatenate(parts)).astype(np.intp)


SINGLE_MODELS = 1  # the paper's baseline (§4.1): "using a single model, we filter out the most predictable examples
# in a single iteration"; one phase of the run's m models is a stronger filter than that (measured: docs/results.md)


def single_iteration_rows(
    ds: Any, run: _Run, size: int, seed: int, cache_dir: Path, show_progress: bool = True,
    exclude: NDArray[np.intp] | None = None, n_models: int = SINGLE_MODELS,
) -> tuple[NDArray[np.intp], SingleIterationInfo]:
    """The paper's single-iteration baseline: ``n_models`` linear models over the run's Φ (the paper's one; the
    run's m gives one phase of its ensemble), each trained on t random rows of those the run filtered, score the
    others once, and the most predictable rows are removed at once (ties broken at random) until ``size`` rows
    remain. Rows that no model scored (a single model's own training rows) are kept, as a filtering phase keeps
    them. Rows in ``exclude`` (warm-up slices of any run being compared) are never kept and do not count to
    ``size``."""
    f, params = run.body.featurizer, run.body.parameters
    if f is None:
        raise InputError(f"{run.path}: results.json records no featurizer (a run of aflite filter), which the "
                         f"single-iteration baseline needs (pass "
                         f"{option_label('--no-single-iteration', 'single_iteration=False')})")
    name, view = f.name, f.view
    opts = run_options(name, f.options)  # the run's own Φ: its backend, this release's option names
    run_seed = int(params.random_state or 0)
    # the run's Φ is cached where the run put it: RUN/cache (read only: a run folder is the run's), or a shared
    # folder given to both `aflite run --cache-dir` and this evaluation's cache (top level); recomputing it (an
    # encoder pass, a warm-up fine-tuning) is the last resort, into this evaluation's cache; the top level is read
    # either way (the parts of a combined Φ, e.g. warmup+ngram, that runs on the same --cache-dir computed)
    feat_cache = cache_dir if any(cache_dir.glob(f"{name}-{view}-*.json")) else cache_dir / "features"
    feats = featurize_dataset(ds, name, view, feat_cache, warmup_size=params.train_size, warmup_seed=run_seed,
                              read_only=[run.path / "cache", cache_dir], show_progress=show_progress, **opts)
    rows = np.asarray(feats.rows, dtype=np.intp)
    X = feats.X.toarray() if hasattr(feats.X, "toarray") else feats.X
    check_run_features(X, ds.labels[rows], run.fingerprint, run.path, feats.cache_path if feats.from_cache else None,
                       str(run.body.dataset or "DATA"))
    groups = ds.groups[rows] if (params.groups and ds.groups is not None) else None
    ph = predictability(X, ds.labels[rows], n_partitions=n_models, train_size=params.train_size,
                        groups=groups, random_state=seed)
    p = ph.predictability
    allowed = np.ones(len(rows), dtype=bool) if exclude is None else ~np.isin(rows, exclude)
    n_remove = max(0, int(allowed.sum()) - size)
    scored = np.flatnonzero(~np.isnan(p) & allowed)
    rng = np.random.default_rng([seed, 3])
    order = scored[np.lexsort((rng.random(len(scored)), -p[scored]))]
    removed = order[:n_remove]
    keep = allowed.copy()
    keep[removed] = False
    info: SingleIterationInfo = {"featurizer": name, "view": view, "n_partitions": n_models,
            "train_size": params.train_size, "seed": seed, "scored": int(len(scored)),
            "unscored": int((np.isnan(p) & allowed).sum()),
            "removed": int(len(removed)), "excluded_warmup": int((~allowed).sum()),
            "min_removed_predictability": float(p[removed].min()) if len(removed) else None,
            "seconds": round(ph.seconds, 2)}
    notes = []
    n_labels = len(np.unique(ds.labels[rows]))
    t = params.train_size
    if t < n_labels:  # the one model never sees every label (with t = 1 it predicts one label for every row)
        notes.append(f"its one model trained on {t} row(s) (the run's t), fewer than the {n_labels} labels: it can "
                     f"predict at most {t} of them, so this cut says little about the rows' predictability")
    if len(removed) < n_remove:
        notes.append(f"only {len(scored)} rows were scored; {n_remove - len(removed)} fewer removed than asked")
    if notes:
        info["note"] = "; ".join(notes)
    return np.sort(rows[keep]), info
