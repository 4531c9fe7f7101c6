"""The synthetic experiment (paper §3, Figure 2, Table 7): data generator, a small end-to-end run, outputs, CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from aflite.errors import ParameterError
from aflite.experiments.circles import make_circles_dataset, train_dev_split
from aflite.experiments.outputs import plot_figure2
from aflite.experiments.synthetic import (
    PAPER_SEPARATIONS,
    PAPER_TABLE7,
    SyntheticExperiment,
    format_table,
    run_synthetic,
)

# A small but real run: one seed, N = 400, Table 8's m / t / k / τ (n = 2t). Shared by several tests.
SMALL = {"seeds": [3], "separations": (0.8, 0.4), "n_samples": 400, "show_progress": False}


@pytest.fixture(scope="module")
def small_result() -> SyntheticExperiment:
    return run_synthetic(**SMALL)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------- data
@pytest.mark.parametrize("sep", PAPER_SEPARATIONS)
def test_dataset_shape_labels_and_bias_fraction(sep: float) -> None:
    d = make_circles_dataset(sep, 1000, random_state=0)
    assert d.X.shape == (1000, 4) and d.X.dtype == np.float64
    assert np.array_equal(d.coords, d.X[:, :2])
    assert set(np.unique(d.y)) == {0, 1} and set(np.unique(d.ring)) == {0, 1}
    assert (d.ring == 1).sum() == 500  # balanced rings
    for c in (0, 1):  # exactly 75% of each ring is biased
        assert d.is_biased[d.ring == c].mean() == pytest.approx(0.75, abs=1e-9)
    # ring radii: inner ≈ 1 − sep, outer ≈ 1 (noise is zero-mean, so the mean radius is a little larger)
    r = np.hypot(d.coords[:, 0], d.coords[:, 1])
    assert r[d.ring == 1].mean() < r[d.ring == 0].mean()
    assert abs(np.median(r[d.ring == 0]) - 1.0) < 0.1
    # label = ring except for flips; flips only at 0.8, and only among the biased instances
    assert np.array_equal(d.y != d.ring, d.flipped)
    if sep >= 0.8:
        assert d.flipped.sum() == round(0.05 * d.is_biased.sum())
        assert not (d.flipped & ~d.is_biased).any()
    else:
        assert not d.flipped.any()


def test_bias_features_carry_the_label_and_noise_features_do_not() -> None:
    d = make_circles_dataset(0.6, 4000, random_state=1)
    f = d.X[:, 2:].sum(1)
    b = d.is_biased
    assert f[b & (d.y == 1)].mean() > 1.0 and f[b & (d.y == 0)].mean() < -1.0
    assert abs(f[~b & (d.y == 1)].mean() - f[~b & (d.y == 0)].mean()) < 0.3  # noise: label-independent
    assert abs(f[~b].mean()) < 0.2
    # the bias (not the rings) is what a linear model can use: sign of the bias score on biased rows
    assert ((f[b] > 0) == (d.y[b] == 1)).mean() > 0.8


def test_flipped_instances_carry_the_bias_of_their_new_label() -> None:
    d = make_circles_dataset(0.8, 4000, random_state=2)
    f = d.X[:, 2:].sum(1)
    fl = d.flipped
    assert fl.sum() == 150
    assert ((f[fl] > 0) == (d.y[fl] == 1)).mean() > 0.8
    assert ((f[fl] > 0) == (d.ring[fl] == 1)).mean() < 0.2


def test_dataset_is_deterministic_per_seed() -> None:
    a = make_circles_dataset(0.7, 300, random_state=5)
    b = make_circles_dataset(0.7, 300, random_state=5)
    c = make_circles_dataset(0.7, 300, random_state=6)
    for name in ("X", "y", "ring", "is_biased", "flipped"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.X, c.X)


def test_dataset_parameters_are_validated() -> None:
    for bad in (0.0, 1.0, -0.1, float("nan")):
        with pytest.raises(ParameterError):
            make_circles_dataset(bad, 100)
    with pytest.raises(ParameterError):
        make_circles_dataset(0.5, 3)
    with pytest.raises(ParameterError):
        make_circles_dataset(0.5, 100, flip_fraction=1.5)
    assert make_circles_dataset(0.5, 400, flip_fraction=0.1).flipped.sum() == 30  # explicit flips anywhere


def test_train_dev_split_is_stratified() -> None:
    y = np.r_[np.zeros(300, int), np.ones(100, int)]
    dev = train_dev_split(y, 0.2, 0)
    assert dev[y == 0].sum() == 60 and dev[y == 1].sum() == 20
    assert np.array_equal(dev, train_dev_split(y, 0.2, 0))


# ----------------------------------------------------------------------------------------- end to end
def test_small_run_removes_bias_and_breaks_the_linear_model(small_result: SyntheticExperiment) -> None:
    assert len(small_result.runs) == 2
    for r in small_result.runs:
        assert r.biased_fraction_before == pytest.approx(0.75)
        assert r.biased_fraction_after < r.biased_fraction_before - 0.05  # the biased share falls
        assert r.biased_removed > r.unbiased_removed + 0.2  # biased instances are removed preferentially
        assert 200 <= r.n_kept < 400 and r.n_iterations >= 400 - r.n_kept  # k = 1: one removal per phase
        assert r.accuracy_D["lr"] > 70.0  # the bias makes D linearly solvable ...
        assert r.accuracy_filtered["lr"] < r.accuracy_D["lr"] - 15.0  # ... and AFLite takes that away
        assert r.accuracy_coords_only["svm"] > 65.0
    # the rings are still there for the SVM (averaged: a dev split of D(Φ) has only ~40 rows per run here)
    svm = np.mean([r.accuracy_filtered["svm"] for r in small_result.runs])
    lr = np.mean([r.accuracy_filtered["lr"] for r in small_result.runs])
    assert svm > lr + 10.0
    r08 = small_result.runs_for(0.8)[0]
    assert r08.n_flipped == 15 and r08.flipped_removed > r08.unbiased_removed  # flipped ones go preferentially
    assert math.isnan(small_result.runs_for(0.4)[0].flipped_removed)


def test_run_is_deterministic() -> None:
    kw = {"seeds": [1], "separations": (0.6,), "n_samples": 250, "show_progress": False,
          "aflite_params": {"n_partitions": 32, "target_size": 150}}
    a, b = run_synthetic(**kw), run_synthetic(**kw)  # type: ignore[arg-type]
    ra, rb = a.runs[0], b.runs[0]
    assert (ra.n_kept, ra.accuracy_D, ra.accuracy_filtered) == (rb.n_kept, rb.accuracy_D, rb.accuracy_filtered)
    assert np.array_equal(a.panels[0].keep, b.panels[0].keep)


def test_run_parameters_are_validated() -> None:
    with pytest.raises(ParameterError):
        run_synthetic(seeds=[], show_progress=False)
    with pytest.raises(ParameterError):
        run_synthetic(seeds=[0], separations=(1.5,), show_progress=False)
    with pytest.raises(ParameterError):
        run_synthetic(seeds=[0], n_samples=150, show_progress=False)  # n_samples must exceed n = 200
    with pytest.raises(ParameterError):
        run_synthetic(seeds=[0], aflite_params={"bogus": 1}, show_progress=False)


# ---------------------------------------------------------------------------------------------- outputs
def test_table_format(small_result: SyntheticExperiment) -> None:
    text = format_table(small_result)
    lines = text.splitlines()
    assert "D(Φ) (ours)" in text and "D (paper)" in text
    row = next(line for line in lines if line.startswith("0.8 ") and "SVM-RBF" in line)
    assert "97.0 ± 0.2" in row and "90.7 ± 0.6" in row  # the paper's numbers, subscripts as std
    lr_row = lines[lines.index(row) + 1]
    assert "Logistic Reg." in lr_row and "83.5 ± 0.5" in lr_row and "50.7 ± 1.2" in lr_row
    ours = small_result.runs_for(0.8)[0].accuracy_D["svm"]
    assert f"{ours:.1f} ± 0.0" in row  # one seed: std 0
    assert "m=128, t=100, k=1, τ=0.75, n=200" in text
    assert "flipped removed" in text


def test_json_format(small_result: SyntheticExperiment) -> None:
    obj = small_result.to_json()
    text = json.dumps(obj, allow_nan=False)  # NaN became null
    back = json.loads(text)
    assert back["separations"] == [0.8, 0.4] and back["seeds"] == [3]
    assert back["aflite"] == {"n_partitions": 128, "train_size": 100, "slice_size": 1, "threshold": 0.75,
                              "target_size": 200}
    assert back["paper_table7"]["0.7"]["lr"]["D_filtered"] == {"mean": 52.4, "std": 1.3}
    assert len(back["runs"]) == 2 and back["runs"][1]["flipped_removed"] is None
    s = back["summary"]["0.8"]
    assert s["accuracy_filtered"]["lr"]["mean"] == pytest.approx(small_result.runs[0].accuracy_filtered["lr"])
    assert s["accuracy_filtered"]["lr"]["n"] == 1
    assert set(PAPER_TABLE7) == set(PAPER_SEPARATIONS)


def test_figure2_png(small_result: SyntheticExperiment, tmp_path: Path) -> None:
    out = tmp_path / "fig" / "figure2.png"
    plot_figure2(small_result, out)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert [p.name for p in out.parent.iterdir()] == ["figure2.png"]  # no temporary left behind
    with pytest.raises(ParameterError):
        plot_figure2([], tmp_path / "empty.png")


# -------------------------------------------------------------------------------------------------- CLI
def test_cli_writes_its_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aflite.cli import main

    out = tmp_path / "syn"
    code = main(["synthetic", "--seeds", "1", "--seed", "2", "--separations", "0.7", "--n-samples", "250",
                 "-m", "32", "-n", "150", "--out", str(out), "--quiet", "--json"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["seeds"] == [2] and printed["aflite"]["n_partitions"] == 32
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert names == ["figure2.png", "results.json", "summary.md", "table.txt"]
    saved = json.loads((out / "results.json").read_text())
    # the shared layout: command, argv, seed and versions, then the results as printed
    assert saved["command"] == "synthetic" and saved["argv"][0] == "synthetic" and saved["seed"] == 2
    assert "numpy" in saved["versions"]
    assert {k: v for k, v in saved.items() if k not in ("command", "format_version", "argv", "seed", "versions",
                                                       "manifest", "sealed")} == printed
    assert "Logistic Reg." in (out / "table.txt").read_text()
    # the verdict opens results.json and summary.md (issue 25, case 12)
    assert saved["verdict"][0].startswith("Separation 0.7: AFLite lowered the share of planted (biased) instances")
    assert (out / "summary.md").read_text().splitlines()[2] == "**Verdict.** " + " ".join(saved["verdict"])


def test_cli_verdict_states_the_tables_accuracies_for_every_separation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #59, 1: the verdict multiplied the (already percent) accuracies by 100 again and kept 3 of the 4
    separations; stdout, summary.md and results.json must now state, for each separation, the mean of the table's
    D and D(Φ) columns."""
    import re

    from aflite.cli import main

    out = tmp_path / "syn"
    assert main(["synthetic", "--seeds", "1", "--n-samples", "250", "-m", "16", "-n", "150", "--out", str(out),
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    verdict = json.loads((out / "results.json").read_text())["verdict"]
    # the table's rows as printed: "sep  model  D ± s  D(Φ) ± s  ...", the separation only on its first model's row
    means: dict[str, list[tuple[float, float]]] = {}
    sep = ""
    for line in (out / "table.txt").read_text().split("What AFLite removed")[0].splitlines():
        m = re.match(r"^(\d\.\d+)?\s+(SVM-RBF|Logistic Reg\.)\s+([\d.]+) ± [\d.]+\s+([\d.]+) ± ", line)
        if m:
            sep = m.group(1) or sep
            means.setdefault(sep, []).append((float(m.group(3)), float(m.group(4))))
    assert sorted(means) == sorted(str(s) for s in PAPER_SEPARATIONS)
    assert len(verdict) == len(PAPER_SEPARATIONS)
    for sentence, (sep, rows) in zip(verdict, means.items(), strict=True):
        got = re.search(r"mean dev accuracy went from ([\d.]+)% on D to ([\d.]+)% on D\(Φ\)", sentence)
        assert sentence.startswith(f"Separation {sep}: ") and got, sentence
        assert float(got.group(1)) == pytest.approx(sum(d for d, _ in rows) / len(rows), abs=0.06)
        assert float(got.group(2)) == pytest.approx(sum(f for _, f in rows) / len(rows), abs=0.06)
    assert (out / "summary.md").read_text().splitlines()[2] == "**Verdict.** " + " ".join(verdict)
    said = printed.splitlines()[-1]
    assert said.startswith("verdict: Separation ") and all(f"Separation {s}: " in said for s in means)
    assert " on D(Φ) (the rows AFLite kept; Φ: the features its models read)" in said


@pytest.mark.parametrize("argv", [
    ["--seeds", "0"],
    ["--separations", "0.8,1.0"],
    ["--n-samples", "150"],
    ["--dev-fraction", "1.5"],
    ["--threshold", "2"],
    ["-t", "300", "-n", "200"],
])
def test_cli_rejects_bad_values(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from aflite.cli import main

    assert main(["synthetic", "--quiet", *argv]) == 2
    assert "error" in capsys.readouterr().err
