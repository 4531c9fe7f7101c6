""":func:`explain` (``aflite explain``; ``aflite.explain_run``): read a run folder and its data back, recompute the
run's first phase (:mod:`aflite.explain.recompute`), run every registered check (:mod:`aflite.check`) with its
options (the older flags ``--alpha``, ... are aliases, :func:`check_aliases`), and write the explain folder.

Why recompute: a run folder holds the ids, the last p̃ and the features cache, not the first phase's
probabilities. The same Φ, parameters and seed (phase 0 draws from ``default_rng([seed, 0])`` as the run did) give
the run's own first phase; ``first_phase.agreement`` in results.json compares the recomputed p̃ of the rows removed
in phase 0 with the recorded one (1.0: bit-equal). Everything is validated before the first file is written.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Unpack

import numpy as np

from aflite.atomic import JsonValue
from aflite.check import (
    CheckContext,
    CheckData,
    CheckResult,
    check_files,
    check_names,
    check_options,
    resolve_checks,
    run_checks,
)
from aflite.data import Columns, open_dataset, source_name, with_columns
from aflite.data.keywords import option_label
from aflite.errors import InputError, ParameterError, takes_mappings
from aflite.explain.files import FILES, ExplainResult, check_columns, explain_results
from aflite.explain.recompute import first_phase, token_texts
from aflite.features import Features, featurize_dataset
from aflite.features.cache import check_run_features
from aflite.features.registry import refuse_untaken, run_options, spec
from aflite.option import OptionValue
from aflite.rundir.folder import RunFolder, claims
from aflite.rundir.lock import check_outside_runs
from aflite.rundir.manifest import RESERVED
from aflite.rundir.names import PAGE, RESULTS
from aflite.rundir.read import Instances, RunRecord, read_run
from aflite.rundir.results import recording_warnings
from aflite.rundir.same_rows import check_run_rows
from aflite.rundir.schema import FeaturizerRecord
from aflite.threads import limited

__all__ = ["ExplainResult", "check_aliases", "explain"]

def check_aliases() -> dict[str, tuple[tuple[str, str], ...]]:
    """explain's older flags (--alpha, ...) as the check options declare them (``alias=``): keyword -> the
    (check, option) pairs it sets, in registry order."""
    aliases: dict[str, list[tuple[str, str]]] = {}
    for name in check_names("explain"):
        for option in check_options(name):
            if option.alias:
                aliases.setdefault(option.alias, []).append((name, option.name))
    return {keyword: tuple(targets) for keyword, targets in aliases.items()}


def _featurizer(run: RunRecord) -> FeaturizerRecord:
    """The Φ the run recorded; a run without one (``aflite filter`` of precomputed features) refused in one line."""
    if run.body.featurizer is None:
        raise InputError(f"{run.path / RESULTS}: not the summary of `aflite run` (no featurizer)")
    return run.body.featurizer


def _load(data_path: Any, run: RunRecord, inst: Instances, dataset_options: dict[str, Any] | None,
          ) -> tuple[Any, np.ndarray]:
    """The dataset and the dataset rows the run filtered (in the run's order), checked against the run."""
    groups = run.body.groups or "premise"
    options = {k: v for k, v in (dataset_options or {}).items() if v is not None}
    if groups not in ("premise", None) and "groups" not in options:
        options["groups"] = groups
    ds = open_dataset(data_path, reads=spec(_featurizer(run).name).modality, **options)
    where = f"{source_name(data_path)} does not match the run in {run.path}"
    if run.body.dataset_size not in (None, len(ds)):
        raise InputError(f"{where}: the run filtered a dataset of {run.body.dataset_size:,} rows, DATA has "
                         f"{len(ds):,} (a run folder from another dataset?)")
    pos = {str(i): r for r, i in enumerate(ds.ids.astype(str))}
    missing = [i for i in inst.ids if i not in pos]
    if missing:
        raise InputError(f"{where}: {len(missing):,} of the run's {len(inst.ids):,} ids are not in DATA, e.g. "
                         f"{missing[0]!r} (a run folder from another dataset?)")
    rows = np.asarray([pos[i] for i in inst.ids], dtype=np.int64)
    bad = np.flatnonzero(ds.labels[rows].astype(str) != np.asarray(inst.labels, dtype=str))
    if len(bad):
        r = int(bad[0])
        raise InputError(f"{where}: {len(bad):,} id(s) carry another label, e.g. id {inst.ids[r]!r}: "
                         f"{inst.labels[r]!r} in the run, {str(ds.labels[rows[r]])!r} in DATA")
    check_run_rows(run.path, ds, source_name(data_path))  # another order or other texts: refused before Φ
    return ds, rows


def _features(ds: Any, run: RunRecord, cache_dir: Path, featurizer_options: dict[str, OptionValue] | None,
              show_progress: bool) -> Features:
    """Φ as the run computed it: from the run's cache (read only: the folder is the run's), else recomputed into
    explain's own ``cache_dir`` with the options the run recorded."""
    fz = _featurizer(run)
    opts: dict[str, JsonValue] = {k: v for k, v in run_options(fz.name, fz.options).items() if v is not None}
    refuse_untaken(fz.name, featurizer_options or {})  # an option the run's featurizer does not take
    opts.update(featurizer_options or {})
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in opts.items()}
    for option, what in spec(fz.name).required:
        if not given.get(option):
            raise ParameterError(f"the run used --featurizer {fz.name}: pass its {what}")
    return featurize_dataset(ds, fz.name, fz.view, cache_dir, read_only=[run.path / "cache"],
                             warmup_size=run.body.parameters.train_size,
                             warmup_seed=run.seed or 0, show_progress=show_progress, **given)


