"""``benchmarks/bench.py --device DEV --profile``: where the time of Φ and of the filter goes, in one short run.

Issue #43's diagnosis. On the H100 the frozen-MiniLM Φ ran *slower* in bfloat16 than in float32 when pipelined and
sped up with larger batches: the device was waiting for the host. This report says which host step it waits for:

* ``phi_profile`` — frozen MiniLM on SNLI pairs, batches by token budget sorted by length, each batch run **one
  step at a time** with a synchronisation after each: tokenising, collating (padding), host→device copy, forward,
  device→host copy (wall seconds per batch; on CUDA also the device's own seconds from CUDA events), then the same
  rows through the pipelined path (:func:`aflite.encoders.embed_pairs`) with their wall time. The device's busy
  fraction is its forward seconds over a path's wall seconds. Tokenising is also timed in one call over all rows,
  as pairs per wall second and per CPU second (process time over all threads: a per-core rate), and in worker
  threads as the pipelined path runs it (one shared tokenizer under a lock, or one copy per worker), and the report
  says how many cores would keep the device's forward pass fed.
* ``filter_profile`` — the complete filter (the SNLI-shaped features of ``filter``) under the torch profiler, one
  marker per phase: per phase the wall seconds and the seconds of device kernels (CUDA) or of torch's CPU operators
  (``torch-cpu``) inside it; the rest is the host's (drawing partitions, selecting, Python).

Timing only: no kept-set comparison runs here (``bench.py --device … --sections phi`` has them), so the report
fits one short device call. On ``torch-cpu`` the same code measures the CPU: "device" is then the CPU running torch.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from aflite.atomic import JSON
from aflite.core.ensemble import FastLogisticEnsemble
from aflite.core.filter import AFLite
from aflite.device import autocast, resolve_model_path, to_device, torch_device, torch_module
from aflite.encoders import TextEncoder, embed_pairs, pad_batch, token_batches, tokenize
from aflite.threads import budget

__all__ = ["PHI_STEPS", "filter_profile", "phi_profile", "summarize_steps"]

PHI_STEPS = ("tokenise", "collate", "h2d", "forward", "d2h")


class _Clock:
    """Wall seconds of a step after the device is done with it, and on CUDA the device's own seconds (events)."""

    def __init__(self, torch: Any, dev: Any) -> None:
        self.torch, self.cuda = torch, dev.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def run(self, fn: Callable[[], Any]) -> tuple[Any, float, float | None]:
        """(result, wall seconds, device seconds or None)."""
        self.sync()
        if self.cuda:
            start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        out = fn()
        if self.cuda:
            end.record()
        self.sync()
        wall = time.perf_counter() - t0
        return out, wall, (start.elapsed_time(end) / 1e3 if self.cuda else None)


class FilterMode(TypedDict, total=False):
    """:class:`aflite.core.ensemble.FastLogisticEnsemble` keywords of one device mode of the filter."""

    device_resident: bool
    device_lbfgs: bool
    device_pass_mb: int
    device_onepass: bool
    storage: str


def summarize_steps(per_batch: dict[str, list[float]]) -> JSON:
    """Totals, shares of the total and per-batch median / p90 (milliseconds) of each step."""
    total = sum(sum(v) for v in per_batch.values()) or 1.0
    return {name: {"seconds": round(sum(v), 4), "share": round(sum(v) / total, 4),
                   "median_ms": round(1e3 * float(np.median(v)), 3) if v else None,
                   "p90_ms": round(1e3 * float(np.percentile(v, 90)), 3) if v else None}
            for name, v in per_batch.items()}


