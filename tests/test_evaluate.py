"""``aflite evaluate``: D vs D(Φ) vs random vs single-iteration, partial-input, Max-PPMI, fine-tuning, OOD."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from aflite.cli import main
from aflite.commands.evaluate import evaluate
from aflite.commands.run import run as run_pipeline
from aflite.data import demo_dataset_path, load_dataset
from aflite.errors import InputError, ParameterError
from aflite.evaluate import HANS_PRED_MAP, FinetuneOptions, ModelSpec, load_eval_set, load_hans
from aflite.evaluate.models import _MaxPPMI
from aflite.evaluate.sets import label_matched_rows
from aflite.splits import split_heldout

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
    run_pipeline(data, tmp / "run", featurizer="ngram", probe=False, show_progress=False,
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
    assert md.count("\n" + head) == 2  # (the OOD summary's header ends the same way)
    assert "| n-gram LR -HypOnly |" in md and "| Max-PPMI |" in md and "| MLP (ngram) -HypOnly |" in md
    assert "| Training set size |" in md
    # Table 1 shape: per heuristic and gold label, predictions collapsed to non-entailment
    assert ("| Train data | constituent: gold entailment | constituent: gold non-entailment | "
            "lexical_overlap: gold entailment") in md
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
    --cache-dir RUN/cache reuses them instead of embedding D again."""
    import aflite.evaluate.models
    from aflite.evaluate.models import _corpus, _FeatureStore

    seen = []

    class _F:
        X = np.zeros((2, 4), dtype=np.float32)

    def fake(a, b, featurizer, view, cache_dir=None, **kw):
        seen.append((featurizer, view, cache_dir))
        return _F()

    monkeypatch.setattr(aflite.evaluate.models, "featurize", fake)
    d = _corpus("D", ["p1", "p2"], ["h1", "h2"])
    store = _FeatureStore(d, tmp_path, False, {})
    assert store.get("minilm", "hypothesis", d).shape == (2, 4)
    assert seen == [("minilm", "pair", tmp_path)]


@pytest.mark.slow  # minutes on a busy 2-core machine (fine-tuning); CI runs it (--run-slow)
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
    ft = rep.config["finetune"]
    assert ft["train_cap_used"] == 24 and ft["lr_source"] == "check"
    assert ft["lr"] == ft["lr_check"]["chosen"] in FinetuneOptions().lr_candidates
    assert all(r["lr"] == ft["lr"] for r in rep.results)  # one rate for every training set
    assert "| Fine-tuned encoder -HypOnly |" in (out / "tables.md").read_text()
    rep2 = evaluate(data, [run], tmp / "ft2", cache_dir=out / "cache", **kw)  # from the cache, same figures
    assert [r["own_heldout"] for r in rep2.results] == [r["own_heldout"] for r in rep.results]
    assert all(r["steps"] == 1 for r in rep2.results)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from tiny_models import make_tiny_model

    torch.manual_seed(0)
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "bert")


def test_one_learning_rate_chosen_on_training_data_for_every_set(snli_run, tiny_bert, tmp_path, monkeypatch):
    """The check runs once, on D's training part (never the held-out part or a test set), and its choice trains
    D, the random subsets and D(Φ); --lr skips it; the tables and the loss curves say so."""
    from aflite.evaluate import lr_check, runner

    tmp, data, run, _ = snli_run
    seen = []
    real = lr_check.check_learning_rate

    def spy(a, b, *args, **kw):
        seen.append(list(a))
        return real(a, b, *args, **kw)

    monkeypatch.setattr(runner, "check_learning_rate", spy)  # where compare_runs looks it up
    ft = FinetuneOptions(model_path=str(tiny_bert), batch_size=16, max_length=32, max_train=60, eval_max=6,
                         lr_candidates=(1e-6, 3e-3), cpu_lr_check_rows=90)
    kw = dict(models=["finetune:pair"], seeds=1, single_iteration=False, show_progress=False)
    rep = evaluate(data, [run], tmp_path / "ev", finetune=ft, **kw)
    cfg = rep.config["finetune"]
    check = cfg["lr_check"]
    assert cfg["lr_source"] == "check" and cfg["lr"] == check["chosen"] in (1e-6, 3e-3)
    assert check["rows"] == 90 and check["train_rows"] + check["heldout_rows"] == 90
    assert [c["lr"] for c in check["candidates"]] == [1e-6, 3e-3]
    ds = load_dataset(data)
    held = split_heldout(len(ds), ds.groups, 0.2, 0)
    assert len(seen) == 1 and len(seen[0]) == 90  # once per run
    assert not set(seen[0]) & {ds.texts_a[i] for i in np.flatnonzero(held)}  # no premise of the held-out part
    assert {r["train_set"] for r in rep.results} == {"D", "D(Φ ngram)", "D_random(200)"}
    assert all(r["lr"] == cfg["lr"] for r in rep.results)  # the same rate for every benchmark set and seed
    for r in rep.results:
        curve = r["loss_curve"]
        assert len(curve["loss"]) == r["steps"] == 12 and curve["step"][-1] == r["steps"]  # 3 epochs of 60 rows
    tables = (tmp_path / "ev" / "tables.md").read_text()
    assert "learning-rate check on" in tables and "## Fine-tuning: training loss per training set" in tables
    saved = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert saved["config"]["finetune"]["lr_check"]["chosen"] == cfg["lr"]
    given = evaluate(data, [run], tmp_path / "ev2", finetune=FinetuneOptions(**{**ft.__dict__, "lr": 2e-3}), **kw)
    assert given.config["finetune"]["lr_check"] is None and given.config["finetune"]["lr_source"] == "given"
    assert all(r["lr"] == 2e-3 for r in given.results) and len(seen) == 1  # --lr: no check


