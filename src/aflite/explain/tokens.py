"""Token artifacts with a significance test: the competency-problem statistics of Gardner et al. (2021).

Gardner, Merrill, Dodge, Peters, Ross, Singh and Smith (2021), "Competency Problems: On Finding and Removing
Artifacts in Language Data" (EMNLP), §3: in a competency problem no single token should tell the label, so for a
token seen in n instances, p̂ of which carry label y, they test H0: p(y | token) = p0 with the one-sided binomial
z-statistic

    z = (p̂ − p0) / sqrt(p0 (1 − p0) / n)

and call a (token, label) pair an artifact when z exceeds the critical value of a Bonferroni-corrected test
(their α = 0.01). The paper takes p0 = 1/|Y| (its datasets are balanced); here p0 is the label's base rate in
the set tested (equal to 1/|Y| on balanced data, and the honest null when labels are skewed, or when filtering
has shifted them). The p-value is the upper normal tail of z; Bonferroni divides α by the number of tests, here
every (token, label) pair of the tokens seen at least ``min_count`` times in that set (|tokens| · |Y|).

Counting is vectorised: the texts become one binary CSR matrix (a token counted once per text), and the
(token, label) table of a subset is one sparse product ``B[rows].T @ onehot(y[rows])``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from scipy.stats import norm

from aflite.errors import ParameterError

__all__ = [
    "TOKEN_PATTERN",
    "TokenStats",
    "token_matrix",
    "competency",
    "random_competency",
    "z_statistic",
    "critical_z",
    "bonferroni_curve",
]

# lower-cased words: letters and digits, inner apostrophes kept ("isn't", "man's")
TOKEN_PATTERN = r"[^\W_]+(?:'[^\W_]+)?"


def token_matrix(texts: Sequence[str]) -> tuple[sp.csr_matrix, NDArray[np.str_]]:
    """Binary (text × token) CSR matrix and the vocabulary (sorted), one pass of scikit-learn's tokenizer."""
    from sklearn.feature_extraction.text import CountVectorizer

    vec = CountVectorizer(binary=True, lowercase=True, token_pattern=TOKEN_PATTERN, dtype=np.int32)
    try:
        B = vec.fit_transform(texts)
    except ValueError:  # every text empty of word tokens
        return sp.csr_matrix((len(texts), 0), dtype=np.int32), np.array([], dtype=str)
    return B.tocsr(), np.asarray(vec.get_feature_names_out(), dtype=str)


