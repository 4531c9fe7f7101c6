"""``aflite run``: a dataset file in, the filtered dataset (same format), the run directory and a summary out."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aflite.cli.filter import add_filter_options, add_scale_options
from aflite.cli.flags import (
    FEATURIZER_OPTIONS,
    LOADERS,
    add_backend,
    add_cache,
    add_columns,
    add_featurizer_flags,
    add_groups_option,
    add_image_options,
    add_out,
    add_quiet,
    claim_out_folder,
    dataset_options,
    featurizer_flag_values,
    image_options,
)
from aflite.features.registry import featurizer_arg, featurizer_help
from aflite.option import OptionValue
from aflite.rundir.commands import COMMANDS
from aflite.verdict import define_terms, phases_text


def add_pipeline_options(p: argparse.ArgumentParser, featurizer_default: str) -> None:
    p.add_argument("--featurizer", "-f", default=featurizer_default, type=featurizer_arg("run"),
                   metavar="NAME[+NAME...]",
                   help=f"Φ: {featurizer_help('run')} (default {featurizer_default})")
    p.add_argument("--view", default="pair", choices=("pair", "hypothesis", "premise"),
                   help="which text the features see: both, or one side to target a partial-input bias (default pair)")
    add_featurizer_flags(p.add_argument_group("featurizer options (each refused for a featurizer that does not "
                                              "take it)"), "run")

    g = add_image_options(p)
    g.add_argument("--link-dir", type=Path, default=None,
                   help="also build a folder of symlinks to the kept images (a new or empty folder)")
    add_cache(p)

    add_backend(p)

    add_groups_option(p)
    claim_out_folder(p)
    p.add_argument("--probe", action=argparse.BooleanOptionalAction, default=True,
                   help="run the hypothesis-only probe of the summary (--no-probe skips it)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run in OUT")
    add_quiet(p)

    add_filter_options(p, scaled=True)

    add_scale_options(p, cluster="embed Φ in shards (minilm, warmup, image encoders) and fit the partitions")
    p.set_defaults(validate=_validate)


def _validate(args: argparse.Namespace) -> None:
    """Before --out is claimed: a featurizer option (or --backend) the chosen featurizer would ignore, and an image
    option on data read as text (ignored there otherwise)."""
    from aflite.data.source import modality_of, refuse_image_options
    from aflite.features.registry import spec

    _featurizer_options(args)
    data = getattr(args, "data", None)  # aflite demo validates as run does, on its bundled text sample (no DATA)
    modality = "text" if data is None else modality_of(data, reads=spec(args.featurizer).modality,
                                                       path_column=args.path_column)
    refuse_image_options(data if data is not None else "the bundled sample", modality,
                         {"image_size": args.image_size, "skip_bad_images": args.skip_bad_images})


def _featurizer_options(args: argparse.Namespace) -> dict[str, OptionValue]:
    return featurizer_flag_values(args, args.featurizer, device=args.device, backend=args.backend,
                                  image_size=args.image_size if args.image_size != 224 else None)


# this command's entry in the one table of commands (aflite.rundir.commands.COMMANDS)
COMMAND = COMMANDS["run"]

# the library calls whose keywords this command's flags are (tests/test_cli_keywords.py reads them)
LIBRARY = (COMMAND.library, "aflite.core.filter:AFLite", *LOADERS, *FEATURIZER_OPTIONS)
CLI_ONLY = {  # flags that are no keyword of LIBRARY, each with why (demo's too)
    "seed": "AFLite's random_state: run(params={'random_state': SEED})",
    "cluster": "opened here as AFLite's executor: run(params={'executor': DaskExecutor(...)})",
    "cluster_scratch": "the scratch folder of that executor (DaskExecutor(scratch=DIR))",
}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="filter a dataset file end to end (load, featurize, AFLite, write back)",
        description="Loads DATA (SNLI/MNLI JSONL, GLUE TSV, CSV/TSV/JSONL/Parquet, HF dataset folder), computes "
        "Φ, runs AFLite and writes OUT/filtered.<ext> in the input's own format with only the kept rows, the run "
        "directory (kept/removed ids, instances.csv, results.json) and a readable OUT/summary.md.",
    )
    p.add_argument("data", type=Path, help="dataset file or folder")
    add_out(p, what="run directory")
    add_columns(p)
    add_pipeline_options(p, "ngram")
    p.set_defaults(handler=run)


@contextlib.contextmanager
def pipeline_kwargs(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """The keywords of :func:`aflite.commands.run.run` from run's (and demo's) flags, while they are used: a
    --cluster (with its --cluster-scratch) is opened as AFLite's executor here and closed after the call."""
    from aflite.core.backends.dask import use_cluster

    params = {"target_size": args.target_size, "n_partitions": args.n_partitions, "train_size": args.train_size,
              "slice_size": args.slice_size, "threshold": args.threshold, "strategy": args.strategy,
              "random_state": args.seed, "device": args.device, "storage": args.storage}
    loader = {**{k: v for k, v in image_options(args).items() if v is not None}, **dataset_options(args)}
    featurizer_options = _featurizer_options(args)  # a refused option is refused before any cluster starts
    executor, release = use_cluster(args.cluster, args.cluster_scratch)
    try:
        yield dict(featurizer=args.featurizer, view=args.view, params={**params, "executor": executor},
                   groups=args.groups, cache_dir=args.cache_dir, resume=args.resume, overwrite=args.overwrite,
                   show_progress=not args.quiet, probe=args.probe, featurizer_options=featurizer_options,
                   dataset_options=loader, link_dir=args.link_dir)
    finally:
        release()


