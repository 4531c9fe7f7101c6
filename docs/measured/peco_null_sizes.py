"""PECO against its label-shuffled null at several sizes of one dataset (issue 12: "a raw PECO cannot be read
without its null"). Frozen MiniLM hypothesis embeddings (cached by a plain `aflite audit FILE --out OUT`),
PCA 30 → k-means 50 as in the audit, seeded row samples of each size; the null is 30 label shuffles.

    python docs/measured/peco_null_sizes.py DATA.tsv OUT/cache docs/measured/peco_null_sizes_snli_devtest.json \
        "../shared/data/snli/dev.tsv.gz + test.tsv.gz"
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from aflite import audit as A
from aflite.data import load_dataset


def main(data: str, cache: str, out: str, label: str | None = None) -> None:
    ds = load_dataset(data)
    cfg = A.AuditConfig(views=("hypothesis",), cache_dir=cache, show_progress=False, tra=False)
    X = A._features(ds, "hypothesis", cfg)
    y = np.asarray(ds.labels).astype(str)
    rows_out = []
    for size in (1000, 2266, 6664, len(y)):
        for rep in range(1 if size == len(y) else 3):
            rows = np.sort(np.random.default_rng([size, rep]).permutation(len(y))[:size])
            for labels in ("real", "shuffled"):
                yy = y[rows] if labels == "real" else np.random.default_rng([size, rep, 9]).permutation(y[rows])
                t0 = time.perf_counter()
                pr = A.peco(X[rows], yy, 30, 50, random_state=0)
                null = A.peco_null(pr, yy, 30, seed=0)
                rows_out.append({"size": int(size), "sample": rep, "labels": labels, "peco": pr.score,
                                 "peco_fraction20": pr.score_fraction20, **null.to_dict(),
                                 "seconds": round(time.perf_counter() - t0, 2)})
                r = rows_out[-1]
                print(f"{size:6d} #{rep} {labels:8s} PECO {r['peco']:.3f}  null {r['null_mean']:.3f} "
                      f"(p95 {r['null_p95']:.3f})  excess {r['excess']:+.3f}  p={r['p_value']:.3f}", flush=True)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump({"data": label or data, "featurizer": "minilm (frozen), hypothesis", "n_components": 30,
                   "n_clusters": 50, "shuffles": 30, "results": rows_out}, fh, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:5])
