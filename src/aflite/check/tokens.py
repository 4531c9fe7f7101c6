"""Token artifacts with a significance test: the competency-problem statistics of Gardner et al. (2021).

Gardner, Merrill, Dodge, Peters, Ross, Singh and Smith (2021), "Competency Problems: On Finding and Removing
Artifacts in Language Data" (EMNLP; arXiv:2104.08646), §3.2 "Hypothesis Test": in a competency problem no single
feature should tell the label, so for a token seen n times, a fraction p̂ of them with label y, they test
H0: p(y | token) = p0 against the one-sided alternative p(y | token) > p0 ("a one-sided binomial proportion
hypothesis test, as our rejection sampling can only lead to binomial proportions … greater than" p0) with the
z-statistic of their Eq. 1

    z = (p̂ − p0) / sqrt(p0 (1 − p0) / n)

and, in §4.1, draw the significance curve at "α = 0.01 and a conservative Bonferroni correction … for all 28,000
vocabulary items" of SNLI. Checked against the paper's text; what is the same and what differs here, and why:

* z and the one-sided upper-tail p-value: the same. The plot's curve p0 + z_crit · sqrt(p0 (1 − p0) / n) is
  their §3.2 boundary p̂ = z / (2 sqrt(n)) + 1/2 for general p0.
* p0: the paper uses the uniform 1/|Y| ("p0 = 1/3, as SNLI has three labels"; 0.5 in its binary analysis). The
  default here is the label's base rate in the set tested (``p0="base"``), as the issue asks: equal to 1/|Y| on
  balanced data, and the honest null when labels are skewed or when filtering has shifted them (AFLite often
  does: a kept set with 25 % of one label would otherwise show that label as "anti-artifacts" and the others
  as artifacts). ``p0="uniform"`` gives the paper's null.
* n: the paper counts "each appearance in an instance as a separate occurrence"; here a token counts once per
  text by default (a text is one trial with one label; a repeated word is not a second, independent trial).
  ``token_matrix(texts, binary=False)`` gives the paper's occurrence counts, and ``competency`` then tests those.
* Bonferroni: the paper divides α by the vocabulary size (every word type, one test per word); here by the
  number of tests actually made, every (token, label) pair of the tokens seen at least ``min_count`` times in the
  set (|tokens| · |Y|; ``min_count`` = 20 as in the paper's §4.2 word cohorts). On SNLI train_100k that is
  6,303 tests, against the paper's 28,000 types of full SNLI.
* tokens: the paper strips punctuation and splits on whitespace; here lower-cased runs of letters and digits
  with inner apostrophes (:data:`TOKEN_PATTERN`).

Counting is vectorised: the texts become one CSR matrix (binary by default), and the (token, label) table of a
subset is one sparse product ``B[rows].T @ onehot(y[rows])``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from scipy.stats import norm

from aflite.errors import InputError, ParameterError

__all__ = [
    "TOKEN_PATTERN",
    "TokenPair",
    "TokenRow",
    "token_artifacts",
    "tokenize",
    "TokenStats",
    "token_matrix",
    "competency",
    "random_competency",
    "z_statistic",
    "critical_z",
    "bonferroni_curve",
]

# lower-cased words: letters and digits, inner apostrophes kept ("isn't", "man's"): the one tokenizer of every
# token analysis (explain's competency test, the audit's token table, the surrogate's inputs, the stop rule)
TOKEN_PATTERN = r"[^\W_]+(?:'[^\W_]+)?"
_TOKEN_RE = re.compile(TOKEN_PATTERN)


def tokenize(text: str) -> list[str]:
    """The tokens of one text as :func:`token_matrix` counts them: lower-cased, :data:`TOKEN_PATTERN`."""
    return _TOKEN_RE.findall(text.lower())


def token_matrix(texts: Sequence[str], binary: bool = True) -> tuple[sp.csr_matrix, NDArray[np.str_]]:
    """(text × token) CSR matrix and the vocabulary (sorted), one pass of scikit-learn's tokenizer.

    Binary by default (a token counted once per text); ``binary=False`` keeps every occurrence, Gardner et al.'s
    count.
    """
    from sklearn.feature_extraction.text import CountVectorizer

    vec = CountVectorizer(binary=binary, lowercase=True, token_pattern=TOKEN_PATTERN, dtype=np.int32)
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


class TokenPair(TypedDict):
    """One tested (token, label) pair of the competency test: its texts, p̂(label | token), z, p-value and whether
    it is significant (a NaN z or p-value is null in JSON)."""

    token: str
    label: str
    count: float
    p_label: float | None
    z: float | None
    p_value: float | None
    significant: bool


class TokenRow(TypedDict):
    """One token of the audit's token table for a label: its PMI and z, its texts with the label and in all, its
    label rate and the label's base rate."""

    token: str
    pmi: float
    z: float
    count: int
    total: int
    label_rate: float
    base_rate: float


@dataclass
class TokenStats:
    """One set's table, one row per tested (token, label) pair (tokens seen ≥ min_count times), token-major."""

    token: NDArray[np.str_]
    label: NDArray[Any]
    count: NDArray[np.float64]  # texts of the set containing the token (occurrences for a non-binary matrix)
    label_count: NDArray[np.float64]  # ... of which carry the label
    p_label: NDArray[np.float64]  # p̂(label | token)
    z: NDArray[np.float64]
    p_value: NDArray[np.float64]
    significant: NDArray[np.bool_]
    n_rows: int
    n_tests: int
    z_critical: float
    base_rates: dict[str, float]
    p0: str = "base"  # the null used: "base" (each label's base rate in the set) or "uniform" (1/|Y|)

    @property
    def n_significant(self) -> int:
        return int(self.significant.sum())

    def top(self, k: int = 5) -> list[TokenPair]:
        """The k most significant pairs (largest z), as plain dicts."""
        order = np.argsort(-np.nan_to_num(self.z, nan=-np.inf), kind="stable")[:k]
        return [{"token": str(self.token[i]), "label": str(self.label[i]), "count": float(self.count[i]),
                 "p_label": float(self.p_label[i]), "z": float(self.z[i]), "p_value": float(self.p_value[i]),
                 "significant": bool(self.significant[i])} for i in order]


