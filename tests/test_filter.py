"""Tests of Algorithm 1 (aflite.core.filter): semantics, invariants, determinism, validation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from aflite.core.filter import AFLite
from aflite.core.phase import FilterState, predictability, select_slice
from aflite.errors import InputError, ParameterError
from aflite.splits import draw_partitions


def planted(n: int = 600, d: int = 6, bias_frac: float = 0.4, seed: int = 0, labels=("a", "b", "c")):
    """Noise features plus a label-revealing bias feature on a random subset of rows."""
    rng = np.random.default_rng(seed)
    y_idx = rng.integers(0, len(labels), n)
    X = rng.standard_normal((n, d))
    biased = rng.random(n) < bias_frac
    X[biased, 0] += 4.0 * (y_idx[biased] - 1)
    X[biased, 1] += 4.0 * (y_idx[biased] == 0)
    y = np.asarray(labels)[y_idx]
    return X.astype(np.float32), y, biased


# --------------------------------------------------------------------------- partitions
def test_partitions_have_exact_size_and_are_seeded():
    a = draw_partitions(100, 7, 30, np.random.default_rng([3, 0]))
    b = draw_partitions(100, 7, 30, np.random.default_rng([3, 0]))
    assert a.shape == (100, 7)
    assert (a.sum(0) == 30).all()
    assert np.array_equal(a, b)
    assert not np.array_equal(a[:, 0], a[:, 1])


def test_partitions_never_split_a_group():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(40), 3)  # 120 rows, groups of three (an SNLI premise and its hypotheses)
    mask = draw_partitions(120, 16, 45, rng, groups)
    for b in range(16):
        per_group = mask[:, b].reshape(40, 3)
        assert (per_group.all(1) | ~per_group.any(1)).all()
        assert abs(int(mask[:, b].sum()) - 45) <= 3
        assert 0 < mask[:, b].sum() < 120


def test_partitions_reject_t_not_smaller_than_s():
    with pytest.raises(ParameterError, match="train_size"):
        draw_partitions(50, 4, 50, np.random.default_rng(0))


# --------------------------------------------------------------------------- selection
def test_selection_respects_threshold_and_k():
    p = np.array([0.9, 0.2, 0.75, np.nan, 1.0, 0.74])
    picked, n_eligible = select_slice(p, 10, 0.75, np.random.default_rng(0))
    assert n_eligible == 3
    assert sorted(picked.tolist()) == [0, 2, 4]
    picked, _ = select_slice(p, 2, 0.75, np.random.default_rng(0))
    assert sorted(picked.tolist()) == [0, 4]  # the two highest


def test_ties_are_broken_randomly_not_by_row_order():
    p = np.ones(1000)
    firsts = [select_slice(p, 100, 0.5, np.random.default_rng(s))[0] for s in range(3)]
    for picked in firsts:
        assert len(picked) == 100
        assert picked.max() > 500  # a stable sort would take rows 0..99
    assert not np.array_equal(np.sort(firsts[0]), np.sort(firsts[1]))


def test_gumbel_samples_proportionally_among_eligible():
    p = np.concatenate([np.full(500, 1.0), np.full(500, 0.8), np.full(100, 0.1)])
    counts = np.zeros(len(p))
    for s in range(200):
        picked, n_eligible = select_slice(p, 50, 0.5, np.random.default_rng(s), "gumbel")
        assert n_eligible == 1000
        counts[picked] += 1
    assert counts[1000:].sum() == 0  # never below tau
    ratio = counts[:500].sum() / counts[500:1000].sum()
    assert 1.1 < ratio < 1.45  # ∝ p̃: 1.0 / 0.8 = 1.25 (sampling without replacement flattens it slightly)


# --------------------------------------------------------------------------- the filter
def test_planted_bias_is_removed_preferentially():
    X, y, biased = planted(900, bias_frac=0.4)
    af = AFLite(target_size=300, n_partitions=16, train_size=200, slice_size=60, threshold=0.75, random_state=0)
    af.fit(X, y)
    kept = af.keep_mask_
    assert kept.sum() < len(y)
    assert biased[kept].mean() < 0.5 * biased.mean()
    removed = ~kept
    assert biased[removed].mean() > 1.5 * biased.mean()  # removed sets are mostly the biased rows
    assert af.stop_reason_


def test_unscored_instances_are_nan_and_never_removed():
    X, y, _ = planted(200)
    ens_phase = predictability(X, y, n_partitions=1, train_size=150, random_state=0)
    p = ens_phase.predictability
    assert np.isnan(p).sum() == 150  # the 150 training rows of the single partition were never held out
    assert set(np.unique(ens_phase.n_heldout[~np.isnan(p)])) == {1}
    af = AFLite(target_size=160, n_partitions=1, train_size=150, slice_size=10, threshold=0.0, random_state=0)
    af.fit(X, y)
    first = af.history_[0]
    assert first.n_unscored == 150
    removed0 = af.removed_at_ == 0
    # everything removed in phase 0 had a score
    assert removed0.sum() == first.n_removed


def test_single_phase_scores_are_fractions_of_heldout_predictions():
    X, y, biased = planted(400)
    ph = predictability(X, y, n_partitions=12, train_size=100, random_state=1)
    ok = ~np.isnan(ph.predictability)
    assert np.allclose(ph.predictability[ok], ph.n_correct[ok] / ph.n_heldout[ok])
    assert (ph.n_heldout <= 12).all()
    assert np.nanmean(ph.predictability[biased]) > np.nanmean(ph.predictability[~biased]) + 0.2


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(60, 160),
    n_classes=st.integers(2, 4),
    m=st.integers(2, 6),
    t_frac=st.floats(0.1, 0.4),
    k=st.integers(1, 25),
    tau=st.floats(0.0, 1.0),
    n_frac=st.floats(0.45, 0.9),
    strategy=st.sampled_from(["slicing", "gumbel", "greedy"]),
    seed=st.integers(0, 2**16),
)
@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_filter_invariants(n, n_classes, m, t_frac, k, tau, n_frac, strategy, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, n)
    y[:n_classes] = np.arange(n_classes)  # every class present
    X = rng.standard_normal((n, 3)).astype(np.float32)
    X[:, 0] += (y == 0) * rng.random(n) * 3
    t = max(2, int(t_frac * n))
    target = max(t + 1, int(n_frac * n))
    kw = dict(target_size=target, n_partitions=m, train_size=t, slice_size=k, threshold=tau,
              strategy=strategy, random_state=seed)
    af = AFLite(**kw).fit(X, y)
    k_eff = 1 if strategy == "greedy" else k
    kept = af.keep_mask_
    assert kept.sum() >= target  # never below n
    assert all(r.n_removed <= k_eff for r in af.history_)  # never more than k per phase
    removed = ~kept
    assert (af.predictability_[removed] >= tau).all()  # nothing with p̃ < τ removed
    # keep mask consistent with the history
    assert sum(r.n_removed for r in af.history_) == removed.sum()
    for r in af.history_:
        assert (af.removed_at_ == r.iteration).sum() == r.n_removed
        assert r.size_after == r.size_before - r.n_removed
    assert (af.removed_at_[kept] == -1).all()
    assert len(af.history_) == af.n_iterations_
    # deterministic per seed
    again = AFLite(**kw).fit(X, y)
    assert np.array_equal(again.keep_mask_, kept)
    assert np.array_equal(again.removed_at_, af.removed_at_)


def test_same_seed_same_result_whatever_the_threads():
    X, y, _ = planted(700, d=16)
    kw = dict(target_size=200, n_partitions=8, train_size=150, slice_size=50, random_state=5)
    with threadpool_limits(1):
        one = AFLite(**kw).fit(X, y)
    with threadpool_limits(2):
        two = AFLite(**kw).fit(X, y)
    assert np.array_equal(one.keep_mask_, two.keep_mask_)
    assert np.array_equal(one.removed_at_, two.removed_at_)
    other = AFLite(**{**kw, "random_state": 6}).fit(X, y)
    assert not np.array_equal(one.removed_at_, other.removed_at_)


def test_labels_of_any_type_and_imbalanced_classes():
    X, y, _ = planted(500, labels=("entailment", "neutral", "contradiction"))
    rng = np.random.default_rng(0)
    keep = (y != "neutral") | (rng.random(len(y)) < 0.2)  # make 'neutral' rare
    X, y = X[keep], y[keep]
    af = AFLite(target_size=0.5, n_partitions=8, train_size=0.2, slice_size=0.05, random_state=0).fit(X, y)
    assert set(af.classes_.tolist()) == {"entailment", "neutral", "contradiction"}
    ints = AFLite(target_size=0.5, n_partitions=8, train_size=0.2, slice_size=0.05, random_state=0).fit(
        X, np.unique(y, return_inverse=True)[1] + 10
    )
    assert np.array_equal(af.keep_mask_, ints.keep_mask_)  # labels are only names


def test_resume_gives_exactly_the_uninterrupted_result():
    X, y, _ = planted(800, d=8)
    kw = dict(target_size=150, n_partitions=8, train_size=120, slice_size=40, random_state=2)
    full = AFLite(**kw).fit(X, y)
    assert full.n_iterations_ >= 3
    saved: list[FilterState] = []

    class Stop(Exception):
        pass

    def kill_after_two(record, state):
        if record.iteration == 1:
            saved.append(FilterState(state.iteration, state.keep.copy(), state.predictability.copy(),
                                     state.removed_at.copy(), list(state.history), state.stop_reason,
                                     {k: v.copy() for k, v in state.ensemble_state.items()}))
            raise Stop

    with pytest.raises(Stop):
        AFLite(**kw).fit(X, y, callback=kill_after_two)
    before = (saved[0].iteration, saved[0].keep.copy(), len(saved[0].history))
    resumed = AFLite(**kw).fit(X, y, resume=saved[0])
    # the caller's state is left as it was: it can be resumed again, with the same result
    assert (saved[0].iteration, len(saved[0].history)) == (before[0], before[2])
    assert np.array_equal(saved[0].keep, before[1]) and saved[0].stop_reason is None
    again = AFLite(**kw).fit(X, y, resume=saved[0])
    assert np.array_equal(again.keep_mask_, full.keep_mask_)
    assert np.array_equal(resumed.keep_mask_, full.keep_mask_)
    assert np.array_equal(resumed.removed_at_, full.removed_at_)
    assert np.allclose(resumed.predictability_, full.predictability_, equal_nan=True)


def test_sizes_accept_fractions_and_counts():
    X, y, _ = planted(400)
    p = AFLite(target_size=0.5, train_size=40, slice_size=0.05).resolved_params(400)
    assert (p.target_size, p.train_size, p.slice_size) == (200, 40, 20)
    d = AFLite().resolved_params(550_152)
    assert (d.n_partitions, d.train_size, d.slice_size, d.target_size) == (64, 50_000, 10_000, 92_000)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(threshold=1.5), "threshold"),
        (dict(threshold=-0.1), "threshold"),
        (dict(slice_size=0), "slice_size"),
        (dict(target_size=400), "target_size"),
        (dict(target_size=500), "target_size"),
        (dict(train_size=250, target_size=200), "train_size"),
        (dict(n_partitions=0), "n_partitions"),
        (dict(strategy="best"), "strategy"),
        (dict(train_size=1.5), "train_size"),
    ],
)
def test_bad_parameters_are_refused(kw, match):
    X, y, _ = planted(400)
    base = dict(target_size=200, train_size=50, slice_size=10, n_partitions=4)
    with pytest.raises(ParameterError, match=match):
        AFLite(**{**base, **kw}).fit(X, y)


def test_bad_inputs_are_refused():
    X, y, _ = planted(100)
    af = AFLite(target_size=50, train_size=20, slice_size=5, n_partitions=2)
    with pytest.raises(InputError, match="100 rows but there are 99 labels"):
        af.fit(X, y[:99])
    Xn = X.copy()
    Xn[7, 2] = np.nan
    with pytest.raises(InputError, match="row 7, column 2"):
        af.fit(Xn, y)
    Xi = X.copy()
    Xi[3, 0] = np.inf
    with pytest.raises(InputError, match="inf"):
        af.fit(Xi, y)
    with pytest.raises(InputError, match="two classes"):
        af.fit(X, np.full(100, "x"))
    with pytest.raises(InputError, match="2-D"):
        af.fit(X[:, 0], y)


def test_raw_text_is_refused_with_the_way_to_features():
    """Issue #59, 6: sentences given to fit() were refused as "a 2-D matrix, got shape (40,)" (a list) or as
    "dtype object" (a DataFrame of texts), with no word of how to make features."""
    texts = [f"a man sleeps {i}" for i in range(40)]
    y = np.array([0, 1] * 20)
    for raw in (texts, np.array(texts), np.array([texts, texts], dtype=object).T):
        with pytest.raises(InputError, match=r"got text: .*aflite\.featurize\(texts_a, texts_b\)\.X.*aflite\.run"):
            AFLite().fit(raw, y)


def test_incremental_greedy_keeps_partitions_uniform_size_and_resumes_exactly():
    X, y, biased = planted(300, d=4)
    kw = dict(target_size=150, n_partitions=16, train_size=60, slice_size=1, strategy="greedy", random_state=4)
    full = AFLite(**kw).fit(X, y)
    rows = np.flatnonzero(full.keep_mask_)
    mask = full.state_.strategy_state["greedy_mask"]
    assert (mask[rows].sum(0) == 60).all()  # every partition still trains on exactly t rows of S
    assert all(r.n_removed == 1 for r in full.history_[:-1])
    assert biased[~full.keep_mask_].mean() > biased.mean()
    saved = []

    def stop_at_5(record, state):
        if record.iteration == 5:
            saved.append(FilterState(state.iteration, state.keep.copy(), state.predictability.copy(),
                                     state.removed_at.copy(), list(state.history), state.stop_reason,
                                     {k: v.copy() for k, v in state.ensemble_state.items()},
                                     {k: v.copy() for k, v in state.strategy_state.items()}))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        AFLite(**kw).fit(X, y, callback=stop_at_5)
    resumed = AFLite(**kw).fit(X, y, resume=saved[0])
    assert np.array_equal(resumed.removed_at_, full.removed_at_)


def test_predictability_takes_the_same_random_state_forms_and_checks_its_arguments():
    X, y, _ = planted(200)
    kw = dict(n_partitions=4, train_size=60)
    a = predictability(X, y, **kw, random_state=np.random.default_rng(3))
    b = predictability(X, y, **kw, random_state=np.random.default_rng(3))
    assert np.array_equal(a.predictability, b.predictability, equal_nan=True)
    assert predictability(X, y, **kw, random_state=None).predictability.shape == (200,)
    with pytest.raises(ParameterError, match="n_partitions"):
        predictability(X, y, n_partitions=0, train_size=60)
    with pytest.raises(ParameterError, match="model"):
        predictability(X, y, **kw, model="svm")


def test_lexsort_top_is_the_head_of_the_full_lexsort() -> None:
    """The partition-based top-k of select_slice gives the positions, in order, that sorting everything gave: keys
    with many ties (p̃ is a ratio of small counts), repeated tie values, -inf keys (Gumbel of p̃ = 0), any k."""
    from aflite.core.phase import lexsort_top

    rng = np.random.default_rng(0)
    for trial in range(300):
        n = int(rng.integers(1, 400))
        key = rng.integers(0, int(rng.integers(1, 6)), n) / 4.0
        if trial % 5 == 0:
            key[rng.random(n) < 0.2] = -np.inf
        tie = rng.random(n)
        if trial % 3 == 0:  # duplicated tie values: the position decides, as in lexsort
            tie = np.round(tie, 1)
        for take in {1, int(rng.integers(1, n + 1)), n}:
            assert np.array_equal(lexsort_top(key, tie, take), np.lexsort((tie, -key))[:take]), (trial, take)