def phi_profile(device: str, a: list[str], b: list[str], *, model_path: Any = None, token_budget: int = 16_384,
                precision: str = "float32", max_length: int = 256) -> JSON:
    """The Φ report of the module docstring on the pairs (``a``, ``b``)."""
    torch = torch_module()
    enc = TextEncoder(resolve_model_path(model_path), device=device, max_length=max_length)
    dev = torch.device(torch_device(device))
    clock = _Clock(torch, dev)
    n = len(a)
    enc.module.eval()
    with torch.inference_mode():  # warm the kernels and the tokenizer up
        enc.pooled(enc.collate(enc.prepare_pairs(a[:32], b[:32])))
    out: JSON = {"pairs": n, "token_budget": token_budget, "precision": precision,
                           "device": str(dev), "model": enc.model_path.name}
    # tokenising alone, all rows in one call: per wall second and per CPU second (every thread's time)
    c0, t0 = time.process_time(), time.perf_counter()
    ids = tokenize(enc.tokenizer, a, b, max_length)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out["tokenise_all"] = {"seconds": round(wall, 4), "cpu_seconds": round(cpu, 4),
                           "pairs_per_s": round(n / wall, 1), "pairs_per_cpu_s": round(n / max(cpu, 1e-9), 1)}
    out["tokenise_workers"] = tokenise_in_workers(enc.tokenizer, a, b, max_length)
    lengths = np.array([len(it["input_ids"]) for it in ids])
    out["tokens_per_pair"] = {"mean": round(float(lengths.mean()), 2), "max": int(lengths.max())}
    batches = token_batches(np.argsort(-lengths, kind="stable"), lengths, token_budget)
    steps: dict[str, list[float]] = {s: [] for s in PHI_STEPS}
    device_s: dict[str, list[float]] = {s: [] for s in ("h2d", "forward", "d2h")}
    rows_of: list[int] = []
    padded = 0
    t_serial = time.perf_counter()
    for idx in batches:
        sa, sb = [a[i] for i in idx], [b[i] for i in idx]
        items, w, _ = clock.run(lambda: tokenize(enc.tokenizer, sa, sb, max_length))  # noqa: B023
        steps["tokenise"].append(w)
        host, w, _ = clock.run(lambda: pad_batch(items, enc.pad_id, torch))  # noqa: B023
        steps["collate"].append(w)
        padded += int(host["input_ids"].numel())
        on_dev, w, d = clock.run(lambda: to_device(host, dev))  # noqa: B023
        steps["h2d"].append(w)
        device_s["h2d"].append(d or 0.0)

        def forward(batch: Any = on_dev) -> Any:
            with torch.inference_mode(), autocast(torch, dev, precision):
                return enc.pooled(batch).float()

        emb, w, d = clock.run(forward)
        steps["forward"].append(w)
        device_s["forward"].append(d or 0.0)
        _, w, d = clock.run(lambda: emb.cpu().numpy())  # noqa: B023
        steps["d2h"].append(w)
        device_s["d2h"].append(d or 0.0)
        rows_of.append(len(idx))
    serial = time.perf_counter() - t_serial
    fwd = sum(device_s["forward"]) if clock.cuda else sum(steps["forward"])
    out["batches"] = {"count": len(batches), "rows_median": int(np.median(rows_of)),
                      "padded_tokens": padded, "padding_share": round(1 - int(lengths.sum()) / max(1, padded), 4)}
    out["serial"] = {"seconds": round(serial, 3), "pairs_per_s": round(n / serial, 1), "steps": summarize_steps(steps),
                     "busy_fraction": round(fwd / serial, 4)}
    if clock.cuda:
        out["serial"]["device_seconds"] = {k: round(sum(v), 4) for k, v in device_s.items()}
    out["forward_only_pairs_per_s"] = round(n / max(fwd, 1e-9), 1)
    _, wall, _ = clock.run(lambda: embed_pairs(enc, a, b, max_length=max_length, precision=precision,
                                               token_budget=token_budget))
    out["pipelined"] = {"seconds": round(wall, 3), "pairs_per_s": round(n / wall, 1),
                        "busy_fraction": round(fwd / wall, 4)}
    per_core = out["tokenise_all"]["pairs_per_cpu_s"]
    out["cores_to_feed_forward"] = float(f"{out['forward_only_pairs_per_s'] / max(per_core, 1e-9):.3g}")
    out["verdict"] = _phi_verdict(out)
    return out


def tokenise_in_workers(tok: Any, a: list[str], b: list[str], max_length: int, workers: int | None = None,
                        chunk: int = 2048) -> JSON:
    """Tokenising all pairs in ``chunk``-row pieces on ``workers`` threads (default the pipelined path's), as
    :func:`aflite.encoders.embed_pairs` does: sharing one tokenizer under a lock, and each worker with its own copy
    (``own_tokenizers``); pairs per wall second and per CPU second of each."""
    n_workers = workers or max(1, min(4, budget()))
    pieces = [(a[s : s + chunk], b[s : s + chunk]) for s in range(0, len(a), chunk)]
    out: JSON = {"workers": n_workers, "chunk": chunk}
    for name, own in (("shared_lock", False), ("per_worker", True)):
        lock, local = threading.Lock(), threading.local()

        def job(piece: tuple[list[str], list[str]], own: bool = own, lock: Any = lock, local: Any = local) -> int:
            if not own:
                with lock:
                    return len(tokenize(tok, piece[0], piece[1], max_length))
            mine = getattr(local, "tok", None)
            if mine is None:
                with lock:
                    mine = local.tok = copy.deepcopy(tok)
            return len(tokenize(mine, piece[0], piece[1], max_length))

        c0, t0 = time.process_time(), time.perf_counter()
        with ThreadPoolExecutor(n_workers) as pool:
            done = sum(pool.map(job, pieces))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        out[name] = {"pairs_per_s": round(done / wall, 1), "pairs_per_cpu_s": round(done / max(cpu, 1e-9), 1)}
    return out


