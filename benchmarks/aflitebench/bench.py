"""``benchmarks/bench.py``: the fast ensemble against the scikit-learn reference, and a complete SNLI-sized run.

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

:func:`aflitebench.scale.scale_benchmark` is the other half (ImageNet-shaped features, devices, a local
cluster); the shaped features of both come from :mod:`aflitebench.shapes`.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite import data
from aflite.atomic import JSON
from aflite.core.ensemble import FastLogisticEnsemble, SklearnEnsemble
from aflite.core.filter import AFLite
from aflite.core.phase import scores_from_predictions
from aflite.errors import InputError, ParameterError
from aflite.rundir.versions import versions
from aflite.splits import draw_partitions
from aflitebench.child import in_child, own_peak_gib
from aflitebench.shapes import SNLI_N, make_snli_like


def _topk_overlap(p_a: NDArray[np.float64], p_b: NDArray[np.float64], k: int, tie: NDArray[np.float64]) -> float:
    k = min(k, len(p_a))
    a = np.lexsort((tie, -np.nan_to_num(p_a, nan=-1.0)))[:k]
    b = np.lexsort((tie, -np.nan_to_num(p_b, nan=-1.0)))[:k]
    return len(np.intersect1d(a, b)) / k


def _solver_phase(
    X: NDArray[np.float32], codes: NDArray[np.int64], rows: NDArray[np.intp], mask: NDArray[np.bool_],
    solver: str, say: Any,
) -> tuple[JSON, NDArray[Any]]:
    """Whitening and one phase with one solver; times, optimiser counts and where the time went."""
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
) -> JSON:
    """One filtering phase over the same partitions with each solver of the fast path and with the
    scikit-learn reference (on ``reference_partitions`` of them; 0 skips it): times, their ratios and agreement.

    The first solver is the one reported as "fast"; with ``("fast", "previous")`` the output also holds the
    previous solver's time, the ratio of the two and their agreement with each other and with the reference.
    """
    say = log or (lambda *_: None)
    _, codes = np.unique(y, return_inverse=True)
    codes = codes.astype(np.int64)
    n = len(codes)
    rows = np.arange(n)
    rng = np.random.default_rng([random_state, 0])
    mask = draw_partitions(n, n_partitions, train_size, rng)
    tie = rng.random(n)

    per: dict[str, JSON] = {}
    preds: dict[str, NDArray[Any]] = {}
    for solver in solvers:
        say(f"{solver} solver: whitening + one phase ...")
        per[solver], preds[solver] = _solver_phase(X, codes, rows, mask, solver, say)
    main = solvers[0]
    pf = preds[main]
    fast = per[main]
    p_fast_all, _, _ = scores_from_predictions(pf, codes, mask)
    out: JSON = {
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
        _compare_solvers(per, preds, main, other, codes, mask, p_fast_all, top_k, tie, n_partitions, say)
    r = min(reference_partitions, n_partitions)
    if r >= 1:
        out.update(_reference(X, codes, rows, mask, r, n_partitions, solvers, per, preds, top_k, tie, say))
    return out


def _compare_solvers(per: dict[str, JSON], preds: dict[str, NDArray[Any]], main: str, other: str,
                     codes: NDArray[np.int64], mask: NDArray[Any], p_fast_all: NDArray[Any], top_k: int,
                     tie: NDArray[Any], n_partitions: int, say: Any) -> None:
    """Another solver against the main one: time ratios and agreement of held-out predictions, p̃ and top k."""
    pf, po, fast = preds[main], preds[other], per[main]
    held = ~mask
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


def _reference(X: NDArray[np.float32], codes: NDArray[np.int64], rows: NDArray[Any], mask: NDArray[Any], r: int,
               n_partitions: int, solvers: tuple[str, ...], per: dict[str, JSON],
               preds: dict[str, NDArray[Any]], top_k: int, tie: NDArray[Any], say: Any) -> JSON:
    """scikit-learn's LogisticRegression on the first ``r`` partitions: its time scaled to all of them, and every
    solver's agreement with it on those partitions."""
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
    main = solvers[0]
    a = per[main]["agreement_with_reference"]
    return {
        "reference_partitions": r,
        "reference_seconds_measured": t_ref,
        "reference_seconds_scaled": t_ref_scaled,
        "reference_lbfgs_iterations_mean": float(np.mean(ref.last_stats.iterations)) if ref.last_stats.iterations
        else None,
        "speedup": t_ref_scaled / per[main]["seconds"],
        "agreement_predictions": a["predictions"],
        "pearson_p": a["pearson_p"],
        "top_k": top_k,
        "top_k_overlap": a["top_k_overlap"],
        "agreement_measured_on": f"the {r} partitions both paths ran (p̃ from those partitions)",
    }


PHASE_PARTS = ("setup", "passes", "line_search", "lbfgs", "prediction")


_OBSERVED: list[Any] = []  # in a benchmark child: the ensembles prepared so far (see _observed_ensemble)


def _observed_ensemble(solver: str) -> Any:
    """A fast ensemble that registers itself when prepared: ``AFLite.fit`` works on a copy of the model it is
    given, and the benchmark reads the copy's per-phase statistics."""
    class ObservedEnsemble(FastLogisticEnsemble):
        def prepare(self, X: Any, y: Any, n_classes: int) -> None:
            _OBSERVED.append(self)
            super().prepare(X, y, n_classes)

    return ObservedEnsemble(solver=solver, copy_X=False)  # X is generated for this run: whitened in place


