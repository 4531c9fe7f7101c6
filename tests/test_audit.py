"""Leakage-audit metrics: hand-computed small cases, PECO properties, TRA / NBA / NBR on tiny models."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiny_models import make_tiny_model

from aflite import audit as A
from aflite.check.summary import COMMON
from aflite.errors import InputError, ParameterError

# ------------------------------------------------------------------------------------------ accuracy metrics


def test_majority_accuracy_hand_case() -> None:
    assert A.majority_accuracy(["a", "b", "a", "c", "a"]) == pytest.approx(0.6)


def test_nba_nbr_hand_case() -> None:
    y = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    pb = np.array([0, 1, 0, 0, 2, 2, 1, 1])  # biased model
    pn = np.array([0, 1, 2, 1, 2, 2, 1, 0])  # normal model
    # agreements at 0, 1, 4, 5, 6 -> 5/8; correct among them: 0, 1, 5 -> 3/5
    nba, nbr = A.nba_nbr(pb, pn, y)
    assert nba == pytest.approx(5 / 8)
    assert nbr == pytest.approx(3 / 5)


def test_nbr_is_nan_without_agreement() -> None:
    nba, nbr = A.nba_nbr([0, 0], [1, 1], [0, 1])
    assert nba == 0.0 and math.isnan(nbr)


def test_leakage_metrics_hand_case() -> None:
    y = np.array(["e", "e", "n", "c", "c", "c", "n", "e", "e", "c"])
    pb = np.array(["e", "n", "n", "c", "e", "c", "c", "e", "e", "n"])  # 6/10 right
    pn = np.array(["e", "e", "n", "c", "c", "e", "n", "e", "n", "c"])  # 8/10 right
    m = A.LeakageMetrics.compute(y, pb, pn)
    assert m.biased_accuracy == pytest.approx(0.6)
    assert m.normal_accuracy == pytest.approx(0.8)
    assert m.majority_accuracy == pytest.approx(0.4)
    assert m.delta_maj == pytest.approx(0.2)
    assert m.score == m.delta_maj
    assert m.pct_rr == pytest.approx(0.75)
    # agree at rows 0, 2, 3, 7 -> NBA 0.4, all four correct -> NBR 1.0
    assert m.nba == pytest.approx(0.4)
    assert m.nbr == pytest.approx(1.0)


def test_metrics_reject_mismatched_lengths() -> None:
    with pytest.raises(InputError):
        A.LeakageMetrics.compute([0, 1], [0], [0, 1])


# ------------------------------------------------------------------------------------------------- PECO


def test_cluster_divergences_hand_case() -> None:
    # global: 2/4 a, 2/4 b; cluster 0 = {a, a} -> s = ((.5-1)^2 + (.5-0)^2)/2 = .25; cluster 1 = {b, b} -> .25
    div, dists, glob, sizes, classes = A.cluster_divergences([0, 0, 1, 1], ["a", "a", "b", "b"])
    np.testing.assert_allclose(div, [0.25, 0.25])
    np.testing.assert_allclose(glob, [0.5, 0.5])
    assert sizes.tolist() == [2, 2] and classes.tolist() == ["a", "b"]
    # eq. 12 from 0: 0.5; with the printed lower limit min(s): 0 (all clusters equally pure)
    assert A.peco_score(div) == pytest.approx(0.5)
    assert A.peco_score(div, "min") == pytest.approx(0.0)


def test_peco_score_is_the_area_under_the_count_curve() -> None:
    s = np.array([0.01, 0.05, 0.02, 0.0])
    t, c = A.peco_curve(s, n_points=20001)
    area = float(np.sum(c[:-1] * np.diff(t)))
    assert area == pytest.approx(A.peco_score(s), rel=1e-3)
    assert A.peco_score(s, "min") == pytest.approx(0.08)


@settings(max_examples=40, deadline=None)
@given(
    n_clusters=st.integers(1, 12),
    per_class=st.lists(st.integers(1, 5), min_size=2, max_size=6),
    seed=st.integers(0, 10_000),
)
def test_peco_zero_when_labels_independent_of_clusters(n_clusters: int, per_class: list[int], seed: int) -> None:
    # every cluster holds the same label multiset -> P(Y | cluster) = P(Y) exactly
    block = np.repeat(np.arange(len(per_class)), per_class)
    labels = np.tile(block, n_clusters)
    clusters = np.repeat(np.arange(n_clusters), len(block))
    perm = np.random.default_rng(seed).permutation(len(labels))
    pr = A.peco_from_clusters(clusters[perm], labels[perm])
    assert pr.score == pytest.approx(0.0, abs=1e-12)
    assert pr.score_min == pytest.approx(0.0, abs=1e-12)
    assert pr.score_fraction20 == pytest.approx(0.0, abs=1e-12)
    assert pr.biased_clusters().size == 0


@settings(max_examples=40, deadline=None)
@given(n_classes=st.integers(2, 7), per_label=st.integers(1, 6), size=st.integers(1, 20))
def test_peco_large_when_clusters_are_label_pure(n_classes: int, per_label: int, size: int) -> None:
    k = n_classes * per_label
    clusters = np.repeat(np.arange(k), size)
    labels = clusters % n_classes
    pr = A.peco_from_clusters(clusters, labels)
    expected_s = (n_classes - 1) / n_classes**2  # mean over classes of squared differences for a pure cluster
    np.testing.assert_allclose(pr.divergences, expected_s)
    assert pr.score == pytest.approx(k * expected_s)
    # on the Table-4 scale every cluster is above every threshold below (C-1)/C
    assert pr.score_fraction20 >= 0.5
    assert pr.biased_clusters().size == k


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_classes=st.integers(2, 5))
def test_peco_pure_clusters_beat_random_labels(seed: int, n_classes: int) -> None:
    rng = np.random.default_rng(seed)
    k = 4 * n_classes
    clusters = rng.integers(0, k, size=2000)
    pure = A.peco_from_clusters(clusters, clusters % n_classes)
    noisy = A.peco_from_clusters(clusters, rng.integers(0, n_classes, size=2000))
    assert pure.score > 5 * noisy.score


def test_peco_end_to_end_on_blobs() -> None:
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(8, 40)) * 10
    cid = np.repeat(np.arange(8), 60)
    X = centers[cid] + rng.normal(size=(480, 40))
    labels = np.array(["x", "y", "z", "w"])[cid % 4]
    pure = A.peco(X, labels, n_components=5, n_clusters=8)
    shuffled = A.peco(X, rng.permutation(labels), n_components=5, n_clusters=8)
    assert pure.n_components == 5 and pure.n_clusters == 8
    assert pure.score == pytest.approx(8 * 3 / 16)
    assert shuffled.score < 0.1 * pure.score
    assert len(pure.classes) == 4  # any number of classes


def test_peco_shrinks_to_tiny_inputs_and_rejects_bad_ones() -> None:
    pr = A.peco(np.eye(6), list("aabbab"), n_components=30, n_clusters=50)
    assert pr.n_clusters <= 6
    with pytest.raises(InputError):
        A.peco(np.full((3, 2), np.nan), [0, 1, 0])
    with pytest.raises(ParameterError):
        A.peco(np.eye(3), [0, 1, 0], n_clusters=0)


# ---------------------------------------------------------------------------------------- token artifacts


def test_token_artifacts_hand_case() -> None:
    texts = ["A man is sleeping", "Nobody is sleeping", "A man is outside", "The man isn't outside"]
    labels = ["c", "c", "e", "c"]
    arts = A.token_artifacts(texts, labels, top_k=3, min_count=2, smoothing=0.0)
    top_c = {r["token"]: r for r in arts["c"]}
    # 'sleeping': in 2 sentences, both 'c'; base rate of c = 3/4 -> PMI = log2(1 / .75)
    assert top_c["sleeping"]["count"] == 2 and top_c["sleeping"]["total"] == 2
    assert top_c["sleeping"]["pmi"] == pytest.approx(math.log2(1 / 0.75))
    # z = (2 - 2 * .75) / sqrt(2 * .75 * .25)
    assert top_c["sleeping"]["z"] == pytest.approx(0.5 / math.sqrt(0.375))
    assert "isn't" in A.tokenize("The man isn't outside")
    with pytest.raises(ParameterError):
        A.token_artifacts(texts, labels, rank_by="bogus")


# ----------------------------------------------------------------------------------------- linear models


def test_cv_predict_learns_and_keeps_groups_together() -> None:
    rng = np.random.default_rng(0)
    y = np.repeat(["a", "b", "c"], 40)
    X = rng.normal(size=(120, 5)) + np.eye(5)[np.repeat([0, 1, 2], 40)] * 4
    groups = np.arange(120) // 3
    pred = A.cv_predict(X, y, groups, n_folds=4)
    classes = np.unique(y)
    assert np.mean(classes[pred] == y) > 0.9
    noise = A.cv_predict(rng.normal(size=(120, 5)), y, groups, n_folds=4)
    assert np.mean(classes[noise] == y) < 0.6


# ---------------------------------------------------------------------------------------- TRA, tiny models


def test_pad_relevance_and_tra_score() -> None:
    assert A.pad_relevance([0.5, 0.5], 4, "hypothesis").tolist() == [0, 0, 0.5, 0.5]
    assert A.pad_relevance([0.5, 0.5], 4, "premise").tolist() == [0.5, 0.5, 0, 0]
    assert A.tra_score([0, 0, 0.5, 0.5], [0.5, 0.5], "hypothesis") == pytest.approx(1.0)
    assert A.tra_score([0.5, 0.5, 0, 0], [0.5, 0.5], "hypothesis") == pytest.approx(0.0)
    # normal [.2 .2 .3 .3] vs padded [0 0 .5 .5]: .3 / (sqrt(.26) * sqrt(.5))
    assert A.tra_score([0.2, 0.2, 0.3, 0.3], [0.5, 0.5], "hypothesis") == pytest.approx(0.3 / math.sqrt(0.13))
    with pytest.raises(InputError):
        A.pad_relevance([1, 2, 3], 2, "premise")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "bert")


PREMISES = ["A man plays a guitar on stage.", "Two dogs run in a field.", "A woman reads a book.",
            "Children are swimming in a pool."] * 6
HYPS = ["A man is performing music.", "The cats are sleeping.", "A person is outdoors.",
        "Nobody is in the water."] * 6
LABELS = np.array(["entailment", "contradiction", "neutral", "contradiction"] * 6)


def test_finetune_predict_relevance_and_tra_on_a_tiny_model(tiny_model: Path, tmp_path: Path) -> None:
    cache = tmp_path / "ft.pt"
    normal = A.finetune(PREMISES, HYPS, LABELS, model_path=tiny_model, steps=3, batch_size=4, device="cpu",
                        cache_file=cache, show_progress=False)
    assert normal.steps == 3 and len(normal.losses) == 3 and cache.is_file()
    again = A.finetune(PREMISES, HYPS, LABELS, model_path=tiny_model, steps=3, batch_size=4, device="cpu",
                       cache_file=cache, show_progress=False)
    assert again.losses == normal.losses  # loaded from the cache, not retrained
    biased = A.finetune(HYPS, None, LABELS, model_path=tiny_model, steps=3, batch_size=4, device="cpu",
                        show_progress=False)
    pn = A.predict(normal, PREMISES, HYPS)
    pb = A.predict(biased, HYPS)
    assert set(pn) <= set(LABELS) and len(pb) == len(HYPS)
    nba, nbr = A.nba_nbr(pb, pn, LABELS)
    assert 0.0 <= nba <= 1.0 and (math.isnan(nbr) or 0.0 <= nbr <= 1.0)

    m_pair = A.token_relevance(normal, PREMISES[0], HYPS[0])
    m_hyp = A.token_relevance(biased, HYPS[0])
    n_pair = len(normal.tokenizer(PREMISES[0], HYPS[0])["input_ids"])
    n_hyp = len(biased.tokenizer(HYPS[0])["input_ids"])
    assert len(m_pair) == n_pair and len(m_hyp) == n_hyp
    assert m_pair.sum() == pytest.approx(1.0) and np.all(m_pair >= 0)
    res = A.tra(normal, biased, PREMISES, HYPS, "hypothesis", rows=[0, 1, 2])
    assert res.per_sample.shape == (3,)
    assert np.all((res.per_sample > 0) & (res.per_sample <= 1.0 + 1e-9))
    assert res.score == pytest.approx(res.per_sample.mean())
    # the same model on both sides of a premise-only comparison: the premise block of the pair vector vs itself
    same = A.tra(biased, biased, HYPS, HYPS, "premise", rows=[0])
    assert 0 < same.score <= 1

    E = A.embed_finetuned(normal, HYPS)
    assert E.shape == (len(HYPS), 32) and np.all(np.isfinite(E))


# ------------------------------------------------------------------------------------- chance and PECO null


def test_leakage_metrics_put_chance_beside_both_accuracies() -> None:
    y = np.array(["a"] * 6 + ["b"] * 4)
    pb = np.array(["a"] * 10)  # the majority guess: exactly chance
    pn = y.copy()
    m = A.LeakageMetrics.compute(y, pb, pn)
    assert m.majority_accuracy == pytest.approx(0.6)
    assert m.delta_maj == pytest.approx(0.0)
    assert m.normal_delta_maj == pytest.approx(0.4)


def _blobs(n_per: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(12, 20)) * 8
    cid = np.repeat(np.arange(12), n_per)
    return centers[cid] + rng.normal(size=(len(cid), 20)), cid


def test_peco_null_is_near_the_raw_value_for_random_labels() -> None:
    X, _ = _blobs(40, 0)
    labels = np.random.default_rng(1).choice(["e", "n", "c"], size=len(X))
    pr = A.peco(X, labels, n_components=10, n_clusters=12)
    null = A.peco_null(pr, labels, n_shuffles=30, seed=0)
    assert len(null.null) == 30 and null.observed == pr.score
    assert null.null.min() <= pr.score <= null.null.max()
    assert abs(null.z) < 2.5 and null.p_value > 0.05
    assert abs(null.excess) < 0.5 * null.mean  # a raw value this size is all noise


def test_peco_null_is_exceeded_by_real_leakage() -> None:
    X, cid = _blobs(40, 0)
    rng = np.random.default_rng(2)
    # each blob leans to one label (70 %), the rest at random: real but imperfect leakage
    lean = np.array(["e", "n", "c"])[cid % 3]
    labels = np.where(rng.random(len(X)) < 0.7, lean, rng.choice(["e", "n", "c"], size=len(X)))
    pr = A.peco(X, labels, n_components=10, n_clusters=12)
    null = A.peco_null(pr, labels, n_shuffles=30, seed=0)
    assert pr.score > null.null.max() and pr.score > null.p95
    assert null.p_value == pytest.approx(1 / 31)
    assert null.excess > 5 * null.std > 0
    d = null.to_dict()
    assert d["excess"] == pytest.approx(pr.score - d["null_mean"]) and d["shuffles"] == 30


def test_peco_null_is_seeded() -> None:
    X, _ = _blobs(20, 3)
    labels = np.random.default_rng(4).choice(["x", "y"], size=len(X))
    pr = A.peco(X, labels, n_components=5, n_clusters=6)
    a, b = A.peco_null(pr, labels, 10, seed=5), A.peco_null(pr, labels, 10, seed=5)
    np.testing.assert_array_equal(a.null, b.null)
    assert not np.array_equal(a.null, A.peco_null(pr, labels, 10, seed=6).null)
    with pytest.raises(ParameterError):
        A.peco_null(pr, labels, 1)


def test_peco_excess_is_comparable_across_sizes_where_the_raw_score_is_not() -> None:
    """Same population (50 clusters, each with its own label mix), drawn at 1,500 and at 24,000 rows."""
    rng = np.random.default_rng(0)
    k, C = 50, 3
    mix = rng.dirichlet(np.full(C, 8.0), size=k)  # moderate, real per-cluster skew

    def draw(n: int, seed: int) -> tuple[float, float]:
        r = np.random.default_rng(seed)
        cid = r.integers(0, k, size=n)
        lab = (r.random(n)[:, None] > np.cumsum(mix[cid], axis=1)).sum(axis=1)
        pr = A.peco_from_clusters(cid, lab, n_clusters=k)
        return pr.score, A.peco_null(pr, lab, 30, seed).excess

    raw_small, ex_small = np.mean([draw(1500, s) for s in range(4)], axis=0)
    raw_big, ex_big = np.mean([draw(24000, s) for s in range(4)], axis=0)
    assert raw_small > 1.5 * raw_big  # the raw score falls with size at unchanged leakage
    assert ex_small == pytest.approx(ex_big, rel=0.25)  # the excess does not


# ------------------------------------------------------------------------------- the audit: config and rows


def _pairs(n: int = 180) -> A.Any:
    from aflite.data import Dataset, SourceInfo

    labels = np.array(["entailment", "neutral", "contradiction"])[np.arange(n) % 3]
    cue = {"entailment": "outdoors", "neutral": "tall friend", "contradiction": "nobody sleeping"}
    a = [f"A person number {i % 60} walks." for i in range(n)]
    b = [f"{cue[lab]} {i % 7}" if i % 4 else f"someone {i % 5}" for i, lab in enumerate(labels)]
    src = SourceInfo(Path("mem.tsv"), "tsv", "generic", False, {}, np.arange(n))
    return Dataset(a, b, labels, np.array([f"r{i}" for i in range(n)]), np.arange(n) % 60, src)


SMALL = dict(featurizer="ngram", n_clusters=6, n_components=5, tsne_sample=0, show_progress=False, tra=False,
             peco_shuffles=5)


def test_audit_takes_its_views_and_sizes_from_config(tmp_path: Path) -> None:
    cfg = A.AuditConfig(views=("hypothesis",), n_folds=3, cache_dir=str(tmp_path), **SMALL)  # type: ignore[arg-type]
    res = A.audit(_pairs(), config=cfg)
    assert list(res.views) == ["hypothesis"]  # config.views is not replaced by a default
    assert res.config.n_folds == 3 and res.views["hypothesis"].peco.n_clusters == 6
    assert res.views["hypothesis"].peco_null is not None and len(res.views["hypothesis"].peco_null.null) == 5
    assert A.audit(_pairs(), ["hypothesis"], cfg).config.views == ("hypothesis",)  # the same views: fine
    with pytest.raises(ParameterError, match="disagrees with config.views"):
        A.audit(_pairs(), ["premise"], cfg)
    assert list(A.audit(_pairs(), ["premise"], cache_dir=str(tmp_path), **SMALL).views) == ["premise"]


def test_audit_row_scores_match_the_dataset_level_figures(tmp_path: Path) -> None:
    ds = _pairs()
    res = A.audit(ds, cache_dir=str(tmp_path), **SMALL)
    for view in ("hypothesis", "premise"):
        rows = res.row_scores(view)
        assert all(len(col) == len(ds) for col in rows.values())
        assert rows["id"].tolist() == list(ds.ids)
        m = res.views[view].metrics
        assert rows["biased_correct"].mean() == pytest.approx(m.biased_accuracy)
        assert rows["normal_correct"].mean() == pytest.approx(m.normal_accuracy)
        pr = res.views[view].peco
        np.testing.assert_array_equal(rows["cluster"], pr.cluster_ids)
        assert int(rows["biased_region"].sum()) == int(np.isin(pr.cluster_ids, pr.biased_clusters()).sum())
        # Σ s_i over clusters, recovered from the per-row divergence of each cluster's first row
        first = np.unique(rows["cluster"], return_index=True)[1]
        assert rows["cluster_divergence"][first].sum() == pytest.approx(pr.score)
    d = res.views["hypothesis"].to_dict()
    assert d["peco_excess"] == pytest.approx(d["peco"] - d["peco_null_mean"])


def test_leakage_metrics_dataclass_matches_the_dict_and_the_row_scores(tmp_path: Path) -> None:
    ds = _pairs()
    res = A.audit(ds, cache_dir=str(tmp_path), **SMALL)
    for view in ("hypothesis", "premise"):
        va = res.views[view]
        m = va.metrics
        assert isinstance(m, A.LeakageMetrics)
        assert va.biased_pred is not None and va.normal_pred is not None
        expected = A.LeakageMetrics.compute(res.labels, va.biased_pred, va.normal_pred).to_json(common=False)
        assert m.to_json(common=False) == expected
        assert [f.name for f in dataclasses.fields(m) if f.name not in COMMON] == list(expected)
        d = va.to_dict()
        for key, value in expected.items():
            assert getattr(m, key) == d[key] == value
        # the one type writes the view entry's figures and reads them back from it
        assert A.LeakageMetrics.from_json(d).to_json(common=False) == expected
        assert m.score == m.delta_maj and m.flagged == int(np.sum(va.biased_pred == va.normal_pred))
        rows = res.row_scores(view)
        bc, nc = rows["biased_correct"], rows["normal_correct"]
        assert bc.mean() == pytest.approx(m.biased_accuracy)
        assert nc.mean() == pytest.approx(m.normal_accuracy)
        assert m.delta_maj == pytest.approx(bc.mean() - m.majority_accuracy)
        assert m.pct_rr == pytest.approx(bc.mean() / nc.mean())
        agree = rows["biased_pred"] == rows["normal_pred"]
        assert m.nba == pytest.approx(agree.mean())
        assert m.nbr == pytest.approx((agree & bc).sum() / agree.sum())


def test_views_hypothesis_never_embeds_the_premises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import aflite.audit.runner

    seen: list[str] = []

    class _F:
        def __init__(self, x: np.ndarray) -> None:
            self.X = x

    def fake(a: list[str], b: list[str] | None, featurizer: str, view: str, **kw: A.Any) -> _F:
        seen.append(view)
        return _F(np.random.default_rng(len(seen)).normal(size=(len(a), 8)).astype(np.float32))

    monkeypatch.setattr(aflite.audit.runner, "featurize", fake)
    cfg = A.AuditConfig(views=("hypothesis",), featurizer="minilm", n_clusters=4, n_components=3, tsne_sample=0,
                        tra=False, show_progress=False, peco_shuffles=3)
    res = A.audit(_pairs(), config=cfg)
    assert sorted(seen) == ["hypothesis", "pair"]
    assert res.normal_input == "pair"  # no premise matrix, so no InferSent features
    seen.clear()
    both = A.audit(_pairs(), config=dataclasses.replace(cfg, views=("hypothesis", "premise")))
    assert sorted(seen) == ["hypothesis", "pair", "premise"] and both.normal_input == "pair+infersent"


def test_tra_is_off_by_default_without_a_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert A.AuditConfig().tra is None
    res = A.audit(_pairs(), device="cpu", cache_dir=str(tmp_path), **{**SMALL, "tra": None})
    assert res.config.tra is False and all(v.tra is None for v in res.views.values())
    cpu = A.estimate_seconds(19_666, A.AuditConfig(), device="cpu")
    gpu = A.estimate_seconds(19_666, A.AuditConfig(), device="cuda")
    assert "fine-tuning (TRA)" not in cpu and "fine-tuning (TRA)" in gpu
    assert A.estimate_seconds(19_666, A.AuditConfig(tra=True), device="cpu")["fine-tuning (TRA)"] > 600
    lines = A.announce({"quick": 5.0, "slow": 600.0})
    assert lines == ["estimate: slow ~10 min (before any cache)"]
    assert capsys.readouterr().err.strip() == lines[0]


def test_add_time_charges_shared_work_to_the_total(tmp_path: Path) -> None:
    res = A.audit(_pairs(), cache_dir=str(tmp_path), **SMALL)
    before = res.timings["total"]
    res.add_time("features", 12.5)
    assert res.timings["total"] == pytest.approx(before + 12.5)


def test_estimates_grow_with_the_machines_load(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    idle = A.estimate_seconds(19_666, A.AuditConfig(tra=True), device="cpu")
    monkeypatch.setattr(os, "getloadavg", lambda: (12.0, 12.0, 12.0))
    busy = A.estimate_seconds(19_666, A.AuditConfig(tra=True), device="cpu")
    for stage in idle:
        assert busy[stage] == pytest.approx(6 * idle[stage])
    assert A.estimate_seconds(19_666, A.AuditConfig(), device="cuda")["MiniLM embedding"] < 10


def test_audit_file_takes_phi_as_every_command_does(tmp_path: Path) -> None:
    """audit_file spells Φ as run and embed do (featurizer=, featurizer_options=); the same thing given also in
    the AuditConfig, differently, is refused in one line and leaves no folder."""
    from aflite.commands.audit import _featurizer_config, audit_file
    from aflite.data import demo_dataset_path

    cfg, rest = _featurizer_config(None, "ngram", {"model_path": "m", "embeddings": None})
    assert (cfg.featurizer, cfg.model_path, rest) == ("ngram", "m", {"embeddings": None})
    assert _featurizer_config(A.AuditConfig(featurizer="ngram"), None, None)[0].featurizer == "ngram"
    out = tmp_path / "audit"
    with pytest.raises(ParameterError, match="given twice.*pass featurizer= only"):
        audit_file(demo_dataset_path(), out, A.AuditConfig(featurizer="ngram"), featurizer="minilm")
    with pytest.raises(ParameterError, match="model folder is given twice"):
        audit_file(demo_dataset_path(), out, A.AuditConfig(model_path="a"), featurizer_options={"model_path": "b"})
    assert not out.exists()
