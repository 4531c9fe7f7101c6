"""``aflite explain DATA RUN_DIR --out DIR``: token artifacts with significance, a data map, label issues and
per-row reasons for a run of ``aflite run`` (see :mod:`aflite.explain`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from aflite.cli.options import (
    add_cache,
    add_columns,
    add_featurizer_flags,
    add_out,
    add_overwrite_option,
    add_quiet,
    claim_out_folder,
    dataset_options,
    featurizer_flag_values,
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        help="what the artifacts are, why each row was removed, data map and label issues of a run",
        description="Reads a run folder of `aflite run` on DATA, recomputes its first filtering phase from the "
        "run's Φ, parameters and seed, and writes OUT/tokens.csv (Gardner et al. 2021 competency test on full D, "
        "kept D(Φ) and same-size random subsets), competency.png, instances.csv (data map, cleanlab label "
        "issues, top surrogate terms, nearest kept rows), datamap.png, weights.csv, results.json and summary.md.",
    )
    p.add_argument("data", type=Path, help="the dataset file or folder the run filtered")
    p.add_argument("run_dir", type=Path, help="the run directory of `aflite run` on DATA")
    add_out(p)
    p.add_argument("--alpha", type=float, default=0.01, help="family-wise α of the Bonferroni test (default 0.01)")
    p.add_argument("--min-count", type=int, default=20,
                   help="test only tokens seen in at least this many texts of a set (default 20)")
    p.add_argument("--null", default="base", choices=("base", "uniform"),
                   help="the token test's p0: each label's share of the set (base, default) or 1/|Y| (uniform, "
                   "Gardner et al. 2021's choice)")
    p.add_argument("--random-seeds", type=int, default=5,
                   help="same-size random subsets averaged for the 'random' set (default 5)")
    p.add_argument("--token-view", default="auto", choices=("auto", "hypothesis", "premise", "pair"),
                   help="which text the token test reads: auto = the hypothesis of a pair (the premise for a "
                   "premise-view run), the text of a single-text dataset (default auto)")
    p.add_argument("--neighbours", type=int, default=3, help="nearest kept rows listed per removed row (default 3)")
    add_cache(p, help="cache folder for Φ when explain has to recompute it (default OUT/cache); the run's own "
              "cache, RUN_DIR/cache, is read first and never written, and a folder inside a run folder is refused")
    add_featurizer_flags(p.add_argument_group("the run's featurizer options that explain needs to recompute its Φ "
                                              "(the run recorded the others)"), "explain")
    p.add_argument("--ngram-coefficients", action="store_true",
                   help="n-gram Φ only: refit the run's featurizer (one more featurizing pass) and list, per row and "
                   "overall, the tokens the ensemble's own weights push towards the gold label")
    g = p.add_argument_group("stop rule (optional; off by default, the paper's k-rule stays the run's rule)")
    g.add_argument("--stop-rule", action="store_true",
                   help="continue filtering past the run's stop with slices of k/4 until no (token, label) pair is "
                   "Bonferroni-significant on the kept set, or the floor is reached; reports which came first")
    g.add_argument("--stop-floor", type=int, default=None, metavar="N",
                   help="smallest kept set the stop rule may reach (default the run's target size n)")
    g.add_argument("--stop-max-phases", type=int, default=40, help="cap on the stop rule's extra phases (default 40)")
    add_columns(p)
    add_quiet(p)

    add_overwrite_option(p)

    claim_out_folder(p)
    p.set_defaults(handler=run, validate=_validate)


def _validate(args: argparse.Namespace) -> None:
    """Before --out is claimed: explain reads the run folder and writes elsewhere (--out and --cache-dir)."""
    from aflite.rundir.lock import check_outside_runs

    check_outside_runs(args.out, [args.run_dir])
    if args.cache_dir is not None:
        check_outside_runs(args.cache_dir, [args.run_dir], flag="--cache-dir")


def run(args: argparse.Namespace) -> int:
    from aflite.runs.explain import explain

    fopts = featurizer_flag_values(args)  # checked against the run's featurizer by explain
    res = explain(args.data, args.run_dir, args.out_folder, alpha=args.alpha, min_count=args.min_count,
                  random_seeds=args.random_seeds, token_view=args.token_view, neighbours=args.neighbours,
                  cache_dir=args.cache_dir, dataset_options=dataset_options(args), featurizer_options=fopts,
                  show_progress=not args.quiet, stop_rule=args.stop_rule, stop_floor=args.stop_floor,
                  stop_max_phases=args.stop_max_phases, ngram_coefficients=args.ngram_coefficients,
                  null=args.null)
    r = res.results
    if r.get("verdict"):
        print("verdict: " + " ".join(r["verdict"]))
    if r.get("significant_tokens"):
        s = r["significant_tokens"]
        print(f"significant (token, label) pairs on the {r['token_view']}: full {s['full']}, kept {s['kept']}, "
              f"random {s['random']:.1f}")
    sr = r["stop_rule"]
    if sr.get("enabled"):
        print(f"stop rule: stopped by {sr['stopped_by']} after removing {sr['extra_removed']} more rows")
    li = r["label_issues"]
    print(f"regions: {r['datamap']['regions']}; label issues: {li['n'] if li['skipped'] is None else li['skipped']}")
    print(f"summary: {args.out / 'summary.md'}", file=sys.stderr)
    return 0
