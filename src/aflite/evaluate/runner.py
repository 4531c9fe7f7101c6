""":func:`compare_runs`: split D, build the benchmarks from the runs, train every model on every benchmark and
seed (cached), and score them on the held-out and external sets. It returns an :class:`EvaluationReport` and writes
only its caches; :func:`aflite.runs.evaluate.evaluate` (``aflite evaluate``) writes the output folder."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.atomic import load_cached_npy, write_json, write_npy
from aflite.defaults import DEFAULT_MODELS
from aflite.errors import InputError, ParameterError
from aflite.evaluate.models import (
    FEATURE_MODELS,
    LR_CHECK_FIELDS,
    FinetuneOptions,
    ModelSpec,
    _Corpus,
    _corpus,
    _feature_classifier,
    _FeatureStore,
    _FineTuned,
    _MaxPPMI,
    _NgramLR,
)
from aflite.evaluate.sets import EvalSet, TrainingSet, _read_run, single_iteration_rows
from aflite.evaluate.tables import EvaluationReport, _aggregate, _breakdown, _majority, render_tables
from aflite.hashing import hash_parts as _hash
from aflite.splits import split_heldout
from aflite.splits import stratified_sample as _stratified_sample
from aflite.threads import limited

log = logging.getLogger("aflite.evaluate")


_CACHE_FORMAT = 1


@limited  # one thread policy (aflite.threads)
def compare_runs(
    data: str | Path,
    runs: Sequence[str | Path],
    *,
    cache_dir: str | Path,
    models: Sequence[str | ModelSpec] = DEFAULT_MODELS,
    seeds: int | Sequence[int] = 3,
    heldout: float = 0.2,
    seed: int = 0,
    random_baseline: bool = True,
    single_iteration: bool = True,
    eval_sets: Sequence[EvalSet] = (),
    finetune: FinetuneOptions | None = None,
    dataset_options: dict[str, Any] | None = None,
    minilm_options: dict[str, Any] | None = None,
    show_progress: bool = True,
    tests: Sequence[EvalSet] = (),
    split: bool = True,
    model_seeds: int | None = None,
) -> EvaluationReport:
    """Train every model on D, each D(Φ), same-size random subsets and single-iteration sets; test each on its
    own held-out part, on all of D's held-out part, on each separate test set in ``tests`` (same labels as D,
    e.g. SNLI dev / test / test_hard: Table 3 shape) and on ``eval_sets`` (HANS, ...: Table 1 shape). With
    ``split=False`` D is not split: every benchmark trains on all its rows and is scored on ``tests`` and
    ``eval_sets`` only (the paper's protocol when D is a training set). Rows of a run's warm-up slice
    (``warmup_ids.txt``) are left out of D, every D(Φ) and every comparison subset. Features, models and
    predictions are cached in ``cache_dir``. ``seed`` draws the train/held-out split; ``seeds`` are the
    benchmarks': one random subset per seed, and the stochastic models (mlp, finetune) train D, the
    single-iteration sets and each D(Φ) once per seed, or with the first ``model_seeds`` seeds only (a budget
    for fine-tuned models; the random subsets stay one per seed). See the module docstring of
    :mod:`aflite.evaluate` for the protocol."""
    split_seed = seed
    from tqdm import tqdm

    from aflite.data import load_dataset

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
    fixed_seeds = seed_list[:model_seeds] if model_seeds is not None else seed_list
    ft = finetune or FinetuneOptions()
    ft.check()
    from aflite.data import images

    image_featurizers = {s.featurizer for s in specs} & set(images.IMAGE_FEATURIZERS)
    is_images = images.is_image_folder(data) or bool(image_featurizers)
    if is_images and ft.image_model is None:  # finetune: models fine-tune the image network
        ft = replace(ft, image_model="hf-image" if ft.model_path else "efficientnet-lite0")
    lr_source = "given" if ft.lr is not None else ("check" if ft.checks_lr() else "default")
    cache = Path(cache_dir)
    t_start = time.perf_counter()

    if is_images:
        ds = images.load_image_dataset(data)
    else:
        ds = load_dataset(data, **(dataset_options or {}))
    n = len(ds)
    if ds.groups is not None:  # identical texts with different labels across groups pull accuracies below chance
        from aflite.data import warn_twins

        warn_twins(ds, sorted({sp_.view for sp_ in specs}), str((dataset_options or {}).get("groups") or "premise"))
    for sp_ in specs:
        if sp_.view == "hypothesis" and not ds.is_pair:
            raise ParameterError(f"model {sp_.key}: the dataset has one text column; use view 'premise' or 'pair'")
        if not is_images:
            from aflite.data import check_view_texts

            check_view_texts(ds, sp_.view, f"model {sp_.key}")
    classes = np.unique(ds.labels.astype(str))
    if len(classes) < 2:
        raise InputError(f"{data}: need at least two labels, found {classes.tolist()}")
    y_all = np.searchsorted(classes, ds.labels.astype(str)).astype(np.int64)
    d_corpus = _corpus("D", ds.texts_a, ds.texts_b)
    id_to_row = {str(i): r for r, i in enumerate(ds.ids.tolist())}
    if not runs:
        raise ParameterError("give at least one run directory (made by aflite run on this dataset)")
    from aflite.hashing import dataset_fingerprint, file_sha256
    from aflite.rundir import check_run_dataset

    data_fp = dataset_fingerprint(ds.ids, ds.labels, ds.texts_a, ds.texts_b)
    for run_dir in runs:  # a run from another file with the same row count would otherwise match by row-N ids
        check_run_dataset(run_dir, data_fp, data)
    taken: set[str] = set()
    run_objs = [_read_run(Path(r), id_to_row, taken) for r in runs]
    if not split and not tests and not eval_sets:
        raise ParameterError("without the held-out split (--no-split) give at least one test set (--test) or an "
                             "evaluation set (--hans / --ood)")
    is_held = split_heldout(n, ds.groups, heldout, split_seed) if split else np.zeros(n, dtype=bool)
    # warm-up slices (of every run compared) trained a Φ: out of D, D(Φ), random and single-iteration sets
    warm = np.unique(np.concatenate([r.warmup for r in run_objs])).astype(np.intp)
    pool = np.setdiff1d(np.arange(n), warm).astype(np.intp)
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

    # ---------------- training sets
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
        if single_iteration:
            rows, info = single_iteration_rows(ds, r, size, int(r.summary.get("seed") or 0), cache, show_progress,
                                               exclude=warm)
            sets.append(TrainingSet(f"single-iteration({r.name.removeprefix('D(').removesuffix(')')})", "single",
                                    rows, run=str(r.path), info=info))
    set_info = []
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

    held_rows = np.flatnonzero(is_held & np.isin(np.arange(n), pool))
    corpora = [(es, _corpus(es.name, es.texts_a, es.texts_b)) for es in eval_sets]
    test_corpora = [(es, _corpus(es.name, es.texts_a, es.texts_b)) for es in tests]
    store = _FeatureStore(d_corpus, cache, show_progress, dict(minilm_options or {}))
    store.read_only = [Path(r.path) / "cache" for r in run_objs]
    for r in run_objs:  # image features at the size (and model) the run's Φ used, so a shared cache is reused
        f = r.summary.get("featurizer") or {}
        if f.get("name") in image_featurizers:
            store.image_options = {k: v for k, v in (f.get("options") or {}).items()
                                   if k in ("image_size", "model_path", "pretrained") and v is not None}
    torch_device = None
    if any(s.kind == "finetune" for s in specs):
        from aflite.device import torch_device as _torch_device

        torch_device = _torch_device(ft.device)
    on_cpu = torch_device == "cpu"
    ft_train_cap = ft.max_train if ft.max_train is not None else (ft.cpu_max_train if on_cpu else None)
    ft_eval_cap = ft.eval_max if ft.eval_max is not None else (ft.cpu_eval_max if on_cpu else None)
    lr_check: dict[str, Any] | None = None
    ft_specs = [s for s in specs if s.kind == "finetune"]
    if ft_specs and lr_source == "check":  # once per run, on D's training part, for every benchmark set
        lr_check = _check_lr(ft, ft_specs[0].view, d_corpus, pool[~is_held[pool]], y_all, len(classes), ds.groups,
                             seed_list[0], split_seed, on_cpu, cache, show_progress)
        ft = replace(ft, lr=lr_check["chosen"])
    elif ft.lr is None:  # resolved here, so that cache keys and the report carry the rate in force
        ft = replace(ft, lr=ft.resolved_lr())

    jobs = []
    for spec in specs:
        for ts in sets:
            for js in ([ts.seed] if ts.seed is not None else fixed_seeds if spec.stochastic else seed_list[:1]):
                jobs.append((spec, ts, int(js)))
    results: list[dict[str, Any]] = []
    bar = tqdm(jobs, desc="train + evaluate", unit="model", disable=not show_progress, dynamic_ncols=True)
    for spec, ts, seed in bar:
        bar.set_postfix_str(f"{spec.key} on {ts.name} seed {seed}")
        results.append(_run_job(spec, ts, seed, ds, y_all, classes, is_held, held_rows, corpora, store, cache,
                                ft, ft_train_cap, ft_eval_cap, show_progress, tests=test_corpora,
                                ft_device=torch_device, lr_source=lr_source))

    aggregate = _aggregate(results, specs, sets, eval_sets, tests)
    config = {
        "dataset": str(data), "dataset_size": n, "dataset_fingerprint": data_fp, "classes": classes.tolist(),
        "runs": [str(r.path) for r in run_objs],
        # which kept set each run held when it was evaluated (a dataset card ties this folder to its run by it)
        "runs_kept_ids_sha256": [file_sha256(r.path / "kept_ids.txt") for r in run_objs],
        "models": [s.key for s in specs], "seeds": seed_list, "model_seeds": fixed_seeds,
        "heldout": heldout, "split_seed": split_seed,
        "heldout_rows": int(len(held_rows)), "split": split, "excluded_warmup_rows": int(len(warm)),
        "protocol": ("D split once by premise group into train/held-out; every benchmark trains on its rows in "
                     "the train part and is tested on its rows in the held-out part (own held-out) and on the whole "
                     "held-out part of D (original held-out)") if split else
        "D not split: every benchmark trains on all its rows and is tested on separate test sets only",
        "tests": [{"name": es.name, "sources": es.sources, "size": len(es), "majority": _majority(es.labels),
                   "label_counts": dict(sorted(Counter(es.labels.tolist()).items()))} for es in tests],
        "finetune": asdict(ft) | {"device": torch_device, "train_cap_used": ft_train_cap, "eval_cap_used": ft_eval_cap,
                                  "lr_source": lr_source, "lr_check": lr_check}
        if torch_device else None,
        "eval_sets": [{"name": es.name, "sources": es.sources, "size": len(es), "pred_map": es.pred_map}
                      for es in eval_sets],
        "wall_seconds": round(time.perf_counter() - t_start, 1),
    }
    tables = render_tables(aggregate, specs, sets, set_info, eval_sets, config, tests)
    from aflite.verdict import evaluate_verdict

    verdict = evaluate_verdict({"training_sets": set_info, "aggregate": aggregate})
    return EvaluationReport(None, results, aggregate, set_info, tables, config, verdict)


def _check_lr(ft: FinetuneOptions, view: str, d: _Corpus, train_part: NDArray[np.intp], y_all: NDArray[np.int64],
              n_classes: int, groups: NDArray[Any] | None, train_seed: int, split_seed: int, on_cpu: bool,
              cache: Path, show_progress: bool) -> dict[str, Any]:
    """The learning-rate check (:mod:`aflite.evaluate.lr_check`) on a seeded slice of D's training part, read
    through ``view``; the record says which rows and which view it used."""
    from aflite.evaluate.lr_check import check_learning_rate

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


def _train_meta(model: _FineTuned, ft: FinetuneOptions) -> dict[str, Any]:
    """What a fine-tuned model's cache entry keeps beside its weights: steps, losses, the loss curve, the rate."""
    from aflite.training import loss_summary

    curve = loss_summary(model.losses_)
    return {"steps": model.steps_, "final_loss": model.final_loss_, "first_loss": model.first_loss_, "lr": ft.lr,
            "loss_curve": curve}


def _run_job(spec: ModelSpec, ts: TrainingSet, seed: int, ds: Any, y_all: NDArray[np.int64],
             classes: NDArray[Any], is_held: NDArray[np.bool_], held_rows: NDArray[np.intp],
             corpora: list[tuple[EvalSet, _Corpus]], store: _FeatureStore, cache: Path, ft: FinetuneOptions,
             ft_train_cap: int | None, ft_eval_cap: int | None, show_progress: bool,
             tests: Sequence[tuple[EvalSet, _Corpus]] = (), ft_device: str | None = None,
             lr_source: str | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    d = store.d
    tr = ts.rows[~is_held[ts.rows]]
    used = tr
    if spec.kind == "finetune" and ft_train_cap is not None and len(tr) > ft_train_cap:
        used = np.sort(np.random.default_rng([seed, 13]).choice(tr, size=ft_train_cap, replace=False))
    opts: dict[str, Any] = {"spec": spec.key, "format": _CACHE_FORMAT}
    if spec.kind == "finetune":
        opts["finetune"] = {k: v for k, v in asdict(ft).items() if k not in ("eval_max", "cpu_eval_max", "device",
                                                                             "num_threads", *LR_CHECK_FIELDS)
                            and not (k.startswith("image_") and ft.image_model is None)}  # text keys unchanged
    if spec.featurizer == "minilm":
        opts["minilm"] = store.minilm_options
    key = _hash(opts, d.fingerprint, classes.tolist(), used.astype(np.int64), y_all[used],
                seed if spec.stochastic else None)[:24]
    mdir = cache / "models"
    meta_path = mdir / f"{spec.kind}-{key}.json"
    model: Any = None

    def get_model() -> Any:
        nonlocal model
        if model is not None:
            return model
        path = mdir / f"{spec.kind}-{key}.pt"
        m: Any
        if spec.kind == "finetune":
            m = _FineTuned(ft, seed, show_progress)
            if path.is_file():
                m.load(path, len(classes))
            else:
                a, b = d.view(spec.view, used)
                m.fit(a, b, y_all[used], len(classes))
                m.save(path)
                write_json(meta_path, _train_meta(m, ft))
        else:
            # scikit-learn models are not written to disk: loading them would mean unpickling files from a
            # user-given cache folder. Their predictions are cached (plain .npy) and they are cheap to refit.
            if spec.kind in FEATURE_MODELS:
                assert spec.featurizer is not None
                X = store.get(spec.featurizer, spec.view, d)
                m = _feature_classifier(spec.kind, seed).fit(X[used], y_all[used])
            elif spec.kind == "ngram":
                a, b = d.view(spec.view, used)
                m = _NgramLR().fit(a, b, y_all[used], len(classes))
            else:
                a, b = d.view(spec.view, used)
                m = _MaxPPMI().fit(a, b, y_all[used], len(classes))
        model = m
        return m

    def predict(corpus: _Corpus, rows: NDArray[np.intp]) -> NDArray[np.int64]:
        path = cache / "predictions" / f"{key}-{_hash(corpus.fingerprint, rows.astype(np.int64))[:16]}.npy"
        cached = load_cached_npy(path, len(rows))
        if cached is not None:
            return cached
        m = get_model()
        if spec.kind in FEATURE_MODELS:
            assert spec.featurizer is not None
            p = np.asarray(m.predict(store.get(spec.featurizer, spec.view, corpus)[rows]), dtype=np.int64)
        else:
            a, b = corpus.view(spec.view, rows)
            p = np.asarray(m.predict(a, b), dtype=np.int64)
        write_npy(path, p)
        return p

    rec: dict[str, Any] = {
        "model": spec.key, "model_label": spec.label, "train_set": ts.name, "kind": ts.kind, "seed": seed,
        "train_rows": int(len(tr)), "train_used": int(len(used)),
    }
    if len(held_rows):
        pred_held = classes[predict(d, held_rows)]
        gold_held = ds.labels[held_rows].astype(str)
        own = np.isin(held_rows, ts.rows)
        rec["own_heldout"] = _breakdown(pred_held[own], gold_held[own], None)
        rec["original_heldout"] = _breakdown(pred_held, gold_held, None)
        rec["majority_own_heldout"] = _majority(gold_held[own])
    def score(es: Any, corpus: Any, by_group: bool) -> dict[str, Any]:
        """Accuracy (with its majority rate) on one separate evaluation set, in the set's own label space."""
        rows = np.arange(len(es))
        if spec.kind == "finetune" and ft_eval_cap is not None:
            rows = _stratified_sample(es.labels, es.groups, ft_eval_cap, 0)
        raw = classes[predict(corpus, rows)]
        mapped = np.asarray([es.pred_map.get(str(c), str(c)) for c in raw])
        groups = es.groups[rows] if by_group and es.groups is not None else None
        return _breakdown(mapped, es.labels[rows], groups)

    rec["tests"] = {es.name: score(es, corpus, by_group=False) for es, corpus in tests}
    rec["external"] = {es.name: score(es, corpus, by_group=True) for es, corpus in corpora}
    if meta_path.is_file():
        rec.update(json.loads(meta_path.read_text(encoding="utf-8")))
        if spec.kind == "finetune" and "loss_curve" not in rec and model is not None:  # a model cached before
            rec.update(_train_meta(model, ft))  # the curve was kept: read it from the checkpoint just loaded
    check_pred: NDArray[Any] | None = None
    check_gold: NDArray[Any] | None = None
    if len(held_rows):  # a model that answers one class everywhere is no finding (aflite.evaluate.degenerate)
        check_pred, check_gold = pred_held, gold_held
    else:
        first = next(iter(tests), None)
        if first is not None:
            rows_t = np.arange(len(first[0]))
            if spec.kind == "finetune" and ft_eval_cap is not None:
                rows_t = _stratified_sample(first[0].labels, first[0].groups, ft_eval_cap, 0)
            check_pred, check_gold = classes[predict(first[1], rows_t)], first[0].labels[rows_t]
    if check_pred is not None and check_gold is not None:
        from aflite.evaluate.degenerate import not_trained

        curve = rec.get("loss_curve") or {}
        fine = spec.kind == "finetune"
        stopped_by = None
        if fine and rec.get("steps") is not None:
            stopped_by = "--max-steps" if ft.max_steps is not None and rec["steps"] >= ft.max_steps else "--epochs"
        mark = not_trained(check_pred, check_gold, steps=rec.get("steps"),
                           first_loss=curve.get("start", rec.get("first_loss")),
                           final_loss=curve.get("end", rec.get("final_loss")), train_rows=int(len(used)),
                           batch_size=ft.batch_size if fine else None, device=ft_device if fine else None,
                           lr=ft.lr if fine else None, lr_source=lr_source if fine else None, stopped_by=stopped_by,
                           available_rows=int(len(tr)) if fine else None)
        if mark is not None:
            rec["not_trained"] = mark
    rec["seconds"] = round(time.perf_counter() - t0, 2)
    return rec
