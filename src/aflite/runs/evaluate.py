"""``aflite evaluate`` as a library call: :func:`evaluate` (``aflite.evaluate_runs``) compares the runs on D
(:func:`aflite.evaluate.compare_runs`) and writes the folder: results.json, tables.md, summary.md, accuracy.png and
report.html.

:func:`evaluation_sets` reads what the command line's ``--hans``, ``--test`` and ``--ood*`` options name (files,
label maps, the prediction map), with the same checks and one-line errors, so that a Python caller passes the same
keywords and gets the same sets; :func:`evaluate_files` is that plus :func:`evaluate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aflite.errors import ParameterError
from aflite.results import recording_warnings

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
    """``ood_label_map`` values → (map for every ood set, {set name: its own map}). ``NAME:a=b,...`` names the
    set (the text before the first ``=`` holds a ``:``); a name that is no ood set is an error."""
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
    from aflite.evaluate import load_eval_set, load_hans

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
    """What ``aflite evaluate`` does: :func:`evaluation_sets` from the file options, then :func:`evaluate` (its
    keywords in ``keywords``) writing ``out``. Returns its report."""
    eval_sets, tests = evaluation_sets(hans=hans, test=test, ood=ood, ood_label_map=ood_label_map,
                                       ood_pred_map=ood_pred_map, ood_group=ood_group, ood_max=ood_max)
    keywords["eval_sets"] = [*keywords.get("eval_sets", ()), *eval_sets]
    keywords["tests"] = [*keywords.get("tests", ()), *tests]
    return evaluate(data, runs, out, **keywords)


@recording_warnings()  # scikit-learn's warnings counted in results.json (aflite.results)
def evaluate(data: str | Path, runs: Sequence[str | Path], out: str | Path | None = None, *,
             cache_dir: str | Path | None = None, **keywords: Any) -> Any:
    """:func:`aflite.evaluate.compare_runs` (its keywords in ``keywords``; ``cache_dir`` defaults to ``out/cache``),
    and with ``out`` its folder: results.json, tables.md, summary.md, accuracy.png and report.html. Returns the
    :class:`aflite.evaluate.EvaluationReport` (``out`` set)."""
    import dataclasses

    from aflite.evaluate import compare_runs

    out_p = None if out is None else Path(out)
    from aflite.rundir import check_outside_runs

    for path, flag in ((out_p, "--out"), (cache_dir, "--cache-dir")):
        if path is not None:  # the run folders are read, never written
            check_outside_runs(path, runs, flag=flag)
    cache = Path(cache_dir) if cache_dir is not None else (out_p / "cache" if out_p is not None else None)
    if cache is None:
        raise ParameterError("give out or cache_dir (features and models are cached there)")
    report = compare_runs(data, runs, cache_dir=cache, **keywords)
    if out_p is None:
        return report
    report = dataclasses.replace(report, out=out_p)
    write_evaluation(report, out_p)
    return report


def write_evaluation(report: Any, out: Path) -> None:
    """The files of an evaluate folder, each written atomically; report.html last (it reads the others)."""
    from aflite.atomic import write_text
    from aflite.evaluate import plot_report
    from aflite.report import write_page
    from aflite.results import write_results_json
    from aflite.verdict import markdown

    out.mkdir(parents=True, exist_ok=True)
    write_results_json(out, {"verdict": report.verdict, "config": report.config,
                             "training_sets": report.training_sets, "aggregate": report.aggregate,
                             "runs": report.results}, command="evaluate", seed=report.config["split_seed"])
    tables = report.tables
    write_text(out / "tables.md", tables)
    write_text(out / "summary.md", markdown(report.verdict) + (tables if tables.endswith("\n") else tables + "\n"))
    plot_report(report, out / "accuracy.png")
    write_page(out)  # report.html: the accuracy bars with the chance line
