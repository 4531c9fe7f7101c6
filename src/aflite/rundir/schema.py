"""results.json, typed: the envelope and one dataclass per command's body, checked in one place.

:meth:`aflite.rundir.folder.RunFolder.finish` checks the document it is about to write with :func:`parse`, and
every reader of a folder (:mod:`aflite.rundir.read`) reads it back through the same :func:`parse`, so that the
writer and the readers agree on each key's type. A key of the wrong type (``size_before: "600"``,
``parameters: null``, ``featurizer: "ngram"``) is refused once, in one line naming the file and the key, instead
of a traceback later in whichever command meets it. Keys a dataclass does not name stay in :attr:`Document.raw`
(timings and the numbers only a table shows); the pages read the typed fields (:mod:`aflite.report.pages`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from aflite.atomic import JsonObject
from aflite.core.phase import IterationRecord, RunParameters
from aflite.errors import InputError
from aflite.features.base import Options, PhiInfo
from aflite.option import OptionValue
from aflite.rundir.commands import declared_body
from aflite.rundir.evaluate_records import SetInfo
from aflite.rundir.manifest import ManifestEntry
from aflite.rundir.names import RUN_COMMANDS
from aflite.rundir.typed_json import build

__all__ = ["SHIFT_WARN_POINTS", "AuditBody", "Body", "CheckEntry", "Document", "EmbedBody", "Envelope", "EvaluateBody",
           "ExplainBody", "ExplainedRun", "FeaturizerRecord", "FirstPhase", "LabelShift", "ProbeRecord", "ProbeRow",
           "RunBody", "RunParameters", "parse"]


BODIES: list[type[Body]] = []  # every body class with commands, as defined (Body.__init_subclass__)
OMIT_NONE = {"omit_none": True}  # a field's metadata: absent from results.json while None, not null


@dataclass(frozen=True)
class WarningEntry:
    """One kind of library warning met while the command ran, and how often (``recording_warnings``)."""

    warning: str
    count: int


@dataclass(frozen=True)
class Envelope:
    """What every results.json starts with (:func:`aflite.rundir.results.results_document`), and its manifest."""

    command: str
    format_version: int
    argv: list[str]
    versions: dict[str, str]
    manifest: dict[str, ManifestEntry]  # relative path -> size and sha256, checked by aflite.rundir.manifest.verify
    seed: int | None = None  # the command's seed (a run's: drawn when none was given; filter: None without one)
    warnings: list[WarningEntry] | None = None


@dataclass(frozen=True)
class Body:
    """A command's body; the base class checks nothing beyond the envelope (synthetic, bench)."""

    commands: ClassVar[tuple[str, ...]] = ()  # the commands whose results.json this body is
    required: ClassVar[tuple[str, ...]] = ()  # the keys a finished command's body has (the others: their defaults)
    required_by: ClassVar[dict[str, tuple[str, ...]]] = {}  # more keys that one of ``commands`` always writes
    verdict: list[str] | None = dataclasses.field(default=None, metadata=OMIT_NONE)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A body class with commands is registered when it is defined (a new command's, in its own module)."""
        super().__init_subclass__(**kwargs)
        if cls.commands:
            BODIES.append(cls)

    def to_json(self) -> JsonObject:
        """The body as results.json holds it: every field in its order (nested dataclasses likewise), the writer's
        and the reader's one description; a field marked ``OMIT_NONE`` is left out while it is None."""
        return _fields_json(self)


def _fields_json(obj: Any) -> JsonObject:
    """The dataclass ``obj`` as JSON, field by field in their order (a field marked ``OMIT_NONE`` left out while
    None)."""
    return {f.name: _as_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)
            if not (f.metadata.get("omit_none") and getattr(obj, f.name) is None)}


