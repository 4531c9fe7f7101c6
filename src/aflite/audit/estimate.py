"""The audit's device and its up-front time estimate (announced for stages over a minute)."""

from __future__ import annotations

import os
import sys
from typing import Any

from aflite.audit.results import AuditConfig
from aflite.device import torch_device
from aflite.features.registry import spec

# Throughputs measured with OMP_NUM_THREADS=1 on a shared 2-core CPU (docs/measured, notes) and on one H100;
# they only decide which stages get announced, so a factor of two either way is fine.
_RATES = {
    "cpu": {"embed_pair": 200.0, "embed_single": 450.0, "ft_step": 1.7, "tra_row": 0.15, "lr_rows": 2500.0},
    "cuda": {"embed_pair": 4000.0, "embed_single": 8000.0, "ft_step": 0.06, "tra_row": 0.02, "lr_rows": 2500.0},
}


def _cpu_slowdown() -> float:
    """How much slower than on an idle machine CPU work will run now: the 1-minute load average per core (≥ 1).
    On a shared machine this is the difference between a 3-minute and a 20-minute embedding."""

    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every platform
        return 1.0
    return max(1.0, load / max(1, os.cpu_count() or 1))


def estimate_seconds(n: int, cfg: AuditConfig, device: str | None = None) -> dict[str, float]:
    """Rough seconds per stage for ``n`` pairs (embedding counts as if nothing were cached); on a CPU scaled by
    the current load (:func:`_cpu_slowdown`)."""
    dev = device if device is not None else torch_device(cfg.device)
    gpu = dev.startswith("cuda")
    slow = 1.0 if gpu else _cpu_slowdown()
    # throughputs (per second) fall and per-item costs (seconds) grow with the slowdown
    r = {k: v * slow if k in ("ft_step", "tra_row") else v / slow for k, v in _RATES["cuda" if gpu else "cpu"].items()}
    est: dict[str, float] = {}
    found = spec(cfg.featurizer)
    if found.frozen:  # an encoder embeds every row: the pair and each view
        est[f"{found.title} embedding"] = n / r["embed_pair"] + len(cfg.views) * n / r["embed_single"]
    est["cross-validated linear models"] = (1 + len(cfg.views)) * n / r["lr_rows"]
    tra = cfg.tra if cfg.tra is not None else dev.startswith("cuda")
    if tra:
        est["fine-tuning (TRA)"] = (1 + len(cfg.views)) * cfg.tra_steps * r["ft_step"]
        est["TRA relevance"] = len(cfg.views) * min(cfg.tra_sample, cfg.tra_eval) * r["tra_row"]
    return est


def announce(est: dict[str, float], min_seconds: float = 60.0, file: Any = None) -> list[str]:
    """Print (to stderr) one line per stage expected to take more than ``min_seconds``; returns the lines."""

    lines = [f"estimate: {stage} ~{_duration(sec)} (before any cache)" for stage, sec in est.items()
             if sec > min_seconds]
    for line in lines:
        print(line, file=file if file is not None else sys.stderr, flush=True)
    return lines


def _duration(sec: float) -> str:
    return f"{sec:.0f} s" if sec < 120 else f"{sec / 60:.0f} min"
