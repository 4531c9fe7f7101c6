"""The summaries of the audit's checks (:mod:`aflite.audit.checks`), one :class:`CheckSummary` subclass per check
with its own typed fields, in the order the checks run. Their own fields are the keys of a view's entry in the
audit's results.json (:meth:`aflite.audit.results.ViewAudit.to_dict` writes them flat, without the common keys).
They live beside the checks rather than in the checks' module because :mod:`aflite.audit.results`, which the checks
import, reads them."""

from __future__ import annotations

from dataclasses import dataclass, field

from aflite.audit.clusters import PecoNullRecord, PecoRecord
from aflite.check import CheckSummary
from aflite.check.tokens import TokenRow

__all__ = ["BiasedSummary", "PecoSummary", "TokenTableSummary", "TraDetails", "TraSummary",
           "TsneSummary"]


@dataclass
class BiasedSummary(CheckSummary):
    """The ``biased_model`` check's summary; ``score``: the biased (view-only) model's out-of-fold accuracy, which
    the view entry carries as :class:`aflite.audit.metrics.LeakageMetrics`'s ``biased_accuracy`` (so no field of
    its own: no key is written by two checks)."""


@dataclass
class PecoSummary(CheckSummary):
    """The ``peco`` check's summary: PECO, its shuffled-label null, the Table-4-scale variant, the clusters'
    figures (``peco_null``, ``peco_details``: :class:`PecoNullRecord`, :class:`PecoRecord`) and the number
    of biased clusters; ``score``: PECO."""

    peco: float
    peco_null_mean: float
    peco_null_p95: float
    peco_excess: float
    peco_p_value: float
    peco_null: PecoNullRecord
    peco_fraction20: float
    peco_details: PecoRecord
    biased_clusters: int

    def __post_init__(self) -> None:
        self.score = self.peco


@dataclass
class TsneSummary(CheckSummary):
    """The ``tsne`` check's summary: nothing of its own (its map stays in Python); ``score``: None."""


@dataclass
class TraDetails:
    """TRA over its sampled rows: the mean, how many rows, the standard deviation."""

    score: float
    n: int
    std: float


@dataclass
class TraSummary(CheckSummary):
    """The ``tra`` check's summary: TRA, its details and the fine-tuned models' own leakage figures on their
    held-out rows (with their sizes and training); ``score``: TRA (None: not fine-tuned)."""

    tra: float | None
    tra_details: TraDetails | None
    finetuned: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.score = self.tra


@dataclass
class TokenTableSummary(CheckSummary):
    """The ``token_artifacts`` check's summary: per label, its token rows (:func:`aflite.check.tokens.token_artifacts`);
    ``score``: None."""

    token_artifacts: dict[str, list[TokenRow]] = field(default_factory=dict)
