"""``aflite evaluate``: D vs D(Φ) vs random vs single-iteration, partial-input, Max-PPMI, fine-tuning, OOD."""

from __future__ import annotations

import gzip
import json
import shutil

import numpy as np
import pytest

from aflite.cli import main
from aflite.data import demo_dataset_path, load_dataset
from aflite.errors import InputError, ParameterError
from aflite.evaluate import (
    HANS_PRED_MAP,
    FinetuneOptions,
    ModelSpec,
    _MaxPPMI,
    evaluate,
    load_eval_set,
    load_hans,
    split_heldout,
)
from aflite.pipeline import run as run_pipeline

HANS_HEADER = "id\tpremise\thypothesis\tlabel\theuristic\tsubcase\ttemplate\n"
HANS_ROWS = [
    ("The doctor saw the lawyer .", "The lawyer saw the doctor .", "non-entailment", "lexical_overlap"),
    ("The doctor near the actor danced .", "The doctor danced .", "entailment", "subsequence"),
    ("The judge by the actor stopped .", "The actor stopped .", "non-entailment", "subsequence"),
    ("If the artist slept , the actor ran .", "The artist slept .", "non-entailment", "constituent"),
    ("Certainly the lawyer waited .", "The lawyer waited .", "entailment", "constituent"),
    ("The senator paid the student .", "The student paid the senator .", "non-entailment", "lexical_overlap"),
    ("The banker and the tourist ran .", "The banker ran .", "entailment", "lexical_overlap"),
    ("Whether the secretary waited is unclear .", "The secretary waited .", "non-entailment", "constituent"),
]


def _write_hans(path, rows=HANS_ROWS, label_override=None):
    lines = [HANS_HEADER] + [f"ex{i}\t{p}\t{h}\t{label_override or lab}\t{heur}\tsub\ttemp1\n"
                             for i, (p, h, lab, heur) in enumerate(rows)]
    path.write_bytes(gzip.compress("".join(lines).encode()))
    return path


@pytest.fixture(scope="module")
def snli_run(tmp_path_factory):
    """The first 360 pairs of the bundled real SNLI sample and one small AFLite run (ngram Φ) on them."""
    tmp = tmp_path_factory.mktemp("ev")
    lines = gzip.decompress(demo_dataset_path().read_bytes()).splitlines(keepends=True)
    data = tmp / "small.tsv.gz"
    data.write_bytes(gzip.compress(b"".join(lines[:361])))
    run_pipeline(data, tmp / "run", featurizer="ngram", probe=False, quiet=True,
                 params={"n_partitions": 8, "train_size": 120, "slice_size": 30, "threshold": 0.6,
                         "target_size": 200}, featurizer_options={"n_components": 32})
    hans = _write_hans(tmp / "hans.tsv.gz")
    return tmp, data, tmp / "run", hans


FT = FinetuneOptions(max_train=24, max_steps=1, batch_size=8, eval_max=6, max_length=32)


def test_model_spec_parse():
    assert ModelSpec.parse("probe:minilm:pair") == ModelSpec("probe", "pair", "minilm")
    assert ModelSpec.parse("ngram:hypothesis") == ModelSpec("ngram", "hypothesis")
    assert ModelSpec.parse("ppmi").view == "pair"
    assert ModelSpec.parse("finetune:hypothesis").label.endswith("-HypOnly")
    for bad in ("svm:pair", "probe:pair", "ngram:question", "probe:ngram:pair:x", ""):
        with pytest.raises(ParameterError):
            ModelSpec.parse(bad)


def test_max_ppmi_predicts_the_associated_label():
    a = ["a man sleeps", "a dog sleeps", "a cat sleeps", "a man runs", "a dog runs", "a cat runs", "someone sits"]
    y = np.array([0, 0, 0, 1, 1, 1, 1])
    m = _MaxPPMI(min_count=2).fit(a, None, y, 2)
    assert m.predict(["the bird sleeps", "the bird runs", "nothing known"], None).tolist() == [0, 1, 1]


