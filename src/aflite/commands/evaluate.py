"""``aflite evaluate`` as a library call (:func:`evaluate`, ``aflite.evaluate_runs``).

:func:`evaluation_sets` reads the ``--hans``, ``--test`` and ``--ood*`` spellings with the command line's checks
and errors, so that a Python caller passes the same keywords and gets the same sets.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aflite.data import COLUMNS, with_columns
from aflite.errors import ParameterError, UnknownKeywordError, takes_mappings
from aflite.evaluate import EvaluateResult, compare_runs, load_eval_set, load_hans
from aflite.rundir.folder import RunFolder, claims
from aflite.rundir.lock import check_outside_runs
from aflite.rundir.names import PAGE, RESULTS, SUMMARY_MD
from aflite.rundir.results import recording_warnings

__all__ = ["evaluate", "evaluate_files", "evaluation_sets", "parse_mapping"]


def parse_mapping(text: str | dict[str, str] | None, what: str = "--ood-pred-map") -> dict[str, str] | None:
    """``a=b,c=d`` → ``{"a": "b", "c": "d"}`` (a dict is taken as it is); ParameterError naming ``what``."""
    what = what if what != "--ood-pred-map" else f"--ood-pred-map {text!r}"
    if text is None or isinstance(text, dict):
        return None if text is None else {str(k): str(v) for k, v in text.items()}
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise ParameterError(f"{what}: expected FROM=TO pairs separated by commas, got {part!r}")
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _label_maps(specs: Sequence[str], names: list[str]) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """``ood_label_map`` values → (map for every ood set, {set name: its own map}); ``NAME:a=b,...`` names the
    set (a ``:`` before the first ``=``), which must be an ood set."""
    every: dict[str, str] = {}
    per_set: dict[str, dict[str, str]] = {}
    for spec in specs:
        head = spec.split("=", 1)[0]
        name, body = (spec.split(":", 1) if ":" in head else ("", spec))
        name = name.strip()
        mapping = parse_mapping(body, f"--ood-label-map {spec!r}") or {}
        if not mapping:
            raise ParameterError(f"--ood-label-map {spec!r}: no RAW=LABEL pair")
        if not name:
            every.update(mapping)
        elif name not in names:
            raise ParameterError(f"--ood-label-map {spec!r}: no --ood set is named {name!r} (sets: "
                                 f"{', '.join(names) or 'none'})")
        else:
            per_set.setdefault(name, {}).update(mapping)
    return every, per_set


def evaluation_sets(*, hans: str | Path | None = None, test: Sequence[str] = (), ood: Sequence[str] = (),
                    ood_label_map: Sequence[str] = (), ood_pred_map: str | dict[str, str] | None = None,
                    ood_group: str | None = None, ood_max: int | None = None) -> tuple[list[Any], list[Any]]:
    """(eval_sets, tests) for :func:`evaluate` from the command line's spellings: ``hans`` a HANS
    file; ``test`` entries ``NAME=FILE[,FILE...]`` (sets with D's labels); ``ood`` entries ``[NAME=]FILE[,FILE...]``
    with ``ood_label_map`` entries ``[NAME:]RAW=LABEL,...``, ``ood_pred_map`` ``PRED=LABEL,...``, ``ood_group`` a
    column to break accuracy down by and ``ood_max`` a stratified sample size. Set names must be unique."""
    eval_sets = []
    if hans is not None:
        eval_sets.append(load_hans(hans, max_rows=ood_max))
    named: list[tuple[str, list[Path]]] = []
    for spec in ood:
        name, _, files = spec.rpartition("=") if "=" in spec else ("", "", spec)
        paths = [Path(f) for f in files.split(",") if f]
        if not paths:
            raise ParameterError(f"--ood {spec!r}: no file")
        named.append((name.strip() or paths[0].name.split(".")[0], paths))
    every, per_set = _label_maps(ood_label_map, [n for n, _ in named])
    pred_map = parse_mapping(ood_pred_map)
    for name, paths in named:
        eval_sets.append(load_eval_set(paths, name, label_map={**every, **per_set.get(name, {})} or None,
                                       pred_map=pred_map, group_column=ood_group, max_rows=ood_max))
    tests = []
    for spec in test:
        name, sep, files = spec.partition("=")
        paths = [Path(f) for f in files.split(",") if f]
        if not sep or not name.strip() or not paths:
            raise ParameterError(f"--test {spec!r}: expected NAME=FILE[,FILE...]")
        tests.append(load_eval_set(paths, name.strip()))
    names = [e.name for e in eval_sets + tests]
    if len(set(names)) != len(names):
        raise ParameterError("two test/evaluation sets share a name: name them with --test / --ood NAME=FILE")
    return eval_sets, tests


def evaluate_files(data: str | Path, runs: Sequence[str | Path], out: str | Path, *,
                   hans: str | Path | None = None, test: Sequence[str] = (), ood: Sequence[str] = (),
                   ood_label_map: Sequence[str] = (), ood_pred_map: str | dict[str, str] | None = None,
                   ood_group: str | None = None, ood_max: int | None = None, **keywords: Any) -> Any:
    """What ``aflite evaluate`` does: :func:`evaluation_sets`, then :func:`evaluate` with ``keywords``."""
    eval_sets, tests = evaluation_sets(hans=hans, test=test, ood=ood, ood_label_map=ood_label_map,
                                       ood_pred_map=ood_pred_map, ood_group=ood_group, ood_max=ood_max)
    keywords["eval_sets"] = [*keywords.get("eval_sets", ()), *eval_sets]
    keywords["tests"] = [*keywords.get("tests", ()), *tests]
    return evaluate(data, runs, out, **keywords)


def _with_columns(keywords: dict[str, Any]) -> dict[str, Any]:
    """``keywords`` with the column keywords and ``groups`` moved into ``dataset_options`` (compare_runs' one
    spelling); a keyword neither takes is refused as Python refuses it, before the folder is written."""
    unknown = sorted(set(keywords) - set(inspect.signature(compare_runs).parameters) - {*COLUMNS, "groups"})
    if unknown:
        raise UnknownKeywordError(f"evaluate() got an unexpected keyword argument {unknown[0]!r}")
    columns = {k: keywords.pop(k) for k in (*COLUMNS, "groups") if k in keywords}
    if columns:
        keywords["dataset_options"] = with_columns(keywords.get("dataset_options"), columns, "evaluate",
                                                   also=("groups",))
        if columns.get("groups") is not None:
            keywords["dataset_options"]["groups"] = columns["groups"]
    return keywords


@claims("evaluate")  # a path given as out is claimed as the CLI claims --out
@recording_warnings()  # scikit-learn's warnings counted in results.json (aflite.rundir.results)
@takes_mappings("dataset_options", "featurizer_options")
def evaluate(data: Any, runs: Sequence[str | os.PathLike[str]],
             out: str | os.PathLike[str] | RunFolder | None = None, *,
             cache_dir: str | os.PathLike[str] | None = None, overwrite: bool = False,
             **keywords: Any) -> EvaluateResult:
    """:func:`aflite.evaluate.compare_runs` on ``data`` (read as :func:`aflite.run` reads it), and with ``out`` its
    folder: tables.md, accuracy.png, results.json, summary.md and report.html.

    Parameters
    ----------
    data : path, pandas.DataFrame, pyarrow.Table or datasets.Dataset
        The data the runs filtered.
    runs : sequence of path
        Run folders of ``aflite run`` to compare.
    out : path or RunFolder, optional
        The folder to write (None: nothing written).
    cache_dir : path, optional
        Where features are cached (default ``out/cache``).
    overwrite : bool, default False
        Start over in an ``out`` that holds an evaluation.
    **keywords
        :func:`aflite.evaluate.compare_runs`'s keywords (``models``, ``seeds``, ...), the column keywords and
        ``groups``.

    Returns
    -------
    EvaluateResult
        Each model's accuracy on each run's sets, and the folder.
    """
    keywords = _with_columns(keywords)
    folder = None if out is None else RunFolder.of(out, "evaluate")
    for path, flag in ((None if folder is None else folder.path, "--out"), (cache_dir, "--cache-dir")):
        if path is not None:  # the run folders are read, never written
            check_outside_runs(path, runs, flag=flag)
    cache = Path(cache_dir) if cache_dir is not None else (folder.path / "cache" if folder is not None else None)
    if cache is None:
        raise ParameterError("give out or cache_dir (features and models are cached there)")
    if folder is not None:  # every name it writes, checked before the folder is touched (a user's tables.md)
        folder.check_writes([*EvaluateResult.file_names, SUMMARY_MD, PAGE, RESULTS])
    report = compare_runs(data, runs, cache_dir=cache, **keywords)
    if folder is not None:
        folder.finish(report)
    return report
