"""The competency statistics (aflite.explain.tokens) against small cases computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aflite.check import tokens as tk
from aflite.errors import ParameterError


def stats_for(texts, labels, **kw):
    classes, y = np.unique(labels, return_inverse=True)
    B, vocab = tk.token_matrix(texts)
    return tk.competency(B, vocab, y.astype(np.int64), classes, **kw)


def row(st, token, label):
    i = np.flatnonzero((st.token == token) & (st.label == label))
    assert len(i) == 1
    return int(i[0])


def test_z_and_p_value_by_hand():
    # 10 texts, base rates a = 0.6, b = 0.4; token x in 5 texts, 4 of them labelled a (and once per text)
    texts = ["x x y", "x", "x", "x", "x"] + ["y"] * 5
    labels = ["a", "a", "a", "a", "b", "a", "a", "b", "b", "b"]
    st = stats_for(texts, labels, min_count=5, alpha=0.01)
    i = row(st, "x", "a")
    assert st.count[i] == 5 and st.label_count[i] == 4
    assert st.p_label[i] == pytest.approx(0.8)
    # by hand: z = (0.8 - 0.6) / sqrt(0.6 * 0.4 / 5) = 0.2 / 0.219089 = 0.912871
    assert st.z[i] == pytest.approx(0.912871, abs=1e-6)
    # one-sided p = 1 - Phi(0.912871) = 0.18066 (normal table)
    assert st.p_value[i] == pytest.approx(0.18066, abs=2e-5)
    j = row(st, "x", "b")
    assert st.z[j] == pytest.approx(-0.912871, abs=1e-6)
    assert st.base_rates == {"a": pytest.approx(0.6), "b": pytest.approx(0.4)}
    assert not st.significant.any()
    # y is in 6 texts (5 plain + "x x y"): tested with min_count 5; tokens below min_count are not tested
    assert set(st.token) == {"x", "y"} and st.n_tests == 4
    assert len(stats_for(texts, labels, min_count=7).token) == 0



def test_uniform_null_is_the_papers_p0():
    # Gardner et al. 2021 §4.1 take p0 = 1/|Y|; the same 10 texts as above (base rates 0.6 / 0.4)
    texts = ["x x y", "x", "x", "x", "x"] + ["y"] * 5
    labels = ["a", "a", "a", "a", "b", "a", "a", "b", "b", "b"]
    st = stats_for(texts, labels, min_count=5, p0="uniform")
    i = row(st, "x", "a")
    # by hand: z = (0.8 - 0.5) / sqrt(0.5 * 0.5 / 5) = 0.3 / 0.223607 = 1.341641; p = 1 - Phi(1.3416) = 0.08986
    assert st.z[i] == pytest.approx(1.341641, abs=1e-6)
    assert st.p_value[i] == pytest.approx(0.08986, abs=5e-5)
    assert st.z[row(st, "x", "b")] == pytest.approx(-1.341641, abs=1e-6)
    assert st.p0 == "uniform" and stats_for(texts, labels, min_count=5).p0 == "base"
    # the base rates are still reported (of the rows), whatever the null
    assert st.base_rates == {"a": pytest.approx(0.6), "b": pytest.approx(0.4)}
    with pytest.raises(ParameterError):
        stats_for(texts, labels, p0="empirical")


def test_occurrence_counts_are_the_papers_n():
    # Gardner et al. count "each appearance in an instance as a separate occurrence": "x x y" gives x twice
    texts = ["x x y", "x", "x", "x", "x"] + ["y"] * 5
    labels = ["a", "a", "a", "a", "b", "a", "a", "b", "b", "b"]
    classes, y = np.unique(labels, return_inverse=True)
    B, vocab = tk.token_matrix(texts, binary=False)
    st = tk.competency(B, vocab, y.astype(np.int64), classes, min_count=5)
    i = row(st, "x", "a")
    # x: 6 occurrences, 5 of them in texts labelled a: p = 5/6; z = (5/6 - 0.6) / sqrt(0.24 / 6) = 0.23333 / 0.2
    assert st.count[i] == 6 and st.label_count[i] == 5
    assert st.z[i] == pytest.approx(1.166667, abs=1e-6)
    # with the paper's null too: (5/6 - 0.5) / sqrt(0.25 / 6) = 0.33333 / 0.204124 = 1.632993
    st_u = tk.competency(B, vocab, y.astype(np.int64), classes, min_count=5, p0="uniform")
    assert st_u.z[row(st_u, "x", "a")] == pytest.approx(1.632993, abs=1e-6)
    # the default matrix is binary: x counted once in "x x y"
    assert stats_for(texts, labels, min_count=5).count[i] == 5

def test_bonferroni_counts_every_token_label_test():
    # 100 texts, 50/50; token t in 20 texts, 17 labelled a: z = 0.35 / sqrt(0.25 / 20) = 3.1305, p = 0.000872
    labels = ["a"] * 50 + ["b"] * 50
    texts = ["t" if i < 17 or 50 <= i < 53 else "u" for i in range(100)]
    st = stats_for(texts, labels, min_count=20, alpha=0.01)
    i = row(st, "t", "a")
    assert st.z[i] == pytest.approx(3.130495, abs=1e-5)
    assert st.p_value[i] == pytest.approx(0.000872, abs=2e-6)
    # tested: t and u (80 texts) x 2 labels = 4 tests -> threshold 0.0025: significant
    assert st.n_tests == 4 and st.significant[i]
    assert st.z_critical == pytest.approx(tk.critical_z(0.01, 4))
    # 11 more tokens seen >= 20 times (every text carries them): 13 tokens x 2 labels = 26 tests -> 0.000385: not
    extra = " ".join(f"w{k}" for k in range(11))
    st2 = stats_for([f"{t} {extra}" for t in texts], labels, min_count=20, alpha=0.01)
    assert st2.n_tests == 26
    assert not st2.significant[row(st2, "t", "a")]
    # the same with a looser family-wise alpha is significant again (0.000872 < 0.05 / 26)
    assert stats_for([f"{t} {extra}" for t in texts], labels, min_count=20, alpha=0.05).significant[
        row(st2, "t", "a")]


def test_bonferroni_curve_is_the_significance_boundary():
    z = tk.critical_z(0.01, 10)
    assert z == pytest.approx(3.09023, abs=1e-4)  # upper 0.001 point of the standard normal
    n = np.array([20.0, 400.0])
    p = tk.bonferroni_curve(0.5, z, n)
    assert np.allclose(tk.z_statistic(p, 0.5, n), z)
    assert p[0] == pytest.approx(0.5 + z * math.sqrt(0.25 / 20))


def test_random_subsets_average_and_are_seeded():
    rng = np.random.default_rng(0)
    labels = rng.choice(["a", "b", "c"], size=600)
    texts = [("cue " if lab == "a" and rng.random() < 0.5 else "") + " ".join(rng.choice(list("pqrstuvw"), 3))
             for lab in labels]
    classes, y = np.unique(labels, return_inverse=True)
    B, vocab = tk.token_matrix(texts)
    avg, per_seed = tk.random_competency(B, vocab, y.astype(np.int64), classes, 300, 7, 3, min_count=10)
    again, per_seed2 = tk.random_competency(B, vocab, y.astype(np.int64), classes, 300, 7, 3, min_count=10)
    assert per_seed == per_seed2 and np.array_equal(avg.z, again.z)
    assert len(per_seed) == 3
    i = row(avg, "cue", "a")
    assert avg.significant[i] and avg.p_label[i] == pytest.approx(1.0)
    assert avg.n_rows == 300
    with pytest.raises(ParameterError):
        tk.random_competency(B, vocab, y.astype(np.int64), classes, 601, 0, 1)


def test_bad_parameters():
    with pytest.raises(ParameterError):
        stats_for(["a b"], ["x"], alpha=0)
    with pytest.raises(ParameterError):
        stats_for(["a b"], ["x"], min_count=0)