def test_split_heldout_keeps_premise_groups_together():
    groups = np.repeat(np.arange(50), 3)
    held = split_heldout(150, groups, 0.2, 0)
    assert 0.15 < held.mean() < 0.3
    for g in range(50):
        assert len(set(held[groups == g].tolist())) == 1
    assert np.array_equal(held, split_heldout(150, groups, 0.2, 0))
    with pytest.raises(ParameterError):
        split_heldout(150, groups, 1.5, 0)


def test_evaluate_every_model_and_the_tables(snli_run):
    tmp, data, run, hans_path = snli_run
    hans = load_hans(hans_path)
    models = ["probe:ngram:pair", "mlp:ngram:hypothesis", "ngram:hypothesis", "ppmi:pair"]
    out = tmp / "ev1"
    rep = evaluate(data, [run], out, models=models, seeds=2, eval_sets=[hans], show_progress=False)
    kept = len((run / "kept_ids.txt").read_text().split())
    names = [s["name"] for s in rep.training_sets]
    assert names == ["D", "D(Φ ngram)", f"D_random({kept})", f"D_random({kept})", "single-iteration(Φ ngram)"]
    assert {s["size"] for s in rep.training_sets[1:]} == {kept}
    # deterministic models train once per fixed set; stochastic ones once per seed; random subsets once per draw
    n_runs = {m: sum(r["model"] == m for r in rep.results) for m in rep.config["models"]}
    assert n_runs["ngram:hypothesis"] == 1 + 1 + 2 + 1
    assert n_runs["mlp:ngram:hypothesis"] == 2 + 2 + 2 + 2
    # Table 3 shape: models as rows, training sets as columns, Δ last, sizes in the last row
    md = (out / "tables.md").read_text()
    head = f"| Model | D | D_random({kept}) | single-iteration(Φ ngram) | D(Φ ngram) | Δ |"
    assert md.count(head) == 2
    assert "| n-gram LR -HypOnly |" in md and "| Max-PPMI |" in md and "| MLP (ngram) -HypOnly |" in md
    assert "| Training set size |" in md
    # Table 1 shape: per heuristic and gold label, predictions collapsed to non-entailment
    assert "| Train data | constituent entailment | constituent non-entailment | lexical_overlap entailment" in md
    res = json.loads((out / "results.json").read_text())
    agg = res["aggregate"]["ppmi:pair"]["D"]
    assert set(agg["external"]["HANS"]["per_label"]) == {"entailment", "non-entailment"}
    assert 0 <= agg["own_heldout"]["mean"] <= 1
    assert (out / "accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a second call reuses the cached predictions (no new files) and gives the same figures
    before = sorted(p.name for p in (out / "cache" / "predictions").iterdir())
    assert before and not list((out / "cache").rglob("*.pkl"))  # nothing pickled
    rep2 = evaluate(data, [run], tmp / "ev2", models=models, seeds=2, eval_sets=[hans],
                    cache_dir=out / "cache", show_progress=False)
    assert sorted(p.name for p in (out / "cache" / "predictions").iterdir()) == before
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in rep.results]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in rep2.results]


def test_minilm_features_come_from_the_cache_folders_top_level(tmp_path, monkeypatch):
    """`aflite run` keeps its MiniLM matrices at the top of OUT/cache; evaluate must look there too, so that
    --cache RUN/cache reuses them instead of embedding D again."""
    import aflite.features
    from aflite.evaluate import _corpus, _FeatureStore

    seen = []

    class _F:
        X = np.zeros((2, 4), dtype=np.float32)

    def fake(a, b, featurizer, view, cache_dir=None, **kw):
        seen.append((featurizer, view, cache_dir))
        return _F()

    monkeypatch.setattr(aflite.features, "featurize", fake)
    d = _corpus("D", ["p1", "p2"], ["h1", "h2"])
    store = _FeatureStore(d, tmp_path, False, {})
    assert store.get("minilm", "hypothesis", d).shape == (2, 4)
    assert seen == [("minilm", "pair", tmp_path)]