def _run_features(data_path: Any, ds: Any, rows: np.ndarray, run: RunRecord, feats: Features) -> Any:
    """Φ of the run's rows, in its order; refused when it is not the Φ the run filtered."""
    fpos = {int(r): j for j, r in enumerate(np.asarray(feats.rows))}
    if any(int(r) not in fpos for r in rows):
        raise InputError(f"{source_name(data_path)}: Φ recomputed from DATA leaves out rows the run filtered "
                         f"(warm-up slice differs); is {run.path} a run of this file?")
    X = feats.X[np.asarray([fpos[int(r)] for r in rows])] if len(fpos) != len(rows) or not np.array_equal(
        np.asarray(feats.rows), rows) else feats.X
    check_run_features(X, ds.labels[rows], run.fingerprint(), run.path, feats.cache_path if feats.from_cache else None,
                       source_name(data_path))
    return X


def _token_view(ds: Any, rows: np.ndarray, fz: FeaturizerRecord, token_view: str,
                options: dict[str, dict[str, OptionValue]]) -> tuple[list[str] | None, str]:
    """(the texts the token checks read, which text); images have none, so the stop rule is refused on them, as
    the n-gram coefficients are for a Φ that cannot score tokens."""
    if options.get("ngram_coefficients", {}).get("enabled") and not spec(fz.name).scores_tokens:
        raise ParameterError(f"check 'ngram_coefficients' (--ngram-coefficients) reads an n-gram Φ; this run used "
                             f"{fz.name!r}")
    if ds.modality == "image":
        if options.get("stop_rule", {}).get("enabled"):
            raise ParameterError("check 'stop_rule' (--stop-rule) tests token artifacts: it needs a text dataset")
        return None, "image statistics"
    texts, view = token_texts(ds, fz.view, token_view)
    return [texts[r] for r in rows], view


def explain_check_options(checks: dict[str, dict[str, OptionValue]] | None,
                          aliases: dict[str, OptionValue]) -> dict[str, dict[str, OptionValue]]:
    """``checks`` with the older flags folded in (``aliases``: keyword -> value or None), checked; a flag and
    ``--check`` giving one option two values are refused."""
    if checks is not None and not isinstance(checks, dict):
        raise ParameterError(f"checks must be a dict of check name -> its options, got {checks!r}")
    merged = {name: dict(opts) if isinstance(opts, dict) else opts for name, opts in (checks or {}).items()}
    declared = check_aliases()
    for keyword, value in aliases.items():
        if value is None:
            continue
        for name, key in declared.get(keyword, ()):
            opts = merged.setdefault(name, {})
            if isinstance(opts, dict) and key in opts and opts[key] != value:
                twice = option_label(f"{opts[key]!r} from --check and {value!r} from --{keyword.replace('_', '-')}",
                                     f"{opts[key]!r} in checks and {value!r} as {keyword}=")
                raise ParameterError(f"check {name!r}: option {key!r} given twice, {twice}")
            if isinstance(opts, dict):
                opts[key] = value
    resolve_checks(merged, "explain")  # an unknown name or key, a bad value: refused here
    return merged


def _check_outputs(found: dict[str, CheckResult], folder: RunFolder, rows: int) -> None:
    """The checks' file and column names, checked before the folder is begun: none of explain's own, reserved or
    the user's files; one writer each."""
    own = check_files(found, set(FILES) | {PAGE} | set(RESERVED))
    folder.check_writes([*FILES, PAGE, *own])  # a file of the user's under one of these names: refused now
    check_columns(found, rows)