def test_cli_learning_rate_options(snli_run, tmp_path, capsys):
    tmp, data, run, _ = snli_run
    for bad in ("1e-5,fast", "0,1e-5", ","):
        code = main(["evaluate", str(data), str(run), "--out", str(tmp_path / "x"), "--models", "finetune:pair",
                     "--lr-candidates", bad, "--quiet"])
        assert code == 2 and "--lr-candidates" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # refused before --out was claimed


def test_cli_evaluate_and_one_line_errors(snli_run, tmp_path, capsys):
    tmp, data, run, hans_path = snli_run
    code = main(["evaluate", str(data), str(run), "--out", str(tmp_path / "cli"), "--models", "ppmi:hypothesis",
                 "--seeds", "1", "--no-single-iteration", "--hans", str(hans_path), "--quiet"])
    assert code == 0
    assert "| Max-PPMI -HypOnly |" in capsys.readouterr().out
    from aflite.report.explorer import embedded_data  # the page: accuracy bars with the chance line

    assert embedded_data((tmp_path / "cli" / "report.html").read_text(encoding="utf-8"))["plots"]["accuracy"]["bars"]
    # a label the models cannot predict, without a map
    bad = _write_hans(tmp_path / "bad.tsv.gz", label_override="maybe")
    code = main(["evaluate", str(data), str(run), "--out", str(tmp_path / "x"), "--models", "ppmi", "--seeds", "1",
                 "--no-single-iteration", "--no-random-baseline", "--ood", str(bad), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "'maybe'" in err and "--ood-label-map" in err
    code = main(["evaluate", str(data), str(run), "--out", str(tmp_path / "x"), "--models", "svm", "--quiet"])
    assert code == 2 and "kind must be one of" in capsys.readouterr().err


ENVELOPE = ("command", "format_version", "argv", "versions", "manifest", "sealed", "seed")
PARAMETERS = {"dataset_size": 0, "target_size": 1, "n_partitions": 1, "train_size": 1, "slice_size": 1,
              "threshold": 0.75, "strategy": "slicing", "model": "logistic", "C": 1.0}  # as results.json types them


def committed(folder: Path) -> Path:
    """``folder`` committed again as aflite commits a run (after a test changed its files by hand), or, without a
    results.json, as a filter run of no phases: the evaluation's own checks are tested, not the manifest's."""
    from committed import commit

    res = json.loads((folder / "results.json").read_text()) if (folder / "results.json").is_file() else {
        "parameters": PARAMETERS, "size_before": 0, "size_after": 0, "n_iterations": 0, "sizes": [], "iterations": []}
    commit(folder, {k: v for k, v in res.items() if k not in ENVELOPE}, command=res.get("command", "filter"),
           argv=res.get("argv"), seed=res.get("seed"))
    return folder


def test_bad_inputs_are_clear_errors(snli_run, tmp_path):
    tmp, data, run, hans_path = snli_run
    ds = load_dataset(data)
    # an empty filtered set
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "kept_ids.txt").write_text("")
    committed(empty)
    with pytest.raises(InputError, match="empty"):
        evaluate(data, [empty], tmp_path / "o", models=["ppmi"], seeds=1, show_progress=False)
    # a filtered set without one of D's labels: the models could never predict it
    nolab = tmp_path / "nolab"
    shutil.copytree(run, nolab, ignore=shutil.ignore_patterns("cache", "checkpoint.npz"))
    (nolab / "kept_ids.txt").write_text("".join(f"{i}\n" for i, lab in zip(ds.ids, ds.labels, strict=True)
                                                if lab != "neutral"))
    committed(nolab)
    with pytest.raises(InputError, match=r"\['neutral'\] of D are absent"):
        evaluate(data, [nolab], tmp_path / "o", models=["ppmi"], seeds=1, single_iteration=False,
                 show_progress=False)
    # ids from another file
    other = tmp_path / "other"
    other.mkdir()
    (other / "kept_ids.txt").write_text("nope-1\n")
    committed(other)
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


def test_finetune_learning_rate_defaults_by_modality():
    """Text keeps the appendix's 1e-5; an image network gets the image preset's rate; a given rate wins."""
    from aflite.encoders.training import WARMUP_IMAGE

    assert FinetuneOptions().resolved_lr() == 1e-5
    assert FinetuneOptions(image_model="efficientnet-lite0").resolved_lr() == WARMUP_IMAGE.lr == 1e-3
    assert FinetuneOptions(lr=3e-4, image_model="hf-image").resolved_lr() == 3e-4


def _snli_like(tmp_path, name, rows):
    """A small SNLI-shaped test file (premise, hypothesis, label) from (premise, hypothesis, label) rows."""
    text = "premise\thypothesis\tlabel\n" + "".join(f"{p}\t{h}\t{lab}\n" for p, h, lab in rows)
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()))
    return path


