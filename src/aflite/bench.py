"""``aflite bench``: the fast ensemble against the scikit-learn reference, and a complete SNLI-sized run.

Not a timed test: a benchmark that reports what it measured. It

1. builds SNLI-shaped features (550,152 × 768 float32, 3 classes) with the conditioning of real sentence
   embeddings — a power-law singular-value spectrum and a non-zero mean — and a planted, learnable bias on
   part of the data (or takes real features);
2. runs one filtering phase with Table 8's SNLI parameters (m = 64, t = 50,000) on the fast path and on
   the reference path (scikit-learn ``LogisticRegression()`` with default C = 1.0 and tol, ``max_iter``
   raised so that it converges) over the *same* partitions; the reference may run on a subset of the m
   partitions, timed and scaled to m — the output says so — and agreement is measured on the partitions
   both ran: per-prediction agreement, Pearson correlation of p̃ and overlap of the top-10,000 sets (ties
   broken by one shared seeded key);
3. runs the complete filter (k = 10,000, τ = 0.75, n = 92,000) in a child process and reports its wall
   time and peak resident memory.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import resource
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

SNLI_N = 550_152


@dataclass
class BenchData:
    X: NDArray[np.float32]
    y: NDArray[Any]
    biased: NDArray[np.bool_] | None
    description: str


def make_snli_like(
    n: int = SNLI_N,
    d: int = 768,
    n_classes: int = 3,
    bias_fraction: float = 0.3,
    decay: float = 1.0,
    random_state: int = 0,
) -> BenchData:
    """Synthetic sentence-embedding-like features with a planted bias.

    Latent Gaussian coordinates carry a weak label signal for everyone (the "task": directions 5–14) and a
    strong class-specific offset for a random ``bias_fraction`` of the rows (the artifact: directions
    30–39). They are then scaled by a power-law spectrum σ_j ∝ j^-decay (real embeddings are strongly
    anisotropic: scikit-learn's L-BFGS needs hundreds of steps on them instead of a handful on isotropic
    noise), rotated by a random orthogonal matrix and shifted by a non-zero mean.
    """
    rng = np.random.default_rng(random_state)
    y = rng.integers(0, n_classes, n)
    spectrum = (2.0 * np.arange(1, d + 1, dtype=np.float64) ** -decay).astype(np.float32)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    rot = (spectrum[:, None] * q.T).astype(np.float32)  # scale then rotate, as one matrix
    mean = (0.3 * rng.standard_normal(d)).astype(np.float32)
    task = np.zeros((n_classes, d), dtype=np.float32)
    task[:, 5:15] = 0.25 * rng.standard_normal((n_classes, 10))
    bias = np.zeros((n_classes, d), dtype=np.float32)
    bias[:, 30:40] = 1.5 * rng.standard_normal((n_classes, 10))
    biased = rng.random(n) < bias_fraction
    X = np.empty((n, d), dtype=np.float32)
    step = 65_536
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        g = rng.standard_normal((r1 - r0, d), dtype=np.float32)
        g += task[y[r0:r1]]
        g[biased[r0:r1]] += bias[y[r0:r1][biased[r0:r1]]]
        np.matmul(g, rot, out=X[r0:r1])
        X[r0:r1] += mean
    desc = (
        f"synthetic SNLI-shaped: {n} x {d} float32, {n_classes} classes, bias on {biased.mean():.1%} of rows, "
        f"spectrum j^-{decay}, non-zero mean, seed {random_state}"
    )
    return BenchData(X, y, biased, desc)


def _topk_overlap(p_a: NDArray[np.float64], p_b: NDArray[np.float64], k: int, tie: NDArray[np.float64]) -> float:
    k = min(k, len(p_a))
    a = np.lexsort((tie, -np.nan_to_num(p_a, nan=-1.0)))[:k]
    b = np.lexsort((tie, -np.nan_to_num(p_b, nan=-1.0)))[:k]
    return len(np.intersect1d(a, b)) / k


def compare_phase(
    X: NDArray[np.float32],
    y: NDArray[Any],
    *,
    n_partitions: int = 64,
    train_size: int = 50_000,
    reference_partitions: int = 8,
    top_k: int = 10_000,
    random_state: int = 0,
    log: Any = None,
) -> dict[str, Any]:
    """One filtering phase on both paths over the same partitions; speed ratio and agreement."""
    from aflite.ensemble import FastLogisticEnsemble, SklearnEnsemble
    from aflite.filter import draw_partitions, scores_from_predictions

    say = log or (lambda *_: None)
    _, codes = np.unique(y, return_inverse=True)
    n = len(codes)
    rows = np.arange(n)
    rng = np.random.default_rng([random_state, 0])
    mask = draw_partitions(n, n_partitions, train_size, rng)
    tie = rng.random(n)

    say("fast path: whitening + one phase ...")
    fast = FastLogisticEnsemble()
    t0 = time.perf_counter()
    fast.prepare(X, codes, int(codes.max()) + 1)
    t_prep = time.perf_counter() - t0
    t0 = time.perf_counter()
    pf = fast.fit_predict(rows, mask)
    t_fast_phase = time.perf_counter() - t0
    fast_total = t_prep + t_fast_phase
    say(f"fast path: {fast_total:.1f} s (prepare {t_prep:.1f} s, phase {t_fast_phase:.1f} s)")

    r = min(reference_partitions, n_partitions)
    subset = list(range(r))
    say(f"reference path: scikit-learn LogisticRegression on {r} of {n_partitions} partitions ...")
    ref = SklearnEnsemble(partitions=subset)
    ref.prepare(X, codes, int(codes.max()) + 1)
    t0 = time.perf_counter()
    pr = ref.fit_predict(rows, mask)
    t_ref = time.perf_counter() - t0
    t_ref_scaled = t_ref * n_partitions / r
    say(f"reference path: {t_ref:.1f} s for {r} partitions -> {t_ref_scaled:.1f} s scaled to {n_partitions}")

    sub = mask[:, subset]
    held = ~sub
    agree = float((pf[:, subset][held] == pr[:, subset][held]).mean())
    p_fast_sub, _, _ = scores_from_predictions(pf[:, subset], codes, sub)
    p_ref_sub, _, _ = scores_from_predictions(pr[:, subset], codes, sub)
    both = ~np.isnan(p_fast_sub) & ~np.isnan(p_ref_sub)
    corr = float(np.corrcoef(p_fast_sub[both], p_ref_sub[both])[0, 1])
    overlap = _topk_overlap(p_fast_sub, p_ref_sub, top_k, tie)
    p_fast_all, _, _ = scores_from_predictions(pf, codes, mask)
    return {
        "n": n,
        "d": int(X.shape[1]),
        "n_partitions": n_partitions,
        "train_size": train_size,
        "fast_seconds": fast_total,
        "fast_prepare_seconds": t_prep,
        "fast_phase_seconds": t_fast_phase,
        "fast_lbfgs_steps_mean": float(np.mean(fast.last_stats.iterations)),
        "fast_passes": fast.last_stats.passes,
        "reference_partitions": r,
        "reference_seconds_measured": t_ref,
        "reference_seconds_scaled": t_ref_scaled,
        "reference_lbfgs_iterations_mean": float(np.mean(ref.last_stats.iterations)) if ref.last_stats.iterations
        else None,
        "speedup": t_ref_scaled / fast_total,
        "agreement_predictions": agree,
        "pearson_p": corr,
        "top_k": top_k,
        "top_k_overlap": overlap,
        "agreement_measured_on": f"the {r} partitions both paths ran (p̃ from those partitions)",
        "fast_p_mean_all_partitions": float(np.nanmean(p_fast_all)),
    }


def _complete_child(conn: Any, spec: dict[str, Any]) -> None:
    from aflite.filter import AFLite

    if spec.get("features"):
        from aflite import data

        X = data.load_features(spec["features"])
        y = data.load_labels(spec["labels"])
    else:
        b = make_snli_like(spec["n"], spec["d"], random_state=spec["seed"])
        X, y = b.X, b.y
    af = AFLite(
        target_size=spec["target_size"],
        n_partitions=spec["n_partitions"],
        train_size=spec["train_size"],
        slice_size=spec["slice_size"],
        threshold=spec["threshold"],
        random_state=spec["seed"],
    )
    t0 = time.perf_counter()
    af.fit(X, y)
    wall = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    conn.send(
        {
            "wall_seconds": wall,
            "peak_rss_gib": peak_kb / 2**20,
            "size_after": int(af.keep_mask_.sum()),
            "n_iterations": af.n_iterations_,
            "stop_reason": af.stop_reason_,
            "seconds_per_phase": [round(r.seconds, 2) for r in af.history_],
        }
    )
    conn.close()


def complete_run(spec: dict[str, Any]) -> dict[str, Any]:
    """The complete filter in a fresh process, so that its peak memory is its own."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_complete_child, args=(child, spec))
    proc.start()
    child.close()
    result: dict[str, Any] = parent.recv()
    proc.join()
    return result


