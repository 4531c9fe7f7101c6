"""AFLite on a sparse TF-IDF (aflite.core.sparse) against the dense path on the same matrix densified, in one run, on
SNLI hypotheses: kept-set agreement, first-phase p̃ agreement with scikit-learn's LogisticRegression fitted on the
same partitions, and the time of each; JSON on stdout (``--out FILE`` also writes it), with the machine and load.

    python benchmarks/sparse_tfidf.py [--data ../shared/data/snli/dev.tsv.gz] [--n 0] [--min-df 3]
        [--partitions 64] [--out docs/measured/sparse_tfidf_snli_dev.json]

The dense path gets ``X.toarray()`` (float32), the sparse path the CSR matrix itself; both run the full filter with
the same parameters and seed, so they draw the same partitions and differ only in the solver. scikit-learn's
``LogisticRegression(C=1)`` (lbfgs, tol 1e-4) is the reference for the first phase (``model="sklearn"``, a loop of
m fits on the CSR rows). Kept for issue #49 item 3; its figures are cited in the report, not typed into the docs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from aflite import AFLite, load_dataset, predictability

ROOT = Path(__file__).resolve().parents[1]


def machine() -> dict[str, Any]:
    """The CPU model (lscpu), the cores this process may use and the load around the run."""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if ln.startswith("Model name")), "?")
    except OSError:
        model = "?"
    return {"cpu": model, "cpus_usable": len(os.sched_getaffinity(0)), "python": platform.python_version(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "?"


def agreement(p: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    ok = ~np.isnan(p) & ~np.isnan(ref)
    return {"pearson": float(np.corrcoef(p[ok], ref[ok])[0, 1]), "mean_abs_diff": float(np.abs(p[ok] - ref[ok]).mean()),
            "max_abs_diff": float(np.abs(p[ok] - ref[ok]).max()), "rows_identical": float(np.mean(p[ok] == ref[ok]))}


def timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data/snli/dev.tsv.gz", help="relative to the repository root")
    ap.add_argument("--n", type=int, default=0, help="the first N rows only (0: all)")
    ap.add_argument("--min-df", type=int, default=3, help="TfidfVectorizer's min_df (the dense copy grows with it)")
    ap.add_argument("--partitions", type=int, default=64)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    path = (ROOT / args.data) if not Path(args.data).is_absolute() else Path(args.data)
    ds = load_dataset(path)
    texts, y = list(ds.texts_b), np.asarray(ds.labels)
    if args.n:
        texts, y = texts[: args.n], y[: args.n]
    X = TfidfVectorizer(min_df=args.min_df).fit_transform(texts).astype(np.float32).tocsr()
    Xd = X.toarray()
    load_before = uptime()
    params = {"n_partitions": args.partitions, "random_state": 0, "device": "cpu"}
    sparse, t_sparse = timed(lambda: AFLite(**params).fit(X, y))
    dense, t_dense = timed(lambda: AFLite(**params).fit(Xd, y))
    first = {"n_partitions": args.partitions, "train_size": sparse.params_.train_size, "random_state": 0}
    ref, t_ref = timed(lambda: predictability(X, y, model="sklearn", **first))
    p_sparse, t_p_sparse = timed(lambda: predictability(X, y, **first))
    p_dense, t_p_dense = timed(lambda: predictability(Xd, y, **first))
    ks, kd = sparse.keep_mask_, dense.keep_mask_
    res = {
        "what": "AFLite on a sparse TF-IDF (aflite.core.sparse) vs the dense path on X.toarray(), same parameters "
                "and seed; first-phase p̃ of each vs scikit-learn LogisticRegression(C=1) on the same partitions",
        "data": f"{args.data}: hypotheses" + (f", first {args.n} rows" if args.n else ""),
        "rows": int(X.shape[0]), "tfidf": {"min_df": args.min_df, "features": int(X.shape[1]), "nnz": int(X.nnz),
                                           "dense_mib": round(Xd.nbytes / 2**20, 1),
                                           "sparse_mib": round((X.data.nbytes + X.indices.nbytes
                                                                + X.indptr.nbytes) / 2**20, 1)},
        "parameters": {k: getattr(sparse.params_, k) for k in ("n_partitions", "train_size", "slice_size",
                                                               "target_size", "threshold")},
        "filter": {"sparse_seconds": round(t_sparse, 2), "dense_seconds": round(t_dense, 2),
                   "dense_over_sparse": round(t_dense / t_sparse, 2),
                   "sparse_kept": int(ks.sum()), "dense_kept": int(kd.sum()),
                   "kept_jaccard": float((ks & kd).sum() / (ks | kd).sum()),
                   "phases": [int(sparse.n_iterations_), int(dense.n_iterations_)]},
        "first_phase": {"sklearn_seconds": round(t_ref, 2), "sparse_seconds": round(t_p_sparse, 2),
                        "dense_seconds": round(t_p_dense, 2),
                        "sparse_vs_sklearn": agreement(p_sparse.predictability, ref.predictability),
                        "dense_vs_sklearn": agreement(p_dense.predictability, ref.predictability),
                        "sparse_vs_dense": agreement(p_sparse.predictability, p_dense.predictability)},
        "machine": machine(), "load_before": load_before, "load_after": uptime(),
    }
    text = json.dumps(res, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
