"""``aflite bench``: fast path vs scikit-learn reference, and a complete SNLI-sized run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from aflite.cli.options import add_overwrite_option, add_quiet, add_seed, claim_out_folder, out_path
from aflite.errors import ParameterError
from aflite.rundir.commands import COMMANDS

# this command's entry in the one table of commands (aflite.rundir.commands.COMMANDS)
COMMAND = COMMANDS["bench"]

# the library calls whose keywords this command's flags are (tests/test_cli_keywords.py reads them)
LIBRARY = (
    COMMAND.library,
    "aflite.experiments.scale:scale_benchmark",
    "aflite.experiments.bench_embed:embed_benchmark",
    "aflite.experiments.outputs:save_bench",
    "aflite.experiments.bench_device:device_benchmark",
)
# flags that are no keyword of LIBRARY, each with why
CLI_ONLY = {
    "embed": "--embed MODEL selects the encoder benchmark: embed_benchmark(model=MODEL)",
    "embed_data": "its dataset: embed_benchmark(data=)",
}

DEFAULT_CPU = {"n": 550_152, "dim": 768, "reference_partitions": 8}  # the default benchmark's sizes (the flags')
TINY_CPU = {"n": 6_000, "dim": 64, "reference_partitions": 2}  # --tiny without --device: seconds, not minutes


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark the fast ensemble against scikit-learn (not a test: it reports what it measures)",
        description="Builds SNLI-shaped features (550,152 x 768, 3 classes, a planted bias, anisotropic "
        "spectrum) or takes --features/--labels, runs one filtering phase (m=64, t=50,000) on the fast path "
        "and on scikit-learn's LogisticRegression over the same partitions, and then the complete filter "
        "(k=10,000, tau=0.75, n=92,000) with wall time and peak memory.",
    )
    p.add_argument("--n", type=int, default=DEFAULT_CPU["n"], help="rows of synthetic features (default 550,152)")
    p.add_argument("--dim", type=int, default=DEFAULT_CPU["dim"], help="feature dimension (default 768)")
    p.add_argument("--reference-partitions", type=int, default=DEFAULT_CPU["reference_partitions"],
                   help="partitions the scikit-learn reference runs; its time is scaled to 64; 0 skips it (default 8)")
    p.add_argument("--complete", action=argparse.BooleanOptionalAction, default=None,
                   help="the complete filter run (default: on; off for the --shape scale benchmark)")
    p.add_argument("--features", default=None, help="real features instead of synthetic ones")
    p.add_argument("--labels", default=None, help="labels for --features")
    p.add_argument("--solvers", choices=("fast", "previous", "both"), default="both",
                   help="the fast ensemble's solver: fast (own-row passes), previous (passes over all of S), or "
                   "both on the same partitions, reporting each time, their ratio and agreement (default both)")
    p.add_argument("--complete-solvers", choices=("fast", "previous", "both"), default=None,
                   help="solver(s) for the complete filter run (default: as --solvers, but fast for --solvers both: "
                   "the previous solver's complete run takes several times longer)")
    p.add_argument("--real-features", default=None,
                   help="also run a phase (fast path vs scikit-learn) and the complete filter on these real features "
                   "(e.g. MiniLM pair embeddings from `aflite embed`), Table 8 scaled to their size")
    p.add_argument("--real-labels", default=None, help="labels for --real-features")
    add_seed(p)
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--out", type=out_path, default=None,
                   help="also write the results to OUT/results.json (with argv, seed and versions) and the report "
                   "to OUT/summary.md")
    add_overwrite_option(p)
    claim_out_folder(p)
    add_quiet(p)
    g = p.add_argument_group(
        "scale benchmark (with --shape)",
        "ImageNet-shaped (1,281,167 x 2,048, 1,000 classes, Table 8's ImageNet m=64, t=32.7K, k=33.6K, n=640K) "
        "or SNLI-shaped features written to a memory-mapped .npy in --workdir, then one phase per --devices "
        "entry and per --cluster-workers size, each in a fresh process with its peak memory.",
    )
    g.add_argument("--shape", choices=("imagenet", "snli"), default=None, help="run the scale benchmark")
    g.add_argument("--scale", type=float, default=1.0, help="fraction of the rows (sizes scale with it) (default 1)")
    g.add_argument("--n-classes", type=int, default=None, help="number of classes (default 1000 / 3)")
    g.add_argument("--measure-partitions", type=int, default=64,
                   help="partitions actually fitted in the measured phase; time is scaled to m (default 64)")
    g.add_argument("--devices", default="cpu", help="comma-separated: cpu, cuda, cuda:N, torch-cpu (default cpu)")
    g.add_argument("--cluster-workers", default="", help="comma-separated local Dask cluster sizes, e.g. 1,2,4")
    g.add_argument("--workdir", default=None, help="folder for the features file (default a temporary folder)")
    e = p.add_argument_group("encoder backends (--embed): items/s, cosine, kept-set Jaccard of torch vs ONNX Runtime")
    e.add_argument("--embed", choices=("minilm", "efficientnet-lite0"), default=None,
                   help="benchmark this encoder's CPU backends")
    e.add_argument("--embed-data", default=None,
                   help="a pair dataset for minilm (e.g. SNLI dev.tsv.gz); an image folder for efficientnet-lite0")
    e.add_argument("--n-items", type=int, default=None,
                   help="items timed per backend (default 2000 pairs, 500 images)")
    e.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median counts (default 3)")
    e.add_argument("--kept-set", action=argparse.BooleanOptionalAction, default=True,
                   help="compare AFLite's kept sets on all rows (--no-kept-set skips it)")
    _add_device_options(p)
    p.set_defaults(handler=run)


def _add_device_options(p: Any) -> None:
    """The device benchmark's group (--device, --profile ...)."""
    d = p.add_argument_group(
        "device benchmark (--device)",
        "One GPU's figures in one run: its measured GEMM rates (the roofline), frozen MiniLM Φ pairs/s in "
        "float32 (fixed batches, and pipelined: the CUDA default) and in opt-in paths (bfloat16/float16, larger token "
        "budgets, TF32, bfloat16-stored weights) with their cosine and kept-set agreement, the complete SNLI-shaped "
        "filter on the CPU and in each device mode with kept-set Jaccard, the warm-up run end to end on SNLI "
        "train_100k, and with --profile where the time goes (per Φ batch and per filter phase, host vs device). "
        "--out DIR keeps device_bench.json up to date after every section.")
    d.add_argument("--device", default=None,
                   help="run the device benchmark here: cuda, cuda:N, or torch-cpu (the same code on the CPU)")
    d.add_argument("--tiny", action="store_true",
                   help="every size shrunk so that the run takes a minute on a CPU (a test; its speeds mean nothing); "
                   "without --device: the default benchmark on 6,000 x 64 features with 2 reference partitions "
                   "(a few seconds), unless --n/--dim/--reference-partitions say otherwise")
    d.add_argument("--sections", default=None,
                   help="comma-separated subset of roofline, profile, phi, filter, warmup (default: roofline, phi, "
                   "filter, warmup; with --profile: profile)")
    d.add_argument("--profile", action="store_true",
                   help="where the time goes: per Φ batch tokenising, collating, host->device copy, forward and "
                   "device->host copy, tokenising pairs per CPU second and the device's busy fraction; per filter "
                   "phase device vs host seconds (the profile section; timing only)")
    d.add_argument("--kept-sets", action=argparse.BooleanOptionalAction, default=None,
                   help="the phi section's kept-set comparisons (default: on; off with --profile, so that the "
                   "timing sections fit a short device call)")
    d.add_argument("--data-dir", default=None,
                   help="folder holding snli/train_100k.tsv.gz (default ../shared/data; --tiny: the bundled sample)")
    d.add_argument("--model-path", default=None, help="the text model folder (default the bundled MiniLM)")


