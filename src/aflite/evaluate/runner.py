""":func:`compare_runs`: split D, build the benchmarks from the runs, train every model on every benchmark and
seed (cached), and score them on the held-out and external sets. It returns an :class:`EvaluateResult` and writes
only its caches; :func:`aflite.commands.evaluate.evaluate` (``aflite evaluate``) writes the output folder."""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.data import check_view_texts, open_dataset, source_name, warn_twins
from aflite.data.loader_options import LoaderOptions
from aflite.defaults import DEFAULT_MODELS
from aflite.device import torch_device
from aflite.errors import InputError, ParameterError
from aflite.evaluate.jobs import Job, JobContext
from aflite.evaluate.lr_check import check_learning_rate
from aflite.evaluate.models import (
    FinetuneOptions,
    ModelSpec,
    _Corpus,
    _corpus,
    _FeatureStore,
)
from aflite.evaluate.scores import _aggregate, _majority
from aflite.evaluate.sets import EvalSet, TrainingSet, _read_run, label_matched_rows, single_iteration_rows
from aflite.evaluate.tables import EvaluateResult, evaluate_verdict, render_tables
from aflite.features.registry import default_featurizer, find
from aflite.features.registry import spec as featurizer_spec
from aflite.hashing import dataset_fingerprint, file_sha256
from aflite.option import OptionValue
from aflite.progress import tqdm  # Jupyter: a widget bar, or none without ipywidgets
from aflite.rundir.evaluate_records import EvalConfig, LrCheck, ScoreRecord, SetInfo, TestEntry
from aflite.rundir.names import KEPT_IDS
from aflite.rundir.same_rows import check_run_rows
from aflite.splits import split_heldout
from aflite.threads import limited

log = logging.getLogger("aflite.evaluate")




def _plan(models: Sequence[str | ModelSpec], seeds: int | Sequence[int], finetune: FinetuneOptions | None,
          model_seeds: int | None = None) -> tuple[list[ModelSpec], list[int], list[int], FinetuneOptions]:
    """The models, the benchmarks' seeds, the seeds of the stochastic models (the first ``model_seeds``) and the
    fine-tuning options, checked before any data is read."""
    specs = [ModelSpec.parse(m) for m in models]
    if not specs:
        raise ParameterError("no models to evaluate")
    if len({s.key for s in specs}) != len(specs):
        raise ParameterError("a model is listed twice")
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise ParameterError(f"seeds (--seeds) must be a count >= 1 or a non-empty list, got {seeds!r}")
    if model_seeds is not None and not 1 <= model_seeds <= len(seed_list):
        raise ParameterError(f"model_seeds (--model-seeds) must be between 1 and the {len(seed_list)} seeds, got "
                             f"{model_seeds}")
    ft = finetune or FinetuneOptions()
    ft.check()
    return specs, seed_list, seed_list[:model_seeds] if model_seeds is not None else seed_list, ft


def _load(data: Any, specs: list[ModelSpec], ft: FinetuneOptions,
          dataset_options: LoaderOptions | None) -> tuple[Any, FinetuneOptions]:
    """D (images when the data or a model's featurizer say so) and the fine-tuning options for its modality."""
    reads = "image" if any(s.featurizer and featurizer_spec(s.featurizer).modality == "image" for s in specs) else "any"
    ds = open_dataset(data, reads=reads, **(dataset_options or LoaderOptions()))
    if ds.modality == "image" and ft.image_model is None:  # finetune: models fine-tune the image network
        ft = replace(ft, image_model=default_featurizer("image", ft.model_path))
    if ds.groups is not None:  # identical texts with different labels across groups pull accuracies below chance
        warn_twins(ds, sorted({sp_.view for sp_ in specs}), str((dataset_options or {}).get("groups") or "premise"))
    for sp_ in specs:
        if sp_.view == "hypothesis" and not ds.is_pair:
            raise ParameterError(f"model {sp_.key}: the dataset has one text column; use view 'premise' or 'pair'")
        check_view_texts(ds, sp_.view, f"model {sp_.key}")  # a column empty in every row: nothing to read
    return ds, ft