def test_separate_test_sets_without_the_split(snli_run, tmp_path):
    """--test NAME=FILE with --no-split: every training set uses all its rows and is scored on each test set,
    next to that set's majority rate; no held-out tables."""
    tmp, data, run, hans_path = snli_run
    ds = load_dataset(data)
    # the last 60 rows of the bundled sample are not in `data` (its first 360 rows): a genuine test set
    lines = gzip.decompress(demo_dataset_path().read_bytes()).decode().splitlines()
    extra = [ln.split("\t") for ln in lines[1 + 360:1 + 420]]
    col = {c: i for i, c in enumerate(lines[0].split("\t"))}
    rows = [(r[col["premise"]], r[col["hypothesis"]], r[col["label"]]) for r in extra]
    dev = _snli_like(tmp_path, "dev.tsv.gz", rows)
    hard = _snli_like(tmp_path, "hard.tsv.gz", rows[:20])
    out = tmp_path / "ts"
    code = main(["evaluate", str(data), str(run), "--out", str(out), "--models", "ngram:hypothesis,ppmi:pair",
                 "--seeds", "2", "--no-split", "--no-single-iteration", "--test", f"dev={dev}", "--test",
                 f"hard={hard}",
                 "--hans", str(hans_path), "--quiet"])
    assert code == 0
    res = json.loads((out / "results.json").read_text())
    cfg = res["config"]
    assert cfg["split"] is False and cfg["heldout_rows"] == 0
    labs = [r[2] for r in rows]
    maj = max(labs.count(x) for x in set(labs)) / len(labs)
    assert [t["name"] for t in cfg["tests"]] == ["dev", "hard"] and cfg["tests"][0]["majority"] == pytest.approx(maj)
    kept = len((run / "kept_ids.txt").read_text().split())
    sizes = {s["name"]: s["train"] for s in res["training_sets"]}
    assert sizes["D"] == len(ds) and sizes["D(Φ ngram)"] == kept  # whole sets train: nothing held out
    for r in res["runs"]:
        assert "own_heldout" not in r and set(r["tests"]) == {"dev", "hard"} and "HANS" in r["external"]
        assert r["tests"]["dev"]["n"] == 60 and r["tests"]["hard"]["n"] == 20
        assert r["tests"]["dev"]["majority"] == pytest.approx(maj)
    # the hard set is the first 20 rows of dev: the same deterministic model predicts them the same way
    d_dev = [r for r in res["runs"] if r["model"] == "ppmi:pair" and r["train_set"] == "D"][0]
    assert 0 <= d_dev["tests"]["hard"]["accuracy"] <= 1
    md = (out / "tables.md").read_text()
    assert f"## Table 3 shape: test set dev (60 rows; majority class {100 * maj:.1f} %)" in md
    assert "## Table 3 shape: test set hard (20 rows" in md
    assert "own held-out" not in md and "Table 1 shape: HANS" in md
    assert md.count(f"| Model | D | D_random({kept}) | D(Φ ngram) | Δ |") == 2
    # with the split (default) the held-out tables come back next to the test tables
    rep = evaluate(data, [run], tmp_path / "ts2", models=["ppmi:pair"], seeds=1, single_iteration=False,
                   tests=[load_eval_set(dev, "dev")], show_progress=False)
    assert "Table 3 shape: each benchmark's own held-out part" in rep.tables and "test set dev" in rep.tables
    assert rep.results[0]["tests"]["dev"]["n"] == 60 and "own_heldout" in rep.results[0]
    # bad specs and nothing to test on are one-line errors
    assert main(["evaluate", str(data), str(run), "--out", str(tmp_path / "x"), "--test", str(dev), "--quiet"]) == 2
    assert main(["evaluate", str(data), str(run), "--out", str(tmp_path / "x"), "--no-split", "--quiet"]) == 2
    with pytest.raises(ParameterError, match="share a name"):
        evaluate(data, [run], tmp_path / "y", models=["ppmi"], tests=[load_eval_set(dev, "a"),
                                                                      load_eval_set(hard, "a")])


def test_the_single_iteration_baseline_is_one_model(snli_run, tmp_path):
    """The paper's baseline (§4.1) filters "using a single model ... in a single iteration": one linear model on t of
    the run's rows scores the rest once (p̃ is 0 or 1), its own training rows stay unscored and kept, and the most
    predictable rows go at once until |D(Φ)| remain."""
    tmp, data, run, _ = snli_run
    summary = json.loads((run / "results.json").read_text())
    t, n = summary["parameters"]["train_size"], len(load_dataset(data))
    rep = evaluate(data, [run], tmp_path / "o", models=["ppmi:pair"], seeds=1, random_baseline=False,
                   show_progress=False)
    single = next(s for s in rep.training_sets if s["kind"] == "single")
    info = single["info"]
    kept = len((run / "kept_ids.txt").read_text().split())
    assert single["size"] == kept and info["n_partitions"] == 1
    # its own training rows, about t of them (whole premise groups), are the only rows it did not score
    assert abs(info["unscored"] - t) <= 0.05 * t and info["scored"] + info["unscored"] == n
    assert info["removed"] == n - kept
    assert info["min_removed_predictability"] in (0.0, 1.0)  # one model: right or wrong, nothing between