def run(args: argparse.Namespace) -> int:
    from aflite.experiments.bench import check_benchmark, run_benchmark
    from aflite.experiments.bench_text import format_report

    if args.embed:
        return _run_embed(args)
    if args.device:
        return _run_device(args)
    if args.tiny and args.shape is None:  # the default benchmark, shrunk (the device benchmark has its own sizes)
        _tiny(args)
    if args.shape is None:  # the same checks run_benchmark makes, before anything else
        check_benchmark(args.n, args.dim, args.reference_partitions, args.features, args.labels,
                        args.real_features, args.real_labels)
    def log(msg: str) -> None:
        if not args.quiet:
            print(f"[bench] {msg}", file=sys.stderr, flush=True)

    if args.shape:
        return _run_scale(args, log)

    res = run_benchmark(
        n=args.n, dim=args.dim, reference_partitions=args.reference_partitions, complete=args.complete is not False,
        features=args.features, labels=args.labels, seed=args.seed, log=log, solvers=args.solvers,
        complete_solvers=args.complete_solvers,
        real_features=args.real_features, real_labels=args.real_labels, real_complete=args.complete is not False,
    )
    _save(args, res, format_report(res))
    print(json.dumps(res, indent=2) if args.json else format_report(res))
    return 0




def _tiny(args: argparse.Namespace) -> None:
    """``--tiny`` for the default benchmark: each size left at its default shrunk to :data:`TINY_CPU` (``aflite
    bench --tiny`` ran the whole 550,152 x 768 benchmark, minutes, before it said a word about --tiny)."""
    for key, small in TINY_CPU.items():
        if getattr(args, key) == DEFAULT_CPU[key]:
            setattr(args, key, small)