def report(res: Any) -> None:
    s = res.summary
    p = s["parameters"]
    if s.get("verdict"):  # the terminal's first lines: each symbol defined where it first appears
        print("verdict: " + " ".join(define_terms(s["verdict"])))
    from aflite.commands.summary_md import warmup_line

    f = s.get("featurizer") or {}
    print(f"Φ: {f.get('name')} ({f.get('dim')} dims, view {f.get('view')})"
          + warmup_line(f.get("info") or {}, "; "))

    print(f"|D| = {s['dataset_size']} -> |D(Φ)| = {s['size_after']} ({phases_text(s['n_iterations'])}; "
          f"{s['stop_reason']})")
    print(f"parameters: m={p['n_partitions']} t={p['train_size']} k={p['slice_size']} n={p['target_size']} "
          f"tau={p['threshold']} (Table 8 SNLI scaled by {s['scaled_defaults']['scale']:.4f} where not given)")
    shift = s.get("label_shift")
    if shift:
        print("class shares before → after: " + ", ".join(
            f"{lab} {shift['shares_before'][lab]:.1f}% → {shift['shares_after'][lab]:.1f}%"
            for lab in shift["shares_before"]))
        if shift["warning"]:
            print(f"warning: {shift['warning']}", file=sys.stderr)
    if "partial_input_probe" in s:
        if s["partial_input_probe"].get("skipped"):
            print(f"  hypothesis-only probe skipped: {s['partial_input_probe']['skipped']}")
        for r in s["partial_input_probe"]["results"]:
            if r.get("skipped"):
                print(f"  hypothesis-only probe on {r['name']:<28} n={r['size']:>6}  skipped: {r['skipped']}")
                continue
            print(f"  hypothesis-only probe on {r['name']:<28} n={r['size']:>6}  acc {100 * r['accuracy']:.1f}%"
                  f"  majority {100 * r['majority']:.1f}%  Δ {100 * (r['accuracy'] - r['majority']):+.1f}")
        from aflite.commands.summary_md import PROBE_MEANING

        print(f"  ({PROBE_MEANING})")
    print(f"filtered dataset: {res.filtered_path}\nsummary: {res.out / 'summary.md'}", file=sys.stderr)
    print(f"page: {res.out / 'report.html'} (open it in a browser: every row, sortable and searchable, and plots)")


def run(args: argparse.Namespace) -> int:
    from aflite.commands.run import run as run_pipeline

    with pipeline_kwargs(args) as kwargs:
        res = run_pipeline(args.data, args.out_folder, **kwargs)
    report(res)
    return 0