def _as_json(value: Any) -> Any:
    """``value`` as JSON: a dataclass by its own ``to_json`` where it has one, else field by field."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "to_json", None)
        return own() if own is not None else _fields_json(value)
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_json(v) for v in value]
    return value


@dataclass(frozen=True)
class FeaturizerRecord:
    """What a run records of its Φ: the featurizer's name, the text view, its options (what explain and evaluate
    rebuild Φ with), the dimension and where it came from."""

    name: str
    view: str = "pair"
    options: Options = dataclasses.field(default_factory=dict)  # as the featurizer gave them
    dim: int | None = None
    from_cache: bool | None = None
    info: PhiInfo | None = None  # timings, throughput, a warm-up's training, a combination's parts
    cluster: dict[str, int | float | dict[str, int] | list[float]] | None = dataclasses.field(
        default=None, metadata=OMIT_NONE)  # the shards' report (ShardReport.as_dict),
    # when a cluster computed Φ (absent from results.json otherwise)


SHIFT_WARN_POINTS = 5.0  # a class share moved by more than this many points: LabelShift.warning says so


@dataclass(frozen=True)
class LabelShift:
    """Each label's share before and after filtering (percent), the change (points), the largest and a warning:
    the one type a run writes (``label_shift`` of results.json, :meth:`between`) and reads back."""

    shares_before: dict[str, float]
    shares_after: dict[str, float]
    change_points: dict[str, float]
    max_change_points: float
    warning: str | None = None

    @classmethod
    def between(cls, before: dict[str, int], after: dict[str, int]) -> LabelShift:
        """Class shares before/after filtering and the largest move, with a warning above SHIFT_WARN_POINTS points:
        when shares move, the majority rate moves with them, and raw accuracies on D and D(Φ) stop being
        comparable."""
        nb, na = max(1, sum(before.values())), max(1, sum(after.values()))
        sb = {k: 100 * v / nb for k, v in before.items()}
        sa = {k: 100 * after.get(k, 0) / na for k in before}
        moves = {k: sa[k] - sb[k] for k in before}
        worst = max(moves, key=lambda k: abs(moves[k])) if moves else None
        warning = None
        if worst is not None and abs(moves[worst]) > SHIFT_WARN_POINTS:
            warning = (
                f"filtering moved the class shares by up to {abs(moves[worst]):.1f} points ({worst} "
                f"{sb[worst]:.1f}% → {sa[worst]:.1f}%); the majority rate went from {max(sb.values()):.1f}% to "
                f"{max(sa.values()):.1f}%, so a raw accuracy on D(Φ) rises or falls with it whatever the text "
                f"carries: read Δ over the majority rate, not raw accuracy")
        return cls(sb, sa, moves, 0.0 if worst is None else abs(moves[worst]), warning)

    def to_json(self) -> dict[str, dict[str, float] | float | str | None]:
        """As results.json holds it: every field, in their order (``warning`` null when the shares stayed)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class RunBody(Body):
    """``aflite run``/``demo``/``filter``: the run's own numbers, built by the filter
    (:func:`aflite.commands.filter.filter_summary`) and the run, written and read back (evaluate, explain, the card,
    audit --compare, the page) as this one type. Fields are in results.json's order (the verdict last); one left
    None is absent from the file, but the few that are written as null (:attr:`NULLS`)."""

    commands: ClassVar[tuple[str, ...]] = RUN_COMMANDS
    required: ClassVar[tuple[str, ...]] = ("parameters", "size_before", "size_after", "n_iterations", "sizes",
                                           "iterations")
    # what run and demo always write (commands/run.py ``_run_body``): Φ, the filtered file and the input's
    # sha256 (a dataset card names the input by it; filter reads no file)
    required_by: ClassVar[dict[str, tuple[str, ...]]] = {
        cmd: ("featurizer", "filtered_dataset", "dataset_sha256") for cmd in ("run", "demo")}
    # written as null when None: always, or (a field named after it) when that field is set (filter: its inputs;
    # run and demo: their Φ)
    NULLS: ClassVar[dict[str, str | None]] = {
        "stop_reason": None, "seconds_total": None, "wall_seconds_this_call": None, "resumed_from_iteration": None,
        "filter_wall_seconds_this_call": None, "cluster": "inputs", "filtered_dataset": "featurizer"}
    parameters: RunParameters
    size_before: int = 0
    size_after: int = 0
    n_iterations: int = 0
    stop_reason: str | None = None
    label_counts_before: dict[str, int] = dataclasses.field(default_factory=dict)
    label_counts_after: dict[str, int] = dataclasses.field(default_factory=dict)
    sizes: list[int] = dataclasses.field(default_factory=list)
    seconds_total: float | None = None  # the phases' own seconds, summed
    iterations: list[IterationRecord] = dataclasses.field(default_factory=list)  # each phase's, as the filter wrote
    wall_seconds_this_call: float | None = None  # the whole call (run: load, Φ, filter, probe, writing)
    resumed_from_iteration: int | None = None  # the checkpoint's phase a --resume went on from (None: started)
    inputs: dict[str, str | None] | None = None  # filter: the features, labels and ids files
    device: str | None = None  # filter: where the partitions' models ran
    cluster: str | None = None  # filter: the executor's type or scheduler address (None: this process)
    dataset: str | None = None
    dataset_relative: str | None = None  # the dataset's path from the run folder (the page finds it by)
    dataset_fingerprint: str | None = None
    dataset_sha256: str | None = None  # run and demo: of the input file's bytes, or of in-memory rows (below)
    dataset_sha256_of: str | None = None  # "rows": in-memory data (aflite.data.memory.rows_sha256); absent: a file
    dataset_options: dict[str, str] | None = None  # the column options the rows were read with
    dataset_size: int | None = None
    dropped_at_load: dict[str, int] | None = None  # rows the loader dropped, by reason
    empty_texts_at_load: dict[str, int] | None = None  # rows kept with an empty text, by column
    featurizer: FeaturizerRecord | None = None  # run and demo: Φ's name, view and options; filter: none
    warmup_rows: int | None = None
    modality: str | None = None  # run and demo: "text" or "image" (the page shows texts or thumbnails)
    scaled_defaults: dict[str, float] | None = None  # run and demo: |D|/|SNLI| and the parameters scaled by it
    overrides: dict[str, OptionValue] | None = None  # run and demo: AFLite's parameters given (not the scaled)
    groups: str | None = None
    partial_input_probe: ProbeRecord | None = None
    label_shift: LabelShift | None = None
    timings: dict[str, float] | None = None  # run and demo: seconds (and rate) by step
    filtered_dataset: str | None = None
    title: str | None = None  # the name the run was given (``title=``), its page's title
    filter_wall_seconds_this_call: float | None = None  # the filter's part of that call

    def to_json(self) -> JsonObject:
        """As results.json holds it: the fields in their order, those None left out (but :attr:`NULLS`), then the
        verdict."""
        out: JsonObject = {f.name: _as_json(getattr(self, f.name)) for f in dataclasses.fields(self)
                           if f.name != "verdict" and self._written(f.name)}
        if self.verdict is not None:
            out["verdict"] = _as_json(self.verdict)
        return out

    def _written(self, name: str) -> bool:
        if getattr(self, name) is not None:
            return True
        if name not in self.NULLS:
            return False
        beside = self.NULLS[name]
        return beside is None or getattr(self, beside) is not None


