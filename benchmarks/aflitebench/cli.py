"""The benchmark harness's command line (``python benchmarks/bench.py``; until issue #58 it was ``aflite bench``):
the fast path against scikit-learn's reference, the complete SNLI-sized filter, the scale benchmark (``--shape``),
the encoder backends (``--embed``) and one device's figures (``--device``). A developer's tool, kept out of the
installed package; it imports aflite from the checkout (``src/``) or from wherever it is installed."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from aflite.cli.flags import add_quiet, add_seed, out_path
from aflite.errors import AfliteError, ParameterError

PROG = "bench"  # the one-line errors read "bench: error: ..."

DEFAULT_CPU = {"n": 550_152, "dim": 768, "reference_partitions": 8}  # the default benchmark's sizes (the flags')
TINY_CPU = {"n": 6_000, "dim": 64, "reference_partitions": 2}  # --tiny without --device: seconds, not minutes


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors, as aflite's own commands give them."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """Every flag of the harness (the former ``aflite bench``'s, unchanged)."""
    p = _Parser(
        prog=PROG,
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
    p.add_argument("--overwrite", action="store_true",
                   help="write into --out even when it is a non-empty folder (default: refuse)")
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
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the benchmark it names and print its report; 2 with one line on stderr for a bad
    argument or an unusable input (nothing written)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help or a usage error (already reported on one line)
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    args.argv = list(argv) if argv is not None else sys.argv[1:]  # recorded in OUT/results.json
    try:
        _check_out(args)
        return run(args)
    except AfliteError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


def _check_out(args: argparse.Namespace) -> None:
    """--out checked before any work: a writable folder, empty unless --overwrite."""
    if args.out is None:
        return
    from aflite.atomic import check_output_path

    out = check_output_path(args.out, flag="--out")
    if out.is_dir() and any(out.iterdir()) and not args.overwrite:
        raise ParameterError(f"--out {args.out} is a non-empty folder; --overwrite writes into it")


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
    from aflitebench.bench import check_benchmark, run_benchmark
    from aflitebench.bench_text import format_report

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
    """With --out: OUT/results.json (aflite's envelope: command, argv, seed, versions; then the figures) and the
    text report as OUT/summary.md."""
    if args.out is None:
        return
    save_bench(res, report, args.out, seed=args.seed, argv=args.argv)


def save_bench(res: dict[str, Any], report: str, out: str | Path, *, seed: int | None = None,
               argv: Sequence[str] | None = None) -> Path:
    """``out/results.json`` and ``out/summary.md`` (the text report) of a benchmark result; returns the folder."""
    from aflite.atomic import write_json, write_text
    from aflite.rundir.results import results_document

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "results.json", results_document(folder, res, command="bench", argv=argv, seed=seed))
    write_text(folder / "summary.md", "# bench\n\n```text\n" + report.rstrip("\n") + "\n```\n")
    return folder


def _run_embed(args: argparse.Namespace) -> int:
    from aflitebench.bench_embed import DEFAULT_ITEMS, embed_benchmark, format_embed_report

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
    from aflitebench.bench_device import device_benchmark, format_device_report

    default = "" if args.profile else "roofline,phi,filter,warmup"
    sections = tuple(s.strip() for s in (args.sections or default).split(",") if s.strip())
    kept = args.kept_sets if args.kept_sets is not None else not args.profile
    if args.out is not None:  # the bench writes device_bench.json as it goes
        Path(args.out).mkdir(parents=True, exist_ok=True)
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

    from aflitebench.scale import format_scale_report, scale_benchmark

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
