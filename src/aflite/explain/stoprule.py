"""A stop rule users can state: keep filtering until no token artifact is significant (optional, off by default).

AFLite's own rule (Algorithm 1) stops when fewer than k rows reach p̃ ≥ τ or |S| ≤ n; it says nothing about what is
left, and it can stop while strong hypothesis artifacts are still significant in D(Φ). This rule continues from
the run's final state with smaller slices — k' = max(1, k // 4) rows per phase, same m, t and τ, phase j drawing
from ``default_rng([seed, j])`` like the filter — and stops at the first of:

* ``no significant artifact``: no (token, label) pair is Bonferroni-significant on the kept set (the competency
  test of :mod:`aflite.check.tokens`, same α and min count as the report);
* ``floor reached``: |S| ≤ the floor (default the run's target size n);
* ``no row reaches τ``: a phase finds no row with p̃ ≥ τ, so nothing more can be removed under the paper's rule;
* ``phase cap``: ``max_phases`` extra phases ran.

Which came first is reported; the run folder itself is never changed (the extra removals are listed in explain's
own instances.csv, column ``stop_rule_removed_at``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np
from numpy.typing import NDArray

from aflite.core.filter import AFLite
from aflite.core.phase import FilterState
from aflite.errors import ParameterError
from aflite.rundir.schema import RunParameters

__all__ = ["StopRuleResult", "continue_until_clean"]


class TrajectoryPoint(TypedDict):
    """One phase of the stop rule: its index, D(Φ)'s size then, the significant (token, label) pairs left."""

    phase: int
    size: int
    significant: int


@dataclass
class StopRuleResult:
    stopped_by: str
    slice_size: int
    floor: int
    removed_at: NDArray[np.int32]  # phase index of rows removed by the rule, -1 otherwise
    trajectory: list[TrajectoryPoint] = field(default_factory=list)

    @property
    def extra_removed(self) -> int:
        """The rows the rule removed beyond the run's stop."""
        return int((self.removed_at >= 0).sum())


def continue_until_clean(
    X: Any, y_str: NDArray[Any], groups: NDArray[np.int64] | None, params: RunParameters, seed: int,
    keep: NDArray[np.bool_], first_phase: int, significant: Any, *, floor: int | None = None,
    max_phases: int = 40,
) -> StopRuleResult:
    """Continue filtering from ``keep`` (the run's D(Φ), after ``first_phase`` phases) under the rule above.

    ``significant(rows) -> int`` counts the Bonferroni-significant (token, label) pairs on those rows.
    """
    k = max(1, params.slice_size // 4)
    t = params.train_size
    floor_n = params.target_size if floor is None else int(floor)
    if floor_n <= t:
        raise ParameterError(f"--stop-floor {floor_n} must be larger than the run's train size t = {t}")
    n = len(keep)
    keep = keep.copy()
    removed_at = np.full(n, -1, dtype=np.int32)
    traj: list[TrajectoryPoint] = []
    phase = int(first_phase)
    stopped_by = "phase cap"
    for step in range(max_phases + 1):
        rows = np.flatnonzero(keep)
        sig = int(significant(rows))
        traj.append({"phase": phase, "size": int(len(rows)), "significant": sig})
        if sig == 0:
            stopped_by = "no significant artifact"
            break
        if len(rows) <= floor_n:
            stopped_by = "floor reached"
            break
        if step == max_phases:
            break
        state = FilterState(iteration=phase, keep=keep.copy(), predictability=np.full(n, np.nan),
                            removed_at=np.full(n, -1, dtype=np.int32))
        af = AFLite(n_partitions=params.n_partitions, train_size=t, slice_size=k, target_size=floor_n,
                    threshold=params.threshold, strategy="slicing", C=params.C,
                    random_state=int(seed), max_iterations=phase + 1, device="cpu")
        af.fit(X, y_str, groups, resume=state)
        gone = np.flatnonzero(keep & ~af.keep_mask_)
        if not len(gone):
            stopped_by = "no row reaches τ"
            break
        keep[gone] = False
        removed_at[gone] = phase
        phase += 1
    return StopRuleResult(stopped_by, k, floor_n, removed_at, traj)