def _check_eval_sets(ds: Any, specs: list[ModelSpec], classes: NDArray[Any], eval_sets: Sequence[EvalSet],
                     tests: Sequence[EvalSet]) -> None:
    names = [es.name for es in list(tests) + list(eval_sets)]
    if len(set(names)) != len(names):
        raise ParameterError(f"two test/evaluation sets share a name: {sorted(names)}")
    for es in list(eval_sets) + list(tests):
        if es.texts_b is None and any(s.view in ("pair", "hypothesis") for s in specs) and ds.is_pair:
            raise InputError(f"evaluation set {es.name}: one text column, but the models read text pairs")
        reachable = {es.pred_map.get(c, c) for c in classes}
        bad = sorted(set(np.unique(es.labels).tolist()) - reachable)
        if bad:
            raise InputError(f"evaluation set {es.name} ({', '.join(es.sources) or 'in memory'}): gold label(s) "
                             f"{bad} are not labels the models can predict {sorted(reachable)}; map them with a "
                             "label map (--ood-label-map) or a prediction map (--ood-pred-map)")


def _training_sets(ds: Any, run_objs: list[Any], pool: NDArray[np.intp], warm: NDArray[np.intp],
                   seed_list: list[int], random_baseline: bool, single_iteration: bool, cache: Path,
                   show_progress: bool, label_matched: bool = False) -> list[TrainingSet]:
    """D, each run's D(Φ), same-size random subsets of D per seed (and, with ``label_matched``, random subsets
    with D(Φ)'s label counts) and the single-iteration sets."""
    sets: list[TrainingSet] = [TrainingSet("D", "D", pool, info={"excluded_warmup": int(len(warm))}
                                           if len(warm) else {})]
    for ri, r in enumerate(run_objs):
        kept = np.setdiff1d(r.kept, warm).astype(np.intp)
        sets.append(TrainingSet(r.name, "filtered", kept, run=str(r.path),
                                info={"excluded_warmup": int(len(r.kept) - len(kept))} if len(warm) else {}))
        size = len(kept)
        if random_baseline:
            for s in seed_list:
                rows = pool[np.random.default_rng([s, 1, ri]).choice(len(pool), size=size, replace=False)]
                rows = np.sort(rows)
                sets.append(TrainingSet(f"D_random({size})" + (f" [{r.name}]" if len(run_objs) > 1 else ""),
                                        "random", rows.astype(np.intp), seed=s, run=str(r.path)))
        if label_matched:
            for s in seed_list:
                rows = label_matched_rows(pool, ds.labels, kept, np.random.default_rng([s, 2, ri]))
                sets.append(TrainingSet(f"D_random({size}, labels of {r.name})", "matched", rows, seed=s,
                                        run=str(r.path)))
        if single_iteration:
            rows, info = single_iteration_rows(ds, r, size, int(r.seed or 0), cache, show_progress,
                                               exclude=warm)
            sets.append(TrainingSet(f"single-iteration({r.name.removeprefix('D(').removesuffix(')')})", "single",
                                    rows, run=str(r.path), info=info))
    return sets


def _set_info(ds: Any, sets: list[TrainingSet], is_held: NDArray[np.bool_], split: bool,
              classes: NDArray[Any]) -> list[SetInfo]:
    """Each training set's sizes and label counts; a set that cannot train or test every label is refused."""
    set_info: list[SetInfo] = []
    for ts in sets:
        tr = ts.rows[~is_held[ts.rows]]
        te = ts.rows[is_held[ts.rows]]
        if len(tr) == 0 or (split and len(te) == 0):
            raise InputError(f"training set {ts.name}: its {'training' if len(tr) == 0 else 'held-out'} part is "
                             "empty")
        missing = sorted(set(classes.tolist()) - set(ds.labels[tr].astype(str).tolist()))
        if missing:
            raise InputError(f"training set {ts.name}: label(s) {missing} of D are absent from its training part; "
                             "the models could never predict them")
        set_info.append({"name": ts.name, "kind": ts.kind, "seed": ts.seed, "run": ts.run, "size": int(len(ts.rows)),
                         "train": int(len(tr)), "heldout": int(len(te)), "info": ts.info,
                         "label_counts": dict(sorted(Counter(ds.labels[ts.rows].astype(str).tolist()).items()))})
    return set_info


