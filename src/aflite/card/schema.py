"""manifest.json of a card, typed: the one description that :mod:`aflite.card.facts` builds, ``manifest.json`` holds
and the card, its limits and croissant.json are rendered from (read back from the file, the same dicts). Typed dicts,
not dataclasses, because the renderers read the manifest as parsed from the file: the types say what each key holds.

A section that is the JSON of another command's own record (the run's label shift and probe, explain's significant
pairs, a manifest line, evaluate's mean and std) is not described again here: the manifest holds that record's JSON,
and the renderers read it back as the record's own class (:func:`label_shift`, :func:`probe_record`,
:func:`significant_counts`), its one description.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from aflite.check.token_summary import SignificantCounts
from aflite.check.tokens import TokenPair
from aflite.features.base import JsonValue
from aflite.rundir.evaluate_records import MeanStd
from aflite.rundir.manifest import ManifestEntry
from aflite.rundir.schema import LabelShift, ProbeRecord
from aflite.rundir.typed_json import typed

__all__ = ["CardManifest", "DataFile", "EvaluateFacts", "ExplainFacts", "FilterFacts", "FrontMatter", "InputFacts",
           "LicenseFacts", "ModelIdentity", "OutputFacts", "PhiFacts", "SetScore", "label_shift", "probe_record",
           "significant_counts"]


class LicenseFacts(TypedDict):
    """The license of D(Φ) and where aflite learned it (``source``)."""

    id: str
    name: str | None
    url: str | None
    source: str
    attribution: str | None


class InputFacts(TypedDict):
    """The input: its file's name (a placeholder for in-memory rows), rows and the sha256 the run recorded."""

    file: str | None
    is_folder: bool
    rows: int | None
    dataset_fingerprint: str | None
    dropped_at_load: dict[str, int] | None
    sha256: str
    sha256_source: str
    in_memory: NotRequired[bool]


class FileDigest(TypedDict):
    """A file of the run folder named by the card, and its sha256."""

    file: str
    sha256: str


class KeptIds(FileDigest):
    ids: int


class DataFile(TypedDict):
    """The card's own data file (Parquet made from D(Φ), or the saved dataset folder copied)."""

    file: str
    format: str
    columns: list[str] | None
    sha256: NotRequired[str]


class OutputFacts(TypedDict):
    """D(Φ): the run's filtered file, its kept (and warm-up) ids, and the data file the card writes from it."""

    file: str
    is_folder: bool
    sha256: str
    format: str | None
    columns: list[str] | None
    rows: int
    kept_ids: KeptIds
    warmup_ids: FileDigest | None
    data: NotRequired[DataFile]


class ModelIdentity(TypedDict, total=False):
    """Which model made Φ: a folder (below its package), the user's embeddings file, or bundled weights; the
    package and version that ship it, its files' sha256 and whether they were found; ``part``: a combination's."""

    part: str
    folder: str
    embeddings: str
    name: str
    weights: str
    package: str
    package_version: str
    files_sha256: dict[str, str]
    found: bool


class PhiFacts(TypedDict):
    """Φ as the run recorded it (options with portable paths; they are the featurizer's own, free-form)."""

    featurizer: str
    view: str
    dim: int | None
    options: dict[str, JsonValue]
    model: ModelIdentity | None
    warmup_rows: int
    warmup_training: dict[str, int | float | str | None] | None


class Phase(TypedDict):
    iteration: int
    size_before: int
    n_removed: int
    size_after: int
    n_eligible: int | None
    n_unscored: int | None


class FilterFacts(TypedDict):
    """The filter's parameters (:class:`~aflite.rundir.schema.RunParameters` as JSON), seed, sizes and phases."""

    parameters: dict[str, int | float | str | bool | None]
    seed: int | None
    groups: str | None
    overrides: dict[str, int | float | str | bool | None]  # the parameters set by hand (RunBody.overrides)
    size_before: int
    size_after: int
    n_iterations: int
    sizes: list[int]
    stop_reason: str | None
    phases: list[Phase]


class LabelFacts(TypedDict):
    before: dict[str, int]
    after: dict[str, int]
    shift: dict[str, dict[str, float] | float | str | None] | None  # LabelShift.to_json


class TestScore(TypedDict, total=False):
    """A model's accuracy on one test or evaluation set, and the majority rate of its rows."""

    accuracy: MeanStd
    majority: MeanStd | float
    n: int


