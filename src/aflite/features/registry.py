"""The one list of featurizers: each declares its name, the modality it reads, the options it accepts and the
commands that offer it. The CLI builds its ``--featurizer`` choices, their help and the routing of featurizer
options from here, so that adding a featurizer is one entry (plus its class in :func:`make_featurizer`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aflite.errors import ParameterError

__all__ = ["FeaturizerSpec", "REGISTRY", "check_backend", "featurizer_names", "featurizer_help", "featurizer_options",
           "image_featurizer_options", "run_options"]


@dataclass(frozen=True)
class FeaturizerSpec:
    """A featurizer as the commands see it."""

    name: str
    modality: str  # "text", "image", "text+image" (warmup fine-tunes either) or "any" (precomputed vectors)
    options: tuple[str, ...]  # keyword options routed to it from the command line
    commands: tuple[str, ...]  # the commands that offer it ("evaluate": as the features of probe/mlp models)
    help: str
    required: tuple[tuple[str, str], ...] = ()  # (option, what the error says is missing)


REGISTRY: dict[str, FeaturizerSpec] = {s.name: s for s in (
    FeaturizerSpec("ngram", "text", (), ("run", "embed", "audit", "evaluate"), "hashed TF-IDF, no model"),
    FeaturizerSpec("minilm", "text", ("model_path", "device", "backend"), ("run", "embed", "audit", "evaluate"),
                   "frozen all-MiniLM-L6-v2"),
    FeaturizerSpec("warmup", "text+image", ("model_path", "device", "image_size", "max_steps", "lr", "backend"),
                   ("run", "embed"), "the paper's Φ: MiniLM — or EfficientNet-Lite0 for images — fine-tuned on a "
                   "warm-up slice of t rows, then discarded"),
    FeaturizerSpec("precomputed", "any", ("embeddings", "embedding_ids"), ("run", "audit"), "--embeddings",
                   required=(("embeddings", "--embeddings FILE"),)),
    FeaturizerSpec("efficientnet-lite0", "image", ("device", "image_size", "backend"),
                   ("run", "embed", "audit", "evaluate"),
                   "frozen ImageNet EfficientNet-Lite0; images"),
    FeaturizerSpec("hf-image", "image", ("model_path", "device", "image_size", "backend"),
                   ("run", "embed", "audit", "evaluate"),
                   "a local Hugging Face vision model, --model-path; images"),
)}


def run_options(name: str, options: dict[str, Any] | None) -> dict[str, Any]:
    """The featurize options that recompute a run's Φ from what its results recorded (explain, evaluate's
    single-iteration baseline), with the backend made explicit. An encoder's recorded options name its backend
    unless it was torch (torch's cache key predates the backends), so a run that recorded none used torch, whatever
    this machine's default is."""
    opts = dict(options or {})
    spec = REGISTRY.get(name)
    if spec is not None and "backend" in spec.options and opts.get("backend") is None:
        opts["backend"] = "torch"
    return opts


def featurizer_names(command: str | None = None, modality: str | None = None) -> tuple[str, ...]:
    """Names in registry order, optionally only those a command offers / that read a modality."""
    return tuple(s.name for s in REGISTRY.values()
                 if (command is None or command in s.commands)
                 and (modality is None or modality in s.modality.split("+") or s.modality == "any"))


def featurizer_help(command: str) -> str:
    """``name (what it is), ...`` for a command's ``--featurizer`` help."""
    return ", ".join(f"{s.name} ({s.help})" for s in REGISTRY.values() if command in s.commands)


def featurizer_options(name: str, **given: Any) -> dict[str, Any]:
    """The options among ``given`` that featurizer ``name`` accepts, None dropped; a missing required option is a
    :class:`ParameterError`. This is how a command routes its flags to the featurizer it runs."""
    spec = REGISTRY.get(name)
    if spec is None:
        raise ParameterError(f"unknown featurizer {name!r}; choose one of {', '.join(REGISTRY)}")
    check_backend(name, given.get("backend"))
    out = {k: v for k, v in given.items() if k in spec.options and v is not None}
    for option, what in spec.required:
        if not out.get(option):
            raise ParameterError(f"--featurizer {name} needs {what}")
    return out


def check_backend(name: str, backend: str | None) -> None:
    """Refuse an explicit ``--backend`` for a featurizer that runs no encoder (ngram, precomputed): it would be
    ignored without a word. ``auto`` (or none) is always accepted."""
    spec = REGISTRY.get(name)
    if backend in (None, "auto") or spec is None or "backend" in spec.options:
        return
    takes = ", ".join(s.name for s in REGISTRY.values() if "backend" in s.options)
    raise ParameterError(f"--backend {backend}: --featurizer {name} runs no encoder, so there is no runtime to choose "
                         f"(--backend applies to {takes}); leave --backend out")


def image_featurizer_options(featurizer: str, options: dict[str, Any]) -> dict[str, Any]:
    """Featurizer options for image inputs: ``warmup`` fine-tunes an image network (EfficientNet-Lite0, or the
    HF vision model at ``model_path``); text-only featurizers are refused with a one-line error."""
    if featurizer == "warmup":
        out = dict(options)
        out.setdefault("image_model", "hf-image" if out.get("model_path") else "efficientnet-lite0")
        return out
    if REGISTRY.get(featurizer) is not None and REGISTRY[featurizer].modality == "text":
        raise ParameterError(f"--featurizer {featurizer} reads text; for images use "
                             f"{', '.join(s.name for s in REGISTRY.values() if s.modality == 'image')}"
                             " (--model-path), warmup or precomputed")
    return dict(options)