def _runs(data: str | os.PathLike[str], ds: Any, runs: Sequence[str | os.PathLike[str]]) -> tuple[list[Any], str]:
    """The run folders, each checked against D (its recorded fingerprint, its ids), and D's fingerprint."""
    if not runs:
        raise ParameterError("give at least one run directory (made by aflite run on this dataset)")
    twice = next((r for k, r in enumerate(runs) if Path(r).resolve() in {Path(q).resolve() for q in runs[:k]}), None)
    if twice is not None:  # one run twice would train and report its sets twice under two names
        raise ParameterError(f"the run folder {twice} is given twice; give each run once")
    data_fp = dataset_fingerprint(ds.ids, ds.labels, ds.texts_a, ds.texts_b)
    for run_dir in runs:  # a run from another file with the same row count would otherwise match by row-N ids
        check_run_rows(run_dir, ds, data)  # what differs (ids, a label, the order, texts), by name
    id_to_row = {str(i): r for r, i in enumerate(ds.ids.tolist())}
    taken: set[str] = set()
    return [_read_run(Path(r), id_to_row, taken) for r in runs], data_fp


def _store(d_corpus: _Corpus, cache: Path, show_progress: bool, featurizer_options: dict[str, OptionValue] | None,
           run_objs: list[Any]) -> _FeatureStore:
    store = _FeatureStore(d_corpus, cache, show_progress, dict(featurizer_options or {}))
    store.read_only = [Path(r.path) / "cache" for r in run_objs]  # the runs' Φ, reused and never written
    for r in run_objs:  # image features at the size (and model) the run's Φ used, so a shared cache is reused
        f = r.body.featurizer
        if f is not None and (found := find(f.name)) is not None and found.modality == "image":
            store.image_options = {k: v for k, v in f.options.items()
                                   if k in ("image_size", "model_path", "pretrained") and v is not None}
    return store


def _caps(specs: list[ModelSpec], ft: FinetuneOptions) -> tuple[str | None, int | None, int | None]:
    """(the fine-tuning device, the training-row cap, the evaluation-row cap): caps default on a CPU only."""
    if not any(s.kind == "finetune" for s in specs):
        return None, ft.max_train, ft.eval_max
    device = torch_device(ft.device)
    on_cpu = device == "cpu"
    return (device, ft.max_train if ft.max_train is not None else (ft.cpu_max_train if on_cpu else None),
            ft.eval_max if ft.eval_max is not None else (ft.cpu_eval_max if on_cpu else None))


def _labels(data: Any, ds: Any) -> tuple[NDArray[Any], NDArray[np.int64]]:
    """D's classes (sorted, as strings) and each row's class code; fewer than two classes is refused."""
    classes = np.unique(ds.labels.astype(str))
    if len(classes) < 2:
        raise InputError(f"{data}: need at least two labels, found {classes.tolist()}")
    return classes, np.searchsorted(classes, ds.labels.astype(str)).astype(np.int64)


def _test_entry(es: EvalSet) -> TestEntry:
    """A separate test set as results.json describes it: name, files, size, majority rate and label counts."""
    return {"name": es.name, "sources": es.sources, "size": len(es), "majority": _majority(es.labels),
            "label_counts": dict(sorted(Counter(es.labels.tolist()).items()))}


def _rate(ft: FinetuneOptions, specs: list[ModelSpec], d: _Corpus, train_part: NDArray[np.intp],
          y_all: NDArray[np.int64], n_classes: int, groups: NDArray[Any] | None, seeds: tuple[int, int], on_cpu: bool,
          cache: Path, show_progress: bool) -> tuple[FinetuneOptions, str, LrCheck | None]:
    """The fine-tuning learning rate in force, where it came from (``given``, ``check`` or ``default``) and the
    learning-rate check's record: the check runs once per evaluation, on D's training part, for every benchmark
    set; the rate is resolved here so that cache keys and the report carry it. ``seeds``: (the first benchmark
    seed, the split seed)."""
    lr_source = "given" if ft.lr is not None else ("check" if ft.checks_lr() else "default")
    ft_specs = [s for s in specs if s.kind == "finetune"]
    if ft_specs and lr_source == "check":
        lr_check = _check_lr(ft, ft_specs[0].view, d, train_part, y_all, n_classes, groups, seeds[0], seeds[1],
                             on_cpu, cache, show_progress)
        return replace(ft, lr=lr_check["chosen"]), lr_source, lr_check
    return (replace(ft, lr=ft.resolved_lr()) if ft.lr is None else ft), lr_source, None


