"""Token artifacts (Gururangan et al. 2018; Gardner et al. 2021): PMI and z-statistic of each token's
label rate against the base rate."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from aflite.audit.metrics import _as_1d
from aflite.errors import InputError, ParameterError

_TOKEN_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)?|n't")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (letters/digits, inner apostrophes kept: "isn't", "man's")."""
    return _TOKEN_RE.findall(text.lower())


def token_artifacts(
    texts: Sequence[str],
    labels: Any,
    top_k: int = 10,
    min_count: int | None = None,
    smoothing: float = 1.0,
    rank_by: str = "pmi",
) -> dict[str, list[dict[str, Any]]]:
    """For each label, the tokens most associated with it.

    Counts are per sentence (a token counted once per sentence). For token w seen in n_w sentences, c_wl of them
    labelled l, and base rate p_l: PMI = log2(((c_wl + α) / (n_w + α·C)) / p_l) with add-α smoothing; z = (c_wl −
    n_w p_l) / sqrt(n_w p_l (1 − p_l)), the z-statistic of the token's label rate against the base rate. Tokens
    seen in fewer than ``min_count`` sentences are skipped (default max(5, 0.2% of the rows)).
    """
    if rank_by not in ("pmi", "z"):
        raise ParameterError(f"rank_by must be 'pmi' or 'z', got {rank_by!r}")
    lab = _as_1d(labels, "labels")
    if len(texts) != len(lab):
        raise InputError(f"{len(texts)} texts but {len(lab)} labels")
    if len(lab) == 0:
        raise InputError("no instances")
    classes, y = np.unique(lab, return_inverse=True)
    C = len(classes)
    n = len(lab)
    if min_count is None:
        min_count = max(5, math.ceil(0.002 * n))
    vocab: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for r, text in enumerate(texts):
        for tok in set(tokenize(text)):
            j = vocab.setdefault(tok, len(vocab))
            rows.append(r)
            cols.append(j)
    counts = np.zeros((len(vocab), C), dtype=np.int64)
    if rows:
        np.add.at(counts, (np.asarray(cols), y[np.asarray(rows)]), 1)
    words = np.array(list(vocab), dtype=object)
    n_w = counts.sum(axis=1)
    base = np.bincount(y, minlength=C) / n
    ok = n_w >= min_count
    out: dict[str, list[dict[str, Any]]] = {}
    for li, cls in enumerate(classes):
        c = counts[ok, li].astype(np.float64)
        nw = n_w[ok].astype(np.float64)
        p = base[li]
        with np.errstate(divide="ignore"):
            pmi = np.log2(((c + smoothing) / (nw + smoothing * C)) / p)
        z = (c - nw * p) / np.sqrt(np.maximum(nw * p * (1 - p), 1e-12))
        key = pmi if rank_by == "pmi" else z
        order = np.lexsort((words[ok].astype(str), -z, -key))
        order = order[z[order] > 0][:top_k]  # only tokens over-represented with the label
        out[str(cls)] = [
            {
                "token": str(words[ok][i]),
                "pmi": float(pmi[i]),
                "z": float(z[i]),
                "count": int(c[i]),
                "total": int(nw[i]),
                "label_rate": float(c[i] / nw[i]),
                "base_rate": float(p),
            }
            for i in order
        ]
    return out