@dataclass(frozen=True)
class CheckEntry:
    """One check's entry in explain's ``checks``: what it found (``summary``: its score, flagged count and verdict
    sentences, then its own keys), the options it ran with, the per-row columns it added to instances.csv, the files
    it wrote into the folder and whether it ran (False: disabled by its options or the data).

    ``summary`` stays JSON here: its type is the check's own summary class (:class:`aflite.check.CheckSummary`),
    which this layer cannot import (the checks import it); a reader that knows the check builds it with that class's
    ``from_json`` (:func:`typed`)."""

    summary: JsonObject  # the check's CheckSummary.to_json(), as it wrote it
    options: dict[str, bool | int | float | str | None]  # its options' values as it ran
    columns: list[str]
    files: list[str]
    ran: bool = True


@dataclass(frozen=True)
class ExplainedRun:
    """The run an explain folder explains: where it was, its data, its sizes and Φ (a card ties the two folders by
    the fingerprint and the sha256 of the kept ids)."""

    folder: str
    dataset: str | None = None
    size_before: int | None = None
    size_after: int | None = None
    stop_reason: str | None = None
    featurizer: str | None = None
    view: str | None = None
    dataset_fingerprint: str | None = None
    kept_ids_sha256: str | None = None


@dataclass(frozen=True)
class FirstPhase:
    """The run's first phase as explain recomputed it: its seed and how closely it agrees with the run (null: no
    row was removed in phase 0)."""

    source: str = ""
    seed: int | None = None
    agreement_with_run: float | None = None
    agreement_meaning: str = ""


