"""What :func:`aflite.commands.run.run` makes of its keywords (Table 8's sizes scaled to |D|); kept apart so that
the run's own module is the pipeline and nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

import numpy as np

from aflite.core.filter import AFLite
from aflite.core.phase import resolve_size
from aflite.data.keywords import Columns, with_columns
from aflite.errors import InputError, ParameterError, check_mappings
from aflite.option import OptionValue

__all__ = ["PARAMETERS", "RUNTIME", "FilterSizes", "RunKeywords", "estimator_params", "run_keywords",
           "scaled_defaults", "scaled_for"]

PARAMETERS = ("target_size", "n_partitions", "train_size", "slice_size", "threshold")


def scaled_defaults(n: int) -> dict[str, int | float]:
    """Table 8's SNLI parameters scaled by n / 550,152 (m and τ do not scale), by :class:`AFLite`'s own rule so the
    defaults live in one place; the floors t >= 2 and n >= 3 only act on tiny data (|D| <= 16)."""
    d = AFLite().get_params()
    return {
        "n_partitions": d["n_partitions"],
        "train_size": max(2, resolve_size(d["train_size"], n, "train_size")),
        "slice_size": resolve_size(d["slice_size"], n, "slice_size"),
        "target_size": max(3, resolve_size(d["target_size"], n, "target_size")),
        "threshold": d["threshold"],
    }


def scaled_for(n: int, given: dict[str, OptionValue], name: str) -> dict[str, int | float]:
    """The scaled defaults for ``n`` rows; too few rows for the smallest target size are refused as such (not as
    a target size the user never set)."""
    chosen = scaled_defaults(n)
    if "target_size" not in given and n <= int(chosen["target_size"]):
        raise InputError(f"{name}: {n:,} row(s) are too few to filter: AFLite keeps at least "
                         f"{chosen['target_size']} rows (the smallest target size) and removes some, so it needs at "
                         f"least {int(chosen['target_size']) + 1} rows")
    return chosen


class FilterSizes(TypedDict, total=False):
    """:class:`AFLite`'s sizes as keywords of :func:`run` (the command line's ``--train-size`` is ``train_size=``):
    a count, or a fraction of |D| below 1; ``threshold`` τ."""

    target_size: int | float | None
    n_partitions: int | None
    train_size: int | float | None
    slice_size: int | float | None
    threshold: float | None


class RunKeywords(Columns, FilterSizes, total=False):
    """:func:`run`'s keywords beyond its signature: the dataset's columns and the filter's sizes."""


def run_keywords(dataset_options: dict[str, Any] | None, params: AFLite | Mapping[str, Any] | None,
                 keywords: dict[str, Any]) -> tuple[dict[str, Any], AFLite | dict[str, Any] | None]:
    """(dataset_options with the column keywords, params with the size keywords); a size given in both with two
    values is refused, as is an unknown keyword (a TypeError, as Python's own)."""
    options = with_columns(dataset_options, keywords, "run", also=PARAMETERS)
    sizes = {k: v for k, v in keywords.items() if k in PARAMETERS and v is not None}
    if isinstance(params, AFLite):
        own = params.get_params()
        twice = sorted(k for k, v in sizes.items() if own[k] != AFLite().get_params()[k] and own[k] != v)
        if twice:
            raise ParameterError(f"{twice[0]} is given twice, {twice[0]}={sizes[twice[0]]!r} and "
                                 f"params.{twice[0]}={own[twice[0]]!r}: give it once")
        return options, AFLite(**{**own, **sizes}) if sizes else params
    check_mappings(params=params)
    twice = sorted(k for k, v in sizes.items() if (params or {}).get(k) not in (None, v))
    if twice:
        raise ParameterError(f"{twice[0]} is given twice, {twice[0]}={sizes[twice[0]]!r} and params[{twice[0]!r}]="
                             f"{(params or {})[twice[0]]!r}: give it once")
    return options, ({**(params or {}), **sizes} if sizes or params is not None else None)


# AFLite's parameters that say how and where the fit runs, not how much it removes: never an "override" of the
# scaled defaults in results.json
RUNTIME = ("strategy", "device", "storage", "random_state", "executor")


def estimator_params(
    params: AFLite | Mapping[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, OptionValue], dict[str, Any]]:
    """(the estimator's other keywords, the size overrides, the RUNTIME ones) from an :class:`AFLite` or a dict:
    one parameter space with ``filter_files``; a size left at AFLite's default is no override."""
    defaults = AFLite().get_params()
    if isinstance(params, AFLite):
        base = params.get_params()
        given = {k: base.pop(k) for k in PARAMETERS}
        given = {k: v for k, v in given.items() if v != defaults[k] and v is not None}
    else:
        check_mappings(params=params)
        base, given = {}, {k: v for k, v in (params or {}).items() if v is not None}
    fixed = {k: given.pop(k, base.pop(k, defaults[k])) for k in RUNTIME}
    rs = 0 if fixed["random_state"] is None else fixed["random_state"]
    if isinstance(rs, bool) or not isinstance(rs, int | np.integer):
        raise ParameterError(f"random_state must be an int seed for run() (every random choice of the run flows "
                             f"from it), not {rs!r}")
    return base, given, {**fixed, "random_state": int(rs)}