def test_label_matched_random_subsets_have_the_filtered_label_counts(snli_run, tmp_path):
    """--label-matched: per seed, a random subset of D with exactly D(Φ)'s label counts (AFLite shifts the label
    shares), drawn apart from the plain random subsets, shown as its own column of Table 3."""
    tmp, data, run, _ = snli_run
    out = tmp_path / "m"
    assert main(["evaluate", str(data), str(run), "--out", str(out), "--models", "ppmi:pair", "--seeds", "2",
                 "--no-single-iteration", "--label-matched", "--quiet"]) == 0
    res = json.loads((out / "results.json").read_text())
    sets = res["training_sets"]
    kept = len((run / "kept_ids.txt").read_text().split())
    filtered = next(s for s in sets if s["kind"] == "filtered")
    matched = [s for s in sets if s["kind"] == "matched"]
    randoms = [s for s in sets if s["kind"] == "random"]
    assert [s["seed"] for s in matched] == [0, 1] and len(randoms) == 2
    assert {s["name"] for s in matched} == {f"D_random({kept}, labels of D(Φ ngram))"}
    for s in matched:
        assert s["size"] == kept and s["label_counts"] == filtered["label_counts"]
    assert any(r["label_counts"] != filtered["label_counts"] for r in randoms)  # a plain draw keeps D's shares
    head = f"| Model | D | D_random({kept}) | D_random({kept}, labels of D(Φ ngram)) | D(Φ ngram) | Δ |"
    assert head in (out / "tables.md").read_text()
    # the draw itself: each seed its own rows, none of them D(Φ), the label counts exact
    ds = load_dataset(data)
    ids = np.asarray([str(i) for i in ds.ids.tolist()])
    kept_rows = np.flatnonzero(np.isin(ids, (run / "kept_ids.txt").read_text().split()))
    pool = np.arange(len(ds))
    a = label_matched_rows(pool, ds.labels, kept_rows, np.random.default_rng([0, 2, 0]))
    b = label_matched_rows(pool, ds.labels, kept_rows, np.random.default_rng([1, 2, 0]))
    assert len(a) == len(b) == kept and set(a.tolist()) != set(b.tolist()) != set(kept_rows.tolist())
    for lab in np.unique(ds.labels):
        assert (ds.labels[a] == lab).sum() == (ds.labels[kept_rows] == lab).sum()


def test_warmup_rows_stay_out_of_every_training_set(snli_run, tmp_path, monkeypatch):
    """Rows listed in a run's warmup_ids.txt (the slice that trained Φ) never train any model: not in D, D(Φ),
    the random subsets or the single-iteration set, and sizes still match |D(Φ)| after their removal."""
    import aflite.evaluate as ev

    tmp, data, run, hans_path = snli_run
    ds = load_dataset(data)
    ids = [str(i) for i in ds.ids.tolist()]
    kept = (run / "kept_ids.txt").read_text().split()
    wrun = tmp_path / "wrun"
    shutil.copytree(run, wrun)
    # a warm-up slice with 30 rows, 20 of them (wrongly) also in the kept list: they must still be left out
    kept_set = set(kept)
    warm = sorted(set(kept[:20]) | set([i for i in ids if i not in kept_set][:10]))
    (wrun / "warmup_ids.txt").write_text("".join(f"{i}\n" for i in warm))
    committed(wrun)
    warm_rows = {ids.index(i) for i in warm}
    seen: dict[str, list[set[int]]] = {}
    orig = ev.runner.Job

    def spy(ctx, spec, ts, seed):
        seen.setdefault(ts.kind, []).append(set(ts.rows.tolist()))
        return orig(ctx, spec, ts, seed)

    monkeypatch.setattr(ev.runner, "Job", spy)  # looked up where compare_runs lives
    rep = evaluate(data, [wrun], tmp_path / "o", models=["ppmi:pair"], seeds=3, show_progress=False)
    assert set(seen) == {"D", "filtered", "random", "single"} and len(seen["random"]) == 3
    for kind, row_sets in seen.items():
        for rows in row_sets:
            assert not rows & warm_rows, kind
    assert seen["D"][0] == set(range(len(ds))) - warm_rows
    size = len(kept) - 20
    assert all(len(r) == size for k in ("filtered", "random", "single") for r in seen[k])
    info = {s["kind"]: s for s in rep.training_sets}
    assert info["D"]["info"]["excluded_warmup"] == len(warm) and info["filtered"]["info"]["excluded_warmup"] == 20
    assert rep.config["excluded_warmup_rows"] == len(warm) and "warm-up slice" in rep.tables
    # held-out rows of the warm-up slice are not scored either
    held = split_heldout(len(ds), ds.groups, 0.2, 0)
    assert rep.config["heldout_rows"] == int(held.sum()) - len(warm_rows & set(np.flatnonzero(held).tolist()))
    # an unknown id in warmup_ids.txt is a clear error
    (wrun / "warmup_ids.txt").write_text("no-such-id\n")
    with pytest.raises(InputError, match="warmup_ids.txt"):
        evaluate(data, [wrun], tmp_path / "o2", models=["ppmi"], seeds=1, show_progress=False)


