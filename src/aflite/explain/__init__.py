"""``aflite explain``: what the artifacts of a dataset are, why each row was removed, and what else is wrong with it.

For a run of ``aflite run`` on DATA, :func:`explain` writes into one folder:

- token artifacts with significance, on full D, the kept D(Φ) and same-size random subsets
  (:mod:`~aflite.explain.tokens`: Gardner et al. 2021's competency test, counted with scipy.sparse), and the
  competency plot (:mod:`~aflite.explain.plots`);
- the first filtering phase's data map (confidence, variability, correctness, region) and cleanlab's label-issue
  candidates from its held-out probabilities (:mod:`~aflite.explain.datamap`; the probabilities come from
  :mod:`aflite.heldout`, which ``AFLite.fit`` also uses for its fitted attributes);
- why each row was easy: a sparse surrogate of p̃ on tokens or image statistics, and each removed row's nearest
  kept rows in Φ (:mod:`~aflite.explain.reasons`);
- soft weights (:func:`aflite.heldout.soft_weights`), results.json and summary.md (:mod:`~aflite.explain.write`).

:mod:`~aflite.explain.runner` reads the run back and orchestrates.
"""

from __future__ import annotations

from aflite.explain.datamap import REGION_RULE, label_issues, overlap_table, regions
from aflite.explain.runner import ExplainResult, explain, read_run
from aflite.explain.tokens import TokenStats, competency, critical_z, random_competency, token_matrix, z_statistic

__all__ = [
    "ExplainResult",
    "REGION_RULE",
    "TokenStats",
    "competency",
    "critical_z",
    "explain",
    "label_issues",
    "overlap_table",
    "random_competency",
    "read_run",
    "regions",
    "token_matrix",
    "z_statistic",
]
