"""``aflite filter``: AFLite on precomputed features and labels."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from aflite.cli.flags import (
    SIZE_HELP,
    add_cluster,
    add_device,
    add_out,
    add_quiet,
    add_seed,
    claim_out_folder,
    partitions,
)
from aflite.cli.flags import size as _size
from aflite.defaults import SNLI_DEFAULTS
from aflite.rundir.commands import COMMANDS
from aflite.verdict import phases_text


def add_filter_options(p: argparse.ArgumentParser, scaled: bool = False) -> None:
    """AFLite's parameters with the paper's defaults; shared by ``filter`` and (``scaled``) ``run``.

    ``filter`` states the defaults as fractions of |D|; ``run`` leaves them unset (None) and scales Table 8's
    counts to the dataset itself, printing what it chose; it has no --model/-C (always the fast ensemble).
    """
    N = SNLI_DEFAULTS["dataset_size"]
    if scaled:
        title = ("Defaults: Table 8's SNLI setting (m=64, t=50K, k=10K, tau=0.75, n=92K of 550,152) with the sizes "
                 "scaled by |D|/550,152; the chosen values are printed and saved in results.json.")
    else:
        title = ("Defaults are Table 8's SNLI setting (Le Bras et al. 2020, appendix A.5), scaled by |D|/550,152 "
                 "where they are sizes.")
    g = p.add_argument_group("AFLite parameters", title)

    def default(key: str) -> float | None:
        return None if scaled else SNLI_DEFAULTS[key] / N

    def said(key: str, text: str) -> str:
        return "" if scaled else f" (default {SNLI_DEFAULTS[key] / N:.4f} = {text})"

    g.add_argument("-n", "--target-size", type=_size, default=default("target_size"), metavar="N",
                   help=f"stop when |S| <= n; {SIZE_HELP}{said('target_size', '92K/550K')}")
    g.add_argument("-m", "--n-partitions", type=partitions, default=None if scaled else SNLI_DEFAULTS["n_partitions"],
                   metavar="M", help="linear classifiers per filtering phase (default 64)")
    g.add_argument("-t", "--train-size", type=_size, default=default("train_size"), metavar="T",
                   help=f"training set size of each classifier; {SIZE_HELP}{said('train_size', '50K/550K')}")
    g.add_argument("-k", "--slice-size", type=_size, default=default("slice_size"), metavar="K",
                   help=f"most instances removed per phase; {SIZE_HELP}{said('slice_size', '10K/550K')}")
    g.add_argument("--threshold", type=float, default=None if scaled else SNLI_DEFAULTS["threshold"],
                   metavar="TAU", help="τ: only instances with predictability >= τ are removed (default 0.75)")
    g.add_argument("--strategy", choices=("slicing", "greedy", "gumbel"), default="slicing",
                   help="selection heuristic of appendix A.1 (default slicing, the paper's)")
    if not scaled:
        g.add_argument("--model", choices=("logistic", "sklearn"), default="logistic",
                       help="logistic: fast batched L2 logistic regression; sklearn: scikit-learn's "
                       "LogisticRegression in a loop (reference, slow) (default logistic)")
        g.add_argument("-C", type=float, default=1.0, help="inverse L2 strength, as in scikit-learn (default 1.0)")
    add_seed(g)


def add_scale_options(p: argparse.ArgumentParser, cluster: bool | str = True) -> None:
    """Where the ensemble runs: device, GPU storage dtype and (for ``filter`` and ``run``) a Dask cluster
    (``cluster``: True, or what the command runs there, for the help)."""
    g = p.add_argument_group("where it runs")
    add_device(g, what="where the ensemble (and the encoder) runs")
    g.add_argument("--storage", choices=("float32", "bfloat16", "float16"), default="float32",
                   help="dtype of the features held on the GPU; products accumulate in float32 (default float32)")
    if cluster:
        add_cluster(g, what="fit the partitions" if cluster is True else str(cluster))
        g.add_argument("--cluster-scratch", type=Path, default=None, metavar="DIR",
                       help="folder every worker can read at the same path (shared storage) for the features "
                       "(default: a temporary folder, fine for a local cluster)")


# this command's entry in the one table of commands (aflite.rundir.commands.COMMANDS)
COMMAND = COMMANDS["filter"]

# the library calls whose keywords this command's flags are (tests/test_cli_keywords.py reads them)
LIBRARY = (COMMAND.library, "aflite.core.filter:AFLite")
# flags that are no keyword of LIBRARY, each with why
CLI_ONLY = {"seed": "AFLite's random_state (scikit-learn's name); --seed is the one seed of every command"}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "filter",
        help="filter a dataset given precomputed features and labels",
        description="Run AFLite (Algorithm 1) on precomputed features Φ(x) and labels. Writes kept/removed "
        "ids, a per-instance table and results.json to --out; checkpoints after every phase and continues "
        "with --resume.",
    )
    p.add_argument("--features", required=True, type=Path,
                   help=".npy matrix, or .csv/.tsv/.parquet with numeric feature columns")
    p.add_argument("--feature-columns", nargs="+", default=None,
                   help="columns to use as features (default all numeric)")
    p.add_argument("--labels", required=True, type=Path,
                   help=".npy vector, or .csv/.tsv/.jsonl/.parquet/.txt with a label column")
    p.add_argument("--label", default=None, metavar="COL", help="label column of --labels (default 'label')")
    p.add_argument("--ids", type=Path, default=None, help="file of instance ids (default: row numbers)")
    p.add_argument("--id-column", default=None, metavar="COL", help="id column of --ids (default 'id')")
    p.add_argument("--groups", type=Path, default=None,
                   help="file with a group per instance (column 'group'); a group is never split between a "
                   "classifier's training and held-out sides")
    add_out(p, what="run directory")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    claim_out_folder(p)
    p.add_argument("--mmap", action="store_true", help="memory-map a .npy feature file instead of loading it")
    add_quiet(p)
    add_filter_options(p)
    add_scale_options(p)
    p.set_defaults(handler=run)


def build_filter(args: argparse.Namespace, executor: Any = None) -> Any:
    from aflite.core.filter import AFLite

    return AFLite(
        target_size=args.target_size,
        n_partitions=args.n_partitions,
        train_size=args.train_size,
        slice_size=args.slice_size,
        threshold=args.threshold,
        strategy=args.strategy,
        model=args.model,
        C=args.C,
        random_state=args.seed,
        device=args.device,
        storage=args.storage,
        executor=executor,
    )


def run(args: argparse.Namespace) -> int:
    from aflite.commands.filter import filter_files

    res = filter_files(args.features, args.labels, args.out_folder, aflite=build_filter(args), ids=args.ids,
                       groups=args.groups, feature_columns=args.feature_columns, label=args.label,
                       id_column=args.id_column, mmap=args.mmap, resume=args.resume, overwrite=args.overwrite,
                       show_progress=not args.quiet, cluster=args.cluster,
                       cluster_scratch=args.cluster_scratch)
    s = res.summary

    print(f"kept {s['size_after']} of {s['size_before']} instances after {phases_text(s['n_iterations'])}: "
          f"{s['stop_reason']}")
    print(f"results in {args.out}", file=sys.stderr)
    return 0


__all__ = ["register", "run", "add_filter_options", "add_scale_options", "build_filter"]