@pytest.mark.slow  # fine-tunes MiniLM for one step and embeds 90 pairs: ~40 s on a busy 2-core machine
def test_warmup_run_end_to_end_excludes_its_slice(snli_run, tmp_path, minilm_model_path):
    """A real warm-up run (MiniLM fine-tuned for one step on a slice of t rows): the slice is written to
    warmup_ids.txt, is neither kept nor removed, is absent from the filtered file, and evaluate (with the
    single-iteration set recomputed from the run's cached Φ) trains on none of it."""
    tmp, data, run, hans_path = snli_run
    lines = gzip.decompress(data.read_bytes()).splitlines(keepends=True)
    small = tmp_path / "small.tsv.gz"
    small.write_bytes(gzip.compress(b"".join(lines[:121])))  # 120 pairs
    res = run_pipeline(small, tmp_path / "wr", featurizer="warmup", probe=False, show_progress=False,
                       params={"device": "cpu", "n_partitions": 4, "train_size": 30, "slice_size": 10,
                               "threshold": 0.5, "target_size": 60},
                       featurizer_options={"max_steps": 1, "batch_size": 8, "embed_batch_size": 32,
                                           "train_max_length": 32})
    out = tmp_path / "wr"
    warm = (out / "warmup_ids.txt").read_text().split()
    kept = (out / "kept_ids.txt").read_text().split()
    removed = (out / "removed_ids.txt").read_text().split() if (out / "removed_ids.txt").is_file() else []
    assert len(warm) == 30 and not set(warm) & set(kept) and not set(warm) & set(removed)
    assert len(kept) + len(removed) == 90 and res.summary["warmup_rows"] == 30
    ds = load_dataset(small)
    filtered = load_dataset(res.filtered_path)
    assert len(filtered) == len(kept) and not set(filtered.texts_b) - set(ds.texts_b)
    wset = set(warm)
    assert res.keep[[i for i, x in enumerate(ds.ids.tolist()) if str(x) in wset]].sum() == 0
    rep = evaluate(small, [out], tmp_path / "ev", models=["ppmi:pair"], seeds=2, split=False,
                   tests=[load_eval_set(small, "self")], show_progress=False)
    sizes = {(s["kind"], s["seed"]): s["size"] for s in rep.training_sets}
    assert sizes[("D", None)] == 90 and sizes[("filtered", None)] == len(kept)
    assert sizes[("random", 0)] == sizes[("random", 1)] == sizes[("single", None)] == len(kept)
    single = next(s for s in rep.training_sets if s["kind"] == "single")
    assert single["info"]["featurizer"] == "warmup" and single["info"]["excluded_warmup"] == 0


# ------------------------------------------------------------------------------- chance beside every accuracy


def test_every_accuracy_has_chance_of_the_same_rows_beside_it(snli_run):
    from collections import Counter

    from aflite.evaluate import CHANCE_ROW

    tmp, data, run, hans_path = snli_run
    hans = load_hans(hans_path)
    out = tmp / "chance"
    rep = evaluate(data, [run], out, models=["ppmi:hypothesis", "ngram:hypothesis"], seeds=1, eval_sets=[hans],
                   single_iteration=False, show_progress=False)
    ds = load_dataset(data)
    held = split_heldout(len(ds), ds.groups, 0.2, 0)
    gold = ds.labels[held].astype(str)
    maj_all = Counter(gold.tolist()).most_common(1)[0][1] / len(gold)
    for r in rep.results:
        for part in ("own_heldout", "original_heldout"):
            b = r[part]
            assert b["delta_majority"] == pytest.approx(b["accuracy"] - b["majority"])
        assert r["original_heldout"]["majority"] == pytest.approx(maj_all)
        assert r["external"]["HANS"]["majority"] == pytest.approx(5 / 8)  # 5 of the 8 HANS rows: non-entailment
    agg = json.loads((out / "results.json").read_text())["aggregate"]["ppmi:hypothesis"]["D"]
    assert agg["original_heldout_majority"]["mean"] == pytest.approx(maj_all)
    assert agg["external"]["HANS"]["majority"]["mean"] == pytest.approx(5 / 8)
    md = (out / "tables.md").read_text()
    # a chance row in both Table 3 shapes and in the OOD summary, and the lead over chance beside each accuracy
    assert md.count(f"| {CHANCE_ROW} |") == 3
    acc = agg["original_heldout"]["mean"]
    assert f"{100 * acc:.1f} ({100 * (acc - maj_all):+.1f})" in md
    # the OOD summary comes before the per-set detail, with the chance row of the set first
    assert md.index("## Out of distribution at a glance") < md.index("## Table 1 shape")
    assert f"| HANS (8 rows) | {CHANCE_ROW} | 62.5 |" in md
    assert "| HANS | Max-PPMI -HypOnly |" in md and "| HANS | n-gram LR -HypOnly |" in md


