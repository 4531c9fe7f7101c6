"""The filter's checkpoint: ``checkpoint.npz``, the filter state after the last completed phase (plain arrays,
no pickles), written after every phase so that an interrupted run resumes, and refused when it was made from other
data or parameters."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from aflite.atomic import write_npz
from aflite.core.phase import FilterState, IterationRecord, RunParameters
from aflite.errors import InputError
from aflite.rundir.names import CHECKPOINT

__all__ = ["load_checkpoint", "save_checkpoint"]


def save_checkpoint(out: Path, state: FilterState, params: RunParameters, fp: str,
                    dataset: str | None = None) -> None:
    meta = {
        "iteration": state.iteration,
        "stop_reason": state.stop_reason,
        "history": [r.to_dict() for r in state.history],
        "params": params.to_json(),
        "fingerprint": fp,
        "dataset_fingerprint": dataset,
    }
    arrays = {f"ens_{k}": v for k, v in state.ensemble_state.items()}
    arrays.update({f"x_{k}": v for k, v in state.strategy_state.items()})
    write_npz(
        out / CHECKPOINT,
        keep=state.keep,
        predictability=state.predictability,
        removed_at=state.removed_at,
        meta=np.array(json.dumps(meta)),
        **arrays,
    )


def load_checkpoint(out: Path, params: RunParameters, fp: str) -> FilterState | None:
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
    if meta["params"] != params.to_json():
        diff = {k: (meta["params"].get(k), v) for k, v in params.to_json().items() if meta["params"].get(k) != v}
        raise InputError(f"{path}: checkpoint was made with other parameters {diff} (saved, now)")
    return FilterState(
        iteration=int(meta["iteration"]),
        keep=data.pop("keep").astype(bool),
        predictability=data.pop("predictability").astype(np.float64),
        removed_at=data.pop("removed_at").astype(np.int32),
        history=[IterationRecord(**r) for r in meta["history"]],
        stop_reason=meta["stop_reason"],
        ensemble_state={k[4:]: v for k, v in data.items() if k.startswith("ens_")},
        strategy_state={k[2:]: v for k, v in data.items() if k.startswith("x_")},
    )
