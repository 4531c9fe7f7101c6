"""``aflite run`` / the pipeline: a dataset file in, the filtered dataset in the same format out."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from aflite.cli import main
from aflite.commands.run import run, scaled_defaults
from aflite.data import demo_dataset_path, load_dataset


@pytest.fixture()
def small_snli(tmp_path):
    """The first 600 pairs of the bundled real SNLI sample, same format (overrides conftest's 300-pair fixture)."""
    lines = gzip.decompress(demo_dataset_path().read_bytes()).splitlines(keepends=True)
    path = tmp_path / "small.tsv.gz"
    path.write_bytes(gzip.compress(b"".join(lines[:601])))
    return path


def planted_embeddings(tmp_path, ds, seed=0):
    """Embeddings (npy + ids) where a third of the rows carry their label: a bias AFLite must remove."""
    rng = np.random.default_rng(seed)
    n = len(ds)
    X = rng.standard_normal((n, 8)).astype(np.float32)
    classes = sorted(set(ds.labels.tolist()))
    biased = rng.random(n) < 0.35
    for j, lab in enumerate(classes):
        X[biased & (ds.labels == lab), j] += 4.0
    np.save(tmp_path / "emb.npy", X)
    (tmp_path / "emb.ids.txt").write_text("".join(f"{i}\n" for i in ds.ids))
    return biased


def test_scaled_defaults_follow_table_8():
    d = scaled_defaults(550_152)
    assert (d["n_partitions"], d["train_size"], d["slice_size"], d["target_size"]) == (64, 50_000, 10_000, 92_000)
    s = scaled_defaults(19_666)
    assert (s["train_size"], s["slice_size"], s["target_size"]) == (1787, 357, 3289)


def test_run_writes_filtered_dataset_in_input_format(tmp_path, small_snli):
    ds = load_dataset(small_snli)
    biased = planted_embeddings(tmp_path, ds)
    out = tmp_path / "run"
    res = run(
        small_snli,
        out,
        featurizer="precomputed",
        params={"train_size": 100, "slice_size": 20, "target_size": 200, "n_partitions": 16},
        featurizer_options={"embeddings": tmp_path / "emb.npy", "embedding_ids": tmp_path / "emb.ids.txt"},
        show_progress=False,
        probe=True,
    )
    kept_ids = (out / "kept_ids.txt").read_text().split()
    assert len(kept_ids) == res.keep.sum() < len(ds)
    # the filtered file: same header and the kept records byte for byte, gzip in -> gzip out
    original = gzip.decompress(small_snli.read_bytes()).splitlines(keepends=True)
    filtered = gzip.decompress(res.filtered_path.read_bytes()).splitlines(keepends=True)
    assert filtered[0] == original[0]
    assert filtered[1:] == [original[1 + i] for i in np.flatnonzero(res.keep)]
    assert biased[~res.keep].mean() > 2 * biased[res.keep].mean()
    s = json.loads((out / "results.json").read_text())
    assert s["featurizer"]["name"] == "precomputed"
    assert s["parameters"]["train_size"] == 100
    assert {r["name"] for r in s["partial_input_probe"]["results"]} >= {"D", "D(Φ)"}
    md = (out / "summary.md").read_text()
    assert "Removed by AFLite" in md and "Retained by AFLite" in md and "| label | before | after" in md


def test_groups_keep_a_premise_on_one_side(tmp_path, small_snli):
    ds = load_dataset(small_snli)
    assert ds.groups is not None and len(np.unique(ds.groups)) < len(ds)
    planted_embeddings(tmp_path, ds)
    res = run(
        small_snli,
        tmp_path / "g",
        featurizer="precomputed",
        params={"train_size": 90, "slice_size": 30, "target_size": 200, "n_partitions": 8},
        featurizer_options={"embeddings": tmp_path / "emb.npy", "embedding_ids": tmp_path / "emb.ids.txt"},
        show_progress=False,
        probe=False,
    )
    assert res.summary["parameters"]["groups"] is True


def test_cli_run_with_ngram_features(tmp_path, small_snli, capsys):
    out = tmp_path / "cli"
    code = main(
        [
            "run",
            str(small_snli),
            "--out",
            str(out),
            "--featurizer",
            "ngram",
            "--quiet",
            "-t",
            "100",
            "-k",
            "20",
            "-n",
            "200",
            "-m",
            "8",
            "--no-probe",
        ]
    )
    assert code == 0
    assert (out / "filtered.tsv.gz").exists() and (out / "instances.csv").exists()
    printed = capsys.readouterr().out
    assert "|D| = 600" in printed


def test_cli_run_reports_bad_parameters_before_work(tmp_path, small_snli, capsys):
    out = tmp_path / "bad"
    assert main(["run", str(small_snli), "--out", str(out), "--featurizer", "ngram", "-t", "700"]) == 2
    assert "train_size" in capsys.readouterr().err
    assert not out.exists()


def test_cli_embed_then_filter(tmp_path, small_snli):
    emb = tmp_path / "feat"
    assert main(["embed", str(small_snli), "--out", str(emb), "--featurizer", "ngram", "--view", "hypothesis",
                 "--cache-dir", str(tmp_path / "cache"), "--quiet"]) == 0
    X = np.load(emb / "features.npy")
    ids = (emb / "ids.txt").read_text().split()
    assert X.shape[0] == len(ids) == 600 and X.dtype == np.float32
    out = tmp_path / "filtered"
    assert main(["filter", "--features", str(emb / "features.npy"), "--labels", str(emb / "labels.txt"),
                 "--ids", str(emb / "ids.txt"), "--mmap", "--out", str(out), "-t", "100", "-k", "20", "-n", "200",
                 "-m", "8", "--quiet"]) == 0
    kept = (out / "kept_ids.txt").read_text().split()
    assert set(kept) <= set(ids)


def test_a_run_folder_is_read_back_by_one_reader(tmp_path):
    """evaluate and audit --compare read RUN/kept_ids.txt through aflite.rundir.read.read_kept_ids: blank lines are
    skipped, and a folder without the file or with no kept ids is refused with a message naming the file."""
    from committed import commit

    from aflite.errors import InputError
    from aflite.rundir.read import read_kept_ids

    with pytest.raises(InputError, match=r"results\.json: not found: .* is not an aflite output folder"):
        read_kept_ids(tmp_path)
    parameters = {"dataset_size": 3, "target_size": 2, "n_partitions": 1, "train_size": 1, "slice_size": 1,
                  "threshold": 0.75, "strategy": "slicing", "model": "logistic", "C": 1.0}
    body = {"parameters": parameters, "size_before": 3, "size_after": 2, "n_iterations": 0, "sizes": [3, 2],
            "iterations": []}
    commit(tmp_path, body, command="filter")  # a committed folder without the file
    with pytest.raises(InputError, match=r"kept_ids\.txt: not found \(is it an AFLite run directory\?\)"):
        read_kept_ids(tmp_path)
    (tmp_path / "kept_ids.txt").write_text("\n  \n", encoding="utf-8")
    commit(tmp_path, body, command="filter")
    with pytest.raises(InputError, match=r"kept_ids\.txt: no kept ids"):
        read_kept_ids(tmp_path)
    (tmp_path / "kept_ids.txt").write_text("a\n\n b \n", encoding="utf-8")
    with pytest.raises(InputError, match=r"kept_ids\.txt: 7 bytes, but the manifest"):  # changed since the commit
        read_kept_ids(tmp_path)
    commit(tmp_path, body, command="filter")
    assert read_kept_ids(tmp_path) == ["a", "b"]


# ------------------------------------------------------------------- imbalanced labels and the probe (issue 25)
def imbalanced(tmp_path, n_major=595, n_minor=5):
    """Real SNLI text, relabelled: n_major rows 'common', n_minor rows 'rare' spread through the file."""
    lines = gzip.decompress(demo_dataset_path().read_bytes()).decode().splitlines()
    head, rows = lines[0].split("\t"), [r.split("\t") for r in lines[1: n_major + n_minor + 1]]
    li = head.index("gold_label") if "gold_label" in head else len(head) - 1
    rare = set(np.linspace(0, len(rows) - 1, n_minor).astype(int).tolist())
    for j, r in enumerate(rows):
        r[li] = "rare" if j in rare else "common"
    path = tmp_path / "imb.tsv"
    path.write_text("\n".join("\t".join(r) for r in [head, *rows]) + "\n")
    return path


def test_imbalanced_labels_finish_with_the_probe_skipped_where_it_cannot_train(tmp_path, capsys):
    data, out = imbalanced(tmp_path), tmp_path / "out"
    code = main(["run", str(data), "--out", str(out), "--featurizer", "ngram", "--quiet", "-m", "8"])
    assert code == 0, capsys.readouterr().err
    res = json.loads((out / "results.json").read_text())
    probe = res["partial_input_probe"]["results"]
    assert probe[0]["name"] == "D" and probe[0]["skipped"] is None and probe[0]["accuracy"] is not None
    skipped = [r for r in probe if r["skipped"]]
    assert all(r["accuracy"] is None and "rows" in r["skipped"] for r in skipped)
    assert skipped or "could not be probed" in probe[-1]["name"]  # subsets holding one class are not probed
    json.loads((out / "results.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    # --resume on the finished run works too (it crashed the same way before)
    assert main(["run", str(data), "--out", str(out), "--featurizer", "ngram", "--quiet", "-m", "8", "--resume"]) == 0


def test_a_probe_that_d_cannot_train_is_skipped_before_the_filter(tmp_path, capsys, monkeypatch):
    data = imbalanced(tmp_path, 599, 1)  # one 'rare' row: no fold split can train on two classes
    code = main(["run", str(data), "--out", str(tmp_path / "out"), "--featurizer", "ngram", "--quiet", "-m", "4"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "note: the hypothesis-only probe is skipped: too few rows of the other classes" in captured.err
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["partial_input_probe"]["results"] == [] and "too few rows" in res["partial_input_probe"]["skipped"]


# ------------------------------------------------------------------------- the demo and summary.md (issue 25, 14)
def test_summary_md_shows_text_as_written_and_escapes_markdown_only():
    from aflite.commands.summary_md import _md

    assert _md("The man isn't \"here\"") == "The man isn't \"here\""
    assert _md("a <b>bold</b> & | pipe\nnext") == "a \\<b\\>bold\\</b\\> \\& \\| pipe next"


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_demo_prints_each_table_once_without_the_resource_path_and_the_real_wall_time(tmp_path, capsys):
    out = tmp_path / "demo"
    code = main(["demo", "--out", str(out), "--featurizer", "ngram", "--quiet", "-m", "4"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "resources" not in printed and "snli_sample.tsv.gz" not in printed
    assert printed.count("hypothesis-only probe on D ") == 1 and printed.count("## Removed by AFLite") == 1
    assert printed.startswith("verdict: ")
    md = (out / "summary.md").read_text()
    assert md.startswith("# aflite run: the bundled SNLI sample (first 1,000 premise groups")
    assert "&#x27;" not in md and "&amp;" not in md and "&quot;" not in md
    assert "'" in md  # the examples' apostrophes, as written
    s = json.loads((out / "results.json").read_text())
    parts = sum(v for k, v in s["timings"].items() if k.endswith("_seconds"))
    assert s["wall_seconds_this_call"] >= parts >= s["filter_wall_seconds_this_call"]


def test_warmup_loss_summary_says_whether_the_loss_fell():
    from aflite.features.warmup import warmup_loss_summary

    fell = warmup_loss_summary([1.10, 1.08, 1.05, 0.9, 0.7, 0.6, 0.5, 0.45, 0.4], 3)
    assert fell.warmup_loss_judgement == "fell" and fell.warmup_loss_start == pytest.approx(1.0767, abs=1e-3)
    flat = warmup_loss_summary([1.106, 1.10, 1.08, 1.0, 0.98, 0.95, 0.94, 0.93, 0.931], 3)
    assert flat.warmup_loss_judgement == "barely moved" and flat.warmup_loss_chance == pytest.approx(1.0986)
    assert warmup_loss_summary([], 3).to_json() == {}


def test_help_imports_neither_numpy_nor_scikit_learn():
    import subprocess
    import sys

    code = ("import sys; from aflite.cli import build_parser; build_parser(); "
            "print([m for m in ('numpy', 'sklearn', 'scipy', 'torch') if m in sys.modules])")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"


# ------------------------------------------------------------------ the probe uses the run's groups (issue 34, 2)
def test_the_probe_folds_use_the_runs_groups(counterfactual_runs):
    """Grouped by premise the counterfactual twins (same hypothesis, other premise, other label) straddle the
    probe's folds and pull it far below the majority rate on D; grouped by family they never straddle, and the
    probe on D sits at the majority rate. The same rows, the same seed: only the folds differ."""
    by_premise, by_family = (counterfactual_runs[g]["partial_input_probe"] for g in ("premise", "family"))
    assert by_premise["groups"] == "premise" and by_family["groups"] == "family"
    assert "folds keep each family group on one side" in by_family["model"]
    d_premise, d_family = by_premise["results"][0], by_family["results"][0]
    assert d_premise["size"] == d_family["size"] == 1340
    assert d_premise["delta_majority"] < -0.10
    assert abs(d_family["delta_majority"]) < 0.05


def test_probe_folds_never_split_a_group():
    from aflite.evaluate import compare_partial_input
    from aflite.splits import probe_folds

    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(60), 3)
    y = rng.integers(0, 3, size=len(groups))
    for tr, te in probe_folds(y, groups, 5, seed=1):
        assert not set(groups[tr]) & set(groups[te])
    for tr, te in probe_folds(y, None, 5, seed=1):  # without groups: the stratified folds of before
        assert len(te) in (36, 37) and len(set(tr) | set(te)) == len(y)
    assert [len(te) for _, te in probe_folds(y, np.repeat([0, 1, 2], 60), 5, 1)] \
        == [60, 60, 60]  # fewer groups than folds: one fold per group
    y3 = np.array(["a", "b"] * 6)
    res = compare_partial_input([f"t{i % 4}" for i in range(12)], y3, np.ones(12, bool), random_repeats=1,
                                groups=np.zeros(12, int))
    assert res[0].skipped == "all rows are in one group, so grouped folds cannot hold any out"


# ------------------------------------------------------------------ what a newcomer sees (issue 34, 7)
def test_the_demo_names_its_page_and_summary_links_it(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--featurizer", "ngram", "-m", "8", "--quiet", "--no-probe"]) == 0
    stdout = capsys.readouterr().out
    assert f"page: {out / 'report.html'} (open it in a browser" in stdout
    assert (out / "report.html").is_file()
    md = (out / "summary.md").read_text(encoding="utf-8")
    assert "[report.html](report.html)" in md.split("\n## ")[0]  # in the head, before the examples
    n = json.loads((out / "results.json").read_text(encoding="utf-8"))["n_iterations"]
    assert f"{n} phases (0–{n - 1})" in md and f"({n} phases (0–{n - 1}); " in stdout


def test_the_demo_folder_is_ignored_in_a_checkout():
    """`aflite demo` run from a clone writes ./aflite-demo (its documented default): git must ignore it."""
    import shutil
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    if shutil.which("git") is None or not (repo / ".git").exists():
        pytest.skip("not a git checkout")
    proc = subprocess.run(["git", "-C", str(repo), "check-ignore", "-q", "aflite-demo/summary.md"])
    assert proc.returncode == 0, "aflite-demo/ is not in .gitignore"
