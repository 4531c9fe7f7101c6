"""``aflite evaluate``: D vs D(Φ) vs same-size random subsets vs the single-iteration baseline, in and out of
distribution (Le Bras et al. 2020, Tables 1 and 3)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from aflite.cli.flags import (
    LOADERS,
    DatasetOptions,
    add_cache,
    add_columns,
    add_device,
    add_featurizer_flags,
    add_groups_option,
    add_out,
    add_quiet,
    add_seed,
    claim_out_folder,
    dataset_options,
    featurizer_flag_values,
)
from aflite.defaults import DEFAULT_MODELS, FINETUNE_CPU_MAX_TRAIN, LR_CANDIDATES
from aflite.errors import ParameterError
from aflite.rundir.commands import COMMANDS

# this command's entry in the one table of commands (aflite.rundir.commands.COMMANDS)
COMMAND = COMMANDS["evaluate"]

# the library calls whose keywords this command's flags are (tests/test_cli_keywords.py reads them)
LIBRARY = (
    COMMAND.library,
    "aflite.commands.evaluate:evaluate",
    "aflite.evaluate:compare_runs",
    "aflite.evaluate:FinetuneOptions",
    *LOADERS,
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "evaluate",
        help="re-estimate models on D, D(Φ), same-size random subsets and the single-iteration set; HANS / OOD",
        description="Splits DATA once by premise group into a training part and a held-out part; every benchmark "
        "(D, each run's D(Φ), a random subset of D of |D(Φ)| rows per seed, and the single-iteration set: one "
        "linear model over the run's Φ, its most predictable rows removed at once down to the same size) trains "
        "each model on its rows of the training part and is tested on its own rows of the held-out part, on the "
        "whole held-out part of D, on separate test sets with D's labels (--test; with --no-split D is not split "
        "and the test sets are the only in-distribution score, the paper's protocol for a training set) and on "
        "labelled external sets (--hans, --ood). A run's warm-up slice (warmup_ids.txt) is left out of every "
        "training set. Writes OUT/results.json, OUT/tables.md (Table 3 and Table 1 shapes) and OUT/accuracy.png.",
    )
    p.add_argument("data", type=Path, help="the original dataset D (the file the runs filtered)")
    p.add_argument("runs", type=Path, nargs="+", help="run directories of aflite run on DATA")
    add_out(p)
    p.add_argument("--models", default=",".join(DEFAULT_MODELS),
                   help="comma-separated kind[:featurizer][:view]: probe:minilm:pair, mlp:ngram:hypothesis, "
                   "ngram:hypothesis, ppmi:pair, finetune:pair, finetune:hypothesis, ... (view pair, hypothesis = "
                   f"the second text column, premise = the first) (default {','.join(DEFAULT_MODELS)})")
    p.add_argument("--seeds", type=int, default=3, help="number of seeds 0..N-1 (default 3)")
    p.add_argument("--model-seeds", type=int, default=None, metavar="N",
                   help="stochastic models (mlp, finetune) train D, the single-iteration sets and each D(Φ) with the "
                   "first N seeds only (default: all --seeds); the random subsets stay one per seed")
    p.add_argument("--heldout", type=float, default=0.2, help="held-out fraction of D's premise groups (default 0.2)")
    add_seed(p, help="seed of the train/held-out split (default 0); the benchmarks' seeds are 0..N-1 (--seeds)")
    p.add_argument("--random-baseline", action=argparse.BooleanOptionalAction, default=True,
                   help="train on same-size random subsets of D too (--no-random-baseline skips them)")
    p.add_argument("--label-matched", action=argparse.BooleanOptionalAction, default=False,
                   help="train on random subsets of D with D(Φ)'s label counts too, one per seed: the part of "
                   "D(Φ)'s drop that is not its label shift (off by default: one more model per seed)")
    p.add_argument("--single-iteration", action=argparse.BooleanOptionalAction, default=True,
                   help="train on the single-iteration baseline too (--no-single-iteration skips it)")
    p.add_argument("--hans", type=Path, default=None,
                   help="HANS evaluation file (neutral/contradiction count as non-entailment; per heuristic)")
    p.add_argument("--test", action="append", default=[], metavar="NAME=FILE[,FILE...]",
                   help="a separate test set with D's labels (repeatable), e.g. snli-dev=dev.tsv.gz: every training "
                   "set is scored on it (Table 3 shape, next to its majority rate)")
    p.add_argument("--split", action=argparse.BooleanOptionalAction, default=True,
                   help="split D into train/held-out (default); --no-split trains on every row of each benchmark and "
                   "scores on the --test sets (and --hans / --ood) only, the paper's protocol when DATA is a "
                   "training set")
    p.add_argument("--ood", action="append", default=[], metavar="[NAME=]FILE[,FILE...]",
                   help="a labelled evaluation set (repeatable); several files of one set must share labels")
    p.add_argument("--ood-label-map", action="append", default=[], metavar="[NAME:]RAW=LABEL,...",
                   help="rename gold labels of the --ood set NAME (repeatable), e.g. "
                   "sick:ENTAILMENT=entailment,NEUTRAL=neutral; without NAME: every --ood set. An entry that "
                   "matches no label of its set is an error")
    p.add_argument("--ood-pred-map", default=None, metavar="PRED=LABEL,...",
                   help="map predicted labels into the --ood label space, e.g. neutral=non-entailment,...")
    p.add_argument("--ood-group", default=None, help="column of --ood files to break accuracy down by")
    p.add_argument("--ood-max", type=int, default=None, metavar="N",
                   help="evaluate every model on a seeded sample of N rows of each external set, stratified by "
                   "group and label (default: all rows)")
    add_cache(p, help="feature/model cache folder (default OUT/cache); the runs' own caches are read for their "
              "features (never written), and a folder inside a run folder is refused")
    add_columns(p)
    add_quiet(p)
    add_groups_option(p)
    claim_out_folder(p)
    _add_finetune_options(p)
    p.set_defaults(handler=run, validate=_validate)


def _add_finetune_options(p: Any) -> None:
    """The options of the fine-tuned models (``finetune:VIEW``): the recipe, its caps and the learning-rate check."""
    g = p.add_argument_group("fine-tuning (models finetune:VIEW)", "Defaults: appendix A.6 (Adam, eps 1e-8, "
                             "3 epochs, batch 92), max length 128; the learning rate of a text model is chosen by a "
                             "short check on D's training part (--lr-candidates), image networks lr 1e-3. "
                             "--model-path is the model of the fine-tuned text models and of the probes' minilm.")
    add_featurizer_flags(g, "evaluate")  # --model-path: the probes' text encoder and the fine-tuned models' model
    g.add_argument("--lr", type=float, default=None,
                   help="learning rate for every training set; no learning-rate check then (--lr 1e-5: appendix "
                   "A.6's) (default: text models the check's choice, image networks 1e-3)")
    g.add_argument("--lr-candidates", default=",".join(f"{c:g}" for c in LR_CANDIDATES), metavar="LR,LR,...",
                   help="the learning-rate check's candidates: each fine-tunes once on a seeded slice of D's "
                   "training part and is scored on a held-out part of that slice; the best is used for every "
                   "training set (default %(default)s)")
    g.add_argument("--lr-check-rows", type=int, default=6000,
                   help="rows of D's training part the check uses (default 6000; on a CPU --cpu-lr-check-rows)")
    g.add_argument("--cpu-lr-check-rows", type=int, default=1000, help="CPU default of --lr-check-rows (default 1000)")
    g.add_argument("--epochs", type=int, default=3)
    g.add_argument("--batch-size", type=int, default=92)
    g.add_argument("--max-length", type=int, default=128)
    g.add_argument("--max-train", type=int, default=None,
                   help="cap on training rows (seeded sample); default: all on a GPU, --cpu-max-train on a CPU")
    g.add_argument("--cpu-max-train", type=int, default=FINETUNE_CPU_MAX_TRAIN,
                   help=f"CPU default cap (default {FINETUNE_CPU_MAX_TRAIN}: fewer rows left fine-tuned MiniLM at the "
                   "label prior on a filtered SNLI set)")
    g.add_argument("--eval-max", type=int, default=None,
                   help="cap on rows of each external set for fine-tuned models (stratified); default: all on a "
                   "GPU, --cpu-eval-max on a CPU")
    g.add_argument("--cpu-eval-max", type=int, default=3000, help="CPU default external-set cap (default 3000)")
    g.add_argument("--max-steps", type=int, default=None, help="cap on optimisation steps")
    add_device(g, what="where the encoder and fine-tuning run")


def _validate(args: argparse.Namespace) -> None:
    """Refused before --out is claimed: a malformed --ood-pred-map (as argparse refused it before) or
    --lr-candidates, an --out or --cache-dir in a run folder."""
    from aflite.commands.evaluate import parse_mapping
    from aflite.rundir.lock import check_outside_runs

    parse_mapping(args.ood_pred_map)
    _candidates(args)
    check_outside_runs(args.out, args.runs)  # evaluate reads run folders and writes elsewhere
    if args.cache_dir is not None:
        check_outside_runs(args.cache_dir, args.runs, flag="--cache-dir")


def _candidates(args: argparse.Namespace) -> tuple[float, ...]:
    try:
        out = tuple(float(x) for x in str(args.lr_candidates).split(",") if x.strip())
    except ValueError:
        raise ParameterError(f"--lr-candidates {args.lr_candidates!r}: expected numbers separated by commas, "
                             "e.g. 1e-5,2e-5,5e-5,1e-4") from None
    if not out or any(not c > 0 for c in out):
        raise ParameterError(f"--lr-candidates {args.lr_candidates!r}: give one or more rates > 0 (or the rate "
                             "itself with --lr)")
    return out


def run(args: argparse.Namespace) -> int:
    from aflite.commands.evaluate import evaluate_files
    from aflite.evaluate import FinetuneOptions

    ft = FinetuneOptions(model_path=args.model_path, lr=args.lr, epochs=args.epochs, batch_size=args.batch_size,
                         max_length=args.max_length, max_train=args.max_train, cpu_max_train=args.cpu_max_train,
                         eval_max=args.eval_max, cpu_eval_max=args.cpu_eval_max, max_steps=args.max_steps,
                         device=args.device, lr_candidates=_candidates(args), lr_check_rows=args.lr_check_rows,
                         cpu_lr_check_rows=args.cpu_lr_check_rows)
    dopts: DatasetOptions = {**dataset_options(args), "groups": args.groups}
    featurizer_options = featurizer_flag_values(args)  # routed to each probe's featurizer that takes it
    rep = evaluate_files(args.data, args.runs, args.out_folder, hans=args.hans, test=args.test, ood=args.ood,
                         ood_label_map=args.ood_label_map, ood_pred_map=args.ood_pred_map, ood_group=args.ood_group,
                         ood_max=args.ood_max, models=[m for m in args.models.split(",") if m.strip()],
                         seeds=args.seeds, model_seeds=args.model_seeds, heldout=args.heldout, seed=args.seed,
                         random_baseline=args.random_baseline, single_iteration=args.single_iteration,
                         label_matched=args.label_matched,
                         finetune=ft, cache_dir=args.cache_dir, dataset_options=dopts, show_progress=not args.quiet,
                         split=args.split, featurizer_options=featurizer_options)
    if rep.verdict:
        print(" ".join(rep.verdict) + "\n")
    print(rep.tables)
    print(f"results: {args.out_folder.results_path}, tables: {args.out / 'tables.md'}, chart: "
          f"{args.out / 'accuracy.png'}", file=sys.stderr)
    return 0