def _run_jobs(shared: JobContext, specs: list[ModelSpec], sets: list[Any], seed_list: list[int],
              fixed_seeds: list[int], show_progress: bool) -> list[ScoreRecord]:
    """Every (model, training set, seed) job: a set drawn with a seed is trained with that seed; otherwise a
    stochastic model with every seed of ``fixed_seeds``, a deterministic one with the first benchmark seed."""
    jobs = [(sp_, ts, int(js)) for sp_ in specs for ts in sets
            for js in ([ts.seed] if ts.seed is not None else fixed_seeds if sp_.stochastic else seed_list[:1])]
    results: list[ScoreRecord] = []
    bar = tqdm(jobs, desc="train + evaluate", unit="model", disable=not show_progress, dynamic_ncols=True)
    for sp_, ts, job_seed in bar:
        bar.set_postfix_str(f"{sp_.key} on {ts.name} seed {job_seed}")
        results.append(Job(shared, sp_, ts, job_seed).run())
    return results


@limited  # one thread policy (aflite.threads)
def compare_runs(
    data: Any,
    runs: Sequence[str | os.PathLike[str]],
    *,
    cache_dir: str | os.PathLike[str],
    models: Sequence[str | ModelSpec] = DEFAULT_MODELS,
    seeds: int | Sequence[int] = 3,
    heldout: float = 0.2,
    seed: int = 0,
    random_baseline: bool = True,
    single_iteration: bool = True,
    label_matched: bool = False,
    eval_sets: Sequence[EvalSet] = (),
    finetune: FinetuneOptions | None = None,
    dataset_options: LoaderOptions | None = None,
    featurizer_options: dict[str, OptionValue] | None = None,
    show_progress: bool = True,
    tests: Sequence[EvalSet] = (),
    split: bool = True,
    model_seeds: int | None = None,
) -> EvaluateResult:
    """Train every model on D, each D(Φ), same-size random subsets and single-iteration sets; test each on its
    own held-out part, on all of D's held-out part, on each separate test set in ``tests`` (same labels as D,
    e.g. SNLI dev / test / test_hard: Table 3 shape) and on ``eval_sets`` (HANS, ...: Table 1 shape). With
    ``split=False`` D is not split: every benchmark trains on all its rows and is scored on ``tests`` and
    ``eval_sets`` only (the paper's protocol when D is a training set). A run's warm-up rows (``warmup_ids.txt``)
    are left out of D, every D(Φ) and every subset. Features, models and predictions are cached in ``cache_dir``.
    ``seed`` draws the train/held-out split; ``seeds`` are the benchmarks': one random subset per seed
    (``label_matched``: and one with D(Φ)'s label counts), and the stochastic models (mlp, finetune) train D, the
    single-iteration sets and each D(Φ) once per seed, or with the first ``model_seeds`` seeds only (a budget for
    fine-tuned models); ``featurizer_options`` go to the probes' text featurizers (see :mod:`aflite.evaluate`)."""
    specs, seed_list, fixed_seeds, ft = _plan(models, seeds, finetune, model_seeds)
    cache = Path(cache_dir)
    t_start = time.perf_counter()
    ds, ft = _load(data, specs, ft, dataset_options)
    n = len(ds)
    classes, y_all = _labels(source_name(data), ds)
    run_objs, data_fp = _runs(source_name(data), ds, runs)
    if not split and not tests and not eval_sets:
        raise ParameterError("without the held-out split (--no-split) give at least one test set (--test) or an "
                             "evaluation set (--hans / --ood)")
    is_held = split_heldout(n, ds.groups, heldout, seed) if split else np.zeros(n, dtype=bool)
    # warm-up slices (of every run compared) trained a Φ: out of D, D(Φ), random and single-iteration sets
    warm = np.unique(np.concatenate([r.warmup for r in run_objs])).astype(np.intp)
    pool = np.setdiff1d(np.arange(n), warm).astype(np.intp)
    _check_eval_sets(ds, specs, classes, eval_sets, tests)
    sets = _training_sets(ds, run_objs, pool, warm, seed_list, random_baseline, single_iteration, cache,
                          show_progress, label_matched)
    set_info = _set_info(ds, sets, is_held, split, classes)
    held_rows = np.flatnonzero(is_held & np.isin(np.arange(n), pool))
    corpora = [(es, _corpus(es.name, es.texts_a, es.texts_b)) for es in eval_sets]
    test_corpora = [(es, _corpus(es.name, es.texts_a, es.texts_b)) for es in tests]
    store = _store(_corpus("D", ds.texts_a, ds.texts_b), cache, show_progress, featurizer_options, run_objs)
    device, ft_train_cap, ft_eval_cap = _caps(specs, ft)
    ft, lr_source, lr_check = _rate(ft, specs, store.d, pool[~is_held[pool]], y_all, len(classes), ds.groups,
                                    (seed_list[0], seed), device == "cpu", cache, show_progress)
    shared = JobContext(ds, y_all, classes, is_held, held_rows, corpora, test_corpora, store, cache, ft, ft_train_cap,
                        ft_eval_cap, show_progress, ft_device=device, lr_source=lr_source)
    results = _run_jobs(shared, specs, sets, seed_list, fixed_seeds, show_progress)
    aggregate = _aggregate(results, specs, sets, eval_sets, tests)
    config: EvalConfig = {
        "dataset": source_name(data), "dataset_size": n, "dataset_fingerprint": data_fp, "classes": classes.tolist(),
        "runs": [str(r.path) for r in run_objs],
        # which kept set each run held when it was evaluated (a dataset card ties this folder to its run by it)
        "runs_kept_ids_sha256": [file_sha256(r.path / KEPT_IDS) for r in run_objs],
        "models": [s.key for s in specs], "seeds": seed_list, "model_seeds": fixed_seeds,
        "heldout": heldout, "split_seed": seed,
        "heldout_rows": int(len(held_rows)), "split": split, "excluded_warmup_rows": int(len(warm)),
        "protocol": PROTOCOL if split else NO_SPLIT,
        "tests": [_test_entry(es) for es in tests],
        "finetune": asdict(ft) | {"device": device, "train_cap_used": ft_train_cap, "eval_cap_used": ft_eval_cap,
                                  "lr_source": lr_source, "lr_check": lr_check}
        if device else None,
        "eval_sets": [{"name": es.name, "sources": es.sources, "size": len(es), "pred_map": es.pred_map}
                      for es in eval_sets],
        "wall_seconds": round(time.perf_counter() - t_start, 1),
    }
    tables = render_tables(aggregate, specs, sets, set_info, eval_sets, config, tests)
    verdict = evaluate_verdict(set_info, aggregate)
    return EvaluateResult(None, results, aggregate, set_info, tables, config, verdict)