@dataclass(frozen=True)
class ExplainBody(Body):
    """``aflite explain``'s body, written (:func:`aflite.explain.files.explain_results`) and read as this one type:
    each check's entry by name (in the order they ran), where the run and the data are (resolved, and relative to
    the folder: report.html finds them so), the run it explains, the recomputed first phase, the soft weights' rule,
    the files and the timings."""

    commands: ClassVar[tuple[str, ...]] = ("explain",)
    required: ClassVar[tuple[str, ...]] = ("run", "first_phase", "checks")
    checks: dict[str, CheckEntry] = dataclasses.field(default_factory=dict)
    run_dir: str | None = None
    dataset: str | None = None
    run_dir_relative: str | None = None
    dataset_relative: str | None = dataclasses.field(default=None, metadata=OMIT_NONE)  # none for in-memory data
    run: ExplainedRun | None = None  # required (REQUIRED); None only in a body built by hand
    first_phase: FirstPhase | None = None  # likewise
    weights: dict[str, str] = dataclasses.field(default_factory=dict)  # {"rule": how the soft weights are made}
    files: dict[str, str] = dataclasses.field(default_factory=dict)  # name -> what it holds
    timings: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class EvaluateBody(Body):
    """``aflite evaluate``: the training sets, the accuracies (mean and std per model and set), the runs."""

    commands: ClassVar[tuple[str, ...]] = ("evaluate",)
    required: ClassVar[tuple[str, ...]] = ("config", "training_sets", "aggregate")
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    training_sets: list[SetInfo] = dataclasses.field(default_factory=list)
    aggregate: dict[str, Any] = dataclasses.field(default_factory=dict)
    runs: list[Any] = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class AuditBody(Body):
    """``aflite audit``: each audited set (its views, figures and configuration)."""

    commands: ClassVar[tuple[str, ...]] = ("audit",)
    results: list[dict[str, Any]] = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class EmbedBody(Body):
    """``aflite embed``'s body, written (:func:`aflite.commands.embed.embed`) and read as this one type: the matrix
    written, its shape and files; text: the view, whether Φ came from the cache and the warm-up ids' file; images:
    the inputs' key (``--resume`` keeps a matrix of the same key) and the unreadable images; a cluster's report."""

    commands: ClassVar[tuple[str, ...]] = ("embed",)
    required: ClassVar[tuple[str, ...]] = ("featurizer", "rows", "dim", "files")
    data: str = ""
    featurizer: str = ""
    rows: int = 0
    dim: int = 0
    seconds: float | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    files: dict[str, str] = dataclasses.field(default_factory=dict)
    view: str | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    from_cache: bool | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    features_key: str | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    cluster: dict[str, int | float | dict[str, int] | list[float]] | None = dataclasses.field(
        default=None, metadata=OMIT_NONE)  # the shards' report (ShardReport.as_dict)
    warmup_ids: str | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    bad_images: dict[str, int | str] | None = dataclasses.field(default=None, metadata=OMIT_NONE)  # count, file


@dataclass(frozen=True)
class Document:
    """A results.json read and checked: its envelope, its body as the command's dataclass, and the whole JSON."""

    envelope: Envelope
    body: Body
    raw: dict[str, Any]

    @property
    def command(self) -> str:
        return self.envelope.command


@dataclass(frozen=True)
class ProbeRow:
    """One training set of a run's partial-input probe (D, D(Φ), the random subsets): its cross-validated accuracy
    (null when it could not be probed: ``skipped`` says why) and the majority rate of the same rows."""

    name: str
    size: int
    accuracy: float | None
    accuracy_std: float | None
    majority: float
    skipped: str | None = None
    delta_majority: float | None = None  # accuracy − majority (null: not probed)


@dataclass(frozen=True)
class ProbeRecord:
    """A run's partial-input probe (results.json's ``partial_input_probe``): the model, how its folds keep groups,
    a row per training set and what the figures mean; or, skipped, why (then no model, groups or rows)."""

    results: list[ProbeRow]
    meaning: str
    model: str | None = None
    groups: str | None = None
    skipped: str | None = None

    def to_json(self) -> JsonObject:
        """As results.json holds it (the card copies it): the keys the run wrote, none that it left out."""
        head = {"skipped": self.skipped} if self.skipped is not None else {
            k: v for k, v in (("model", self.model), ("groups", self.groups)) if v is not None}
        return {**head, "results": [dataclasses.asdict(r) for r in self.results], "meaning": self.meaning}


def body_class(command: str) -> type[Body]:
    """The body class of ``command``'s results.json: one defined so far, else the one its declaration names
    (:mod:`aflite.rundir.commands`: importing it registers it), else :class:`Body` (the envelope only)."""
    found = next((b for b in BODIES if command in b.commands), None)
    if found is None:
        declared_body(command)
        found = next((b for b in BODIES if command in b.commands), None)
    return found or Body


def required_keys(command: str) -> tuple[str, ...]:
    """The keys the body of a finished ``command`` has (its class's ``required`` and ``required_by``)."""
    cls = body_class(command)
    return cls.required + cls.required_by.get(command, ())


def parse(obj: Any, path: Path, *, manifest: bool = True) -> Document:
    """Check a results.json document (``obj``, as parsed from ``path``) against the envelope and the body of its
    command; one :class:`InputError` naming the file and the first key of a wrong type. ``manifest``: whether
    the manifest must be there (False: a document about to be written)."""
    if not isinstance(obj, dict):
        raise InputError(f"{path}: not aflite's results.json (a JSON {type(obj).__name__}, not an object)")
    fields = {**obj} if manifest else {**obj, "manifest": {}}
    envelope = build(Envelope, fields, path, ("command", "format_version", "argv", "versions", "manifest"))
    cls = body_class(envelope.command)
    if envelope.command == "explain" and "checks" not in obj:  # 0.3 before the checks owned their entries
        raise InputError(f"{path}: an explain folder of an earlier aflite (its checks' keys at the top level, not "
                         f"under 'checks'): run `aflite explain` again")
    body = build(cls, obj, path, required_keys(envelope.command))
    return Document(envelope, body, obj)