def run_benchmark(
    n: int = SNLI_N,
    d: int = 768,
    reference_partitions: int = 8,
    complete: bool = True,
    features: str | None = None,
    labels: str | None = None,
    seed: int = 0,
    log: Any = None,
) -> dict[str, Any]:
    say = log or (lambda *_: None)
    from threadpoolctl import threadpool_info

    from aflite.rundir import versions

    t0 = time.perf_counter()
    if features:
        from aflite import data

        X = data.load_features(features)
        y = data.load_labels(labels) if labels else None
        if y is None:
            raise ValueError("--labels is required with --features")
        desc = f"real features {features} ({X.shape[0]} x {X.shape[1]})"
    else:
        b = make_snli_like(n, d, random_state=seed)
        X, y, desc = b.X, b.y, b.description
    say(f"data: {desc} ({time.perf_counter() - t0:.1f} s)")
    scale = len(y) / SNLI_N
    t = 50_000 if len(y) >= SNLI_N else max(10, int(round(50_000 * scale)))
    out: dict[str, Any] = {"data": desc, "versions": versions(),
                           "blas": [(i.get("internal_api"), i.get("architecture"), i.get("num_threads"))
                                    for i in threadpool_info()]}
    out["phase"] = compare_phase(X, y, n_partitions=64, train_size=t, reference_partitions=reference_partitions,
                                 top_k=min(10_000, len(y) // 10), random_state=seed, log=say)
    del X
    if complete:
        spec = {
            "n": n, "d": d, "seed": seed, "features": features, "labels": labels,
            "n_partitions": 64, "train_size": t,
            "slice_size": 10_000 if scale >= 1 else max(1, int(round(10_000 * scale))),
            "target_size": 92_000 if scale >= 1 else max(t + 1, int(round(92_000 * scale))),
            "threshold": 0.75,
        }
        say("complete filter run (k=10,000, tau=0.75, n=92,000 scaled to |D|) in a child process ...")
        out["complete"] = {"parameters": spec, **complete_run(spec)}
        say(f"complete run: {out['complete']['wall_seconds']:.1f} s, peak {out['complete']['peak_rss_gib']:.2f} GiB")
    return out


def format_report(res: dict[str, Any]) -> str:
    p = res["phase"]
    lines = [
        f"data: {res['data']}",
        f"one filtering phase, m={p['n_partitions']}, t={p['train_size']}:",
        f"  fast path      {p['fast_seconds']:8.1f} s  (whitening {p['fast_prepare_seconds']:.1f} s + phase "
        f"{p['fast_phase_seconds']:.1f} s; {p['fast_lbfgs_steps_mean']:.1f} L-BFGS steps per model)",
        f"  reference      {p['reference_seconds_scaled']:8.1f} s  (scikit-learn LogisticRegression, measured "
        f"{p['reference_seconds_measured']:.1f} s on {p['reference_partitions']} of {p['n_partitions']} "
        f"partitions and scaled; {p['reference_lbfgs_iterations_mean']} L-BFGS iterations per model)",
        f"  speed-up       {p['speedup']:8.1f} x",
        f"  agreement on {p['agreement_measured_on']}: predictions {p['agreement_predictions']:.4f}, "
        f"Pearson(p̃) {p['pearson_p']:.4f}, top-{p['top_k']} overlap {p['top_k_overlap']:.4f}",
    ]
    if "complete" in res:
        c = res["complete"]
        lines += [
            f"complete filter (k={c['parameters']['slice_size']}, tau=0.75, n={c['parameters']['target_size']}):",
            f"  wall {c['wall_seconds']:.1f} s, peak RSS {c['peak_rss_gib']:.2f} GiB, kept {c['size_after']} after "
            f"{c['n_iterations']} phases ({c['stop_reason']})",
        ]
    return "\n".join(lines)


def main_json(res: dict[str, Any]) -> None:
    json.dump(res, sys.stdout, indent=2)
    sys.stdout.write("\n")
