"""``benchmarks/bench.py --shape``: ImageNet-shaped (or SNLI-shaped) features in a memory-mapped .npy, one phase per
device (GPU against CPU on the same machine), on local Dask clusters of several sizes (scaling, and a check
that the predictions are identical to one process), and optionally the complete filter."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import JSON
from aflite.core.backends.dask import DaskExecutor
from aflite.core.ensemble import FastLogisticEnsemble
from aflite.core.filter import AFLite
from aflite.device import resolve_device
from aflite.errors import ParameterError
from aflite.rundir.versions import versions
from aflite.splits import draw_partitions
from aflitebench.child import in_child
from aflitebench.shapes import IMAGENET_N, IMAGENET_PARAMS, SNLI_N, make_snli_like, write_imagenet_like


class _MemorySampler:
    """Peak resident memory of this process, split into anonymous (heap) and file-backed (memory-mapped)."""

    def __init__(self, interval: float = 0.25) -> None:

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


def _scale_child(conn: Any, spec: JSON) -> None:
    """One measured job in a fresh process: a phase (or the whole filter) on a memory-mapped .npy."""
    out: JSON = {}
    with _MemorySampler() as mem:
        X = np.load(spec["features"], mmap_mode="r")
        y = np.load(spec["labels"])
        n = X.shape[0]
        executor = None
        if spec.get("workers"):
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


def _in_child(spec: JSON, target: Any = None) -> JSON:
    """A scale-benchmark job (or ``target``) in a fresh process (:func:`aflitebench.child.in_child`)."""
    return in_child(spec, target or _scale_child)


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
) -> JSON:
    """Scale benchmark on a memory-mapped .npy: one phase per device (ratios against the CPU), the same phase
    on a local Dask cluster of each size in ``cluster_workers`` (scaling, and identity with one process), and
    optionally the complete filter. Each job runs in a fresh process so that its peak memory is its own."""

    if not 0 < scale <= 1:
        raise ParameterError("--scale must lie in (0, 1]")
    if measure_partitions < 1:
        raise ParameterError("--measure-partitions must be at least 1")
    if any(w < 1 for w in cluster_workers):
        raise ParameterError("--cluster-workers: sizes must be at least 1")
    for dev in devices:
        resolve_device(dev)  # a clear error before any data is written
    say = log or (lambda *_: None)
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    n, d, K, params, feats, labels, data_seconds = _shaped_data(work, shape, scale, dim, n_classes, seed, say)
    res: JSON = {
        "shape": shape, "n": n, "d": d, "n_classes": K, "scale": scale, "parameters": params,
        "features": str(feats), "features_gib": n * d * 4 / 2**30, "data_seconds": data_seconds,
        "versions": versions(), "phase": {}, "cluster": {},
    }
    m = params["n_partitions"]
    mp_ = min(measure_partitions, m)
    base = {"features": str(feats), "labels": str(labels), "seed": seed, **params}
    res["phase"] = _device_phases(work, base, devices, m, mp_, say)
    for w in cluster_workers:
        say(f"one phase on a local Dask cluster of {w} worker(s) ...")
        r = _in_child({**base, "job": "phase", "device": "cpu", "measure_partitions": mp_, "workers": w,
                       "scratch": str(work / "scratch"), "save_preds": str(work / f"preds-cluster{w}.npy")})
        if (work / "preds-cpu.npy").exists():
            r["identical_to_one_process"] = bool(np.array_equal(np.load(work / "preds-cpu.npy"),
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


def _shaped_data(work: Any, shape: str, scale: float, dim: int | None, n_classes: int | None, seed: int,
                 say: Any) -> tuple[int, int, int, JSON, Any, Any, float]:
    """The shaped features and labels (written once, reused): (n, d, classes, the scaled parameters, the feature
    and label files, the seconds it took)."""
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
    return n, d, K, params, feats, labels, time.perf_counter() - t0


def _device_phases(work: Any, base: JSON, devices: tuple[str, ...], m: int, mp_: int,
                   say: Any) -> JSON:
    """One phase per device in a fresh process each (times scaled to all m partitions, peak memory), and each
    device's speed and prediction agreement against the CPU's."""
    phases: JSON = {}
    for dev in devices:
        say(f"one phase on {dev}: {mp_} of {m} partitions, t={base['train_size']} ...")
        r = _in_child({**base, "job": "phase", "device": dev, "measure_partitions": mp_,
                       "save_preds": str(work / f"preds-{dev.replace(':', '_')}.npy")})
        r["measure_partitions"] = mp_
        r["phase_seconds_scaled_to_m"] = r["phase_seconds_measured"] * m / mp_
        phases[dev] = r
        say(f"  {dev}: prepare {r['prepare_seconds']:.1f} s, phase {r['phase_seconds_measured']:.1f} s "
            f"(x{m / mp_:.0f} -> {r['phase_seconds_scaled_to_m']:.1f} s), peak anon {r['peak_anon_gib']:.2f} GiB")
    if "cpu" in phases:
        cpu = phases["cpu"]
        for dev, r in phases.items():
            if dev != "cpu":
                r["speedup_vs_cpu"] = (cpu["prepare_seconds"] + cpu["phase_seconds_measured"]) / (
                    r["prepare_seconds"] + r["phase_seconds_measured"])
                a, b = np.load(work / "preds-cpu.npy"), np.load(work / f"preds-{dev.replace(':', '_')}.npy")
                r["prediction_agreement_with_cpu"] = float((a == b).mean())
    return phases


def format_scale_report(res: JSON) -> str:
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
