"""Φ in shards on a local Dask cluster of 2 workers (1 thread each) against one process (2 threads), side by side.

For each backend, in one run: a single-process ``featurize`` (chunks of ``--shard-size`` rows, the thread budget of
2) and the same call with :class:`aflite.features.shards.ShardedTransform` on a fresh 2-worker local cluster,
alternating (single, sharded, single, sharded ...). Reported: wall seconds of each (the cluster's start-up apart),
pairs/s, their ratio, whether the features are the same bits, the shards per worker and the encoder loads, and
the rates without the encoder loads (one process's load timed on 8 pairs; the workers' shards after their first). Each
timed run starts from an empty feature cache (so every row is embedded) with the ONNX exports already made (a
warm-up call first), and loads its encoder as a user's run does. Also measured once: how far a single chunk of all
rows (one length sort over the whole set, other padding) is from the fixed chunks, which is why shards are the
chunks. Not a test: run it by hand from the repository root::

    python benchmarks/shards_bench.py --n-pairs 2000 --shard-size 250 \
        --json docs/measured/shards_minilm.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SNLI_DEV = REPO.parent / "shared" / "data" / "snli" / "dev.tsv.gz"


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-pairs", type=int, default=2000)
    ap.add_argument("--shard-size", type=int, default=250)
    ap.add_argument("--backends", default="onnx-int8,torch")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    from aflite.core.backends.dask import DaskExecutor
    from aflite.data import load_dataset
    from aflite.features import featurize
    from aflite.features.shards import ShardedTransform
    from aflite.threads import thread_policy

    ds = load_dataset(SNLI_DEV)
    a, b = list(ds.texts_a[: args.n_pairs]), list(ds.texts_b[: args.n_pairs])
    n = len(a)
    work = Path(tempfile.mkdtemp(prefix="aflite-shards-bench-"))
    res: dict[str, Any] = {
        "command": "python benchmarks/shards_bench.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "data": "../shared/data/snli/dev.tsv.gz (first rows)", "pairs": n, "shard_size": args.shard_size,
        "shards": -(-n // args.shard_size), "single": "one process, thread budget 2",
        "sharded": "local Dask cluster, 2 worker processes x 1 thread", "cpus": os.cpu_count(),
        "machine": platform.processor() or platform.machine(), "load_before": _load(), "backends": {},
    }
    try:
        for backend in [x for x in args.backends.split(",") if x]:
            export = work / "onnx"  # one export for every run: made by the warm-up call, not timed
            kw: dict[str, Any] = dict(chunk_size=args.shard_size, show_progress=False, backend=backend,
                                      export_dir=str(export))
            with thread_policy(2):
                featurize(a[:8], b[:8], "minilm", "pair", **kw)
                t0 = time.perf_counter()  # what loading the encoder costs one process (8 pairs, no cache)
                featurize(a[:8], b[:8], "minilm", "pair", **kw)
                load_one = round(time.perf_counter() - t0, 2)
            out: dict[str, Any] = {"single_seconds": [], "sharded_seconds": [], "cluster_start_seconds": [],
                                   "bit_identical": [], "load": [], "single_encoder_load_seconds": load_one,
                                   "worker_first_shard_seconds": [], "worker_other_shard_seconds": []}
            ref = None
            for r in range(args.rounds):
                cache = work / f"{backend}-single-{r}"
                with thread_policy(2):
                    t0 = time.perf_counter()
                    one = featurize(a, b, "minilm", "pair", cache_dir=cache, **kw)
                    out["single_seconds"].append(round(time.perf_counter() - t0, 2))
                ref = one.X if ref is None else ref
                t0 = time.perf_counter()
                with DaskExecutor(n_workers=2) as ex:
                    out["cluster_start_seconds"].append(round(time.perf_counter() - t0, 2))
                    shards = ShardedTransform(ex)
                    t0 = time.perf_counter()
                    two = featurize(a, b, "minilm", "pair", cache_dir=work / f"{backend}-sharded-{r}", shards=shards,
                                    **kw)
                    out["sharded_seconds"].append(round(time.perf_counter() - t0, 2))
                assert shards.report is not None
                out["bit_identical"].append(bool(np.array_equal(one.X, two.X) and np.array_equal(ref, two.X)))
                rep = shards.report.as_dict()
                out["shards_per_worker"] = sorted(rep["shards_per_worker"].values())
                out["encoder_loads_on_workers"] = rep["loads"]
                out["worker_first_shard_seconds"].append(rep["first_shard_seconds"])
                out["worker_other_shard_seconds"].append(rep["other_shard_seconds"])
                out["load"].append(_load())
                print(f"{backend} round {r}: single {out['single_seconds'][-1]} s, sharded "
                      f"{out['sharded_seconds'][-1]} s (+{out['cluster_start_seconds'][-1]} s start), identical "
                      f"{out['bit_identical'][-1]}, load {out['load'][-1]}", file=sys.stderr)
            single, sharded = float(np.median(out["single_seconds"])), float(np.median(out["sharded_seconds"]))
            out["single_pairs_per_s"] = round(n / single, 1)
            out["sharded_pairs_per_s"] = round(n / sharded, 1)
            out["speedup_sharded_over_single"] = round(single / sharded, 3)
            # without the encoder loads (paid once per process, however many rows): one process's rate with its
            # load taken out, and the workers' rate on the shards after their first (2 workers side by side)
            out["single_pairs_per_s_without_load"] = round(n / max(single - load_one, 1e-9), 1)
            other = [t for r in out["worker_other_shard_seconds"] for t in r]
            n_other = len(other) / max(len(out["worker_other_shard_seconds"]), 1)
            if other:
                per_round = float(np.sum(other)) / len(out["worker_other_shard_seconds"])
                out["sharded_pairs_per_s_after_first_shard"] = round(n_other * args.shard_size / (per_round / 2), 1)
            if backend == args.backends.split(",")[0]:  # why the shards are the chunks: one global sort differs
                with thread_policy(2):
                    whole = featurize(a, b, "minilm", "pair", **{**kw, "chunk_size": n}).X
                assert ref is not None
                out["one_chunk_of_all_rows_bit_identical"] = bool(np.array_equal(whole, ref))
                out["one_chunk_of_all_rows_max_abs_diff"] = float(np.abs(whole - ref).max())
            res["backends"][backend] = out
            shutil.rmtree(export, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res["load_after"] = _load()
    text = json.dumps(res, indent=2) + "\n"
    if args.json:
        args.json.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
