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

:func:`scale_benchmark` is the other half: ImageNet-shaped (or SNLI-shaped) features in a memory-mapped
.npy, one phase per device (GPU against CPU on the same machine), on local Dask clusters of several sizes
(scaling, and a check that the predictions are identical to one process), and optionally the complete filter.
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

from aflite.errors import InputError, ParameterError

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


def _solver_phase(
    X: NDArray[np.float32], codes: NDArray[np.int64], rows: NDArray[np.intp], mask: NDArray[np.bool_],
    solver: str, say: Any,
) -> tuple[dict[str, Any], NDArray[Any]]:
    """Whitening and one phase with one solver; times, optimiser counts and where the time went."""
    from aflite.ensemble import FastLogisticEnsemble

    ens = FastLogisticEnsemble(solver=solver)
    t0, c0 = time.perf_counter(), time.process_time()
    ens.prepare(X, codes, int(codes.max()) + 1)
    t_prep = time.perf_counter() - t0
    t0 = time.perf_counter()
    preds = ens.fit_predict(rows, mask)
    t_phase = time.perf_counter() - t0
    cpu = time.process_time() - c0  # CPU seconds of all threads: less sensitive than wall time to other jobs
    st = ens.last_stats
    say(f"{solver} solver: {t_prep + t_phase:.1f} s, CPU {cpu:.1f} s (whitening {t_prep:.1f} s, phase {t_phase:.1f} s, "
        f"{np.mean(st.iterations):.1f} L-BFGS steps per model)")
    return {
        "seconds": t_prep + t_phase,
        "cpu_seconds": cpu,
        "whitening_seconds": t_prep,
        "phase_seconds": t_phase,
        "lbfgs_steps_mean": float(np.mean(st.iterations)),
        "passes": st.passes,
        "converged": st.converged,
        "thread_seconds": {k: round(v, 3) for k, v in st.parts.items()},
    }, preds


def compare_phase(
    X: NDArray[np.float32],
    y: NDArray[Any],
    *,
    n_partitions: int = 64,
    train_size: int = 50_000,
    reference_partitions: int = 8,
    top_k: int = 10_000,
    random_state: int = 0,
    solvers: tuple[str, ...] = ("fast",),
    log: Any = None,
) -> dict[str, Any]:
    """One filtering phase over the same partitions with each solver of the fast path and with the
    scikit-learn reference (on ``reference_partitions`` of them; 0 skips it): times, their ratios and agreement.

    The first solver is the one reported as "fast"; with ``("fast", "previous")`` the output also holds the
    previous solver's time, the ratio of the two and their agreement with each other and with the reference.
    """
    from aflite.ensemble import SklearnEnsemble
    from aflite.filter import draw_partitions, scores_from_predictions

    say = log or (lambda *_: None)
    _, codes = np.unique(y, return_inverse=True)
    codes = codes.astype(np.int64)
    n = len(codes)
    rows = np.arange(n)
    rng = np.random.default_rng([random_state, 0])
    mask = draw_partitions(n, n_partitions, train_size, rng)
    tie = rng.random(n)
    held = ~mask

    per: dict[str, dict[str, Any]] = {}
    preds: dict[str, NDArray[Any]] = {}
    for solver in solvers:
        say(f"{solver} solver: whitening + one phase ...")
        per[solver], preds[solver] = _solver_phase(X, codes, rows, mask, solver, say)
    main = solvers[0]
    pf = preds[main]
    fast = per[main]
    p_fast_all, _, _ = scores_from_predictions(pf, codes, mask)
    out: dict[str, Any] = {
        "n": n,
        "d": int(X.shape[1]),
        "n_partitions": n_partitions,
        "train_size": train_size,
        "solver": main,
        "fast_seconds": fast["seconds"],
        "fast_prepare_seconds": fast["whitening_seconds"],
        "fast_phase_seconds": fast["phase_seconds"],
        "fast_lbfgs_steps_mean": fast["lbfgs_steps_mean"],
        "fast_passes": fast["passes"],
        "fast_p_mean_all_partitions": float(np.nanmean(p_fast_all)),
        "solvers": per,
    }
    for other in solvers[1:]:
        po = preds[other]
        p_o, _, _ = scores_from_predictions(po, codes, mask)
        both = ~np.isnan(p_fast_all) & ~np.isnan(p_o)
        per[other]["ratio_to_" + main] = per[other]["seconds"] / fast["seconds"]
        per[other]["phase_ratio_to_" + main] = per[other]["phase_seconds"] / fast["phase_seconds"]
        per[other]["cpu_ratio_to_" + main] = per[other]["cpu_seconds"] / fast["cpu_seconds"]
        per[other]["agreement_with_" + main] = {
            "predictions": float((po[held] == pf[held]).mean()),
            "pearson_p": float(np.corrcoef(p_fast_all[both], p_o[both])[0, 1]),
            "top_k_overlap": _topk_overlap(p_fast_all, p_o, top_k, tie),
            "measured_on": f"all {n_partitions} partitions, held-out predictions",
        }
        say(f"{other} / {main}: {per[other]['ratio_to_' + main]:.2f}x the time; held-out predictions agree "
            f"{per[other]['agreement_with_' + main]['predictions']:.5f}")

    r = min(reference_partitions, n_partitions)
    if r < 1:
        return out
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
    held_sub = ~sub
    p_ref_sub, _, _ = scores_from_predictions(pr[:, subset], codes, sub)

    def agreement(p: NDArray[Any]) -> dict[str, float]:
        p_sub, _, _ = scores_from_predictions(p[:, subset], codes, sub)
        ok = ~np.isnan(p_sub) & ~np.isnan(p_ref_sub)
        return {
            "predictions": float((p[:, subset][held_sub] == pr[:, subset][held_sub]).mean()),
            "pearson_p": float(np.corrcoef(p_sub[ok], p_ref_sub[ok])[0, 1]),
            "top_k_overlap": _topk_overlap(p_sub, p_ref_sub, top_k, tie),
        }

    for solver in solvers:
        per[solver]["agreement_with_reference"] = agreement(preds[solver])
    a = per[main]["agreement_with_reference"]
    out.update({
        "reference_partitions": r,
        "reference_seconds_measured": t_ref,
        "reference_seconds_scaled": t_ref_scaled,
        "reference_lbfgs_iterations_mean": float(np.mean(ref.last_stats.iterations)) if ref.last_stats.iterations
        else None,
        "speedup": t_ref_scaled / fast["seconds"],
        "agreement_predictions": a["predictions"],
        "pearson_p": a["pearson_p"],
        "top_k": top_k,
        "top_k_overlap": a["top_k_overlap"],
        "agreement_measured_on": f"the {r} partitions both paths ran (p̃ from those partitions)",
    })
    return out