def _complete_child(conn: Any, spec: JSON) -> None:
    t_start = time.perf_counter()
    if spec.get("features"):
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
    phases: list[JSON] = []
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
            "peak_rss_gib": own_peak_gib(),  # the child's own (VmHWM), not the parent's at fork
            "size_after": int(af.keep_mask_.sum()),
            "n_iterations": af.n_iterations_,
            "stop_reason": af.stop_reason_,
            "seconds_per_phase": [round(r.seconds, 2) for r in af.history_],
            "phases": phases,
            "keep_mask": np.packbits(af.keep_mask_).tobytes().hex(),
        }
    )
    conn.close()


def complete_run(spec: JSON) -> JSON:
    """The complete filter in a fresh process, so that its peak memory is its own."""
    return in_child(spec, _complete_child)


def _compare_complete(spec: JSON, solvers: tuple[str, ...], say: Any) -> JSON:
    """The complete filter once per solver (same seed, so the same partitions while the kept sets agree)."""
    runs: JSON = {}
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
    out: JSON = {"parameters": spec, **runs[solvers[0]], "solvers": runs}
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


def _table8(n_rows: int) -> JSON:
    """Table 8's SNLI parameters, scaled by |D| / 550,152 below SNLI's size."""
    scale = n_rows / SNLI_N
    t = 50_000 if scale >= 1 else max(10, int(round(50_000 * scale)))
    return {
        "n_partitions": 64, "train_size": t,
        "slice_size": 10_000 if scale >= 1 else max(1, int(round(10_000 * scale))),
        "target_size": 92_000 if scale >= 1 else max(t + 1, int(round(92_000 * scale))),
        "threshold": 0.75, "scale": min(1.0, scale),
    }


def check_benchmark(n: int, d: int, reference_partitions: int, features: str | None, labels: str | None,
                    real_features: str | None = None, real_labels: str | None = None) -> None:
    """The parameters of :func:`run_benchmark` that no benchmark can use, refused before any work."""
    if reference_partitions < 0:
        raise ParameterError("--reference-partitions must be at least 0 (0: skip the scikit-learn reference)")
    if (features is None) != (labels is None):
        raise ParameterError("--features and --labels go together")
    if (real_features is None) != (real_labels is None):
        raise ParameterError("--real-features and --real-labels go together")
    if features is None and d < 40:
        raise ParameterError(f"--dim {d}: the synthetic SNLI-shaped features need at least 40 dimensions")
    if n < 100:
        raise ParameterError(f"--n {n}: at least 100 rows")


def _solver_tuple(value: str | tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(value, str):
        if value not in ("fast", "previous", "both"):
            raise ParameterError(f"solver {value!r}: choose fast, previous or both")
        return ("fast", "previous") if value == "both" else (value,)
    return tuple(value)


def run_benchmark(
    n: int = SNLI_N,
    dim: int = 768,
    reference_partitions: int = 8,
    complete: bool = True,
    features: str | None = None,
    labels: str | None = None,
    seed: int = 0,
    log: Any = None,
    solvers: str | tuple[str, ...] = ("fast", "previous"),
    complete_solvers: str | tuple[str, ...] | None = None,
    real_features: str | None = None,
    real_labels: str | None = None,
    real_complete: bool = True,
) -> JSON:
    """The benchmark: one phase per solver and the reference (same partitions), the complete filter per solver,
    and optionally the same on real features (``real_features``/``real_labels``, Table 8 scaled to their size).
    ``dim`` is the synthetic features' dimension. ``solvers`` and ``complete_solvers``
    are a tuple or one of ``fast``, ``previous``, ``both``; ``complete_solvers`` defaults to ``solvers``, but only
    the fast one for both (the previous solver's complete run takes several times longer)."""
    d = dim
    solvers = _solver_tuple(solvers)
    if complete_solvers is None:
        complete_solvers = ("fast",) if solvers == ("fast", "previous") else solvers
    complete_solvers = _solver_tuple(complete_solvers)
    check_benchmark(n, d, reference_partitions, features, labels, real_features, real_labels)
    say = log or (lambda *_: None)
    from threadpoolctl import threadpool_info

    if real_features:  # read and checked now: a bad file must not wait for the synthetic benchmark's minutes
        check_features_files(real_features, real_labels)
    t0 = time.perf_counter()
    if features:
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

    out: JSON = {"data": desc, "versions": versions(), "solvers": list(solvers),
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
) -> JSON:
    """Real features (e.g. MiniLM pair embeddings): Table 8 scaled to |D|, one phase per solver against the
    scikit-learn loop on the same partitions, and the complete filter per solver."""
    say = log or (lambda *_: None)
    if labels is None:
        raise ParameterError("labels are required with real features")
    X = data.load_features(features)
    y = data.load_labels(labels)
    params = _table8(len(y))
    say(f"real features {features}: {X.shape[0]} x {X.shape[1]}, Table 8 scaled by {params['scale']:.4f}")
    res: JSON = {"features": features, "labels": labels, "shape": list(X.shape), "parameters": params}
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
