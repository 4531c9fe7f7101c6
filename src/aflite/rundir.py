"""The run directory of a filtering run: results, summary and a resumable checkpoint.

Layout (every file written atomically, so a killed run never leaves a half-written one):

* ``kept_ids.txt`` / ``removed_ids.txt`` — one id per line, in dataset order;
* ``instances.csv`` — id, label, kept, predictability (last p̃; empty if never scored), removed_at;
* ``summary.json`` — parameters, seed, per-iteration sizes and timings, stop reason, label counts, versions;
* ``checkpoint.npz`` — the filter state after the last completed phase (plain arrays, no pickles).
"""

from __future__ import annotations

import csv
import hashlib
import json
import platform
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.atomic import atomic_open, write_json, write_npz
from aflite.errors import InputError, ParameterError
from aflite.filter import FilterState, IterationRecord

CHECKPOINT = "checkpoint.npz"


def fingerprint(X: Any, y: NDArray[Any]) -> str:
    """A cheap identity of the inputs (shape, labels, a sample of rows) to refuse resuming on other data."""
    h = hashlib.sha256()
    h.update(repr((tuple(X.shape), str(X.dtype))).encode())
    h.update(np.asarray(y).astype(str).tobytes())
    idx = np.linspace(0, X.shape[0] - 1, num=min(64, X.shape[0])).astype(np.int64)
    h.update(np.ascontiguousarray(np.asarray(X[idx], dtype=np.float32)).tobytes())
    return h.hexdigest()[:32]


def save_checkpoint(out: Path, state: FilterState, params: dict[str, Any], fp: str) -> None:
    meta = {
        "iteration": state.iteration,
        "stop_reason": state.stop_reason,
        "history": [r.to_dict() for r in state.history],
        "params": params,
        "fingerprint": fp,
    }
    arrays = {f"ens_{k}": v for k, v in state.ensemble_state.items()}
    arrays.update({f"x_{k}": v for k, v in state.extra.items()})
    write_npz(
        out / CHECKPOINT,
        keep=state.keep,
        predictability=state.predictability,
        removed_at=state.removed_at,
        meta=np.array(json.dumps(meta)),
        **arrays,
    )


def load_checkpoint(out: Path, params: dict[str, Any], fp: str) -> FilterState | None:
    """The saved state, or None when there is none; refuses one made with other data or parameters."""
    path = out / CHECKPOINT
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        meta = json.loads(str(data.pop("meta")))
    except Exception as exc:  # noqa: BLE001 - any damage means the checkpoint is unusable
        raise InputError(f"{path}: unreadable checkpoint ({exc}); delete it to start over") from exc
    if meta["fingerprint"] != fp:
        raise InputError(f"{path}: checkpoint was made from different features or labels; use another --out")
    if meta["params"] != params:
        diff = {k: (meta["params"].get(k), v) for k, v in params.items() if meta["params"].get(k) != v}
        raise InputError(f"{path}: checkpoint was made with other parameters {diff} (saved, now)")
    return FilterState(
        iteration=int(meta["iteration"]),
        keep=data.pop("keep").astype(bool),
        predictability=data.pop("predictability").astype(np.float64),
        removed_at=data.pop("removed_at").astype(np.int32),
        history=[IterationRecord(**r) for r in meta["history"]],
        stop_reason=meta["stop_reason"],
        ensemble_state={k[4:]: v for k, v in data.items() if k.startswith("ens_")},
        extra={k[2:]: v for k, v in data.items() if k.startswith("x_")},
    )


def versions() -> dict[str, str]:
    import scipy
    import sklearn

    from aflite import __version__

    return {
        "aflite": __version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "platform": platform.platform(),
    }


def write_results(
    out: Path,
    ids: NDArray[Any],
    labels: NDArray[Any],
    state: FilterState,
    params: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ids, the per-instance table and summary.json; return the summary."""
    keep = state.keep
    with atomic_open(out / "kept_ids.txt") as fh:
        fh.writelines(f"{i}\n" for i in ids[keep])
    with atomic_open(out / "removed_ids.txt") as fh:
        fh.writelines(f"{i}\n" for i in ids[~keep])
    with atomic_open(out / "instances.csv") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["id", "label", "kept", "predictability", "removed_at"])
        for i, lab, k, p, r in zip(ids, labels, keep, state.predictability, state.removed_at, strict=True):
            w.writerow([i, lab, int(k), "" if np.isnan(p) else f"{p:.6f}", int(r)])
    before = Counter(map(str, labels))
    after = Counter(map(str, labels[keep]))
    summary: dict[str, Any] = {
        "parameters": params,
        "seed": params.get("random_state"),
        "size_before": int(len(keep)),
        "size_after": int(keep.sum()),
        "n_iterations": state.iteration,
        "stop_reason": state.stop_reason,
        "label_counts_before": dict(sorted(before.items())),
        "label_counts_after": dict(sorted(after.items())),
        "sizes": [len(keep)] + [r.size_after for r in state.history],
        "seconds_total": float(sum(r.seconds for r in state.history)),
        "iterations": [r.to_dict() for r in state.history],
        "versions": versions(),
    }
    if extra:
        summary.update(extra)
    write_json(out / "summary.json", summary)
    return summary


def run_filter(
    af: Any,
    X: Any,
    y: np.ndarray,
    ids: np.ndarray,
    out: Path,
    *,
    groups: np.ndarray | None = None,
    resume: bool = False,
    quiet: bool = False,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fit ``af`` with a progress bar, a checkpoint after every phase, and the run directory's outputs."""
    from tqdm import tqdm

    from aflite import rundir  # late-bound so that tests can intercept checkpoint writes
    from aflite.filter import validate_inputs

    # validate everything before touching the output directory
    validate_inputs(X, y, groups)
    params = af.resolved_params(len(y))
    if groups is not None:
        params["groups"] = True
    fp = fingerprint(X, y)
    state = None
    if (out / CHECKPOINT).exists() or (out / "summary.json").exists():
        if not resume:
            raise ParameterError(f"{out} holds a previous run: pass --resume to continue it, or choose another --out")
        state = rundir.load_checkpoint(out, params, fp)
    out.mkdir(parents=True, exist_ok=True)

    total = params["dataset_size"] - params["target_size"]
    done0 = 0 if state is None else int((~state.keep).sum())
    bar = tqdm(total=total, initial=done0, unit="inst", desc="removed", disable=quiet, file=sys.stderr,
               dynamic_ncols=True)

    def on_phase(record: Any, st: Any) -> None:
        rundir.save_checkpoint(out, st, params, fp)
        bar.update(record.n_removed)
        bar.set_postfix(iter=record.iteration, S=record.size_after, eligible=record.n_eligible,
                        s_per_phase=f"{record.seconds:.1f}")

    resumed_from = None if state is None else int(state.iteration)
    start = time.perf_counter()
    try:
        af.fit(X, y, groups, resume=state, callback=on_phase)
    finally:
        bar.close()
    info = {"wall_seconds_this_call": time.perf_counter() - start, "resumed_from_iteration": resumed_from}
    if extra:
        info.update(extra)
    summary = rundir.write_results(out, ids, np.asarray(y), af.state_, params, info)
    return summary