@claims("explain")  # a path given as out is claimed as the CLI claims --out
@limited  # one thread policy (aflite.threads)
@recording_warnings()  # scikit-learn's warnings counted in results.json (aflite.rundir.results)
@takes_mappings("dataset_options", "featurizer_options")
def explain(data_path: Any, run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | RunFolder, *,
            checks: dict[str, dict[str, OptionValue]] | None = None, token_view: str = "auto",
            cache_dir: str | os.PathLike[str] | None = None, dataset_options: dict[str, Any] | None = None,
            featurizer_options: dict[str, OptionValue] | None = None, show_progress: bool = True,
            overwrite: bool = False,
            **columns: Unpack[Columns]) -> ExplainResult:
    """Explain a run of ``aflite run``: why its rows were removed, with every registered check.

    The run folder is only read; an unknown check or option, or a bad value, is refused before any work.

    Parameters
    ----------
    data_path : path, pandas.DataFrame, pyarrow.Table or datasets.Dataset
        The data the run filtered (its ids, labels and texts are checked against the run).
    run_dir : path
        The folder of ``aflite run``.
    out : path or RunFolder
        The explain folder to write (a path is claimed as the command line claims ``--out``); it may not lie in a
        run folder.
    checks : dict, optional
        Each check's options, check name -> {option: value} (``aflite explain --help`` lists them), e.g.
        ``{"tokens": {"alpha": 0.05}, "stop_rule": {"enabled": True}}``; the checks not named keep their
        defaults. The stop rule continues filtering past the run's stop until no token artifact is significant;
        the run folder is never changed.
    token_view : str, default "auto"
        Which text the token checks read: "auto" (the hypothesis of pairs, the premise for a premise-view run, the
        text of single texts), "pair", "premise" or "hypothesis".
    cache_dir : path, optional
        Where Φ is recomputed when the run's cache lacks it (default ``out/cache``; not in a run folder).
    dataset_options : dict, optional
        The loader's keywords, as for :func:`aflite.commands.run.run`.
    featurizer_options : dict, optional
        Options of the run's featurizer (those the run recorded are used; ``model_path`` where it needs one).
    show_progress : bool, default True
        Show progress bars.
    overwrite : bool, default False
        Start over in an ``out`` that holds an explain folder.
    **columns
        DATA's columns, named as for the run (:class:`aflite.data.Columns`: ``text_a=``, ``label=``, ...).

    Returns
    -------
    ExplainResult
        The checks' results, the verdict and the folder written.
    """
    dataset_options = with_columns(dataset_options, columns, "explain")  # before anything is read
    options = resolve_checks(checks, "explain")
    folder = RunFolder.of(out, "explain")
    for path, flag in ((folder.path, "--out"), (cache_dir or folder.path, "--cache-dir")):  # it reads the run only
        check_outside_runs(path, [run_dir], flag=flag)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    run = read_run(run_dir)
    fz = _featurizer(run)
    inst = run.instances()
    ds, rows = _load(data_path, run, inst, dataset_options)
    params = run.body.parameters
    seed = int(run.seed or 0)  # the envelope's seed
    texts, tview = _token_view(ds, rows, fz, token_view, options)
    timings["load_seconds"] = time.perf_counter() - t_start

    t0 = time.perf_counter()
    feats = _features(ds, run, Path(cache_dir) if cache_dir else folder.path / "cache", featurizer_options,
                      show_progress)
    X = _run_features(data_path, ds, rows, run, feats)
    y_str = ds.labels[rows]
    timings["features_seconds"] = time.perf_counter() - t0

    # ------------------------------------------------------------------ everything below computes; nothing written
    t0 = time.perf_counter()
    grp = ds.groups[rows] if run.body.groups not in (None, "none") and ds.groups is not None else None
    af = first_phase(X, y_str, grp, params, seed)
    y = np.searchsorted(af.classes_, y_str).astype(np.int64)
    rem0 = inst.removed_at == 0
    agree = (float(np.mean(np.isclose(af.first_phase_predictability_[rem0], inst.predictability[rem0])))
             if rem0.any() else float("nan"))
    timings["first_phase_seconds"] = time.perf_counter() - t0
    data = CheckData(
        np.asarray(inst.ids), y_str, af.classes_, y, X, seed, np.asarray(inst.kept, bool), inst.predictability,
        inst.removed_at, af, texts, tview, [ds.texts_a[r] for r in rows] if texts is None else None,
        {"token_view": token_view}, run.body, CheckContext(dataset=ds, rows=rows, groups=grp))
    found = run_checks(data, options=options)
    _check_outputs(found, folder, len(data))
    timings.update({f"{name}_seconds": r.seconds for name, r in found.items() if r.seconds is not None})
    body = explain_results(found, run, inst, source_name(data_path), seed, agree, timings, folder.path,
                           ds.source.memory is not None)
    result = ExplainResult(folder.path, body, data, found, ds, t_start, run.body)
    folder.finish(result)
    return result