def z_statistic(p_hat: Any, p0: Any, n: Any) -> NDArray[np.float64]:
    """Gardner et al.'s one-sided binomial z: (p̂ − p0) / sqrt(p0 (1 − p0) / n)."""
    p_hat, p0, n = np.asarray(p_hat, float), np.asarray(p0, float), np.asarray(n, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (p_hat - p0) / np.sqrt(p0 * (1.0 - p0) / n)


def critical_z(alpha: float, n_tests: int) -> float:
    """The z above which a one-sided test is significant at α after a Bonferroni correction over n_tests."""
    return float(norm.isf(alpha / max(int(n_tests), 1)))


def bonferroni_curve(p0: float, z_crit: float, counts: Any) -> NDArray[np.float64]:
    """The smallest significant p̂ for each count n: p0 + z_crit · sqrt(p0 (1 − p0) / n) (the plot's curve)."""
    n = np.asarray(counts, dtype=float)
    return p0 + z_crit * np.sqrt(p0 * (1.0 - p0) / n)


@dataclass
class TokenStats:
    """One set's table, one row per tested (token, label) pair (tokens seen ≥ min_count times), token-major."""

    token: NDArray[np.str_]
    label: NDArray[Any]
    count: NDArray[np.float64]  # texts of the set containing the token
    label_count: NDArray[np.float64]  # ... of which carry the label
    p_label: NDArray[np.float64]  # p̂(label | token)
    z: NDArray[np.float64]
    p_value: NDArray[np.float64]
    significant: NDArray[np.bool_]
    n_rows: int
    n_tests: int
    z_critical: float
    base_rates: dict[str, float]

    @property
    def n_significant(self) -> int:
        return int(self.significant.sum())

    def top(self, k: int = 5) -> list[dict[str, Any]]:
        """The k most significant pairs (largest z), as plain dicts."""
        order = np.argsort(-np.nan_to_num(self.z, nan=-np.inf), kind="stable")[:k]
        return [{"token": str(self.token[i]), "label": str(self.label[i]), "count": float(self.count[i]),
                 "p_label": float(self.p_label[i]), "z": float(self.z[i]), "p_value": float(self.p_value[i]),
                 "significant": bool(self.significant[i])} for i in order]


def _check(alpha: float, min_count: int) -> None:
    if not 0.0 < alpha < 1.0:
        raise ParameterError(f"alpha must lie in (0, 1), got {alpha}")
    if isinstance(min_count, bool) or int(min_count) != min_count or min_count < 1:
        raise ParameterError(f"min_count must be an integer >= 1, got {min_count}")


def competency(
    B: sp.csr_matrix,
    vocab: NDArray[np.str_],
    y: NDArray[np.int64],
    classes: NDArray[Any],
    rows: NDArray[np.intp] | None = None,
    *,
    alpha: float = 0.01,
    min_count: int = 20,
) -> TokenStats:
    """The competency test on the texts ``rows`` (default all) of ``B`` with label codes ``y``."""
    _check(alpha, min_count)
    K = len(classes)
    if rows is not None:
        B, y = B[rows], y[rows]
    n = len(y)
    counts = np.asarray(B.sum(0)).ravel().astype(np.float64)
    onehot = sp.csr_matrix((np.ones(n), (np.arange(n), y)), shape=(n, K))
    label_counts = np.asarray((B.T @ onehot).todense(), dtype=np.float64)  # (V, K)
    base = np.bincount(y, minlength=K) / max(n, 1)
    tested = np.flatnonzero(counts >= min_count)
    n_tests = len(tested) * K
    z_crit = critical_z(alpha, n_tests)
    cnt = np.repeat(counts[tested], K)
    lab_cnt = label_counts[tested].ravel()
    p0 = np.tile(base, len(tested))
    p_hat = lab_cnt / np.maximum(cnt, 1)
    z = z_statistic(p_hat, p0, cnt)
    with np.errstate(invalid="ignore"):
        p_val = norm.sf(z)
        sig = p_val < alpha / max(n_tests, 1)
    return TokenStats(
        token=np.repeat(vocab[tested], K), label=np.tile(np.asarray(classes), len(tested)), count=cnt,
        label_count=lab_cnt, p_label=p_hat, z=z, p_value=p_val, significant=sig & np.isfinite(z),
        n_rows=n, n_tests=n_tests, z_critical=z_crit,
        base_rates={str(c): float(b) for c, b in zip(classes, base, strict=True)},
    )


def random_competency(
    B: sp.csr_matrix,
    vocab: NDArray[np.str_],
    y: NDArray[np.int64],
    classes: NDArray[Any],
    size: int,
    seed: int,
    n_seeds: int,
    *,
    alpha: float = 0.01,
    min_count: int = 20,
) -> tuple[TokenStats, list[int]]:
    """The test on ``n_seeds`` same-size random subsets of all rows (subset r drawn from
    ``SeedSequence([seed, r, 1])``), averaged into one table.

    How an averaged row reads: ``count``, ``label_count``, ``p_label``, ``z`` and ``p_value`` are means over the
    seeds in whose subset the token was tested (seen ≥ min_count times); ``significant`` is True when the pair was
    significant in at least half of all seeds. Also returns the number of significant pairs per seed (their mean
    is the ``random`` figure of results.json).
    """
    if n_seeds < 1:
        raise ParameterError("random_competency needs at least one seed")
    n = B.shape[0]
    if not 1 <= size <= n:
        raise ParameterError(f"subset size {size} must lie in [1, {n}]")
    K = len(classes)
    V = len(vocab)
    sums = np.zeros((5, V * K))
    tested_in = np.zeros(V * K)
    sig_in = np.zeros(V * K)
    per_seed: list[int] = []
    n_tests: list[int] = []
    stats = None
    for r in range(n_seeds):
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), r, 1]))
        rows = np.sort(rng.choice(n, size, replace=False))
        stats = competency(B, vocab, y, classes, rows, alpha=alpha, min_count=min_count)
        per_seed.append(stats.n_significant)
        n_tests.append(stats.n_tests)
        idx = np.searchsorted(vocab, stats.token) * K + np.tile(np.arange(K), len(stats.token) // max(K, 1))
        for j, arr in enumerate((stats.count, stats.label_count, stats.p_label, stats.z, stats.p_value)):
            sums[j, idx] += np.nan_to_num(arr)
        tested_in[idx] += 1
        sig_in[idx] += stats.significant
    assert stats is not None
    keep = np.flatnonzero(tested_in > 0)
    mean = sums[:, keep] / tested_in[keep]
    avg = TokenStats(
        token=vocab[keep // K], label=np.asarray(classes)[keep % K], count=mean[0], label_count=mean[1],
        p_label=mean[2], z=mean[3], p_value=mean[4], significant=sig_in[keep] >= math.ceil(n_seeds / 2),
        n_rows=size, n_tests=int(round(np.mean(n_tests))), z_critical=critical_z(alpha, int(round(np.mean(n_tests)))),
        base_rates=stats.base_rates,  # of the last seed's subset (the subsets' label mixes differ by sampling only)
    )
    return avg, per_seed