def test_finetune_capped_one_step(snli_run):
    tmp, data, run, hans_path = snli_run
    out = tmp / "ft"
    kw = dict(models=["finetune:hypothesis"], seeds=1, eval_sets=[load_hans(hans_path)], finetune=FT,
              random_baseline=False, single_iteration=False, show_progress=False)
    rep = evaluate(data, [run], out, **kw)
    assert [r["train_set"] for r in rep.results] == ["D", "D(Φ ngram)"]
    for r in rep.results:
        assert r["train_used"] == 24 and r["train_rows"] > 24 and r["steps"] == 1
        assert r["external"]["HANS"]["n"] == 6
    assert rep.config["finetune"]["train_cap_used"] == 24 and rep.config["finetune"]["lr"] == 1e-5
    assert "| Fine-tuned encoder -HypOnly |" in (out / "tables.md").read_text()
    rep2 = evaluate(data, [run], tmp / "ft2", cache_dir=out / "cache", **kw)  # from the cache, same figures
    assert [r["own_heldout"] for r in rep2.results] == [r["own_heldout"] for r in rep.results]
    assert all(r["steps"] == 1 for r in rep2.results)


def test_cli_evaluate_and_one_line_errors(snli_run, tmp_path, capsys):
    tmp, data, run, hans_path = snli_run
    code = main(["evaluate", str(data), str(run), "--out", str(tmp_path / "cli"), "--models", "ppmi:hypothesis",
                 "--seeds", "1", "--no-single", "--hans", str(hans_path), "--quiet"])
    assert code == 0
    assert "| Max-PPMI -HypOnly |" in capsys.readouterr().out
    # a label the models cannot predict, without a map
    bad = _write_hans(tmp_path / "bad.tsv.gz", label_override="maybe")
    code = main(["evaluate", str(data), str(run), "--out", str(tmp_path / "x"), "--models", "ppmi", "--seeds", "1",
                 "--no-single", "--no-random", "--ood", str(bad), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "'maybe'" in err and "--ood-label-map" in err
    code = main(["evaluate", str(data), str(run), "--out", str(tmp_path / "x"), "--models", "svm", "--quiet"])
    assert code == 2 and "kind must be one of" in capsys.readouterr().err


def test_bad_inputs_are_clear_errors(snli_run, tmp_path):
    tmp, data, run, hans_path = snli_run
    ds = load_dataset(data)
    # an empty filtered set
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "kept_ids.txt").write_text("")
    with pytest.raises(InputError, match="empty"):
        evaluate(data, [empty], tmp_path / "o", models=["ppmi"], seeds=1, show_progress=False)
    # a filtered set without one of D's labels: the models could never predict it
    nolab = tmp_path / "nolab"
    shutil.copytree(run, nolab, ignore=shutil.ignore_patterns("cache", "checkpoint.npz"))
    (nolab / "kept_ids.txt").write_text("".join(f"{i}\n" for i, lab in zip(ds.ids, ds.labels, strict=True)
                                                if lab != "neutral"))
    with pytest.raises(InputError, match=r"\['neutral'\] of D are absent"):
        evaluate(data, [nolab], tmp_path / "o", models=["ppmi"], seeds=1, single_iteration=False,
                 show_progress=False)
    # ids from another file
    other = tmp_path / "other"
    other.mkdir()
    (other / "kept_ids.txt").write_text("nope-1\n")
    with pytest.raises(InputError, match="not in the dataset"):
        evaluate(data, [other], tmp_path / "o", models=["ppmi"], seeds=1, show_progress=False)
    # OOD files of one set with different label sets
    three = _write_hans(tmp_path / "three.tsv.gz", label_override="neutral")
    with pytest.raises(InputError, match="different label sets"):
        load_eval_set([hans_path, three], "mixed")
    # an OOD label no prediction maps to (HANS labels without the collapse)
    raw = load_eval_set(hans_path, "raw")
    with pytest.raises(InputError, match="non-entailment"):
        evaluate(data, [run], tmp_path / "o", models=["ppmi"], seeds=1, eval_sets=[raw], show_progress=False,
                 single_iteration=False, random_baseline=False)
    # with the map it is accepted
    assert load_eval_set(hans_path, "ok", pred_map=HANS_PRED_MAP).pred_map["neutral"] == "non-entailment"
    with pytest.raises(ParameterError):
        evaluate(data, [run], tmp_path / "o", models=["ngram"], seeds=0, show_progress=False)
    with pytest.raises(ParameterError):
        FinetuneOptions(lr=0).check()
