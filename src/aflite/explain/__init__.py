"""``aflite explain``: what the artifacts of a dataset are, why each row was removed, and what else is wrong with it.

:func:`aflite.commands.explain.explain` reads a run of ``aflite run`` and its data back, runs the checks
(:mod:`aflite.check`; the built-in ones in :mod:`~aflite.explain.checks`: token artifacts, the first phase's data
map and label issues (:mod:`~aflite.explain.datamap`), a surrogate of p̃ and nearest kept rows
(:mod:`~aflite.explain.reasons`), the stop rule) and writes one folder (:mod:`~aflite.explain.files`).
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