PROTOCOL = ("D split once by premise group into train/held-out; every benchmark trains on its rows in the train part "
            "and is tested on its rows in the held-out part (own held-out) and on the whole held-out part of D "
            "(original held-out)")
NO_SPLIT = "D not split: every benchmark trains on all its rows and is tested on separate test sets only"


def _check_lr(ft: FinetuneOptions, view: str, d: _Corpus, train_part: NDArray[np.intp], y_all: NDArray[np.int64],
              n_classes: int, groups: NDArray[Any] | None, train_seed: int, split_seed: int, on_cpu: bool,
              cache: Path, show_progress: bool) -> LrCheck:
    """The learning-rate check (:mod:`aflite.evaluate.lr_check`) on a seeded slice of D's training part, read
    through ``view``; the record says which rows and which view it used."""
    size = ft.cpu_lr_check_rows if on_cpu else ft.lr_check_rows
    rows = train_part
    if size is not None and len(rows) > size:
        rows = np.sort(np.random.default_rng([split_seed, 29]).choice(rows, size=size, replace=False))
    a, b = d.view(view, rows)
    log.info("learning-rate check: %d rows, candidates %s", len(rows), list(ft.lr_candidates))
    rec = check_learning_rate(a, b, y_all[rows], n_classes, options=ft,
                              groups=None if groups is None else np.asarray(groups)[rows], seed=train_seed,
                              cache_dir=cache, show_progress=show_progress)
    rec["view"] = view
    rec["slice_seed"] = [split_seed, 29]
    return rec
