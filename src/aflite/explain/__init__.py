"""``aflite explain``: what the artifacts of a dataset are, why each row was removed, and what else is wrong with it.

The analyses of ``aflite explain``; :func:`aflite.commands.explain.explain` (``aflite.explain_run``) reads a run of
``aflite run`` and its DATA back, runs them, and writes into one folder:

- token artifacts with significance, on full D, the kept D(Φ) and same-size random subsets
  (:mod:`aflite.check.tokens`: Gardner et al. 2021's competency test, counted with scipy.sparse), and the
  competency plot (:mod:`~aflite.explain.plots`);
- the first filtering phase's data map (confidence, variability, correctness, region) and cleanlab's label-issue
  candidates from its held-out probabilities (:mod:`~aflite.explain.datamap`; the probabilities come from
  :mod:`aflite.core.heldout`, which ``AFLite.fit`` also uses for its fitted attributes);
- why each row was easy: a sparse surrogate of p̃ on tokens or image statistics, and each removed row's nearest
  kept rows in Φ (:mod:`~aflite.explain.reasons`);
- soft weights (:func:`aflite.core.heldout.soft_weights`); results.json and summary.md
  (:mod:`aflite.explain.files`).

Each analysis is a check (:mod:`aflite.check`) registered once; :mod:`~aflite.explain.checks` holds them.

:mod:`~aflite.explain.recompute` recomputes the run's first phase from Φ, its parameters and seed.
"""

from __future__ import annotations

from aflite.explain.datamap import REGION_RULE, label_issues, overlap_table, regions
from aflite.explain.recompute import first_phase, token_texts

__all__ = [
    "REGION_RULE",
    "first_phase",
    "label_issues",
    "overlap_table",
    "regions",
    "token_texts",
]
