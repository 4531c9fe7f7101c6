"""The summaries of ``aflite explain``'s checks (:mod:`aflite.explain.checks`), one :class:`CheckSummary` subclass
per check with its own typed fields, in the order the checks run. They live beside the checks rather than in the
checks' module so that a reader of explain's results.json (the dataset card, a page) builds them back with
``from_json`` without importing the checks and what they compute with. The ``tokens`` check's summary is
:class:`aflite.check.token_summary.TokenSummary`, a layer down, because the notebook view (:mod:`aflite.report`)
reads it and explain imports report."""

from __future__ import annotations

from dataclasses import dataclass

from aflite.check import CheckSummary, optional
from aflite.explain.datamap import OverlapRow
from aflite.explain.reasons import Term
from aflite.explain.stoprule import TrajectoryPoint

__all__ = ["DataMapSummary", "LabelIssueSummary", "NeighboursSummary", "NgramSummary", "NgramTerm", "ShuffledLabels",
           "StopRuleSummary", "SurrogateSummary"]


@dataclass
class StopRuleSummary(CheckSummary):
    """The ``stop_rule`` check's summary: AFLite's own stop and the pairs it left, then (when it ran) where the
    rule stopped and its trajectory; ``score``: the significant pairs left when the rule stopped (None: it did not
    run)."""

    k_rule: str | None
    significant_after_filtering: int | None
    enabled: bool
    stopped_by: str | None = optional()
    slice_size: int | None = optional()
    floor: int | None = optional()
    extra_removed: int | None = optional()
    trajectory: list[TrajectoryPoint] | None = optional()

    def __post_init__(self) -> None:
        self.score = float(self.trajectory[-1]["significant"]) if self.trajectory else None


@dataclass
class DataMapSummary(CheckSummary):
    """The ``datamap`` check's summary: the region rule, the rows per region and the removed rows per region;
    ``score``: None (the regions are a partition, no one figure heads them)."""

    region_rule: str
    regions: dict[str, int]
    removed_by_region: dict[str, int]


@dataclass
class ShuffledLabels:
    """cleanlab's count with the labels permuted: per permutation, its mean and standard deviation, and what it
    means."""

    per_seed: list[int]
    mean: float
    std: float
    meaning: str


@dataclass
class LabelIssueSummary(CheckSummary):
    """The ``label_issues`` check's summary: cleanlab's candidates (``n`` of ``rows``; ``skipped``: why not), the
    count with permuted labels and the removed set's overlap with each group; ``score``: ``n`` (None: skipped)."""

    n: int | None
    rows: int
    skipped: str | None
    method: str
    input: str
    shuffled_labels: ShuffledLabels | None
    overlap: list[OverlapRow]

    def __post_init__(self) -> None:
        self.score = None if self.n is None else float(self.n)


@dataclass
class SurrogateSummary(CheckSummary):
    """The ``surrogate`` check's summary: what it fits on what, its Lasso α, fit and nonzero terms (the strongest
    25); ``score``: its R² on the scored rows."""

    target: str
    inputs: str
    model: str
    alpha: float | None  # NaN (null in results.json): no scored row to fit on
    r2: float | None  # likewise
    n_inputs: int
    n_terms: int
    top_terms: list[Term]

    def __post_init__(self) -> None:
        self.score = self.r2


@dataclass
class NeighboursSummary(CheckSummary):
    """The ``neighbours`` check's summary: nothing of its own (its finding is per row, ``nearest_kept``);
    ``score``: None."""


@dataclass
class NgramTerm:
    """A token's push towards a label from the ensemble's own weights."""

    token: str
    label: str
    score: float


@dataclass
class NgramSummary(CheckSummary):
    """The ``ngram_coefficients`` check's summary (its keys only when it ran): the rule, how closely the refitted Φ
    reproduces the run's, and the 25 strongest (token, label) pushes; ``score``: None."""

    rule: str | None = optional()
    refit_max_abs_diff: float | None = optional()
    top_terms: list[NgramTerm] | None = optional()
