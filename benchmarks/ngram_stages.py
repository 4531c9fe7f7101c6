"""Where the n-gram featurizer's fit_transform spends its time, stage by stage, and how its SVD compares with
scikit-learn's TruncatedSVD on the real matrix (side by side in one process).

Usage: ``PYTHONPATH=$PWD/src python benchmarks/ngram_stages.py DATA [--rows N] [--fit-rows N]
[--reference-src DIR]``. Prints JSON: CPU-s and wall s per stage (hashing, column choice, TF-IDF fit+transform,
hstack, SVD fit, projection, combine) for this tree's SVD and for scikit-learn's, and the agreement of the two
(components, projected features). ``--reference-src`` (another tree's ``src``, e.g. an older commit's) also fits
that tree's ``randomized_components`` on the same matrices, in a subprocess right after this tree's (old and new
side by side in one run), and reports its CPU-s and how far its components are from this tree's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any

import numpy as np
import scipy.sparse as sp

from aflite import load_dataset
from aflite.features.ngram import NgramFeaturizer, _project
from aflite.features.rsvd import randomized_components


class Clock:
    """CPU-s (process) and wall s accumulated per stage name."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.wall: dict[str, float] = defaultdict(float)

    def run(self, stage: str, fn: Any, *args: Any) -> Any:
        c, w = time.process_time(), time.perf_counter()
        out = fn(*args)
        self.cpu[stage] += time.process_time() - c
        self.wall[stage] += time.perf_counter() - w
        return out

    def figures(self) -> dict[str, dict[str, float]]:
        return {s: {"cpu_s": round(self.cpu[s], 2), "wall_s": round(self.wall[s], 2)} for s in self.cpu}


def tfidf_stages(f: NgramFeaturizer, texts: list[str], sample: np.ndarray | None, clock: Clock) -> sp.csr_matrix:
    """``NgramFeaturizer._tfidf_field`` (fit) split into its stages."""
    from sklearn.feature_extraction.text import TfidfTransformer

    from aflite.features.ngram_hash import murmur_counts
    from aflite.threads import budget

    blocks = []
    for h in f._hashers():
        counts = clock.run("hashing", murmur_counts, texts, h.analyzer, h.ngram_range, h.n_features, budget())
        fit_counts = counts if sample is None else counts[sample]
        cols = clock.run("column choice", f._choose_columns, fit_counts)
        tf = TfidfTransformer(sublinear_tf=f.sublinear_tf, norm="l2")
        clock.run("tfidf", tf.fit, fit_counts[:, cols])
        blocks.append(clock.run("tfidf", tf.transform, counts[:, cols]))
    return clock.run("hstack", lambda: sp.csr_matrix(
        sp.hstack(blocks, format="csr", dtype=np.float32) * np.float32(1 / np.sqrt(2)), dtype=np.float32))


REFERENCE_FIT = """
import json, sys, time
import numpy as np, scipy.sparse as sp
from aflite.features.rsvd import randomized_components
x = sp.load_npz(sys.argv[1]).tocsr()
k, threads = int(sys.argv[3]), int(sys.argv[5])
seed = None if sys.argv[4] == "None" else int(sys.argv[4])
randomized_components(x[:50], 5, seed, 5, 10, threads)  # compiles (or loads) the kernels outside the clock
c, w = time.process_time(), time.perf_counter()
comps = randomized_components(x, k, seed, 5, 10, threads)
print(json.dumps({"cpu_s": time.process_time() - c, "wall_s": time.perf_counter() - w}))
np.save(sys.argv[2], comps)
"""