P0_CHOICES = ("base", "uniform")


def _check(alpha: float, min_count: int, p0: str = "base") -> None:
    if p0 not in P0_CHOICES:
        raise ParameterError(f"p0 must be one of {', '.join(P0_CHOICES)}, got {p0!r}")
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
    p0: str = "base",
) -> TokenStats:
    """The competency test on the texts ``rows`` (default all) of ``B`` with label codes ``y``.

    ``p0``: the null p(label | token) — "base" (the label's share of the set's rows) or "uniform" (1/|Y|, the
    paper's). A token is tested when its count (column sum of ``B``) is at least ``min_count``.
    """
    _check(alpha, min_count, p0)
    K = len(classes)
    if rows is not None:
        B, y = B[rows], y[rows]
    n = len(y)
    counts = np.asarray(B.sum(0)).ravel().astype(np.float64)
    onehot = sp.csr_matrix((np.ones(n), (np.arange(n), y)), shape=(n, K))
    label_counts = np.asarray((B.T @ onehot).todense(), dtype=np.float64)  # (V, K)
    base = np.bincount(y, minlength=K) / max(n, 1)
    null = base if p0 == "base" else np.full(K, 1.0 / max(K, 1))
    tested = np.flatnonzero(counts >= min_count)
    n_tests = len(tested) * K
    z_crit = critical_z(alpha, n_tests)
    cnt = np.repeat(counts[tested], K)
    lab_cnt = label_counts[tested].ravel()
    p_hat = lab_cnt / np.maximum(cnt, 1)
    z = z_statistic(p_hat, np.tile(null, len(tested)), cnt)
    with np.errstate(invalid="ignore"):
        p_val = norm.sf(z)
        sig = p_val < alpha / max(n_tests, 1)
    return TokenStats(
        token=np.repeat(vocab[tested], K), label=np.tile(np.asarray(classes), len(tested)), count=cnt,
        label_count=lab_cnt, p_label=p_hat, z=z, p_value=p_val, significant=sig & np.isfinite(z),
        n_rows=n, n_tests=n_tests, z_critical=z_crit,
        base_rates={str(c): float(b) for c, b in zip(classes, base, strict=True)}, p0=p0,
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
    p0: str = "base",
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
        stats = competency(B, vocab, y, classes, rows, alpha=alpha, min_count=min_count, p0=p0)
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
        p0=p0,
    )
    return avg, per_seed


def token_artifacts(
    texts: Sequence[str],
    labels: Any,
    top_k: int = 10,
    min_count: int | None = None,
    smoothing: float = 1.0,
    rank_by: str = "pmi",
) -> dict[str, list[TokenRow]]:
    """For each label, the tokens most associated with it (the audit's token table; Gururangan et al. 2018).

    Counts are per text (:func:`token_matrix`, binary). For token w seen in n_w texts, c_wl of them labelled l,
    and base rate p_l: PMI = log2(((c_wl + α) / (n_w + α·C)) / p_l) with add-α smoothing, and Gardner et al.'s z of
    the token's label rate against the base rate (:func:`z_statistic`, the competency test's). Tokens seen in fewer
    than ``min_count`` texts are skipped (default max(5, 0.2% of the rows)); only tokens over-represented with the
    label (z > 0) are listed, ranked by ``rank_by`` (``pmi`` or ``z``).
    """
    if rank_by not in ("pmi", "z"):
        raise ParameterError(f"rank_by must be 'pmi' or 'z', got {rank_by!r}")
    lab = np.asarray(labels)
    if lab.ndim != 1:
        raise InputError(f"labels must be one-dimensional, got shape {lab.shape}")
    if len(texts) != len(lab):
        raise InputError(f"{len(texts)} texts but {len(lab)} labels")
    if len(lab) == 0:
        raise InputError("no instances")
    classes, y = np.unique(lab, return_inverse=True)
    C, n = len(classes), len(lab)
    if min_count is None:
        min_count = max(5, math.ceil(0.002 * n))
    B, words = token_matrix(list(texts))
    onehot = sp.csr_matrix((np.ones(n), (np.arange(n), y)), shape=(n, C))
    counts = np.asarray((B.T @ onehot).todense(), dtype=np.float64)  # (V, C)
    n_w = counts.sum(axis=1)
    base = np.bincount(y, minlength=C) / n
    ok = n_w >= min_count
    out: dict[str, list[TokenRow]] = {}
    for li, cls in enumerate(classes):
        c, nw, p = counts[ok, li], n_w[ok], base[li]
        with np.errstate(divide="ignore"):
            pmi = np.log2(((c + smoothing) / (nw + smoothing * C)) / p)
        z = z_statistic(c / nw, p, nw)
        key = pmi if rank_by == "pmi" else z
        order = np.lexsort((words[ok].astype(str), -z, -key))
        order = order[z[order] > 0][:top_k]  # only tokens over-represented with the label
        out[str(cls)] = [{"token": str(words[ok][i]), "pmi": float(pmi[i]), "z": float(z[i]), "count": int(c[i]),
                          "total": int(nw[i]), "label_rate": float(c[i] / nw[i]), "base_rate": float(p)}
                         for i in order]
    return out
