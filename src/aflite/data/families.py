"""Families of rows for grouped splits (``--groups twins``): rows joined by a shared text, so that counterfactual
twins never sit on both sides of a split. Kept apart from :mod:`aflite.data.text` and :mod:`aflite.data.twins`
so that both can use it without importing each other."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def twin_families(texts_a: Sequence[str], texts_b: Sequence[str] | None = None) -> np.ndarray:
    """A family id per row (``--groups twins``): the connected components of the graph in which two rows are
    joined when they share their first text *or* their second text. Counterfactual twins (one premise with edited
    hypotheses, one hypothesis under edited premises) thus share a family, so grouped folds never split them."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    n = len(texts_a)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    cols = []
    for texts in (texts_a, texts_b):
        if texts is None:
            continue
        ids: dict[str, int] = {}
        cols.append(np.fromiter((ids.setdefault(t, len(ids)) for t in texts), dtype=np.int64, count=n))
    # bipartite graph rows ↔ texts (each side's texts numbered apart); rows sharing a text are connected
    offset, parts = n, []
    for c in cols:
        parts.append(c + offset)
        offset += int(c.max()) + 1
    rows = np.concatenate([np.arange(n)] * len(parts))
    other = np.concatenate(parts)
    graph = sp.coo_matrix((np.ones(len(rows), dtype=np.int8), (rows, other)), shape=(offset, offset))
    _, label = connected_components(graph, directed=False)
    _, family = np.unique(label[:n], return_inverse=True)  # families numbered 0..F-1
    return family.astype(np.int64)
