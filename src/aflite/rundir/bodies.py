"""results.json, typed: the envelope and one dataclass per command's body, checked in one place.

:meth:`aflite.runs.folder.RunFolder.finish` checks the document it is about to write with :func:`parse`, and
every reader of a folder (:mod:`aflite.rundir.read`) reads it back through the same :func:`parse`, so that the
writer and the readers agree on each key's type. A key of the wrong type (``size_before: "600"``,
``parameters: null``, ``featurizer: "ngram"``) is refused once, in one line naming the file and the key, instead
of a traceback later in whichever command meets it. Keys a dataclass does not name stay in :attr:`Document.raw`
(the numbers only a page or a table shows).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Union

from aflite.errors import InputError
from aflite.rundir.names import RUN_COMMANDS

__all__ = ["AuditBody", "Body", "Document", "EmbedBody", "Envelope", "EvaluateBody", "ExplainBody", "RunBody",
           "parse"]


@dataclass(frozen=True)
class Envelope:
    """What every results.json starts with (:func:`aflite.rundir.results.results_envelope`), and its manifest."""

    command: str
    format_version: int
    argv: list[str]
    versions: dict[str, Any]
    manifest: dict[str, Any]
    seed: Any = None
    warnings: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Body:
    """A command's body; the base class checks nothing beyond the envelope (synthetic, bench)."""

    commands: ClassVar[tuple[str, ...]] = ()
    verdict: list[str] | None = None


@dataclass(frozen=True)
class RunBody(Body):
    """``aflite run``/``demo``/``filter``: the run's own numbers (what evaluate, explain, the card, audit --compare
    and the page read back)."""

    commands: ClassVar[tuple[str, ...]] = RUN_COMMANDS
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)
    size_before: int = 0
    size_after: int = 0
    n_iterations: int = 0
    stop_reason: str | None = None
    label_counts_before: dict[str, int] = dataclasses.field(default_factory=dict)
    label_counts_after: dict[str, int] = dataclasses.field(default_factory=dict)
    sizes: list[int] = dataclasses.field(default_factory=list)
    iterations: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    featurizer: dict[str, Any] | None = None  # run and demo: Φ's name, view and options; filter: none
    filtered_dataset: str | None = None
    dataset: str | None = None
    dataset_size: int | None = None
    dataset_fingerprint: str | None = None
    dataset_options: dict[str, str] | None = None  # the column options the rows were read with
    groups: str | None = None
    label_shift: dict[str, Any] | None = None
    partial_input_probe: dict[str, Any] | None = None
    overrides: dict[str, Any] | None = None
    warmup_rows: int | None = None
    modality: str | None = None  # run and demo: "text" or "image" (the page shows texts or thumbnails)


@dataclass(frozen=True)
class ExplainBody(Body):
    """``aflite explain``: the run it explains, the recomputed first phase."""

    commands: ClassVar[tuple[str, ...]] = ("explain",)
    run: dict[str, Any] = dataclasses.field(default_factory=dict)
    first_phase: dict[str, Any] = dataclasses.field(default_factory=dict)
    run_dir: str | None = None
    dataset: str | None = None


@dataclass(frozen=True)
class EvaluateBody(Body):
    """``aflite evaluate``: the training sets, the accuracies (mean and std per model and set), the runs."""

    commands: ClassVar[tuple[str, ...]] = ("evaluate",)
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    training_sets: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    aggregate: dict[str, Any] = dataclasses.field(default_factory=dict)
    runs: list[Any] = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class AuditBody(Body):
    """``aflite audit``: each audited set (its views, figures and configuration)."""

    commands: ClassVar[tuple[str, ...]] = ("audit",)
    results: list[dict[str, Any]] = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class EmbedBody(Body):
    """``aflite embed``: the matrix written and its shape."""

    commands: ClassVar[tuple[str, ...]] = ("embed",)
    featurizer: str = ""
    rows: int = 0
    dim: int = 0
    files: dict[str, str] = dataclasses.field(default_factory=dict)


BODIES: tuple[type[Body], ...] = (RunBody, ExplainBody, EvaluateBody, AuditBody, EmbedBody)
# the keys a body must have (the others may be absent: their defaults)
REQUIRED: dict[str, tuple[str, ...]] = {
    "run": ("parameters", "size_before", "size_after", "n_iterations", "sizes", "iterations", "featurizer",
            "filtered_dataset"),
    "demo": ("parameters", "size_before", "size_after", "n_iterations", "sizes", "iterations", "featurizer",
             "filtered_dataset"),
    "filter": ("parameters", "size_before", "size_after", "n_iterations", "sizes", "iterations"),
    "explain": ("run", "first_phase"),
    "evaluate": ("config", "training_sets", "aggregate"),
    "embed": ("featurizer", "rows", "dim", "files"),
}


@dataclass(frozen=True)
class Document:
    """A results.json read and checked: its envelope, its body as the command's dataclass, and the whole JSON."""

    envelope: Envelope
    body: Body
    raw: dict[str, Any]

    @property
    def command(self) -> str:
        return self.envelope.command


def body_class(command: str) -> type[Body]:
    return next((b for b in BODIES if command in b.commands), Body)


def parse(obj: Any, path: Path, *, manifest: bool = True) -> Document:
    """Check a results.json document (``obj``, as parsed from ``path``) against the envelope and the body of its
    command; one :class:`InputError` naming the file and the first key of a wrong type. ``manifest``: whether
    the manifest must be there (False: a document about to be written)."""
    if not isinstance(obj, dict):
        raise InputError(f"{path}: not aflite's results.json (a JSON {type(obj).__name__}, not an object)")
    fields = {**obj} if manifest else {**obj, "manifest": {}}
    envelope = _build(Envelope, fields, path, ("command", "format_version", "argv", "versions", "manifest"))
    cls = body_class(envelope.command)
    body = _build(cls, obj, path, REQUIRED.get(envelope.command, ()))
    return Document(envelope, body, obj)


def _build(cls: type[Any], obj: dict[str, Any], path: Path, required: tuple[str, ...]) -> Any:
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in obj:
            if f.name in required:
                raise InputError(f"{path}: no {f.name!r}: not the results.json of a finished aflite command")
            continue
        value = obj[f.name]
        if not _is(value, hints[f.name]):
            raise InputError(f"{path}: {f.name!r} is {_shown(value)}, not {_named(hints[f.name])}; the file was "
                             f"edited or damaged: run the command again")
        values[f.name] = value
    return cls(**values)


def _is(value: Any, hint: Any) -> bool:
    """Whether ``value`` (parsed JSON) has the type ``hint`` (int, float, str, bool, Any, list[...], dict[str, ...]
    and unions of them with None)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_is(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint in (str, bool):
        return isinstance(value, hint)
    args = typing.get_args(hint)
    if origin is list:
        return isinstance(value, list) and all(_is(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_is(v, args[1]) for v in value.values())
    return False  # pragma: no cover - a hint this checker does not know


def _named(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(_named(h) for h in typing.get_args(hint))
    if hint is type(None):
        return "null"
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false", list: "a list",
             dict: "an object"}
    return names.get(origin or hint, str(hint))


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    text = "null" if value is None else text
    return text if len(text) <= 40 else text[:37] + "..."