PHASE_PARTS = ("setup", "passes", "line_search", "lbfgs", "prediction")


_OBSERVED: list[Any] = []  # in a benchmark child: the ensembles prepared so far (see _observed_ensemble)


def _observed_ensemble(solver: str) -> Any:
    """A fast ensemble that registers itself when prepared: ``AFLite.fit`` works on a copy of the model it is
    given, and the benchmark reads the copy's per-phase statistics."""
    from aflite.ensemble import FastLogisticEnsemble

    class ObservedEnsemble(FastLogisticEnsemble):
        def prepare(self, X: Any, y: Any, n_classes: int) -> None:
            _OBSERVED.append(self)
            super().prepare(X, y, n_classes)

    return ObservedEnsemble(solver=solver)


def _complete_child(conn: Any, spec: dict[str, Any]) -> None:
    from aflite.filter import AFLite

    t_start = time.perf_counter()
    if spec.get("features"):
        from aflite import data

        X = data.load_features(spec["features"])
        y = data.load_labels(spec["labels"])
    else:
        b = make_snli_like(spec["n"], spec["d"], random_state=spec["seed"])
        X, y = b.X, b.y
    data_seconds = time.perf_counter() - t_start
    af = AFLite(
        target_size=spec["target_size"],
        n_partitions=spec["n_partitions"],
        train_size=spec["train_size"],
        slice_size=spec["slice_size"],
        threshold=spec["threshold"],
        random_state=spec["seed"],
        model=_observed_ensemble(spec.get("solver", "fast")),
    )
    phases: list[dict[str, Any]] = []
    clock = {"last": 0.0}

    def on_phase(record: Any, state: Any) -> None:
        del state
        now = time.perf_counter()
        ens = _OBSERVED[-1]
        st = ens.last_stats
        wall = now - clock["last"] - (ens.prepare_seconds_ if not phases else 0.0)  # phase 0: not the whitening
        clock["last"] = now
        threads = sum(st.parts.values())
        fit_parts = {k: round(st.seconds * st.parts.get(k, 0.0) / threads, 3) if threads else 0.0 for k in PHASE_PARTS}
        phases.append({
            "size_before": record.size_before,
            "wall": round(wall, 3),
            "fit": round(st.seconds, 3),
            **{f"fit_{k}": v for k, v in fit_parts.items()},
            "partitions_and_scoring": round(record.seconds - record.fit_seconds, 3),
            "selection_and_bookkeeping": round(wall - record.seconds, 3),
            "lbfgs_steps_mean": round(float(np.mean(st.iterations)), 2) if st.iterations else None,
            "passes": st.passes,
        })
        if spec.get("progress"):
            print(f"[bench]   phase {record.iteration}: |S| {record.size_before} -> {record.size_after}, "
                  f"{wall:.1f} s", file=sys.stderr, flush=True)

    t0, c0 = time.perf_counter(), time.process_time()
    clock["last"] = t0
    af.fit(X, y, callback=on_phase)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    totals = {k: round(sum(p[k] for p in phases), 2) for k in phases[0] if k not in ("size_before", "passes",
                                                                                      "lbfgs_steps_mean")}
    conn.send(
        {
            "solver": spec.get("solver", "fast"),
            "wall_seconds": wall,
            "cpu_seconds": cpu,
            "data_seconds": data_seconds,
            "whitening_seconds": _OBSERVED[-1].prepare_seconds_,
            "phase_totals_seconds": totals,
            "peak_rss_gib": peak_kb / 2**20,
            "size_after": int(af.keep_mask_.sum()),
            "n_iterations": af.n_iterations_,
            "stop_reason": af.stop_reason_,
            "seconds_per_phase": [round(r.seconds, 2) for r in af.history_],
            "phases": phases,
            "keep_mask": np.packbits(af.keep_mask_).tobytes().hex(),
        }
    )
    conn.close()


