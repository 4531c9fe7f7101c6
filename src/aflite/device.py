"""One device resolver for everything that runs on PyTorch: the encoders, fine-tuning and the fast ensemble.

``--device`` (and ``device=`` in the library) means the same everywhere: ``auto`` (or None) picks a CUDA GPU
when PyTorch sees one and the CPU otherwise; ``cpu``; ``cuda`` or ``cuda:N`` (checked: asking for a GPU that
is not there is a :class:`~aflite.errors.ParameterError`, not a silent fallback); ``torch-cpu`` runs the
ensemble's PyTorch code on the CPU (for tests and comparisons; encoders treat it as ``cpu``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from aflite.errors import ParameterError

__all__ = ["resolve_device", "torch_device", "DEVICE_HELP"]

DEVICE_HELP = "auto (a CUDA GPU when PyTorch sees one, else the CPU), cpu, cuda or cuda:N (default auto)"


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise ParameterError("this device needs PyTorch: pip install 'aflite[text]' (or use --device cpu)") from exc
    return torch


def resolve_device(device: str | None = "auto") -> str:
    """``auto``/None → ``cuda`` when PyTorch sees a GPU, else ``cpu``; ``cuda[:N]`` is checked; ``cpu`` and
    ``torch-cpu`` are returned as they are. Resolving ``auto`` does not import PyTorch on a machine without an
    NVIDIA device node (so that CPU-only commands stay fast to start)."""
    if device is None or device == "auto":
        if importlib.util.find_spec("torch") is None or not any(Path("/dev").glob("nvidia[0-9]*")):
            return "cpu"
        return "cuda" if _import_torch().cuda.is_available() else "cpu"
    if not isinstance(device, str):
        raise ParameterError(f"device must be a string such as auto, cpu or cuda:0, not {device!r}")
    if device in ("cpu", "torch-cpu"):
        return device
    if device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit()):
        torch = _import_torch()
        if not torch.cuda.is_available():
            raise ParameterError(
                f"device {device!r} asked for, but PyTorch sees no CUDA GPU (use --device auto or cpu)"
            )
        if ":" in device and int(device[5:]) >= torch.cuda.device_count():
            raise ParameterError(f"device {device!r}: PyTorch sees {torch.cuda.device_count()} GPU(s)")
        return device
    raise ParameterError(f"unknown device {device!r}: use auto, cpu, cuda or cuda:N")


def torch_device(device: str | None = "auto") -> str:
    """The PyTorch device string for an encoder or a fine-tuning run (``torch-cpu`` → ``cpu``)."""
    resolved = resolve_device(device)
    return "cpu" if resolved == "torch-cpu" else resolved
