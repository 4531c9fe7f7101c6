"""scikit-learn's HashingVectorizer against the compiled murmur hasher (aflite.features.ngram_hash.murmur_counts)
on the same texts, side by side in one run: CPU seconds and wall time of each, and whether the CSR matrices are
bit-identical (indptr, indices, data). JSON on stdout, with the load average before and after.

    python benchmarks/ngram_hash_speed.py [--data ../shared/data/snli/train_100k.tsv.gz] [--threads 2]

Both text fields of the TSV are hashed with the featurizer's settings (word 1-2, char_wb 2-4, 2**20 buckets).
Kept for issue #57; its figures are cited in the report, not typed into the docs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.feature_extraction.text import HashingVectorizer

from aflite.features.ngram_hash import compiled, murmur_counts


def _texts(path: str) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        rows = [line.rstrip("\n").split("\t") for line in fh]
    a, b = header.index("premise"), header.index("hypothesis")
    return [r[a] for r in rows] + [r[b] for r in rows]


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data/snli/train_100k.tsv.gz")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    texts = _texts(args.data)
    murmur_counts(texts[:100], "word", (1, 2), 2**20)  # compile (or load the cached machine code) outside timing
    murmur_counts(texts[:100], "char_wb", (2, 4), 2**20)
    report: dict[str, Any] = {"texts": len(texts), "compiled": compiled(), "load_before": os.getloadavg(),
                              "threads": args.threads, "analyzers": {}}
    for analyzer, ngrams in (("word", (1, 2)), ("char_wb", (2, 4))):
        hv = HashingVectorizer(analyzer=analyzer, ngram_range=ngrams, n_features=2**20, lowercase=True,
                               alternate_sign=False, norm=None, dtype=np.float32)
        old, old_cpu, old_wall = _timed(lambda hv=hv: hv.transform(texts))
        row: dict[str, Any] = {"sklearn_cpu_s": round(old_cpu, 3), "sklearn_wall_s": round(old_wall, 3)}
        for threads in sorted({1, args.threads}):
            new, cpu, wall = _timed(lambda a=analyzer, g=ngrams, t=threads: murmur_counts(texts, a, g, 2**20, t))
            same = all(np.array_equal(getattr(old, k), getattr(new, k))
                       and getattr(old, k).dtype == getattr(new, k).dtype for k in ("indptr", "indices", "data"))
            row[f"threads_{threads}"] = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "bit_identical": same,
                                         "cpu_ratio": round(old_cpu / cpu, 1), "wall_ratio": round(old_wall / wall, 1)}
        report["analyzers"][analyzer] = row
    report["load_after"] = os.getloadavg()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
