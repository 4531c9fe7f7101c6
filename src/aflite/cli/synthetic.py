"""``aflite synthetic``: the paper's synthetic experiment (§3, Figure 2, appendix Table 7)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from aflite.cli.flags import (
    SIZE_HELP,
    add_quiet,
    add_seed,
    claim_out_folder,
    out_path,
    partitions,
    size,
)
from aflite.rundir.commands import COMMANDS
from aflite.verdict import define_terms


def _separations(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.replace(" ", "").split(",") if v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("give at least one separation")
    return values


# this command's entry in the one table of commands (aflite.rundir.commands.COMMANDS)
COMMAND = COMMANDS["synthetic"]

# the library calls whose keywords this command's flags are (tests/test_cli_keywords.py reads them)
LIBRARY = (
    COMMAND.library,
    "aflite.experiments.outputs:save_synthetic",
    "aflite.core.filter:AFLite",
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "synthetic",
        help="reproduce the synthetic concentric-circles experiment (Figure 2, Table 7)",
        description="Builds two-ring datasets at several class separations with class-specific Gaussian bias "
        "features on 75% of each class (labels of 5% of the biased instances flipped at separation 0.8), "
        "runs AFLite with Table 8's synthetic setting (m=128, t=100, k=1, tau=0.75; n=200) on each, and "
        "reports the dev accuracy of an RBF SVM and of logistic regression trained on D and on D(Phi), "
        "mean +- std over seeds, next to the paper's Table 7. With --out, writes table.txt, results.json "
        "and figure2.png there.",
    )
    p.add_argument("--seeds", type=int, default=10, metavar="N", help="number of seeds (default 10)")
    add_seed(p, help="first seed; runs use seed .. seed+N-1 (default 0)")
    p.add_argument("--separations", type=_separations, default=(0.8, 0.7, 0.6, 0.4), metavar="S,S,...",
                   help="class separations in (0, 1), comma-separated (default 0.8,0.7,0.6,0.4)")
    p.add_argument("--n-samples", type=int, default=1000, metavar="N",
                   help="instances per dataset (default 1000)")
    p.add_argument("--dev-fraction", type=float, default=0.2, metavar="F",
                   help="stratified dev share of D used for the accuracies (default 0.2)")
    g = p.add_argument_group("AFLite parameters", "Defaults are Table 8's synthetic column; n is our choice (2t).")
    g.add_argument("-m", "--n-partitions", type=partitions, default=128, metavar="M", help="default 128")
    g.add_argument("-t", "--train-size", type=size, default=100, metavar="T", help=f"{SIZE_HELP} (default 100)")
    g.add_argument("-k", "--slice-size", type=size, default=1, metavar="K", help=f"{SIZE_HELP} (default 1)")
    g.add_argument("--threshold", type=float, default=0.75, metavar="TAU", help="τ (default 0.75)")
    g.add_argument("-n", "--target-size", type=size, default=200, metavar="N", help=f"{SIZE_HELP} (default 200)")
    p.add_argument("--out", type=out_path, default=None, help="folder for table.txt, results.json and figure2.png")
    p.add_argument("--json", action="store_true", help="print the JSON results instead of the text table")
    claim_out_folder(p)
    add_quiet(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from aflite.experiments.synthetic import format_table, run_synthetic

    result = run_synthetic(
        seeds=range(args.seed, args.seed + args.seeds),
        separations=args.separations,
        n_samples=args.n_samples,
        aflite_params={
            "n_partitions": args.n_partitions,
            "train_size": args.train_size,
            "slice_size": args.slice_size,
            "threshold": args.threshold,
            "target_size": args.target_size,
        },
        dev_fraction=args.dev_fraction,
        show_progress=not args.quiet,
    )
    table = format_table(result)
    from aflite.experiments.outputs import synthetic_json, synthetic_verdict

    obj = synthetic_json(result)  # the verdict first, then every figure (as in results.json)
    if args.out is not None:
        from aflite.experiments.outputs import save_synthetic

        save_synthetic(result, args.out_folder, seed=args.seed)
        if not args.quiet:
            print(f"wrote table.txt, results.json and figure2.png to {args.out}", file=sys.stderr)
    if args.json:
        print(json.dumps(obj, indent=2, allow_nan=False))
    else:
        print(table, end="")
        verdict = synthetic_verdict(obj)  # the sentences results.json and summary.md open with
        if verdict:  # each symbol defined once
            print("\nverdict: " + " ".join(define_terms(verdict)))
    return 0


__all__ = ["register", "run"]
