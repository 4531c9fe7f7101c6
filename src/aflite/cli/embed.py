"""``aflite embed``: compute Φ for a dataset file and save it (cached, resumable) for ``aflite filter``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from aflite.cli.flags import (
    FEATURIZER_OPTIONS,
    LOADERS,
    add_backend,
    add_cache,
    add_cluster,
    add_columns,
    add_device,
    add_featurizer_flags,
    add_image_options,
    add_out,
    add_quiet,
    add_seed,
    claim_out_folder,
    dataset_options,
    featurizer_flag_values,
    positive_int,
)
from aflite.features.registry import featurizer_arg, featurizer_help
from aflite.option import OptionValue
from aflite.rundir.commands import COMMANDS

# this command's entry in the one table of commands (aflite.rundir.commands.COMMANDS)
COMMAND = COMMANDS["embed"]

# the library calls whose keywords this command's flags are (tests/test_cli_keywords.py reads them)
LIBRARY = (COMMAND.library, *LOADERS, *FEATURIZER_OPTIONS)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "embed",
        help="compute features Φ for a dataset file (ngram, minilm, warmup) and save them as .npy",
        description="Featurizes DATA under a view and writes OUT/features.npy (float32, memory-mappable), "
        "OUT/ids.txt, OUT/labels.txt, OUT/results.json and OUT/summary.md, ready for `aflite filter --features "
        "OUT/features.npy --labels OUT/labels.txt --ids OUT/ids.txt`. Encoder runs are cached in --cache-dir "
        "(default OUT/cache); an interrupted run resumes when the same command is run again (or with --resume, "
        "which also accepts OUT with finished features).",
    )
    p.add_argument("data", type=Path, help="dataset file or folder")
    add_out(p)

    p.add_argument("--featurizer", "-f", default="ngram", type=featurizer_arg("embed"), metavar="NAME[+NAME...]",
                   help=f"Φ: {featurizer_help('embed')} (default ngram)")
    p.add_argument("--view", default="pair", choices=("pair", "hypothesis", "premise"))
    p.add_argument("--warmup-size", type=float, default=0.1,
                   help="warmup: rows of the warm-up slice, a count or a fraction (default 0.1)")
    add_featurizer_flags(p.add_argument_group("featurizer options (each refused for a featurizer that does not "
                                              "take it)"), "embed")
    add_cache(p)

    add_image_options(p, "DATA: a folder with one sub-folder per class, a table with a path column, or a HF "
                          "dataset with an Image column; OUT/features.npy is written chunk by chunk into a "
                          "memory-mapped file and the same command resumes an interrupted run")

    p.add_argument("--chunk-size", type=positive_int, default=4096,
                   help="rows (texts or images) per resumable chunk, and per shard with --cluster (default 4096)")
    add_cluster(p, what="embed the chunks as shards (each worker loads the encoder once; the cache must be a "
                "folder every worker can write)")
    add_seed(p, help="seed of the warm-up slice and its fine-tuning (default 0)")
    add_columns(p)
    add_device(p, what="where the encoder runs")

    add_backend(p)
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted embed in OUT (chunks and features already computed are reused; "
                   "finished features are kept)")
    add_quiet(p)
    claim_out_folder(p)
    p.set_defaults(handler=run, validate=_validate)


def _validate(args: argparse.Namespace) -> None:
    """Refuse, before OUT is claimed, to replace finished features without --overwrite (or to shard a featurizer
    that has no shards)."""
    from aflite.commands.embed import check_embed_out

    check_embed_out(args.out, args.overwrite, args.resume)

    _featurizer_options(args)  # before --out is claimed: an option the featurizer would ignore is refused
    if args.cluster:
        from aflite.features.shards import check_shardable

        check_shardable(args.featurizer)


def _featurizer_options(args: argparse.Namespace) -> dict[str, OptionValue]:
    """The featurizer's own options (--model-path, --lr, ...; the command-wide --device, --backend and
    --image-size stay embed's keywords)."""
    featurizer_flag_values(args, args.featurizer, backend=args.backend)
    return featurizer_flag_values(args)


def run(args: argparse.Namespace) -> int:
    from aflite.commands.embed import embed

    res = embed(args.data, args.out_folder, featurizer=args.featurizer, view=args.view,
                featurizer_options=_featurizer_options(args),
                warmup_size=args.warmup_size, cache_dir=args.cache_dir, seed=args.seed, device=args.device,
                image_size=args.image_size, path_column=args.path_column, chunk_size=args.chunk_size,
                skip_bad_images=args.skip_bad_images, dataset_options=dict(dataset_options(args)),
                overwrite=args.overwrite, show_progress=not args.quiet, backend=args.backend,
                cluster=args.cluster, resume=args.resume)
    print(res.line)
    return 0
