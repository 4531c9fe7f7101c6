"""The shapes ``aflite evaluate`` records (the records of results.json's ``runs``, ``aggregate``, ``training_sets``
and ``config``), as TypedDicts: they are written as JSON as they are, :class:`aflite.rundir.schema.EvaluateBody`
reads them back as these types (so they live below it), and mypy checks every field read."""

from __future__ import annotations

from typing import NotRequired, TypeAlias, TypedDict

from aflite.encoders.training import CurvePoints, LossCurve
from aflite.option import OptionValue


class Breakdown(TypedDict):
    """Accuracy on one set of rows, with the chance rate of the same rows and per gold label (and group)."""

    accuracy: float
    n: int
    majority: float  # always answering the most frequent gold label of these rows
    delta_majority: float
    per_label: dict[str, float]
    per_group: NotRequired[dict[str, dict[str, float]]]


class MeanStd(TypedDict):
    """A metric over seeds (NaNs left out): None and n 0 when no seed gave a number."""

    mean: float | None
    std: float | None
    n: int


class NotTrained(TypedDict):
    """:func:`aflite.evaluate.degenerate.not_trained`: why a model counts as not trained, and the advice; on an
    aggregate (:func:`aflite.evaluate.degenerate.merge`) also which seeds."""

    reason: str
    predicted_class_share: float
    steps: int | None
    epochs_run: NotRequired[float]
    advice: NotRequired[str]
    budget_note: NotRequired[str]  # always set, after the advice (results.json's key order)
    steps_needed_estimate: NotRequired[int]
    seeds_not_trained: NotRequired[list[int | None]]
    seeds: NotRequired[int]


class ScoreRecord(TypedDict):
    """One (model, training set, seed) job's record (:meth:`aflite.evaluate.jobs.Job.run`)."""

    model: str
    model_label: str
    train_set: str
    kind: str
    seed: int
    train_rows: int
    train_used: int
    own_heldout: NotRequired[Breakdown]
    original_heldout: NotRequired[Breakdown]
    majority_own_heldout: NotRequired[float]
    tests: NotRequired[dict[str, Breakdown]]  # always set, after the held-out parts (results.json's key order)
    external: NotRequired[dict[str, Breakdown]]
    # a fine-tuned model's training log (:func:`aflite.evaluate.jobs.train_meta`)
    steps: NotRequired[int]
    final_loss: NotRequired[float | None]
    first_loss: NotRequired[float | None]
    lr: NotRequired[float | None]
    loss_curve: NotRequired[LossCurve]
    not_trained: NotRequired[NotTrained]
    seconds: NotRequired[float]


class TrainMeta(TypedDict):
    """What a fine-tuned model's cache entry keeps beside its weights (:func:`aflite.evaluate.jobs.train_meta`)."""

    steps: int
    final_loss: float | None
    first_loss: float | None
    lr: float | None
    loss_curve: LossCurve


class TestScore(TypedDict):
    """A separate test set in an aggregate: the accuracy over seeds, its size and majority rate."""

    accuracy: MeanStd
    n: int
    majority: float
    per_label: dict[str, MeanStd]


class ExternalScore(TypedDict):
    """An external (HANS / OOD) set in an aggregate, per label and group over seeds."""

    accuracy: MeanStd
    n: int
    majority: MeanStd
    delta_majority: MeanStd
    per_label: dict[str, MeanStd]
    per_group: NotRequired[dict[str, dict[str, MeanStd]]]


class TrainingLoss(TypedDict):
    """A fine-tuned model's training loss at the start and the end over seeds, its steps and rate."""

    start: MeanStd
    end: MeanStd
    steps: int
    lr: float | None


class AggregateEntry(TypedDict):
    """One (model, training set) over its seeds."""

    train_rows: int
    train_used: int
    tests: dict[str, TestScore]
    external: dict[str, ExternalScore]
    own_heldout: NotRequired[MeanStd]
    original_heldout: NotRequired[MeanStd]
    own_heldout_majority: NotRequired[MeanStd]
    own_heldout_delta_majority: NotRequired[MeanStd]
    original_heldout_majority: NotRequired[MeanStd]
    original_heldout_delta_majority: NotRequired[MeanStd]
    training_loss: NotRequired[TrainingLoss]
    not_trained: NotRequired[NotTrained]


Aggregate: TypeAlias = dict[str, dict[str, AggregateEntry]]  # model key → training set name → entry


class SetInfo(TypedDict):
    """A training set as results.json's ``training_sets`` lists it."""

    name: str
    kind: str
    seed: int | None
    run: str | None
    size: int
    train: int
    heldout: int
    info: SingleIterationInfo
    label_counts: dict[str, int]


class SingleIterationInfo(TypedDict, total=False):
    """How a single-iteration set was made (:func:`aflite.evaluate.sets.single_iteration_rows`); empty for the
    other training sets."""

    featurizer: str
    view: str
    n_partitions: int
    train_size: int
    seed: int
    scored: int
    unscored: int
    removed: int
    excluded_warmup: int
    min_removed_predictability: float | None
    seconds: float
    note: str


class TestEntry(TypedDict):
    """A separate test set as results.json's config describes it."""

    name: str
    sources: list[str]
    size: int
    majority: float
    label_counts: dict[str, int]


class EvalSetEntry(TypedDict):
    """An external (HANS / OOD) set as results.json's config describes it."""

    name: str
    sources: list[str]
    size: int
    pred_map: dict[str, str]


class EvalConfig(TypedDict):
    """results.json's ``config`` of an evaluation: the data, the runs, the protocol, the sets, fine-tuning."""

    dataset: str
    dataset_size: int
    dataset_fingerprint: str
    classes: list[str]
    runs: list[str]
    runs_kept_ids_sha256: list[str]  # which kept set each run held when it was evaluated
    models: list[str]
    seeds: list[int]
    model_seeds: list[int]
    heldout: float
    split_seed: int
    heldout_rows: int
    split: bool
    excluded_warmup_rows: int
    protocol: str
    tests: list[TestEntry]
    finetune: FinetuneRecord | None
    eval_sets: list[EvalSetEntry]
    wall_seconds: float


class Candidate(TypedDict):
    """One learning rate of the learning-rate check."""

    lr: float
    accuracy: float
    loss_start: float | None
    loss_end: float | None
    steps: int
    loss_curve: CurvePoints


class LrCheck(TypedDict):
    """The learning-rate check's record (:func:`aflite.evaluate.lr_check.check_learning_rate`)."""

    chosen: float
    candidates: list[Candidate]
    rows: int
    train_rows: int
    heldout_rows: int
    heldout_majority: float
    seed: int
    rule: str
    loss_window: int
    seconds: float
    from_cache: NotRequired[bool]  # set after the cache file is written
    view: NotRequired[str]
    slice_seed: NotRequired[list[int]]


# results.json's config["finetune"]: the FinetuneOptions in force (asdict; lr_candidates a list), the device, the caps
# used, the rate's source and the learning-rate check
FinetuneRecord: TypeAlias = "dict[str, OptionValue | list[float] | LrCheck]"