class SetScore(TypedDict, total=False):
    """A model trained on one training set: its held-out accuracies (and majority rates), tests, external sets."""

    own_heldout: MeanStd
    original_heldout: MeanStd
    own_heldout_majority: MeanStd
    original_heldout_majority: MeanStd
    not_trained: str
    tests: dict[str, TestScore]
    external: dict[str, TestScore]


class NamedSet(TypedDict):
    name: str
    size: int | None


class TestSet(NamedSet):
    sources: list[str]


class TrainingSet(TypedDict):
    name: str
    kind: str
    seed: int | None
    size: int | None
    train: int | None
    heldout: int | None
    label_counts: dict[str, int] | None
    note: str | None


class FinetuneCaps(TypedDict):
    device: str | None
    train_cap_used: int | None
    eval_cap_used: int | None


class EvaluateFacts(TypedDict):
    """This run's figures in an evaluate folder (``sets``: the card's role -> the training set's name)."""

    tied_to_run_by: str
    verdict: list[str]
    models: list[str]
    seeds: list[int] | None
    split: float | None
    heldout: float | None
    split_seed: int | None
    protocol: str | None
    tests: list[TestSet]
    eval_sets: list[NamedSet]
    sets: dict[str, str]
    training_sets: list[TrainingSet]
    finetune_caps: FinetuneCaps | None
    scores: dict[str, dict[str, SetScore]]


class TokenTestFacts(TypedDict):
    alpha: float | None
    min_count: int | None
    null: str | None
    random_subsets: int | None


class DataMapFacts(TypedDict):
    regions: dict[str, int] | None
    removed_by_region: dict[str, int] | None


class SurrogateFacts(TypedDict):
    model: str | None
    r2: float | None
    n_terms: int | None


class ExplainFacts(TypedDict):
    """The explain folder's figures the card shows."""

    tied_to_run_by: str
    token_view: str | None
    significant_tokens: dict[str, float] | None  # SignificantCounts as JSON
    token_test: TokenTestFacts
    top_artifacts_kept: list[TokenPair]
    first_phase_agreement: float | None
    datamap: DataMapFacts
    label_issues: int | None
    surrogate: SurrogateFacts


class Generator(TypedDict):
    tool: str
    aflite: str


class FrontMatter(TypedDict, total=False):
    """README.md's YAML front matter, the Hub's dataset card metadata (keys in the order they are written)."""

    license: str
    license_name: str
    pretty_name: str
    language: list[str]
    task_categories: list[str]
    task_ids: list[str]
    size_categories: list[str]
    source_datasets: list[str]
    tags: list[str]
    dataset_info: dict[str, list[dict[str, str]]]
    configs: list[dict[str, str | list[dict[str, str]]]]


class CardManifest(TypedDict):
    """Every fact of the card; ``limits`` is added from the rest, ``files`` and the seal when it is committed."""

    format: str
    generator: Generator
    name: str
    title: str | None
    license: LicenseFacts
    language: list[str] | None
    task_categories: list[str]
    task_ids: list[str]
    size_category: str
    source_datasets: list[str]
    input: InputFacts
    output: OutputFacts
    phi: PhiFacts
    filter: FilterFacts
    versions: dict[str, str]
    labels: LabelFacts
    probe: dict[str, JsonValue] | None  # ProbeRecord.to_json
    verdict: list[str]
    evaluate: EvaluateFacts | None
    explain: ExplainFacts | None
    limits: NotRequired[list[str]]
    files: NotRequired[dict[str, ManifestEntry]]
    sealed: NotRequired[str]  # the digest of the rest (aflite.rundir.manifest.seal)


def label_shift(m: CardManifest) -> LabelShift | None:
    """The run's label shift (``labels.shift``) read back as :class:`~aflite.rundir.schema.LabelShift`."""
    shift = m["labels"]["shift"]
    return None if shift is None else typed(LabelShift, shift, "manifest.json: labels.shift")


def probe_record(m: CardManifest) -> ProbeRecord | None:
    """The run's probe (``probe``) read back as :class:`~aflite.rundir.schema.ProbeRecord`, rows and all."""
    found = m["probe"]
    return None if found is None else typed(ProbeRecord, found, "manifest.json: probe")


def significant_counts(ex: ExplainFacts) -> SignificantCounts | None:
    """explain's significant pairs (``explain.significant_tokens``) read back as their
    :class:`~aflite.check.token_summary.SignificantCounts`."""
    sig = ex["significant_tokens"]
    return None if sig is None else typed(SignificantCounts, sig, "manifest.json: explain.significant_tokens")