def reference_fit(src: str, x: sp.csr_matrix, k: int, seed: int | None, threads: int,
                  ours: np.ndarray) -> dict[str, Any]:
    """The tree at ``src``'s SVD fit of ``x`` in a subprocess: its CPU-s and wall s, and its components' distance
    from ``ours``."""
    with tempfile.TemporaryDirectory() as tmp:
        sp.save_npz(f"{tmp}/x.npz", x, compressed=False)
        env = {**os.environ, "PYTHONPATH": src}
        res = subprocess.run([sys.executable, "-c", REFERENCE_FIT, f"{tmp}/x.npz", f"{tmp}/c.npy", str(k),
                              str(seed), str(threads)], env=env, check=True, capture_output=True, text=True)
        figures = json.loads(res.stdout.strip().splitlines()[-1])
        theirs = np.load(f"{tmp}/c.npy")
    return {"cpu_s": round(figures["cpu_s"], 2), "wall_s": round(figures["wall_s"], 2),
            "max_abs_component_diff": float(np.abs(theirs - ours).max()),
            "bit_equal": bool(np.array_equal(theirs, ours))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("data")
    ap.add_argument("--rows", type=int, default=None, help="first N rows only")
    ap.add_argument("--fit-rows", type=int, default=None, help="svd_fit_rows (default: all rows)")
    ap.add_argument("--no-sklearn", action="store_true", help="skip scikit-learn's SVD")
    ap.add_argument("--reference-src", default=None,
                    help="another tree's src folder: time its SVD fit beside this tree's on the same matrices")
    args = ap.parse_args()
    from sklearn.decomposition import TruncatedSVD

    ds = load_dataset(args.data)
    fields = [list(ds.texts_a), list(ds.texts_b)]
    if args.rows:
        fields = [t[: args.rows] for t in fields]
    f = NgramFeaturizer(svd_fit_rows=args.fit_rows)
    n = len(fields[0])
    sample = f._sample_rows(n)
    ours, ref, shared = Clock(), Clock(), Clock()
    agree, reference = [], []
    outs, ref_outs = [], []
    for texts in fields:
        x = tfidf_stages(f, texts, sample, shared)
        fit_x = x if sample is None else x[sample]
        k = min(f.n_components, n - 1, x.shape[1] - 1)
        comps = ours.run("svd fit", randomized_components, fit_x, k, f.seed, 5, 10, os.cpu_count() or 1)
        outs.append(ours.run("projection", _project, x, comps))
        if args.reference_src:
            reference.append(reference_fit(args.reference_src, fit_x, k, f.seed, os.cpu_count() or 1, comps))
        if not args.no_sklearn:
            svd = TruncatedSVD(k, algorithm="randomized", n_iter=5, random_state=f.seed)
            ref.run("svd fit", svd.fit, fit_x)
            ref_outs.append(np.asarray(ref.run("projection", svd.transform, x), dtype=np.float32))
            sk = svd.components_
            cos = np.abs(np.sum(comps * sk, axis=1)) / (np.linalg.norm(comps, axis=1) * np.linalg.norm(sk, axis=1))
            agree.append({"max_abs_component_diff": float(np.abs(comps - sk).max()),
                          "components_over_0.999_cosine": int((cos > 0.999).sum()), "k": k,
                          "first_component_below_0.999": int(np.argmax(cos <= 0.999)) if (cos <= 0.999).any()
                          else None,
                          "max_abs_feature_diff": float(np.abs(outs[-1] - ref_outs[-1]).max()),
                          "feature_scale": float(np.abs(ref_outs[-1]).max())})
    ours.run("combine", lambda: np.ascontiguousarray(np.hstack(outs), dtype=np.float32))
    total_shared = sum(shared.cpu.values())
    report = {"rows": n, "fit_rows": None if sample is None else len(sample), "cpus": os.cpu_count(),
              "load": os.getloadavg(), "shared_stages": shared.figures(), "this_tree_svd": ours.figures(),
              "sklearn_svd": ref.figures(), "agreement_per_field": agree,
              "reference_svd_fit_per_field": reference,
              "cpu_s_this_tree": round(total_shared + sum(ours.cpu.values()), 2),
              "cpu_s_sklearn": round(total_shared + sum(ref.cpu.values()), 2) if ref.cpu else None}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
