"""Counterfactual twins: texts that occur with different labels in different groups, which grouped folds can
train on with one label and test with another; the warning that says so."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from aflite.data.keywords import _opt

if TYPE_CHECKING:
    from aflite.data.text import Dataset


def counterfactual_twins(
    texts: Sequence[Any], labels: Sequence[Any] | np.ndarray, groups: Sequence[Any] | np.ndarray | None
) -> tuple[int, int, Any]:
    """Texts that occur with different labels in different groups: (how many such texts, the rows that carry
    them, one example).

    Grouped folds keep a group on one side, not a text: a twin's text can be learned with one label and tested
    with another, which pulls a probe below the majority rate. Grouping by the twins' family fixes that.
    """
    if groups is None:
        return 0, 0, None
    seen: dict[Any, set[tuple[Any, Any]]] = {}
    count: Counter[Any] = Counter()
    for t, lab, g in zip(texts, np.asarray(labels).tolist(), np.asarray(groups).tolist(), strict=True):
        seen.setdefault(t, set()).add((lab, g))
        count[t] += 1
    bad = [t for t, pairs in seen.items() if len(pairs) > 1
           and any(a[0] != b[0] and a[1] != b[1] for a in pairs for b in pairs)]
    return len(bad), sum(count[t] for t in bad), bad[0] if bad else None


# Twins on fewer than this share of the rows (or fewer than TWINS_WARN_TEXTS texts) are ordinary duplicates: the
# bundled SNLI sample has 6 short hypotheses such as "A person in a shirt" under several premises with different
# labels (< 1 % of its rows); a counterfactually augmented set has twins on nearly every row.
TWINS_WARN_SHARE = 0.02
TWINS_WARN_TEXTS = 3


def twins_warning(what: str, n_twins: int, n_rows: int, example: Any, group_by: str, n_total: int) -> str:
    """The one-paragraph warning for :func:`counterfactual_twins` (empty when they are under TWINS_WARN_SHARE)."""
    if n_twins < TWINS_WARN_TEXTS or n_rows < TWINS_WARN_SHARE * n_total:
        return ""
    ex = example if isinstance(example, str) else " / ".join(map(str, example))
    ex = ex if len(ex) <= 80 else ex[:77] + "..."
    return (f"warning: {n_twins:,} {what} text(s) ({n_rows:,} of {n_total:,} rows) occur with different labels in "
            f"different {group_by} groups "
            f"(counterfactual twins, e.g. {ex!r}); folds grouped by {group_by} can train on such a text with one "
            f"label and test it with another, which pulls accuracy below the majority rate. Group the twins "
            f"together with {_opt('groups')} twins (families of rows joined by a shared premise or hypothesis), "
            f"or {_opt('groups')} COLUMN when the data has a family id column.")


def warn_twins(ds: Dataset, views: Sequence[str], group_by: str, file: Any = None) -> list[str]:
    """Print (to stderr) and return one :func:`twins_warning` per side a view uses that has twins."""

    if ds.groups is None or ds.texts_b is None:
        return []
    sides: dict[str, Sequence[Any]] = {}
    for v in views:
        if v == "pair":
            sides["pair"] = list(zip(ds.texts_a, ds.texts_b, strict=True))
        elif v == "hypothesis":
            sides["hypothesis"] = ds.texts_b
        elif v == "premise":
            sides["premise"] = ds.texts_a
    msgs = []
    for what, texts in sides.items():
        msg = twins_warning(what, *counterfactual_twins(texts, ds.labels, ds.groups), group_by, len(ds))
        if msg:
            print(msg, file=file or sys.stderr)
            msgs.append(msg)
    return msgs