def complete_run(spec: dict[str, Any]) -> dict[str, Any]:
    """The complete filter in a fresh process, so that its peak memory is its own."""
    return _in_child(spec, _complete_child)


def _compare_complete(spec: dict[str, Any], solvers: tuple[str, ...], say: Any) -> dict[str, Any]:
    """The complete filter once per solver (same seed, so the same partitions while the kept sets agree)."""
    runs: dict[str, Any] = {}
    keep: dict[str, NDArray[np.bool_]] = {}
    for solver in solvers:
        say(f"complete filter with the {solver} solver (k={spec['slice_size']}, tau={spec['threshold']}, "
            f"n={spec['target_size']}) in a child process ...")
        r = complete_run({**spec, "solver": solver})
        bits = np.unpackbits(np.frombuffer(bytes.fromhex(r.pop("keep_mask")), dtype=np.uint8))
        keep[solver] = bits[: spec["n"]].astype(bool)
        runs[solver] = r
        say(f"  {solver}: {r['wall_seconds']:.1f} s, CPU {r['cpu_seconds']:.1f} s (whitening "
            f"{r['whitening_seconds']:.1f} s), peak "
            f"{r['peak_rss_gib']:.2f} GiB, kept {r['size_after']} after {r['n_iterations']} phases")
    out: dict[str, Any] = {"parameters": spec, **runs[solvers[0]], "solvers": runs}
    main = solvers[0]
    for other in solvers[1:]:
        a, b = keep[main], keep[other]
        n = min(len(a), len(b))
        a, b = a[:n], b[:n]
        removed_a, removed_b = ~a, ~b
        runs[other]["ratio_to_" + main] = runs[other]["wall_seconds"] / runs[main]["wall_seconds"]
        runs[other]["cpu_ratio_to_" + main] = runs[other]["cpu_seconds"] / runs[main]["cpu_seconds"]
        runs[other]["agreement_with_" + main] = {
            "same_keep_status": float((a == b).mean()),
            "removed_jaccard": float((removed_a & removed_b).sum() / max(1, (removed_a | removed_b).sum())),
        }
        say(f"  {other} / {main}: {runs[other]['ratio_to_' + main]:.2f}x the wall time; removed sets' Jaccard "
            f"{runs[other]['agreement_with_' + main]['removed_jaccard']:.4f}")
    return out


def _table8(n_rows: int) -> dict[str, Any]:
    """Table 8's SNLI parameters, scaled by |D| / 550,152 below SNLI's size."""
    scale = n_rows / SNLI_N
    t = 50_000 if scale >= 1 else max(10, int(round(50_000 * scale)))
    return {
        "n_partitions": 64, "train_size": t,
        "slice_size": 10_000 if scale >= 1 else max(1, int(round(10_000 * scale))),
        "target_size": 92_000 if scale >= 1 else max(t + 1, int(round(92_000 * scale))),
        "threshold": 0.75, "scale": min(1.0, scale),
    }


