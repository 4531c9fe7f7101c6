"""Trust, round 5 (issue 42): in-memory data, odd text, cards and messages, each driven through the real input (real
files, real DataFrames, the real command line) and checked for one precise line and nothing half-written or written
outside ``out``/``cache_dir``."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import aflite
from aflite import AuditConfig, audit_file, data, evaluate_runs, explain_run, write_card
from aflite.cli import main
from aflite.errors import InputError, OutputError, ParameterError

pd = pytest.importorskip("pandas")

KW: dict[str, Any] = {"params": {"target_size": 0.6, "n_partitions": 8, "random_state": 0},
                      "featurizer_options": {"n_components": 32}, "show_progress": False, "probe": False}


def demo(n: int) -> Any:
    """The first ``n`` rows of the bundled sample, every column a Python string (object dtype: a cell may then hold
    any str, a lone surrogate too, as a DataFrame built from JSON or from Python strings does)."""
    frame = pd.read_csv(data.demo_dataset_path(), sep="\t", quoting=csv.QUOTE_NONE, keep_default_na=False, dtype=str)
    return frame.head(n).astype(object)


def write_jsonl(path: Path, frame: Any, raw: dict[tuple[int, str], str] | None = None) -> Path:
    """``frame`` as JSONL; ``raw[(row, column)]`` is written as it is inside the quotes (a JSON escape)."""
    lines = []
    for i, rec in enumerate(frame.to_dict("records")):
        cells = [f"{json.dumps(k)}: " + (f'"{raw[(i, k)]}"' if raw and (i, k) in raw else json.dumps(v))
                 for k, v in rec.items()]
        lines.append("{" + ", ".join(cells) + "}\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def one_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"aflite {command}: error: "), err
    return lines[0]


# ------------------------------------------------------------------------- 1. nothing outside out / cache_dir
@pytest.mark.slow  # ~50 s on two loaded cores: a child process exports and quantizes a (tiny) encoder
def test_an_encoder_without_a_cache_writes_nothing_outside_its_call(tmp_path: Path) -> None:
    """minilm on the ONNX backend with out=None and no cache_dir: the export lives in a temporary folder removed
    once loaded, and ONNX Runtime's telemetry (a device id under ~/.cache/Microsoft) is off. Run in a child whose
    home, XDG cache and temporary folder are empty folders, so anything written there is seen."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_model

    model = make_tiny_model(tmp_path / "tiny")
    home, tmp, xdg = tmp_path / "home", tmp_path / "tmp", tmp_path / "xdg"
    for d in (home, tmp, xdg):
        d.mkdir()
    demo(40).to_csv(tmp_path / "d.tsv", sep="\t", index=False)
    code = ("import sys, pandas as pd, aflite\n"
            "df = pd.read_csv(sys.argv[1], sep='\\t', dtype=str, keep_default_na=False)\n"
            "res = aflite.run(df, featurizer='minilm', featurizer_options={'model_path': sys.argv[2], "
            "'backend': 'onnx-int8'}, show_progress=False, probe=False)\n"
            "print(len(res.filtered))\n")
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "XDG_CACHE_HOME": str(xdg),
           "PYTHONPATH": str(Path(aflite.__file__).parents[1]), "OMP_NUM_THREADS": "1"}
    env.pop("ORT_DISABLE_TELEMETRY", None)
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "d.tsv"), str(model)], env=env,
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) > 0
    assert [str(p) for p in home.rglob("*")] == [] and [str(p) for p in xdg.rglob("*")] == []
    # PyTorch's own empty torchinductor_<user> folder (made when torch._dynamo is imported) is all that may be there
    left = [p for p in tmp.rglob("*") if not p.name.startswith("torchinductor_")]
    assert left == [] and not any(p.is_file() for p in tmp.rglob("*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.tsv", "home", "tiny", "tmp", "xdg"]


# ------------------------------------------------------------------------- 2, 3. lone surrogates
def test_a_lone_surrogate_in_a_dataframe_text_is_one_line_naming_row_and_column(tmp_path: Path) -> None:
    frame = demo(60)
    frame.loc[5, "hypothesis"] = "x\ud800"
    for out in (None, tmp_path / "out"):
        with pytest.raises(InputError, match=r"in-memory pandas DataFrame: row 5, column 'hypothesis': the text "
                                             r"holds a lone surrogate U\+D800") as err:
            aflite.run(frame, out, **KW)
        assert "\n" not in str(err.value) and "out=None" not in str(err.value)
    assert not (tmp_path / "out").exists()


def test_a_lone_surrogate_escape_in_a_jsonl_file_is_refused_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", demo(60), {(7, "premise"): "A man \\ud800 sits."})
    code = main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    line = one_line(capsys.readouterr().err, "run")
    assert code == 2 and "d.jsonl: line 8, column 'premise': the text holds a lone surrogate U+D800" in line
    assert not (tmp_path / "out").exists()


def test_a_lone_surrogate_in_an_id_is_refused_at_load_from_a_file_and_from_an_index(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", demo(60), {(3, "id"): "id\\udc80"})
    code = main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    line = one_line(capsys.readouterr().err, "run")
    assert code == 2 and "line 4, column 'id': the id holds a lone surrogate U+DC80" in line
    assert not (tmp_path / "out").exists()
    frame = demo(60).set_index("id")
    frame.index = pd.Index([*frame.index[:3], "id\udc80", *frame.index[4:]], dtype=object)
    with pytest.raises(InputError, match=r"row 3 \(index 'id\\udc80'\), column '\(index\)': the id holds a lone "
                                         r"surrogate"):
        aflite.run(frame, tmp_path / "out2", **KW)
    assert not (tmp_path / "out2").exists()


# ------------------------------------------------------------------------- 4. an index Parquet cannot store
@pytest.mark.parametrize("index", ["mixed", "tuples"])
def test_an_index_parquet_cannot_hold_is_refused_before_the_filter(tmp_path: Path, index: str) -> None:
    frame = demo(60).set_index("id")
    values = [1, *frame.index[1:]] if index == "mixed" else [(i, "a") for i in range(len(frame))]
    frame.index = pd.Index(values, dtype=object, tupleize_cols=False)
    with pytest.raises(InputError, match=r"its index \(Index, dtype object\) cannot be written to filtered.parquet"):
        aflite.run(frame, tmp_path / "out", **KW)
    assert not (tmp_path / "out").exists()
    assert len(aflite.run(frame, **KW).filtered) > 0  # without a folder nothing is written: it runs


# ------------------------------------------------------------------------- 6. the audit's featurizer refusals
@pytest.mark.parametrize(("name", "why"), [("warmup", "fine-tuned on the labels"),
                                           ("minilm+ngram", "does not take a combination")])
def test_the_audit_says_why_it_does_not_take_a_text_featurizer(tmp_path: Path, name: str, why: str) -> None:
    demo(60).to_csv(tmp_path / "d.tsv", sep="\t", index=False)
    with pytest.raises(ParameterError) as err:
        audit_file(tmp_path / "d.tsv", tmp_path / "out", AuditConfig(featurizer=name, tra=False), show_progress=False)
    assert f"featurizer={name!r}" in str(err.value) and why in str(err.value)
    assert "images" not in str(err.value) and "ngram or minilm" in str(err.value)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------- 7, 8. column names and label types
def test_int_column_names_are_named_by_their_ints() -> None:
    frame = demo(60)[["premise", "hypothesis", "label"]]
    frame.columns = [0, 1, 2]
    res = aflite.run(frame, dataset_options={"text_a": 0, "text_b": 1, "label": 2}, **KW)
    assert list(res.filtered.columns) == [0, 1, 2] and 0 < len(res.filtered) < 60
    with pytest.raises(InputError,
                       match=r"missing column 5 \(given by text_b=\); the pandas DataFrame has: '0', '1', '2'"):
        aflite.run(frame, dataset_options={"text_a": 0, "text_b": 5, "label": 2}, **KW)


def test_labels_0_and_the_string_0_are_not_merged_silently(tmp_path: Path) -> None:
    frame = demo(60)
    frame["label"] = [0 if i % 3 == 0 else "0" if i % 3 == 1 else "1" for i in range(60)]
    with pytest.raises(InputError, match=r"row 1, column 'label': label '0' \(str\) and row 0's 0 \(int\) would be "
                                         r"one class '0'"):
        aflite.run(frame, **KW)
    path = write_jsonl(tmp_path / "d.jsonl", frame)  # JSON keeps the two types apart too
    with pytest.raises(InputError, match=r"d.jsonl: line 2, column 'label': label '0' \(str\)"):
        aflite.load_dataset(path)
    res = aflite.run(frame, dataset_options={"label_map": {0: "zero", "0": "zero", "1": "one"}}, **KW)
    assert set(res.scores["label"]) == {"zero", "one"}  # mapped on purpose: one class, as asked


# ------------------------------------------------------------------------- 9. report on an in-memory run
def test_report_on_an_in_memory_run_does_not_advise_a_dataset_path(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    aflite.run(demo(60), tmp_path / "run", **KW)
    page = (tmp_path / "run" / "report.html").read_bytes()
    code = main(["report", str(tmp_path / "run")])
    line = one_line(capsys.readouterr().err, "report")
    assert code == 2 and "only the page the run wrote can show them: keep it" in line
    assert "path resolves" not in line and (tmp_path / "run" / "report.html").read_bytes() == page


# ------------------------------------------------------------------------- 10, 5, 12. the card
def test_a_license_that_is_not_a_string_is_a_parameter_error(tmp_path: Path) -> None:
    aflite.run(demo(60), tmp_path / "run", **KW)
    with pytest.raises(ParameterError, match=r"license= 123: give a license identifier"):
        write_card(tmp_path / "run", tmp_path / "card", license=123)  # type: ignore[arg-type]
    assert not (tmp_path / "card").exists()


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two runs of one file (pair and hypothesis views), one evaluate of both with label-matched subsets and one
    of the first without any baseline; small and quick (the n-gram model only)."""
    tmp = tmp_path_factory.mktemp("card5")
    path = tmp / "d.tsv"
    demo(400).to_csv(path, sep="\t", index=False)
    aflite.run(path, tmp / "r1", **KW)
    aflite.run(path, tmp / "r2", view="hypothesis", **KW)
    evaluate_runs(path, [tmp / "r1", tmp / "r2"], tmp / "both", models=["ngram"], seeds=2, label_matched=True,
                  show_progress=False)
    evaluate_runs(path, [tmp / "r1"], tmp / "bare", models=["ngram"], seeds=1, random_baseline=False,
                  single_iteration=False, show_progress=False)
    return {"tmp": tmp, "data": path, "r1": tmp / "r1", "r2": tmp / "r2", "both": tmp / "both", "bare": tmp / "bare"}


def test_the_card_quotes_its_own_runs_verdict_and_shows_the_label_matched_subsets(two_runs: dict[str, Path]) -> None:
    recorded = json.loads((two_runs["both"] / "results.json").read_text(encoding="utf-8"))["verdict"]
    assert any("D(Φ ngram)" in s and "hypothesis" not in s for s in recorded)  # the folder holds both runs' verdicts
    card = write_card(two_runs["r2"], two_runs["tmp"] / "card2", evaluate=two_runs["both"])
    text = card.readme.read_text(encoding="utf-8")
    quoted = [line for line in text.splitlines() if line.startswith("> Trained on")]
    assert quoted and all("D(Φ ngram-hypothesis)" in s for s in quoted)
    assert "D_random(" in text and "labels of D(Φ ngram-hypothesis)" in text
    assert "with D(Φ)'s label counts (--label-matched)" in text
    assert card.manifest["evaluate"]["sets"]["label-matched random"].startswith("D_random(")


def test_the_card_names_only_the_sets_that_were_trained(two_runs: dict[str, Path]) -> None:
    text = write_card(two_runs["r1"], two_runs["tmp"] / "card1", evaluate=two_runs["bare"]).readme.read_text(
        encoding="utf-8")
    assert "Models trained on D and on D(Φ);" in text
    assert "single-iteration" not in text and "random subsets of D, on" not in text
    assert "trained no same-size random subsets of D (--no-random-baseline)" in text


def test_a_single_iteration_model_on_one_row_is_noted(two_runs: dict[str, Path]) -> None:
    tmp = two_runs["tmp"]
    aflite.run(two_runs["data"], tmp / "t1", **{**KW, "params": {**KW["params"], "train_size": 1}})
    report = evaluate_runs(two_runs["data"], [tmp / "t1"], tmp / "ev_t1", models=["ngram"], seeds=1,
                           show_progress=False)
    single = next(s for s in report.training_sets if s["kind"] == "single")
    assert "trained on 1 row(s) (the run's t), fewer than the 3 labels" in single["info"]["note"]
    assert "**Notes on the training sets:**" in (tmp / "ev_t1" / "summary.md").read_text(encoding="utf-8")
    text = write_card(tmp / "t1", tmp / "card_t1", evaluate=tmp / "ev_t1").readme.read_text(encoding="utf-8")
    assert "fewer than the 3 labels" in text


def test_a_warmup_that_barely_moved_is_on_the_card(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_model

    model = make_tiny_model(tmp_path / "tiny")
    demo(80).to_csv(tmp_path / "d.tsv", sep="\t", index=False)
    aflite.run(tmp_path / "d.tsv", tmp_path / "run", featurizer="warmup", show_progress=False, probe=False,
               featurizer_options={"model_path": str(model), "max_steps": 3, "device": "cpu", "backend": "torch"})
    results = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    judged = results["featurizer"]["info"]["warmup_loss_judgement"]
    text = write_card(tmp_path / "run", tmp_path / "card").readme.read_text(encoding="utf-8")
    assert "over 3 steps" in text
    assert ("The warm-up's loss barely moved" in text) == (judged == "barely moved")


# ------------------------------------------------------------------------- 11. the same rows in another order
def test_rows_in_another_order_are_named_and_nothing_is_written(tmp_path: Path) -> None:
    frame = demo(200).set_index("id")
    aflite.run(frame, tmp_path / "run", **KW)
    shuffled = frame.sample(frac=1, random_state=1)
    for call in (lambda: evaluate_runs(shuffled, [tmp_path / "run"], tmp_path / "ev", models=["ngram"], seeds=1,
                                       show_progress=False),
                 lambda: explain_run(shuffled, tmp_path / "run", tmp_path / "ex", show_progress=False)):
        with pytest.raises(InputError, match=r"the same 200 rows \(ids and labels\) in another order \(the run's row 0 "
                                             r"is id 'snli-dev-0', here '") as err:
            call()
        assert "\n" not in str(err.value)
    assert not (tmp_path / "ev").exists() and not (tmp_path / "ex").exists()
    edited = frame.copy()
    edited.iloc[4, 0] = edited.iloc[4, 0] + " (edited)"
    with pytest.raises(InputError, match="the same ids and labels in the same order, but other texts"):
        explain_run(edited, tmp_path / "run", tmp_path / "ex", show_progress=False)
    assert not (tmp_path / "ex").exists()


def test_audit_compare_takes_the_runs_rows_in_any_order(tmp_path: Path) -> None:
    frame = demo(200).set_index("id")
    aflite.run(frame, tmp_path / "run", **KW)
    shuffled = frame.sample(frac=1, random_state=1)
    config = AuditConfig(featurizer="ngram", tra=False, peco_shuffles=2, tsne_sample=50)
    res = audit_file(shuffled, tmp_path / "audit", config, compare=tmp_path / "run", show_progress=False)
    kept = (tmp_path / "run" / "kept_ids.txt").read_text(encoding="utf-8").split()
    assert [r.n for r in res.results] == [200, len(kept)]


# ------------------------------------------------------------------------- 12. messages naming internals
def test_too_few_rows_are_named_as_such_not_as_a_default_the_user_never_set() -> None:
    with pytest.raises(InputError, match=r"in-memory pandas DataFrame: 3 row\(s\) are too few to filter: AFLite keeps "
                                         r"at least 3 rows \(the smallest target size\) and removes some, so it needs "
                                         r"at least 4 rows"):
        aflite.run(demo(3), show_progress=False, probe=False)
    assert len(aflite.run(demo(4), show_progress=False, probe=False).filtered) >= 3


def test_an_unknown_dataset_option_is_named(tmp_path: Path) -> None:
    for given in (demo(60), data.demo_dataset_path()):
        with pytest.raises(ParameterError, match=r"unknown dataset option\(s\) 'txt_a'; the loaders take text_a, "):
            aflite.run(given, dataset_options={"txt_a": "premise"}, **KW)


# ------------------------------------------------------------------------- found by trying new data (trust5_cases.md)
def test_labels_differing_only_by_case_or_spaces_are_refused(tmp_path: Path) -> None:
    frame = demo(60)
    frame.loc[7, "label"] = frame.loc[7, "label"] + " "
    with pytest.raises(InputError, match=r"row 7, column 'label': label '\w+ ' differs from row \d+'s '\w+' only by "
                                         r"case or spaces"):
        aflite.run(frame, **KW)
    path = tmp_path / "d.tsv"
    upper = demo(60)
    upper.loc[9, "label"] = upper.loc[9, "label"].upper()
    upper.to_csv(path, sep="\t", index=False)
    with pytest.raises(InputError, match=r"d.tsv: line 11, column 'label': label '[A-Z]+' differs from"):
        aflite.load_dataset(path)


def test_an_empty_dataframe_says_no_rows() -> None:
    with pytest.raises(InputError, match=r"^in-memory pandas DataFrame: no rows$"):
        aflite.run(demo(0), **KW)


def test_a_folder_holding_a_run_is_refused_before_phi_in_the_callers_words(tmp_path: Path) -> None:
    aflite.run(demo(60), tmp_path / "run", **KW)
    cache = sorted(p.name for p in (tmp_path / "run" / "cache").iterdir())
    other = demo(120).tail(60).reset_index(drop=True)  # other rows: their Φ is not in the cache
    with pytest.raises(OutputError, match=r"holds a previous run: pass resume=True to continue it, overwrite=True "
                                             r"to start over, or choose another out$"):
        aflite.run(other, tmp_path / "run", **KW)
    assert sorted(p.name for p in (tmp_path / "run" / "cache").iterdir()) == cache


def test_evaluate_refuses_one_run_given_twice(tmp_path: Path) -> None:
    path = tmp_path / "d.tsv"
    demo(120).to_csv(path, sep="\t", index=False)
    aflite.run(path, tmp_path / "run", **KW)
    with pytest.raises(ParameterError, match=r"the run folder .*run/ is given twice"):
        evaluate_runs(path, [tmp_path / "run", str(tmp_path / "run") + "/"], tmp_path / "ev", models=["ngram"],
                      seeds=1, show_progress=False)
    assert not (tmp_path / "ev").exists()


def test_audit_file_without_progress_prints_no_progress_bar(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    config = AuditConfig(featurizer="ngram", tra=False, peco_shuffles=2, tsne_sample=50)
    audit_file(demo(120), tmp_path / "audit", config, show_progress=False)
    assert "ngram features" not in capfd.readouterr().err
