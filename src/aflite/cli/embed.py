"""``aflite embed``: compute Φ for a dataset file and save it (cached, resumable) for ``aflite filter``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from aflite.cli.options import add_columns, add_device, add_quiet, add_seed, dataset_options


def register(sub: Any) -> None:
    p = sub.add_parser(
        "embed",
        help="compute features Φ for a dataset file (ngram, minilm, warmup) and save them as .npy",
        description="Featurizes DATA under a view and writes OUT.npy (float32), OUT.ids.txt and OUT.labels.txt, "
        "ready for `aflite filter --features OUT.npy --labels OUT.labels.txt --ids OUT.ids.txt`. Encoder runs "
        "are cached in --cache and resume after an interruption.",
    )
    p.add_argument("data", type=Path, help="dataset file or folder")
    p.add_argument("--out", required=True, type=Path, help="output stem (OUT.npy, OUT.ids.txt, OUT.labels.txt)")
    p.add_argument("--featurizer", "-f", default="ngram",
                   choices=("ngram", "minilm", "warmup", "efficientnet-lite0", "hf-image"))
    p.add_argument("--view", default="pair", choices=("pair", "hypothesis", "premise"))
    p.add_argument("--model-path", default=None, help="local Hugging Face model folder (minilm/warmup)")
    p.add_argument("--warmup-size", type=float, default=0.1,
                   help="warmup: rows of the warm-up slice, a count or a fraction (default 0.1)")
    p.add_argument("--cache", type=Path, default=Path(".aflite-cache"), help="cache folder (default .aflite-cache)")
    g = p.add_argument_group("images", "DATA: a folder with one sub-folder per class, a table with a path column, "
                             "or a HF dataset with an Image column; OUT.npy is written chunk by chunk into a "
                             "memory-mapped file and the same command resumes an interrupted run")
    g.add_argument("--path-column", default=None, metavar="COL", help="image path / Image column (default: detected)")
    g.add_argument("--image-size", type=int, default=224, help="images are resized to this square (default 224)")
    g.add_argument("--skip-bad-images", action="store_true", help="leave unreadable images out (listed)")
    g.add_argument("--chunk-size", type=int, default=4096, help="images per resumable chunk (default 4096)")
    add_seed(p, help="seed of the warm-up slice and its fine-tuning (default 0)")
    add_columns(p)
    add_device(p, what="where the encoder runs")
    add_quiet(p)
    from aflite.cli.options import add_overwrite_option

    add_overwrite_option(p)
    p.set_defaults(handler=run, output="stem")  # OUT is a file stem, checked in run() rather than claimed


def run(args: argparse.Namespace) -> int:
    from aflite import data, features
    from aflite.atomic import write_npy, write_text
    from aflite.rundir import check_output_stem

    stem = args.out.with_suffix("") if args.out.suffix == ".npy" else args.out
    check_output_stem(stem, (".npy", ".ids.txt", ".labels.txt"), overwrite=args.overwrite)
    from aflite import images

    if images.wants_images(args.data, args.featurizer):
        return images.cli_embed(args, stem)
    ds = data.load_dataset(args.data, **dataset_options(args))
    opts: dict[str, Any] = {}
    if args.model_path:
        opts["model_path"] = args.model_path
    if args.featurizer in ("minilm", "warmup"):
        opts["device"] = args.device
    ws: float | int = args.warmup_size if args.warmup_size < 1 else int(args.warmup_size)
    t0 = time.perf_counter()
    f = features.featurize(ds.texts_a, ds.texts_b, args.featurizer, args.view, cache_dir=args.cache,
                           y=ds.labels.tolist() if args.featurizer == "warmup" else None,
                           warmup_size=ws, warmup_seed=args.seed, show_progress=not args.quiet, **opts)
    secs = time.perf_counter() - t0
    X = f.X.toarray() if hasattr(f.X, "toarray") else f.X
    write_npy(stem.with_suffix(".npy"), X)
    write_text(stem.with_suffix(".ids.txt"), "".join(f"{i}\n" for i in ds.ids[f.rows]))
    write_text(stem.with_suffix(".labels.txt"), "".join(f"{lab}\n" for lab in ds.labels[f.rows]))
    if len(f.warmup_rows):
        write_text(stem.with_suffix(".warmup_ids.txt"), "".join(f"{i}\n" for i in ds.ids[f.warmup_rows]))
    print(f"{X.shape[0]} x {X.shape[1]} features ({args.featurizer}, view {args.view}) in {secs:.1f} s "
          f"({X.shape[0] / max(secs, 1e-9):.0f} rows/s{', from cache' if f.from_cache else ''}) -> "
          f"{stem.with_suffix('.npy')}", file=sys.stderr)
    return 0
