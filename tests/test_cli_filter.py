"""``aflite filter`` end to end: outputs, summary, errors that leave nothing behind, kill and --resume."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aflite.rundir.checkpoint
from aflite.cli import main


def make_inputs(tmp: Path, n: int = 400, seed: int = 0) -> tuple[Path, Path, Path]:
    rng = np.random.default_rng(seed)
    y = rng.choice(["entailment", "neutral", "contradiction"], n)
    X = rng.standard_normal((n, 5)).astype(np.float32)
    biased = rng.random(n) < 0.4
    X[biased, 0] += 3.0 * (y[biased] == "entailment")
    X[biased, 1] += 3.0 * (y[biased] == "neutral")
    np.save(tmp / "X.npy", X)
    (tmp / "labels.csv").write_text("id,label\n" + "".join(f"ex{i},{lab}\n" for i, lab in enumerate(y)))
    return tmp / "X.npy", tmp / "labels.csv", tmp / "labels.csv"


ARGS = ["-n", "120", "-m", "8", "-t", "80", "-k", "30", "--seed", "3", "--quiet"]


def test_filter_writes_the_run_directory(tmp_path):
    X, labels, ids = make_inputs(tmp_path)
    out = tmp_path / "run"
    code = main(["filter", "--features", str(X), "--labels", str(labels), "--ids", str(ids), "--out", str(out), *ARGS])
    assert code == 0
    kept = (out / "kept_ids.txt").read_text().split()
    removed = (out / "removed_ids.txt").read_text().split()
    assert len(kept) + len(removed) == 400
    assert set(kept).isdisjoint(removed)
    assert kept[0].startswith("ex")
    rows = list(csv.DictReader((out / "instances.csv").open()))
    assert [r["id"] for r in rows] == [f"ex{i}" for i in range(400)]
    by_id = {r["id"]: r for r in rows}
    for i in removed:
        assert float(by_id[i]["predictability"]) >= 0.75
        assert int(by_id[i]["removed_at"]) >= 0
    summary = json.loads((out / "results.json").read_text())
    assert summary["size_after"] == len(kept)
    assert summary["parameters"]["n_partitions"] == 8
    assert summary["parameters"]["random_state"] == 3
    assert summary["sizes"][0] == 400 and summary["sizes"][-1] == len(kept)
    assert summary["stop_reason"]
    assert "numpy" in summary["versions"]
    assert sum(summary["label_counts_after"].values()) == len(kept)
    assert not list(out.glob(".*.tmp"))


def test_kill_and_resume_gives_the_uninterrupted_result(tmp_path, monkeypatch):
    X, labels, _ = make_inputs(tmp_path)
    common = ["filter", "--features", str(X), "--labels", str(labels), *ARGS]
    assert main([*common, "--out", str(tmp_path / "full")]) == 0

    real_save = aflite.rundir.checkpoint.save_checkpoint
    calls = {"n": 0}

    def save_then_die(*a, **kw):
        real_save(*a, **kw)
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(aflite.rundir.checkpoint, "save_checkpoint", save_then_die)
    out = tmp_path / "killed"
    assert main([*common, "--out", str(out)]) == 130
    assert (out / "checkpoint.npz").exists()
    assert not (out / "results.json").exists()
    monkeypatch.setattr(aflite.rundir.checkpoint, "save_checkpoint", real_save)
    assert main([*common, "--out", str(out)]) == 2  # refuses to overwrite without --resume
    assert main([*common, "--out", str(out), "--resume"]) == 0
    assert (out / "instances.csv").read_text() == (tmp_path / "full" / "instances.csv").read_text()
    s = json.loads((out / "results.json").read_text())
    assert s["resumed_from_iteration"] == 2


def test_resume_refuses_other_parameters(tmp_path):
    X, labels, _ = make_inputs(tmp_path)
    out = tmp_path / "run"
    assert main(["filter", "--features", str(X), "--labels", str(labels), "--out", str(out), *ARGS]) == 0
    args = [a if a != "30" else "20" for a in ARGS]
    assert main(["filter", "--features", str(X), "--labels", str(labels), "--out", str(out), "--resume", *args]) == 2


@pytest.mark.parametrize(
    "mutate, extra, message",
    [
        ("short_labels", [], "400 rows"),
        ("nan", [], "row 5, column 2"),
        ("one_class", [], "two classes"),
        (None, ["-t", "200"], "train_size"),
        (None, ["-n", "400"], "target_size"),
        (None, ["-k", "0"], "slice-size"),
        (None, ["--threshold", "1.5"], "threshold"),
        ("truncated", [], "X.npy"),
        ("missing", [], "X.npy"),
        (None, ["--device", "tpu"], "unknown device"),
        (None, ["--cluster", "local:x"], "--cluster"),
    ],
)
def test_bad_input_is_one_line_nonzero_and_writes_nothing(tmp_path, capsys, mutate, extra, message):
    X, labels, _ = make_inputs(tmp_path)
    if mutate == "short_labels":
        labels.write_text("\n".join(labels.read_text().splitlines()[:-1]) + "\n")
    elif mutate == "nan":
        arr = np.load(X)
        arr[5, 2] = np.nan
        np.save(X, arr)
    elif mutate == "one_class":
        labels.write_text("id,label\n" + "".join(f"ex{i},same\n" for i in range(400)))
    elif mutate == "truncated":
        X.write_bytes(X.read_bytes()[:1000])
    elif mutate == "missing":
        X.unlink()
    out = tmp_path / "run"
    code = main(["filter", "--features", str(X), "--labels", str(labels), "--out", str(out), *ARGS, *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    assert len(err) == 1 and message in err[0]
    assert not out.exists() or not any(out.iterdir())


def test_help_states_the_paper_defaults():
    proc = subprocess.run([sys.executable, "-m", "aflite", "filter", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "Table 8" in text and "default 64" in text and "default 0.75" in text
    assert "50K/550K" in text and "10K/550K" in text


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_memory_mapped_cluster_run_equals_the_plain_run(tmp_path):
    """--mmap streams the features from disk; --cluster local:2 fits the partitions in two worker processes."""
    pytest.importorskip("dask.distributed")
    X, labels, ids = make_inputs(tmp_path, n=600, seed=4)
    base = ["filter", "--features", str(X), "--labels", str(labels), "--ids", str(ids), *ARGS]
    # the plain run on the CPU path, as the cluster's workers: on a GPU machine auto would pick the GPU
    assert main([*base, "--out", str(tmp_path / "plain"), "--device", "cpu"]) == 0
    assert main([*base, "--out", str(tmp_path / "spread"), "--mmap", "--cluster", "local:2"]) == 0
    for name in ("kept_ids.txt", "removed_ids.txt", "instances.csv"):
        assert (tmp_path / "plain" / name).read_text() == (tmp_path / "spread" / name).read_text()
    summary = json.loads((tmp_path / "spread" / "results.json").read_text())
    assert summary["cluster"] == "local:2" and summary["device"] == "cpu"


def test_resume_refuses_features_changed_outside_a_64_row_sample(tmp_path, capsys):
    X, labels, ids = make_inputs(tmp_path)
    out = tmp_path / "run"
    argv = ["filter", "--features", str(X), "--labels", str(labels), "--ids", str(ids), "--out", str(out), *ARGS]
    assert main(argv) == 0
    arr = np.load(X)
    arr[5] += 1.0  # row 5 is not among the 64 rows older versions sampled
    np.save(X, arr)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main([*argv, "--resume"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "checkpoint was made from different features or labels" in err[0], err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_resume_from_another_dataset_is_refused_before_anything_is_written(tmp_path, capsys):
    from test_cli_safety import sample_rows

    rows = sample_rows(300)
    a, b = tmp_path / "a.tsv", tmp_path / "b.tsv"
    a.write_text("id\tpremise\thypothesis\tlabel\n" + "".join("\t".join(r) + "\n" for r in rows[:240]))
    b.write_text("id\tpremise\thypothesis\tlabel\n" + "".join("\t".join(r) + "\n" for r in rows[60:]))
    out = tmp_path / "run"
    fast = ["--featurizer", "ngram", "--quiet", "-m", "4", "--no-probe"]
    assert main(["run", str(a), "--out", str(out), *fast]) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["run", str(b), "--out", str(out), *fast, "--resume"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "made from a different dataset" in err[0], err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # not even into cache/
    # another Φ on the same data: refused after featurizing, and what that wrote into cache/ is removed again
    capsys.readouterr()
    assert main(["run", str(a), "--out", str(out), *fast, "--resume", "--view", "hypothesis"]) == 2
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