def run_benchmark(
    n: int = SNLI_N,
    d: int = 768,
    reference_partitions: int = 8,
    complete: bool = True,
    features: str | None = None,
    labels: str | None = None,
    seed: int = 0,
    log: Any = None,
    solvers: tuple[str, ...] = ("fast", "previous"),
    complete_solvers: tuple[str, ...] | None = None,
    real_features: str | None = None,
    real_labels: str | None = None,
    real_complete: bool = True,
) -> dict[str, Any]:
    """The benchmark: one phase per solver and the reference (same partitions), the complete filter per solver,
    and optionally the same on real features (``real_features``/``real_labels``, Table 8 scaled to their size)."""
    say = log or (lambda *_: None)
    from threadpoolctl import threadpool_info

    from aflite.rundir import versions

    if real_features:  # read and checked now: a bad file must not wait for the synthetic benchmark's minutes
        check_features_files(real_features, real_labels)
    t0 = time.perf_counter()
    if features:
        from aflite import data

        X = data.load_features(features)
        y = data.load_labels(labels) if labels else None
        if y is None:
            raise ParameterError("--labels is required with --features")
        desc = f"real features {features} ({X.shape[0]} x {X.shape[1]})"
    else:
        b = make_snli_like(n, d, random_state=seed)
        X, y, desc = b.X, b.y, b.description
        del b  # the complete runs happen in child processes: hold the features only as long as needed
    say(f"data: {desc} ({time.perf_counter() - t0:.1f} s)")
    params = _table8(len(y))
    import os

    out: dict[str, Any] = {"data": desc, "versions": versions(), "solvers": list(solvers),
                           "load_average_at_start": list(os.getloadavg()),  # other jobs on the machine
                           "blas": [(i.get("internal_api"), i.get("architecture"), i.get("num_threads"))
                                    for i in threadpool_info()]}
    out["phase"] = compare_phase(X, y, n_partitions=64, train_size=params["train_size"],
                                 reference_partitions=reference_partitions, top_k=min(10_000, len(y) // 10),
                                 random_state=seed, solvers=solvers, log=say)
    n_rows = len(y)
    del X, y
    if complete:
        spec = {"n": n_rows if features else n, "d": d, "seed": seed, "features": features, "labels": labels,
                **{k: v for k, v in params.items() if k != "scale"}, "progress": True}
        out["complete"] = _compare_complete(spec, complete_solvers or solvers, say)
    if real_features:
        out["real"] = real_benchmark(real_features, real_labels, reference_partitions=reference_partitions,
                                     complete=real_complete, seed=seed, solvers=solvers,
                                     complete_solvers=complete_solvers, log=say)
    out["load_average_at_end"] = list(os.getloadavg())
    return out


def check_features_files(features: str, labels: str | None) -> None:
    """Refuse unreadable or misaligned real features / labels before any benchmark work (one-line errors)."""
    from aflite import data

    if labels is None:
        raise ParameterError("labels are required with real features")
    X = data.load_features(features, mmap=True)
    y = data.load_labels(labels)
    data.check_aligned(X.shape[0], len(y), files=(features, labels))
    if len(np.unique(y)) < 2:
        raise InputError(f"{labels}: every row has the label {str(y[0])!r}; AFLite needs at least two classes")


def real_benchmark(
    features: str,
    labels: str | None,
    *,
    reference_partitions: int = 8,
    complete: bool = True,
    seed: int = 0,
    solvers: tuple[str, ...] = ("fast", "previous"),
    complete_solvers: tuple[str, ...] | None = None,
    log: Any = None,
) -> dict[str, Any]:
    """Real features (e.g. MiniLM pair embeddings): Table 8 scaled to |D|, one phase per solver against the
    scikit-learn loop on the same partitions, and the complete filter per solver."""
    from aflite import data

    say = log or (lambda *_: None)
    if labels is None:
        raise ParameterError("labels are required with real features")
    X = data.load_features(features)
    y = data.load_labels(labels)
    params = _table8(len(y))
    say(f"real features {features}: {X.shape[0]} x {X.shape[1]}, Table 8 scaled by {params['scale']:.4f}")
    res: dict[str, Any] = {"features": features, "labels": labels, "shape": list(X.shape), "parameters": params}
    res["phase"] = compare_phase(X, y, n_partitions=64, train_size=params["train_size"],
                                 reference_partitions=reference_partitions, top_k=params["slice_size"],
                                 random_state=seed, solvers=solvers, log=say)
    n_rows = len(y)
    del X, y
    if complete:
        spec = {"n": n_rows, "d": 0, "seed": seed, "features": features, "labels": labels,
                **{k: v for k, v in params.items() if k != "scale"}, "progress": True}
        res["complete"] = _compare_complete(spec, complete_solvers or solvers, say)
    return res


def _format_phase(p: dict[str, Any], indent: str = "  ") -> list[str]:
    lines = []
    for name, s in p["solvers"].items():
        th = ", ".join(f"{k} {v:.1f}" for k, v in s["thread_seconds"].items())
        extra = ""
        if "ratio_to_" + p["solver"] in s:
            ag = s["agreement_with_" + p["solver"]]
            extra = (f"; {s['ratio_to_' + p['solver']]:.2f}x the {p['solver']} solver's time, held-out predictions "
                     f"agree {ag['predictions']:.5f}, Pearson(p̃) {ag['pearson_p']:.4f}")
        lines.append(f"{indent}{name:<9} {s['seconds']:8.1f} s  (whitening {s['whitening_seconds']:.1f} s + phase "
                     f"{s['phase_seconds']:.1f} s; {s['lbfgs_steps_mean']:.1f} L-BFGS steps per model; "
                     f"thread-seconds: {th}){extra}")
    if "reference_seconds_scaled" in p:
        lines.append(f"{indent}reference {p['reference_seconds_scaled']:8.1f} s  (scikit-learn LogisticRegression, "
                     f"measured {p['reference_seconds_measured']:.1f} s on {p['reference_partitions']} of "
                     f"{p['n_partitions']} partitions and scaled; {p['reference_lbfgs_iterations_mean']} L-BFGS "
                     f"iterations per model)")
        lines.append(f"{indent}speed-up  {p['speedup']:8.1f} x  ({p['solver']} solver vs reference)")
        for name, s in p["solvers"].items():
            a = s["agreement_with_reference"]
            lines.append(f"{indent}{name} vs reference on {p['agreement_measured_on']}: predictions "
                         f"{a['predictions']:.4f}, Pearson(p̃) {a['pearson_p']:.4f}, top-{p['top_k']} overlap "
                         f"{a['top_k_overlap']:.4f}")
    return lines


def _format_complete(c: dict[str, Any], indent: str = "  ") -> list[str]:
    pr = c["parameters"]
    lines = [f"complete filter (m={pr['n_partitions']}, t={pr['train_size']}, k={pr['slice_size']}, "
             f"tau={pr['threshold']}, n={pr['target_size']}):"]
    main = next(iter(c["solvers"]))
    for name, r in c["solvers"].items():
        tot = r["phase_totals_seconds"]
        extra = ""
        if "ratio_to_" + main in r:
            extra = (f"; {r['ratio_to_' + main]:.2f}x the {main} solver's time, removed sets' Jaccard "
                     f"{r['agreement_with_' + main]['removed_jaccard']:.4f}")
        lines.append(f"{indent}{name:<9} wall {r['wall_seconds']:.1f} s, peak RSS {r['peak_rss_gib']:.2f} GiB, kept "
                     f"{r['size_after']} after {r['n_iterations']} phases ({r['stop_reason']}){extra}")
        lines.append(f"{indent}{'':<9} whitening {r['whitening_seconds']:.1f} s; phases: fit {tot['fit']:.1f} s "
                     f"(passes {tot['fit_passes']:.1f}, line search {tot['fit_line_search']:.1f}, L-BFGS "
                     f"{tot['fit_lbfgs']:.1f}, prediction {tot['fit_prediction']:.1f}, setup {tot['fit_setup']:.1f}), "
                     f"partitions+scoring {tot['partitions_and_scoring']:.1f} s, selection+bookkeeping "
                     f"{tot['selection_and_bookkeeping']:.1f} s")
    return lines


def format_report(res: dict[str, Any]) -> str:
    p = res["phase"]
    lines = [f"data: {res['data']}", f"one filtering phase, m={p['n_partitions']}, t={p['train_size']}:"]
    lines += _format_phase(p)
    if "complete" in res:
        lines += _format_complete(res["complete"])
    if "real" in res:
        r = res["real"]
        lines.append(f"real features {r['features']} ({r['shape'][0]} x {r['shape'][1]}), Table 8 scaled by "
                     f"{r['parameters']['scale']:.4f}: one phase, m=64, t={r['phase']['train_size']}:")
        lines += _format_phase(r["phase"])
        if "complete" in r:
            lines += _format_complete(r["complete"])
    return "\n".join(lines)


def main_json(res: dict[str, Any]) -> None:
    json.dump(res, sys.stdout, indent=2)
    sys.stdout.write("\n")


# ------------------------------------------------------------------------------------------------------------
# Scale: ImageNet-shaped features from a memory-mapped file, devices, and a local cluster
# ------------------------------------------------------------------------------------------------------------

IMAGENET_N = 1_281_167
# Table 8 (appendix A.5), ImageNet column; n = 640K and no τ (the paper controls n instead).
IMAGENET_PARAMS = {"n_partitions": 64, "train_size": 32_700, "slice_size": 33_600, "target_size": 640_000,
                   "threshold": 0.0}


def write_imagenet_like(
    path: str, n: int = IMAGENET_N, d: int = 2048, n_classes: int = 1000, bias_fraction: float = 0.3,
    random_state: int = 0,
) -> NDArray[np.int64]:
    """ImageNet-shaped features written chunk by chunk to a .npy (never whole in memory); returns labels.

    Pooled CNN features are non-negative-ish, anisotropic and class-clustered: each class has a weak mean
    direction, a random ``bias_fraction`` of rows carries a strong class-specific offset (the artifact), the
    coordinates are scaled by a power-law spectrum and shifted by a positive mean.
    """
    from aflite.atomic import atomic_path

    rng = np.random.default_rng(random_state)
    y = rng.integers(0, n_classes, n)
    spectrum = (2.0 * np.arange(1, d + 1, dtype=np.float64) ** -0.5).astype(np.float32)
    centres = (0.15 * rng.standard_normal((n_classes, d))).astype(np.float32)
    bias = np.zeros((n_classes, d), dtype=np.float32)
    nb = min(64, max(1, d // 4))
    bias[:, -nb:] = 1.5 * rng.standard_normal((n_classes, nb))  # the artifact lives in low-variance directions
    biased = rng.random(n) < bias_fraction
    with atomic_path(path) as tmp:
        X = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, d))
        step = 32_768
        for r0 in range(0, n, step):
            r1 = min(n, r0 + step)
            g = rng.standard_normal((r1 - r0, d), dtype=np.float32)
            g += centres[y[r0:r1]]
            g[biased[r0:r1]] += bias[y[r0:r1][biased[r0:r1]]]
            g *= spectrum
            g += 0.5
            X[r0:r1] = g
        X.flush()
        del X
    return y


class _MemorySampler:
    """Peak resident memory of this process, split into anonymous (heap) and file-backed (memory-mapped)."""

    def __init__(self, interval: float = 0.25) -> None:
        import threading

        self.peak = {"rss": 0, "anon": 0, "file": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)

    def _read(self) -> dict[str, int]:
        vals = {}
        with open("/proc/self/status") as fh:
            for line in fh:
                key = {"VmRSS:": "rss", "RssAnon:": "anon", "RssFile:": "file"}.get(line.split(" ")[0].split("\t")[0])
                if key:
                    vals[key] = int(line.split()[1]) * 1024
        return vals

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.sample()

    def sample(self) -> None:
        try:
            for k, v in self._read().items():
                self.peak[k] = max(self.peak[k], v)
        except OSError:  # not Linux: no breakdown
            pass

    def __enter__(self) -> _MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def gib(self) -> dict[str, float]:
        return {f"peak_{k}_gib": v / 2**30 for k, v in self.peak.items()}


def _scale_child(conn: Any, spec: dict[str, Any]) -> None:
    """One measured job in a fresh process: a phase (or the whole filter) on a memory-mapped .npy."""
    from aflite.ensemble import FastLogisticEnsemble
    from aflite.filter import AFLite, draw_partitions

    out: dict[str, Any] = {}
    with _MemorySampler() as mem:
        X = np.load(spec["features"], mmap_mode="r")
        y = np.load(spec["labels"])
        n = X.shape[0]
        executor = None
        if spec.get("workers"):
            from aflite.cluster import DaskExecutor

            executor = DaskExecutor(n_workers=spec["workers"], scratch=spec.get("scratch"))
        try:
            if spec["job"] == "phase":
                ens = FastLogisticEnsemble(device=spec["device"], storage=spec.get("storage", "float32"),
                                           executor=executor)
                t0 = time.perf_counter()
                ens.prepare(X, y, int(y.max()) + 1)
                out["prepare_seconds"] = time.perf_counter() - t0
                rng = np.random.default_rng([spec["seed"], 0])
                mask = draw_partitions(n, spec["n_partitions"], spec["train_size"], rng)
                mask = mask[:, : spec["measure_partitions"]]
                t0 = time.perf_counter()
                preds = ens.fit_predict(np.arange(n), mask)
                out["phase_seconds_measured"] = time.perf_counter() - t0
                out["lbfgs_steps_mean"] = float(np.mean(ens.last_stats.iterations))
                held = ~mask
                out["heldout_accuracy"] = float((preds[held] == np.broadcast_to(y[:, None], mask.shape)[held]).mean())
                if spec.get("save_preds"):
                    np.save(spec["save_preds"], preds)
            else:
                af = AFLite(**{k: spec[k] for k in ("n_partitions", "train_size", "slice_size", "target_size",
                                                    "threshold")}, random_state=spec["seed"],
                            device=spec["device"], executor=executor)
                t0 = time.perf_counter()
                af.fit(X, y)
                out["wall_seconds"] = time.perf_counter() - t0
                out.update(size_after=int(af.keep_mask_.sum()), n_iterations=af.n_iterations_,
                           stop_reason=af.stop_reason_, seconds_per_phase=[round(r.seconds, 2) for r in af.history_])
                if spec.get("save_preds"):
                    np.save(spec["save_preds"], af.keep_mask_)
        finally:
            if executor is not None:
                executor.close()
    out.update(mem.gib())
    conn.send(out)
    conn.close()


def _in_child(spec: dict[str, Any], target: Any = None) -> dict[str, Any]:
    """Run ``target(conn, spec)`` (default: a scale-benchmark job) in a fresh process and return what it sends."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target or _scale_child, args=(child, spec))
    proc.start()
    child.close()
    try:
        result: dict[str, Any] = parent.recv()
    except EOFError:
        proc.join()
        raise RuntimeError(f"benchmark child failed (exit code {proc.exitcode}); see the messages above") from None
    proc.join()
    return result


def scale_benchmark(
    workdir: str,
    *,
    shape: str = "imagenet",
    scale: float = 1.0,
    dim: int | None = None,
    n_classes: int | None = None,
    measure_partitions: int = 64,
    devices: tuple[str, ...] = ("cpu",),
    cluster_workers: tuple[int, ...] = (),
    complete: bool = False,
    seed: int = 0,
    log: Any = None,
) -> dict[str, Any]:
    """Scale benchmark on a memory-mapped .npy: one phase per device (ratios against the CPU), the same phase
    on a local Dask cluster of each size in ``cluster_workers`` (scaling, and identity with one process), and
    optionally the complete filter. Each job runs in a fresh process so that its peak memory is its own."""
    from pathlib import Path

    from aflite.rundir import versions

    say = log or (lambda *_: None)
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    if shape == "imagenet":
        n0, d, K = IMAGENET_N, dim or 2048, n_classes or 1000
        params = dict(IMAGENET_PARAMS)
    elif shape == "snli":
        n0, d, K = SNLI_N, dim or 768, n_classes or 3
        params = {"n_partitions": 64, "train_size": 50_000, "slice_size": 10_000, "target_size": 92_000,
                  "threshold": 0.75}
    else:
        raise ParameterError(f"unknown shape {shape!r}: use snli or imagenet")
    n = max(1000, int(round(n0 * scale)))
    for key in ("train_size", "slice_size", "target_size"):
        params[key] = max(10, int(round(params[key] * n / n0)))
    feats, labels = work / f"{shape}-{n}x{d}-{K}-s{seed}.npy", work / f"{shape}-{n}x{d}-{K}-s{seed}.labels.npy"
    t0 = time.perf_counter()
    if not (feats.exists() and labels.exists()):
        say(f"writing {shape}-shaped features {n} x {d} ({n * d * 4 / 2**30:.1f} GiB) to {feats} ...")
        if shape == "imagenet":
            y = write_imagenet_like(str(feats), n, d, K, random_state=seed)
        else:
            b = make_snli_like(n, d, K, random_state=seed)
            np.save(feats, b.X)
            y = b.y
        np.save(labels, y.astype(np.int64))
    res: dict[str, Any] = {
        "shape": shape, "n": n, "d": d, "n_classes": K, "scale": scale, "parameters": params,
        "features": str(feats), "features_gib": n * d * 4 / 2**30, "data_seconds": time.perf_counter() - t0,
        "versions": versions(), "phase": {}, "cluster": {},
    }
    m = params["n_partitions"]
    mp_ = min(measure_partitions, m)
    base = {"features": str(feats), "labels": str(labels), "seed": seed, **params}
    ref_preds = work / "preds-cpu.npy"
    for dev in devices:
        say(f"one phase on {dev}: {mp_} of {m} partitions, t={params['train_size']} ...")
        r = _in_child({**base, "job": "phase", "device": dev, "measure_partitions": mp_,
                       "save_preds": str(work / f"preds-{dev.replace(':', '_')}.npy")})
        r["measure_partitions"] = mp_
        r["phase_seconds_scaled_to_m"] = r["phase_seconds_measured"] * m / mp_
        res["phase"][dev] = r
        say(f"  {dev}: prepare {r['prepare_seconds']:.1f} s, phase {r['phase_seconds_measured']:.1f} s "
            f"(x{m / mp_:.0f} -> {r['phase_seconds_scaled_to_m']:.1f} s), peak anon {r['peak_anon_gib']:.2f} GiB")
    if "cpu" in res["phase"]:
        cpu = res["phase"]["cpu"]
        for dev, r in res["phase"].items():
            if dev != "cpu":
                r["speedup_vs_cpu"] = (cpu["prepare_seconds"] + cpu["phase_seconds_measured"]) / (
                    r["prepare_seconds"] + r["phase_seconds_measured"])
                a, b = np.load(ref_preds), np.load(work / f"preds-{dev.replace(':', '_')}.npy")
                r["prediction_agreement_with_cpu"] = float((a == b).mean())
    for w in cluster_workers:
        say(f"one phase on a local Dask cluster of {w} worker(s) ...")
        r = _in_child({**base, "job": "phase", "device": "cpu", "measure_partitions": mp_, "workers": w,
                       "scratch": str(work / "scratch"), "save_preds": str(work / f"preds-cluster{w}.npy")})
        if ref_preds.exists():
            r["identical_to_one_process"] = bool(np.array_equal(np.load(ref_preds),
                                                                np.load(work / f"preds-cluster{w}.npy")))
        res["cluster"][str(w)] = r
        say(f"  {w} worker(s): phase {r['phase_seconds_measured']:.1f} s")
    if res["cluster"]:
        first = res["cluster"][str(cluster_workers[0])]["phase_seconds_measured"]
        for r in res["cluster"].values():
            r["speedup_vs_first"] = first / r["phase_seconds_measured"]
    if complete:
        say("complete filter ...")
        res["complete"] = _in_child({**base, "job": "complete", "device": devices[0]})
        say(f"  complete: {res['complete']['wall_seconds']:.1f} s, {res['complete']['n_iterations']} phases")
    return res


def format_scale_report(res: dict[str, Any]) -> str:
    p = res["parameters"]
    lines = [f"{res['shape']}-shaped features {res['n']} x {res['d']} float32 ({res['features_gib']:.1f} GiB, "
             f"memory-mapped), {res['n_classes']} classes; m={p['n_partitions']}, t={p['train_size']}, "
             f"k={p['slice_size']}, n={p['target_size']}"]
    for dev, r in res["phase"].items():
        extra = ""
        if "speedup_vs_cpu" in r:
            extra = f", {r['speedup_vs_cpu']:.1f}x the CPU, predictions agree {r['prediction_agreement_with_cpu']:.4f}"
        lines.append(f"  phase on {dev}: prepare {r['prepare_seconds']:.1f} s + {r['phase_seconds_measured']:.1f} s "
                     f"for {r['measure_partitions']} partitions measured -> {r['phase_seconds_scaled_to_m']:.1f}"
                     f" s scaled to m; peak memory {r['peak_anon_gib']:.2f} GiB anonymous + {r['peak_file_gib']:.2f} "
                     f"GiB mapped file{extra}")
    for w, r in res["cluster"].items():
        lines.append(f"  local cluster, {w} worker(s): phase {r['phase_seconds_measured']:.1f} s "
                     f"({r['speedup_vs_first']:.2f}x), identical to one process: {r.get('identical_to_one_process')}")
    if "complete" in res:
        c = res["complete"]
        lines.append(f"  complete filter: {c['wall_seconds']:.1f} s, {c['n_iterations']} phases, kept {c['size_after']}"
                     f" ({c['stop_reason']}), peak {c['peak_anon_gib']:.2f} GiB anonymous")
    return "\n".join(lines)
