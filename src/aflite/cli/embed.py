"""``aflite embed``: compute Φ for a dataset file and save it (cached, resumable) for ``aflite filter``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from aflite.cli.options import (
    add_cache,
    add_columns,
    add_device,
    add_out,
    add_quiet,
    add_seed,
    dataset_options,
)

FEATURES = "features.npy"  # OUT/features.npy: the one file `aflite filter --features` reads


def register(sub: Any) -> None:
    p = sub.add_parser(
        "embed",
        help="compute features Φ for a dataset file (ngram, minilm, warmup) and save them as .npy",
        description="Featurizes DATA under a view and writes OUT/features.npy (float32, memory-mappable), "
        "OUT/ids.txt, OUT/labels.txt, OUT/results.json and OUT/summary.md, ready for `aflite filter --features "
        "OUT/features.npy --labels OUT/labels.txt --ids OUT/ids.txt`. Encoder runs are cached in --cache "
        "(default OUT/cache); an interrupted run resumes when the same command is run again.",
    )
    p.add_argument("data", type=Path, help="dataset file or folder")
    add_out(p)
    p.add_argument("--featurizer", "-f", default="ngram",
                   choices=("ngram", "minilm", "warmup", "efficientnet-lite0", "hf-image"))
    p.add_argument("--view", default="pair", choices=("pair", "hypothesis", "premise"))
    p.add_argument("--model-path", default=None, help="local Hugging Face model folder (minilm/warmup)")
    p.add_argument("--warmup-size", type=float, default=0.1,
                   help="warmup: rows of the warm-up slice, a count or a fraction (default 0.1)")
    p.add_argument("--lr", type=float, default=None, help="warmup: fine-tuning learning rate (default 5e-5)")
    add_cache(p)
    from aflite.cli.options import add_image_options

    g = add_image_options(p, "DATA: a folder with one sub-folder per class, a table with a path column, or a HF "
                          "dataset with an Image column; OUT/features.npy is written chunk by chunk into a "
                          "memory-mapped file and the same command resumes an interrupted run")
    g.add_argument("--chunk-size", type=int, default=4096, help="images per resumable chunk (default 4096)")
    add_seed(p, help="seed of the warm-up slice and its fine-tuning (default 0)")
    add_columns(p)
    add_device(p, what="where the encoder runs")
    add_quiet(p)
    from aflite.cli.options import add_overwrite_option

    add_overwrite_option(p)
    p.set_defaults(handler=run, validate=_validate)  # --overwrite sets output="folder": OUT is claimed (rundir)


def _validate(args: argparse.Namespace) -> None:
    """Refuse, before OUT is claimed, to replace finished features without --overwrite (an unfinished image run,
    OUT/features.npy.partial, is resumed by the same command instead)."""
    from aflite.errors import OutputError

    done = Path(args.out) / FEATURES
    if done.exists() and not args.overwrite:
        raise OutputError(f"--out {args.out}: {done} exists; pass --overwrite to replace it, or choose another --out")


def run(args: argparse.Namespace) -> int:
    from aflite import data, features
    from aflite.atomic import write_npy, write_text

    out: Path = args.out
    if args.cache is None:
        args.cache = out / "cache"
    if args.overwrite:  # start over: no partial image run is resumed
        for name in (FEATURES + ".partial", FEATURES + ".progress.json"):
            (out / name).unlink(missing_ok=True)
    from aflite.data import images

    if images.wants_images(args.data, args.featurizer):
        return images.cli_embed(args, out)
    ds = data.load_dataset(args.data, **dataset_options(args))
    opts: dict[str, Any] = {}
    if args.model_path:
        opts["model_path"] = args.model_path
    if args.featurizer in ("minilm", "warmup"):
        opts["device"] = args.device
    if args.lr is not None and args.featurizer == "warmup":
        opts["lr"] = args.lr
    ws: float | int = args.warmup_size if args.warmup_size < 1 else int(args.warmup_size)
    t0 = time.perf_counter()
    f = features.featurize(ds.texts_a, ds.texts_b, args.featurizer, args.view, cache_dir=args.cache,
                           y=ds.labels.tolist() if args.featurizer == "warmup" else None,
                           warmup_size=ws, warmup_seed=args.seed, show_progress=not args.quiet, **opts)
    secs = time.perf_counter() - t0
    X = f.X.toarray() if hasattr(f.X, "toarray") else f.X
    write_npy(out / FEATURES, X)
    write_text(out / "ids.txt", "".join(f"{i}\n" for i in ds.ids[f.rows]))
    write_text(out / "labels.txt", "".join(f"{lab}\n" for lab in ds.labels[f.rows]))
    extra: dict[str, Any] = {}
    if len(f.warmup_rows):
        write_text(out / "warmup_ids.txt", "".join(f"{i}\n" for i in ds.ids[f.warmup_rows]))
        extra["warmup_ids"] = "warmup_ids.txt"
    write_outputs(args, out, rows=int(X.shape[0]), dim=int(X.shape[1]), seconds=secs, view=args.view,
                  from_cache=bool(f.from_cache), **extra)
    return 0


def write_outputs(args: argparse.Namespace, out: Path, *, rows: int, dim: int, seconds: float,
                  **more: Any) -> None:
    """OUT/results.json and OUT/summary.md, the same for text and images; the result line goes to stdout."""
    from aflite.atomic import write_text
    from aflite.cli.options import write_results

    files = {"features": FEATURES, "ids": "ids.txt"}
    if (out / "labels.txt").exists():
        files["labels"] = "labels.txt"
    res = {"data": str(args.data), "featurizer": args.featurizer, "rows": rows, "dim": dim,
           "seconds": round(seconds, 3), "files": files, **more}
    write_results(out, args, res)
    line = (f"{rows} x {dim} features ({args.featurizer}"
            f"{', view ' + str(more['view']) if 'view' in more else ''}) in {seconds:.1f} s "
            f"({rows / max(seconds, 1e-9):.0f} rows/s{', from cache' if more.get('from_cache') else ''}) -> "
            f"{out / FEATURES}")
    use = (f"aflite filter --features {out / FEATURES} --ids {out / 'ids.txt'}"
           + (f" --labels {out / 'labels.txt'}" if "labels" in files else "") + " --mmap --out RUN")
    write_text(out / "summary.md", f"# aflite embed: {args.data}\n\n- {line}\n\nNext: `{use}`\n")
    print(line)
