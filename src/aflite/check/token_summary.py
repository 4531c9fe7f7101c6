"""The ``tokens`` check's summary (the competency test of :mod:`aflite.check.tokens` on full D, the kept D(Φ) and
random subsets), typed. It lives with the token analysis rather than beside explain's other summaries
(:mod:`aflite.explain.check_summaries`) because both explain and the notebook view (:mod:`aflite.report.inline`),
which explain imports, read it: every import points down."""

from __future__ import annotations

from dataclasses import dataclass, field

from aflite.check.summary import CheckSummary
from aflite.check.tokens import TokenPair

__all__ = ["BonferroniSet", "SignificantCounts", "TokenSummary", "TokenTest"]


@dataclass
class SignificantCounts:
    """Significant (token, label) pairs on full D, on the kept D(Φ), and their mean over the random subsets."""

    full: int
    kept: int
    random: float


@dataclass
class TokenTest:
    """The competency test as it ran: its statistic, α, min count, null and random subsets, said in words."""

    statistic: str
    alpha: float
    min_count: int
    null: str
    random_subsets: int
    random_rows: str


@dataclass
class BonferroniSet:
    """One set's test: its rows, the pairs tested, the Bonferroni-corrected critical z and each label's base rate."""

    n_rows: int
    n_tests: int
    z_critical: float
    base_rates: dict[str, float]


@dataclass
class TokenSummary(CheckSummary):
    """The ``tokens`` check's summary; ``score``: the significant (token, label) pairs left on the kept D(Φ)
    (None: no text). ``top_artifacts``: per set, the ten most significant pairs (:meth:`TokenStats.top`)."""

    significant_tokens: SignificantCounts | None
    significant_tokens_random_per_seed: list[int]
    token_view: str | None
    token_test: TokenTest
    bonferroni: dict[str, BonferroniSet] = field(default_factory=dict)
    top_artifacts: dict[str, list[TokenPair]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.score = None if self.significant_tokens is None else float(self.significant_tokens.kept)