def _write_numeric_ood(path, rows=12):
    lines = ["premise\thypothesis\tlabel\n"] + [f"A man number {i} sits .\tA person sits .\t{i % 3}\n"
                                                 for i in range(rows)]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_per_set_ood_label_maps_and_unmatched_entries(snli_run, tmp_path, capsys):
    tmp, data, run, hans_path = snli_run
    num = _write_numeric_ood(tmp_path / "num.tsv")
    base = ["evaluate", str(data), str(run), "--models", "ppmi:hypothesis", "--seeds", "1", "--no-single-iteration",
            "--no-random-baseline", "--quiet", "--ood", f"num={num}"]
    good = "num:0=entailment,1=neutral,2=contradiction"
    assert main(base + ["--out", str(tmp_path / "ok"), "--ood-label-map", good]) == 0
    md = capsys.readouterr().out
    assert "| num (12 rows) |" in md and "## Out of distribution at a glance" in md
    # an entry that matches no label of its set: one line, exit 2, nothing written
    assert main(base + ["--out", str(tmp_path / "bad"), "--ood-label-map", "num:0=entailment,7=neutral"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "7=neutral" in err and "match no label" in err
    assert not (tmp_path / "bad" / "results.json").exists()
    # a map for a set that is not there
    assert main(base + ["--out", str(tmp_path / "bad2"), "--ood-label-map", "sick:0=entailment"]) == 2
    assert "no --ood set is named 'sick'" in capsys.readouterr().err
    # in the library too
    with pytest.raises(InputError, match="match no label"):
        load_eval_set(num, "num", label_map={"0": "entailment", "x": "neutral"})
    assert set(load_eval_set(num, "num", label_map={"0": "entailment", "1": "neutral", "2": "contradiction"})
               .labels.tolist()) == {"entailment", "neutral", "contradiction"}


def test_a_drop_that_is_only_chance_falling_reads_as_such():
    """The SICK case of issue 12: the probe sits at the majority rate on D and on D(Φ); its accuracy falls 13
    points only because filtering changed the label mix. The table must show chance and the unchanged lead."""
    from aflite.evaluate import CHANCE_ROW, TrainingSet, render_tables

    def ms(x):
        return {"mean": x, "std": 0.0, "n": 1}

    def entry(acc, maj):
        return {"own_heldout": ms(acc), "own_heldout_majority": ms(maj), "original_heldout": ms(acc),
                "original_heldout_majority": ms(maj), "train_rows": 10, "train_used": 10, "external": {}}

    rows = np.arange(10)
    sets = [TrainingSet("D", "D", rows), TrainingSet("D(Φ ngram)", "filtered", rows, run="r")]
    agg = {"ngram:hypothesis": {"D": entry(0.569, 0.569), "D(Φ ngram)": entry(0.436, 0.452)}}
    info = [{"name": n, "seed": None, "size": 10, "train": 8, "heldout": 2, "label_counts": {"a": 5, "b": 5}}
            for n in ("D", "D(Φ ngram)")]
    cfg = {"dataset": "sick.tsv", "seeds": [0], "heldout_rows": 2, "heldout": 0.2, "split_seed": 0,
           "wall_seconds": 0.0}
    md = render_tables(agg, [ModelSpec.parse("ngram:hypothesis")], sets, info, [], cfg)
    assert f"| {CHANCE_ROW} | 56.9 | 45.2 | -11.7 |" in md
    assert "| n-gram LR -HypOnly | 56.9 (+0.0) | 43.6 (-1.6) | -13.3 (lead -1.6) |" in md


def test_single_iteration_reuses_a_shared_feature_cache(snli_run, tmp_path, monkeypatch):
    """A run made with --cache-dir SHARED (no OUT/cache) and evaluated with --cache-dir SHARED: the single-iteration set
    reads the run's Φ from SHARED instead of featurizing D again (for a warm-up Φ that would mean fine-tuning)."""
    import aflite.features.compute

    tmp, data, run, hans_path = snli_run
    shared = tmp_path / "shared"
    run_pipeline(data, tmp_path / "r", featurizer="ngram", probe=False, show_progress=False, cache_dir=shared,
                 params={"n_partitions": 8, "train_size": 120, "slice_size": 30, "threshold": 0.6,
                         "target_size": 200}, featurizer_options={"n_components": 32})
    assert not (tmp_path / "r" / "cache").exists()
    calls = []
    orig = aflite.features.compute.featurize

    def spy(*a, **kw):
        res = orig(*a, **kw)
        calls.append((kw.get("cache_dir"), res.from_cache))
        return res

    monkeypatch.setattr(aflite.features.compute, "featurize", spy)
    evaluate(data, [tmp_path / "r"], tmp_path / "ev", models=["ppmi"], seeds=1, random_baseline=False,
             cache_dir=shared, show_progress=False)
    assert calls == [(shared, True)]


def test_probe_on_a_one_class_subset_is_skipped_with_its_reason():
    from aflite.evaluate import compare_partial_input, probe_skip_reason

    assert probe_skip_reason(np.array(["a"] * 9)) == "all 9 rows have one label ('a')"
    assert "too few rows" in probe_skip_reason(np.array(["a"] * 9 + ["b"]))
    assert probe_skip_reason(np.array(["a"] * 9 + ["b"] * 2)) is None
    texts = [f"word{i % 7} other{i % 3}" for i in range(40)]
    y = np.array(["a"] * 36 + ["b"] * 4)
    keep = np.zeros(40, bool)
    keep[:20] = True  # D(Φ) holds only 'a'
    res = compare_partial_input(texts, y, keep, random_repeats=2)
    assert res[0].skipped is None and np.isfinite(res[0].accuracy)
    assert res[1].skipped == "all 20 rows have one label ('a')" and np.isnan(res[1].accuracy)


def test_evaluate_and_audit_compare_refuse_a_run_from_another_dataset(tmp_path, capsys):
    """Same row count and no id column (ids are row-N in both): only the recorded content fingerprint tells."""
    lines = gzip.decompress(demo_dataset_path().read_bytes()).decode().splitlines()
    head = lines[0].split("\t")
    keep_cols = [head.index(c) for c in ("premise", "hypothesis", "label")]

    def write(name, body):
        p = tmp_path / name
        p.write_text("\n".join("\t".join(r.split("\t")[c] for c in keep_cols) for r in [lines[0], *body]) + "\n")
        return p

    a, b = write("a.tsv", lines[1:301]), write("b.tsv", lines[301:601])
    run = tmp_path / "run"
    assert main(["run", str(a), "--out", str(run), "--featurizer", "ngram", "--quiet", "-m", "4", "--no-probe"]) == 0
    assert json.loads((run / "results.json").read_text())["dataset_fingerprint"]
    capsys.readouterr()
    code = main(["evaluate", str(b), str(run), "--out", str(tmp_path / "ev"), "--models", "ppmi", "--seeds", "1",
                 "--no-single-iteration", "--quiet"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and "is not the data this run read: " in err[0], err
    assert not (tmp_path / "ev").exists()
    code = main(["audit", str(b), "--compare", str(run), "--out", str(tmp_path / "au"), "--featurizer", "ngram",
                 "--quiet"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and "is not the data this run read: " in err[0], err
    # a results.json whose fingerprint was taken out by hand: refused as edited (the seal), nothing written
    body = json.loads((run / "results.json").read_text())
    body.pop("dataset_fingerprint")
    (run / "results.json").write_text(json.dumps(body))
    code = main(["evaluate", str(a), str(run), "--out", str(tmp_path / "ev2"), "--models", "ppmi", "--seeds", "1",
                 "--no-single-iteration", "--quiet"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and "edited after aflite wrote it" in err[0], err
    assert not (tmp_path / "ev2").exists()


def test_not_trained_marks_one_class_models_and_flat_losses():
    from aflite.evaluate.degenerate import not_trained

    gold = np.array(["a", "b", "c"] * 20)
    assert not_trained(np.array(["a", "b", "c"] * 20), gold) is None
    one = not_trained(np.array(["b"] * 59 + ["a"]), gold, steps=27, first_loss=1.106, final_loss=0.931,
                      train_rows=2000, batch_size=16)
    assert one["reason"] == "predicts 'b' for 98.3% of the 60 test rows"
    assert one["steps_needed_estimate"] == 375  # 3 epochs of 2,000 rows at batch 16
    flat = not_trained(np.array(["a", "b", "c"] * 20), gold, steps=3, first_loss=1.10, final_loss=1.05,
                       train_rows=100, batch_size=16)
    assert flat["reason"] == "its training loss did not fall (1.100 → 1.050)" and flat["steps_needed_estimate"] == 21
    assert not_trained(np.array(["a"] * 60), np.array(["a"] * 60)) is None  # the test set itself is one class


def test_the_not_trained_advice_follows_how_far_the_model_got():
    """Three full epochs with a flat loss: another learning rate or model, no step estimate (the H100 case:
    1,203 steps = 3 epochs of 36,837 rows at batch 92). Ten steps: more steps, never fewer than it ran; a GPU
    only when it ran on a CPU."""
    from aflite.evaluate.degenerate import not_trained

    gold = np.array(["a", "b", "c"] * 20)
    pred = np.array(["a"] * 60)
    done = not_trained(pred, gold, steps=1203, first_loss=1.109, final_loss=1.078, train_rows=36837, batch_size=92,
                       device="cuda", lr=1e-5, lr_source="given")
    assert done["advice"] == "learning rate or capacity" and done["epochs_run"] == 3.0
    assert "steps_needed_estimate" not in done
    note = done["budget_note"]
    assert note.startswith("it ran 1,203 steps = 3.0 epochs of 36,837 rows at batch 92, lr 1e-05 (given): ")
    assert "more steps of this recipe will not help" in note and "--lr" in note and "--model-path" in note
    assert "GPU" not in note and "--max-steps" not in note
    # the same on a CPU run that did its 3 epochs (the 2-core case: 66 steps = 3 epochs of 2,000 rows at batch 92)
    cpu = not_trained(pred, gold, steps=66, first_loss=1.126, final_loss=1.083, train_rows=2000, batch_size=92,
                      device="cpu", lr=1e-5, lr_source="default")
    assert cpu["advice"] == "learning rate or capacity" and "GPU" not in cpu["budget_note"]
    assert "~660" not in cpu["budget_note"] and "steps_needed_estimate" not in cpu
    # ... and when a cap took its rows, more rows too (the CPU-capped ladder: 184 of 70,111 rows)
    capped = not_trained(pred, gold, steps=6, first_loss=1.109, final_loss=1.024, train_rows=184, batch_size=92,
                         device="cpu", lr=1e-4, lr_source="check", available_rows=70111)
    assert capped["advice"] == "learning rate or capacity" and capped["budget_note"].endswith(
        "or more of its rows: it trained on a sample of 184 of 70,111 (raise --max-train / --cpu-max-train, or use a "
        "GPU)")
    short = not_trained(pred, gold, steps=10, first_loss=1.10, final_loss=1.09, train_rows=2000, batch_size=92,
                        device="cpu", lr=5e-5, lr_source="check", stopped_by="--max-steps")
    assert short["advice"] == "more steps" and short["steps_needed_estimate"] == 66 > 10
    assert short["budget_note"] == ("~66 steps (3 epochs of 2,000 rows at batch 92); it ran 10 steps = 0.5 epochs "
                                    "of 2,000 rows at batch 92, lr 5e-05 (chosen by the learning-rate check): raise "
                                    "--max-steps, or use a GPU")
    on_gpu = not_trained(pred, gold, steps=10, train_rows=2000, batch_size=92, device="cuda",
                         stopped_by="--max-steps")
    assert on_gpu["advice"] == "more steps" and "GPU" not in on_gpu["budget_note"]


def test_a_model_predicting_one_class_is_marked_not_trained_everywhere(snli_run, tmp_path, monkeypatch):
    from aflite.evaluate import models as M

    tmp, data, run, _ = snli_run
    monkeypatch.setattr(M._MaxPPMI, "predict", lambda self, a, b: np.zeros(len(a), dtype=np.int64))
    code = main(["evaluate", str(data), str(run), "--out", str(tmp_path / "ev"), "--models", "ppmi,ppmi:hypothesis",
                 "--seeds", "1", "--no-single-iteration", "--quiet"])
    assert code == 0
    res = json.loads((tmp_path / "ev" / "results.json").read_text())
    for model in ("ppmi:pair", "ppmi:hypothesis"):
        for entry in res["aggregate"][model].values():
            assert entry["not_trained"]["reason"].startswith("predicts ")
    assert all(r["not_trained"] for r in res["runs"])
    md = (tmp_path / "ev" / "summary.md").read_text()
    assert "| not trained |" in md and "**Not trained**" in md
    assert res["verdict"] == ["Not counted: ppmi:hypothesis, ppmi:pair (not trained: see the tables)."]


def test_featurizer_options_reach_the_probe_featurizers_that_take_them(tmp_path: Path) -> None:
    """compare_runs' featurizer_options (aflite evaluate's registry-made --model-path) go to each probe featurizer
    that takes them and join its models' cache key; a featurizer that takes none gets none."""
    from aflite.evaluate.models import _Corpus, _FeatureStore

    store = _FeatureStore(_Corpus("D", ["a"], ["b"], "fp"), tmp_path, False, {"model_path": "/m", "lr": 1e-3})
    assert store.options_for("minilm") == {"model_path": "/m"} == store.keyed_options("minilm")
    assert store.options_for("ngram") == {} and store.keyed_options("ngram") is None
    args = ["evaluate", "d.tsv", "r", "--out", str(tmp_path / "o"), "--model-path", "/m"]
    from aflite.cli import build_parser
    from aflite.cli.flags import featurizer_flag_values

    assert featurizer_flag_values(build_parser().parse_args(args)) == {"model_path": "/m"}


def _tamper(npy: Path, seed: int = 0) -> None:
    """Numbers of the same shape and dtype written over a cached matrix (what a bad copy or another tool leaves)."""
    x = np.load(npy)
    np.save(npy, np.random.default_rng(seed).random(x.shape).astype(x.dtype))


def test_evaluate_never_uses_a_tampered_run_cache(snli_run, tmp_path, caplog):
    """#50 item 4: numbers of the same shape written over RUN/cache/*.npy are caught by the sha256 the cache
    records: the entry is not used (a warning names the file), Φ is recomputed into evaluate's own cache, the
    single-iteration figures are those of the untouched cache, and the run folder is left as it is. A forged
    record (its sha256 rewritten to match) is refused in one line by the run's checkpoint fingerprint, naming the
    file, the check explain makes too."""
    tmp, data, run, _ = snli_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    kw = dict(models=["ppmi:pair"], seeds=1, random_baseline=False, show_progress=False)
    before = next(s for s in evaluate(data, [copy], tmp_path / "a", **kw).training_sets if s["kind"] == "single")
    (npy,) = (copy / "cache").glob("ngram-pair-*.npy")
    _tamper(npy)
    tampered = npy.read_bytes()
    caplog.clear()
    after = next(s for s in evaluate(data, [copy], tmp_path / "b", **kw).training_sets if s["kind"] == "single")
    assert any(str(npy) in r.getMessage() and "sha256 differs" in r.getMessage() for r in caplog.records)
    assert {k: v for k, v in after["info"].items() if k != "seconds"} == \
        {k: v for k, v in before["info"].items() if k != "seconds"}
    assert npy.read_bytes() == tampered  # the run's cache is the run's: read, never written
    assert list((tmp_path / "b" / "cache").rglob("ngram-pair-*.npy"))  # recomputed into evaluate's own cache
    meta = npy.with_suffix(".json")
    record = json.loads(meta.read_text())
    from aflite.hashing import file_sha256

    meta.write_text(json.dumps({**record, "sha256": file_sha256(npy)}))
    with pytest.raises(InputError, match="checkpoint fingerprint differs") as err:
        evaluate(data, [copy], tmp_path / "c", **kw)
    assert str(npy) in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "c").exists()