def _phi_verdict(p: JSON) -> str:
    """One sentence: the largest step of the serial pass, and whether the host can feed the forward pass."""
    steps = p["serial"]["steps"]
    top = max(steps, key=lambda s: steps[s]["seconds"])
    host = sum(steps[s]["seconds"] for s in ("tokenise", "collate"))
    return (f"largest step {top} ({100 * steps[top]['share']:.0f} % of the serial pass); host steps "
            f"(tokenise + collate) {host:.3f} s against forward {steps['forward']['seconds']:.3f} s; the forward pass "
            f"alone runs {p['forward_only_pairs_per_s']:.0f} pairs/s, tokenising "
            f"{p['tokenise_all']['pairs_per_cpu_s']:.0f} pairs per CPU second: "
            f"{p['cores_to_feed_forward']:.3g} cores keep it fed; pipelined busy fraction "
            f"{100 * p['pipelined']['busy_fraction']:.0f} %")


def filter_profile(device: str, X: np.ndarray, y: np.ndarray, params: Mapping[str, int | float], *, seed: int = 0,
                   mode: FilterMode | None = None, trace: Path | None = None) -> JSON:
    """The filter of the module docstring: per phase wall, device (or torch-CPU) seconds and the host's rest
    (phase 0's wall includes the fit's preparation; ``after_last_phase_s`` is what follows the last phase)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    torch = torch_module()
    dev = torch.device(torch_device(device))
    cuda = dev.type == "cuda"
    model = FastLogisticEnsemble(device=device, **(mode or {}))
    af = AFLite(**params, random_state=seed, device="cpu", model=model)  # type: ignore[arg-type]
    marks: list[Any] = []
    stamps: list[float] = []

    def begin(j: int) -> None:
        rf = record_function(f"aflite_phase_{j}")
        rf.__enter__()
        marks.append(rf)

    def after_phase(record: Any, _state: Any) -> None:
        if cuda:
            torch.cuda.synchronize()
        marks[-1].__exit__(None, None, None)
        stamps.append(time.perf_counter())
        begin(record.iteration + 1)

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        begin(0)
        t0 = time.perf_counter()
        af.fit(X, y, callback=after_phase)
        marks[-1].__exit__(None, None, None)
    wall = time.perf_counter() - t0
    if trace is not None:
        prof.export_chrome_trace(str(trace))
    phases = _bucket(prof.events(), cuda, len(stamps))
    walls = np.diff([t0, *stamps])
    rows = []
    for j, rec in enumerate(af.history_):
        busy = phases.get(j, 0.0)
        rows.append({"phase": j, "wall_s": round(float(walls[j]), 4), "device_s": round(busy, 4),
                     "host_s": round(max(0.0, float(walls[j]) - busy), 4),
                     "busy_fraction": round(busy / max(float(walls[j]), 1e-9), 4),
                     "fit_s": round(rec.fit_seconds, 4), "score_s": round(rec.seconds, 4)})
    dev_total = sum(r["device_s"] for r in rows)
    return {"mode": mode or {}, "rows": int(len(y)), "dim": int(X.shape[1]), "phases": af.n_iterations_,
            "kept": int(np.asarray(af.keep_mask_).sum()), "wall_seconds_profiled": round(wall, 3),
            "device_seconds": round(dev_total, 3), "host_seconds": round(max(0.0, wall - dev_total), 3),
            "busy_fraction": round(dev_total / max(wall, 1e-9), 4),
            "after_last_phase_s": round(wall - (stamps[-1] - t0 if stamps else 0.0), 4),
            "device_means": "CUDA kernel time" if cuda else "self CPU time of torch operators",
            "per_phase": rows}


def _bucket(events: Any, cuda: bool, n_phases: int) -> dict[int, float]:
    """Seconds of device kernels (CUDA) or of torch operators' self CPU time inside each phase marker."""
    ranges: list[tuple[int, float, float]] = []
    for e in events:
        if e.name.startswith("aflite_phase_") and getattr(e, "device_type", None) is not None \
                and "CPU" in str(e.device_type):
            j = int(e.name.rsplit("_", 1)[1])
            if j < n_phases:
                ranges.append((j, e.time_range.start, e.time_range.end))
    ranges.sort(key=lambda r: r[1])
    starts = np.array([r[1] for r in ranges]) if ranges else np.zeros(0)
    out: dict[int, float] = {}
    for e in events:
        if cuda:
            if "CUDA" not in str(getattr(e, "device_type", "")):
                continue
            secs = e.time_range.elapsed_us() / 1e6
        else:
            if not e.name.startswith("aten::"):
                continue
            secs = e.self_cpu_time_total / 1e6
        i = int(np.searchsorted(starts, e.time_range.start, side="right")) - 1
        if 0 <= i < len(ranges) and e.time_range.start <= ranges[i][2]:
            out[ranges[i][0]] = out.get(ranges[i][0], 0.0) + secs
    return out
