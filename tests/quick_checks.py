"""explain's cheap check options for tests, as ``checks=``: what the alias keywords ``min_count=``,
``random_seeds=`` and ``neighbours=`` (removed from ``explain()`` in #58) set, one entry per check option."""

from __future__ import annotations

from typing import Any


def quick_checks(min_count: int | None = None, random_seeds: int = 1, neighbours: int = 0,
                 **more: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``checks=`` with one random seed (tokens' random subsets, label issues' permutations), ``neighbours``
    nearest kept rows and, when given, the token count floor of every check that has one; ``more`` adds checks."""
    floor = {} if min_count is None else {"min_count": min_count}
    return {"tokens": {**floor, "random_seeds": random_seeds}, "label_issues": {"permutations": random_seeds},
            "neighbours": {"k": neighbours}, **({"surrogate": floor, "ngram_coefficients": floor} if floor else {}),
            **more}
