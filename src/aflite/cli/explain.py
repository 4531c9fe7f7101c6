"""``aflite explain DATA RUN_DIR --out DIR``: token artifacts with significance, a data map, label issues and
per-row reasons for a run of ``aflite run`` (see :mod:`aflite.explain`)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any

from aflite.cli.flags import (
    FEATURIZER_OPTIONS,
    LOADERS,
    add_cache,
    add_columns,
    add_featurizer_flags,
    add_out,
    add_quiet,
    claim_out_folder,
    dataset_options,
    featurizer_flag_values,
)
from aflite.option import Option, OptionValue
from aflite.rundir.commands import COMMANDS

# explain's --help ends with every explain check and its options, read from the check registry when the help is
# printed (building the parser imports no check: they import numpy); _Formatter puts the listing where this sits
CHECKS_EPILOG = "<the explain checks and their options>"


class _Formatter(argparse.HelpFormatter):
    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text != CHECKS_EPILOG:
            return super()._fill_text(text, width, indent)
        return "\n".join(check_listing(width))


def check_listing(width: int = 100) -> list[str]:
    """Every registered explain check with its options, as ``--check NAME:KEY=VALUE`` takes them (and the older
    flag that sets the same option, where there is one)."""
    from aflite.check import check_names, check_options
    from aflite.commands.explain import check_aliases

    flags = {target: f"--{kw.replace('_', '-')}" for kw, targets in check_aliases().items() for target in targets}
    lines = ["checks (each runs on every explain; set an option with --check NAME:KEY=VALUE, repeatable):"]
    for name in check_names("explain"):
        options = check_options(name)
        lines.append(f"  {name}" + ("" if options else ": no options"))
        for o in options:
            alias = flags.get((name, o.name))
            text = f"{name}:{o.describe()}" + (f"; also {alias}" if alias else "")
            lines += textwrap.wrap(text, width, initial_indent="    ", subsequent_indent="        ")
    return lines


# this command's entry in the one table of commands (aflite.rundir.commands.COMMANDS)
COMMAND = COMMANDS["explain"]

# the library calls whose keywords this command's flags are (tests/test_cli_keywords.py reads them)
LIBRARY = (COMMAND.library, *LOADERS, *FEATURIZER_OPTIONS)
# explain's older flags, each an alias of built-in checks' options (their ``alias=``): keyword -> the options it
# sets ("check:option") and the first one's declaration as its flag shows it (type, default, help, choices), stated
# here so that building the parser imports no check; tests/test_conformance.py holds it to the checks' own options
ALIAS_FLAGS: dict[str, tuple[tuple[str, ...], Option]] = {
    "alpha": (("tokens:alpha",), Option("alpha", float, 0.01, "family-wise α of the Bonferroni test")),
    "min_count": (("tokens:min_count", "surrogate:min_count", "ngram_coefficients:min_count"),
                  Option("min_count", int, 20, "test only tokens seen in at least this many texts of a set")),
    "null": (("tokens:null",), Option("null", str, "base", "the test's p0: each label's share of the set (base) or "
                                      "1/|Y| (uniform, Gardner et al. 2021's choice)", choices=("base", "uniform"))),
    "random_seeds": (("tokens:random_seeds", "label_issues:permutations"),
                     Option("random_seeds", int, 5, "same-size random subsets averaged for the 'random' set")),
    "stop_rule": (("stop_rule:enabled",), Option(
        "enabled", bool, False, "continue filtering past the run's stop with slices of k/4 until no (token, label) "
        "pair is Bonferroni-significant on the kept set, or the floor is reached")),
    "stop_floor": (("stop_rule:floor",), Option(
        "floor", int, None, "the smallest kept set the stop rule may reach; unset: the run's target size n")),
    "stop_max_phases": (("stop_rule:max_phases",),
                        Option("max_phases", int, 40, "cap on the stop rule's extra phases")),
    "neighbours": (("neighbours:k",), Option("k", int, 3, "nearest kept rows listed per removed row (0: none)")),
    "ngram_coefficients": (("ngram_coefficients:enabled",), Option(
        "enabled", bool, False, "n-gram Φ only: refit the run's featurizer (one more featurizing pass) and list, "
        "per row and overall, the tokens the ensemble's own weights push towards the gold label")),
}


# flags that are no keyword of LIBRARY, each with why
CLI_ONLY = {"check": "--check NAME:KEY=VALUE, repeatable: one entry of explain(checks={NAME: {KEY: VALUE}})",
            # the older flags (ALIAS_FLAGS), folded into checks= (a frozen set: a new check option is given with
            # --check)
            **dict.fromkeys(ALIAS_FLAGS, "an alias of built-in checks' options: folded into explain(checks=...)")}


def add_alias_flags(p: Any) -> None:
    """The flags that set built-in checks' options (``--alpha`` sets ``tokens:alpha``), one per entry of
    :data:`ALIAS_FLAGS`, typed, with their help and default."""
    for alias, (targets, first) in ALIAS_FLAGS.items():
        sets = ", ".join(targets)
        flag = "--" + alias.replace("_", "-")
        if first.type is bool:
            p.add_argument(flag, action="store_true", default=None, help=f"{sets}=true: {first.help}")
            continue
        default = "unset" if first.default is None else first.default
        p.add_argument(flag, type=first.converter(), default=None, choices=first.choices or None,
                       help=f"{sets}: {first.help} (default {default})")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "explain", formatter_class=_Formatter, epilog=CHECKS_EPILOG,
        help="what the artifacts are, why each row was removed, data map and label issues of a run",
        description="Reads a run folder of `aflite run` on DATA, recomputes its first filtering phase from the "
        "run's Φ, parameters and seed, and writes OUT/tokens.csv (Gardner et al. 2021 competency test on full D, "
        "kept D(Φ) and same-size random subsets), competency.png, instances.csv (data map, cleanlab label "
        "issues, top surrogate terms, nearest kept rows), datamap.png, weights.csv, results.json and summary.md.",
    )
    p.add_argument("data", type=Path, help="the dataset file or folder the run filtered")
    p.add_argument("run_dir", type=Path, help="the run directory of `aflite run` on DATA")
    add_out(p)
    p.add_argument("--check", action="append", default=None, metavar="NAME:KEY=VALUE",
                   help="an option of one check (repeatable), e.g. tokens:alpha=0.05 or stop_rule:enabled=true; "
                   "the checks and their options are listed at the end of this help. The flags below set the "
                   "built-in checks' options too (given both ways, the two values must agree)")
    add_alias_flags(p)
    p.add_argument("--token-view", default="auto", choices=("auto", "hypothesis", "premise", "pair"),
                   help="which text the token test reads: auto = the hypothesis of a pair (the premise for a "
                   "premise-view run), the text of a single-text dataset (default auto)")
    add_cache(p, help="cache folder for Φ when explain has to recompute it (default OUT/cache); the run's own "
              "cache, RUN_DIR/cache, is read first and never written, and a folder inside a run folder is refused")
    add_featurizer_flags(p.add_argument_group("the run's featurizer options that explain needs to recompute its Φ "
                                              "(the run recorded the others)"), "explain")
    add_columns(p)
    add_quiet(p)
    claim_out_folder(p)
    p.set_defaults(handler=run, validate=_validate)


def _validate(args: argparse.Namespace) -> None:
    """Before --out is claimed: explain reads the run folder and writes elsewhere (--out and --cache-dir), and every
    --check (and the flags that alias check options) names a check, one of its options and a value it takes."""
    from aflite.check import check_options
    from aflite.check.params import parse_check_flag
    from aflite.commands.explain import explain_check_options
    from aflite.rundir.lock import check_outside_runs

    check_outside_runs(args.out, [args.run_dir])
    if args.cache_dir is not None:
        check_outside_runs(args.cache_dir, [args.run_dir], flag="--cache-dir")
    args.checks = parse_check_flag(args.check or [], lambda name: check_options(name, "explain"))
    explain_check_options(args.checks, _alias_values(args))


def _alias_values(args: argparse.Namespace) -> dict[str, OptionValue]:
    """The flags that set built-in checks' options (their ``alias=``), by keyword."""
    from aflite.commands.explain import check_aliases

    return {k: getattr(args, k, None) for k in check_aliases()}


def run(args: argparse.Namespace) -> int:
    from aflite.commands.explain import explain, explain_check_options

    checks = explain_check_options(args.checks, _alias_values(args))  # the alias flags folded in
    fopts = featurizer_flag_values(args)  # checked against the run's featurizer by explain
    res = explain(args.data, args.run_dir, args.out_folder, checks=checks, token_view=args.token_view,
                  cache_dir=args.cache_dir, dataset_options=dict(dataset_options(args)), featurizer_options=fopts,
                  show_progress=not args.quiet)
    verdict = res.verdict_sentences()
    if verdict:
        print("verdict: " + " ".join(verdict))
    for found in (res.checks or {}).values():  # each check's own line (CheckResult.headline), in the order they ran
        if found.headline:
            print(found.headline)
    print(f"summary: {args.out / 'summary.md'}", file=sys.stderr)
    return 0