def _save(args: argparse.Namespace, res: dict[str, Any], report: str) -> None:
    """With --out: the shared layout, results.json and summary.md."""
    if args.out is None:
        return
    from aflite.experiments.outputs import save_bench

    save_bench(res, report, args.out_folder, seed=args.seed)


def _run_embed(args: argparse.Namespace) -> int:
    from aflite.experiments.bench_embed import DEFAULT_ITEMS, embed_benchmark, format_embed_report

    if not args.embed_data:
        raise ParameterError("--embed needs --embed-data (a premise/hypothesis dataset, e.g. SNLI dev.tsv.gz; "
                             "an image folder for efficientnet-lite0)")
    items = args.n_items if args.n_items is not None else DEFAULT_ITEMS[args.embed]
    res = {"embed": embed_benchmark(args.embed_data, model=args.embed, n_items=items,
                                    rounds=args.rounds, seed=args.seed, kept_set=args.kept_set,
                                    log=lambda m: None if args.quiet else print(f"[bench] {m}", file=sys.stderr,
                                                                                flush=True))}
    report = format_embed_report(res["embed"])
    _save(args, res, report)
    print(json.dumps(res, indent=2) if args.json else report)
    return 0


def _run_device(args: argparse.Namespace) -> int:
    from aflite.experiments.bench_device import device_benchmark, format_device_report

    default = "" if args.profile else "roofline,phi,filter,warmup"
    sections = tuple(s.strip() for s in (args.sections or default).split(",") if s.strip())
    kept = args.kept_sets if args.kept_sets is not None else not args.profile
    if args.out is not None:
        from aflite.atomic import check_output_path

        check_output_path(args.out, flag="--out")
        if args.out_folder is not None:  # the build starts before the bench writes device_bench.json as it goes
            args.out_folder.begin()
    res = device_benchmark(args.device, tiny=args.tiny, data_dir=args.data_dir, model_path=args.model_path,
                           sections=sections, profile=args.profile, seed=args.seed, kept_sets=kept,
                           out_json=None if args.out is None else Path(args.out) / "device_bench.json",
                           log=lambda m: None if args.quiet else print(f"[bench] {m}", file=sys.stderr, flush=True))
    report = format_device_report(res)
    _save(args, res, report)
    print(json.dumps(res, indent=2) if args.json else report)
    return 0


def _run_scale(args: argparse.Namespace, log: Any) -> int:
    import shutil
    import tempfile

    from aflite.experiments.scale import format_scale_report, scale_benchmark

    devices = tuple(d.strip() for d in args.devices.split(",") if d.strip())
    try:
        workers = tuple(int(w) for w in args.cluster_workers.split(",") if w.strip())
    except ValueError:
        raise ParameterError(f"--cluster-workers {args.cluster_workers!r}: comma-separated numbers") from None
    if args.workdir:
        from aflite.atomic import check_output_path

        check_output_path(args.workdir, flag="--workdir")
    workdir = args.workdir or tempfile.mkdtemp(prefix="aflite-bench-")
    try:
        res = scale_benchmark(workdir, shape=args.shape, scale=args.scale, dim=args.dim if args.dim != 768 else None,
                              n_classes=args.n_classes, measure_partitions=args.measure_partitions, devices=devices,
                              cluster_workers=workers, complete=bool(args.complete), seed=args.seed, log=log)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    _save(args, res, format_scale_report(res))
    print(json.dumps(res, indent=2) if args.json else format_scale_report(res))
    return 0
