"""``aflite explain`` end to end on small planted data: the planted token is found first, flipped labels land in
hard / label issues, every file is written with its columns; bad input stops with one line and exit 2."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from quick_checks import quick_checks

from aflite.cli import main
from aflite.explain.files import INSTANCE_COLUMNS, TOKEN_COLUMNS

LABELS = ("contradiction", "entailment", "neutral")
RUN = ["--featurizer", "ngram", "--quiet", "--no-probe", "-m", "16", "-t", "0.25", "-k", "0.05", "-n", "0.3",
       "--groups", "none"]


def planted(path: Path, n: int = 900, flip: float = 0.04, seed: int = 0) -> dict[str, object]:
    """An NLI-shaped TSV: each label has cue words in its hypotheses (a learnable signal), the token 'zqx' is
    inserted into 40 % of the contradiction hypotheses, and a few % of the labels are then flipped."""
    rng = np.random.default_rng(seed)
    filler = [f"f{i}" for i in range(80)]
    cues = {lab: [f"{lab[:3]}{i}" for i in range(6)] for lab in LABELS}
    rows, flipped, plant = [], [], []
    for i in range(n):
        lab = LABELS[i % 3]
        # two cue words, each from the row's own label with probability 0.75 (else from any label)
        hyp = list(rng.choice(filler, 4)) + [str(rng.choice(cues[lab if rng.random() < 0.75 else str(
            rng.choice(LABELS))])) for _ in range(2)]
        if lab == "contradiction" and rng.random() < 0.4:
            hyp.insert(int(rng.integers(0, len(hyp))), "zqx")
            plant.append(i)
        gold = lab
        if rng.random() < flip:
            gold = LABELS[(LABELS.index(lab) + 1 + int(rng.integers(0, 2))) % 3]
            flipped.append(i)
        rows.append([f"r{i}", " ".join(rng.choice(filler, 6)), " ".join(hyp), gold])
    path.write_text("id\tpremise\thypothesis\tlabel\n" + "".join("\t".join(r) + "\n" for r in rows))
    return {"flipped": [f"r{i}" for i in flipped], "planted": [f"r{i}" for i in plant]}


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def explained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("explain")
    data = tmp / "planted.tsv"
    truth = planted(data)
    assert main(["run", str(data), "--out", str(tmp / "run"), *RUN]) == 0
    assert main(["explain", str(data), str(tmp / "run"), "--out", str(tmp / "ex"), "--quiet", "--min-count", "10",
                 "--random-seeds", "3"]) == 0
    return tmp, truth


def test_planted_token_is_ranked_first_and_significant(explained):
    tmp, _ = explained
    rows = read_csv(tmp / "ex" / "tokens.csv")
    assert tuple(rows[0].keys()) == TOKEN_COLUMNS
    full = [r for r in rows if r["set"] == "full"]
    top = max(full, key=lambda r: float(r["z"]))
    assert (top["token"], top["label"], top["significant"]) == ("zqx", "contradiction", "1")
    res = json.loads((tmp / "ex" / "results.json").read_text())
    assert res["checks"]["tokens"]["summary"]["top_artifacts"]["full"][0]["token"] == "zqx"
    tokens = res["checks"]["tokens"]["summary"]  # the token check's own keys
    assert set(tokens["significant_tokens"]) == {"full", "kept", "random"}
    assert tokens["token_view"] == "hypothesis"
    assert tokens["significant_tokens"]["full"] == sum(r["significant"] == "1" for r in full)
    assert {r["set"] for r in rows} == {"full", "kept", "random"}


def test_each_checks_summary_is_typed_and_reads_back_equal(explained, tmp_path):
    """Every built-in check returns its own CheckSummary subclass; results.json's checks[name]["summary"] writes its
    score, flagged count (from the check's flags) and verdict first, then its own keys, and reads back through the
    class's from_json to an equal object; explain's verdict is the checks' sentences, written once per check."""
    from aflite.check import CheckSummary
    from aflite.check.summary import COMMON
    from aflite.commands.explain import explain

    tmp, _ = explained
    got = explain(tmp / "planted.tsv", tmp / "run", tmp_path / "ex", checks=quick_checks(10),
                  show_progress=False)
    res = json.loads((tmp_path / "ex" / "results.json").read_text())
    assert got.checks is not None and list(got.checks) == list(res["checks"])
    for name, r in got.checks.items():
        summary, entry = r.summary, res["checks"][name]
        assert type(summary) is not CheckSummary and isinstance(summary, CheckSummary), name
        assert summary.flagged == (None if r.flags is None else int(np.sum(r.flags))), name
        assert tuple(entry["summary"])[:3] == COMMON and "verdict" not in entry, name  # the verdict's one place
        assert type(summary).from_json(entry["summary"]) == summary, name
    tokens, issues = got.checks["tokens"].summary, got.checks["label_issues"].summary
    assert tokens.score == tokens.significant_tokens.kept and issues.score == issues.n
    assert got.checks["surrogate"].summary.score == got.checks["surrogate"].summary.r2
    assert res["checks"]["label_issues"]["summary"]["flagged"] == issues.n  # its flags are its n candidates
    assert res["verdict"] == tokens.verdict + issues.verdict and len(res["verdict"]) == 2


def test_flipped_labels_land_in_hard_or_label_issues(explained):
    tmp, truth = explained
    inst = {r["id"]: r for r in read_csv(tmp / "ex" / "instances.csv")}
    columns = tuple(next(iter(inst.values())).keys())  # explain's own columns first, then any other check's
    assert columns[:len(INSTANCE_COLUMNS)] == INSTANCE_COLUMNS
    flipped = truth["flipped"]
    assert len(flipped) >= 20
    caught = [i for i in flipped if inst[i]["region"] == "hard" or inst[i]["label_issue"] == "1"]
    assert len(caught) / len(flipped) > 0.75
    # and they are rare among the rows flagged, compared with their share of the data
    flagged = [i for i, r in inst.items() if r["label_issue"] == "1"]
    assert sum(i in set(flipped) for i in flagged) / max(len(flagged), 1) > 0.5


def test_every_file_and_the_first_phase_matches_the_run(explained):
    tmp, _ = explained
    ex = tmp / "ex"
    for name in ("tokens.csv", "competency.png", "instances.csv", "datamap.png", "weights.csv", "results.json",
                 "summary.md"):
        assert (ex / name).stat().st_size > 0, name
    res = json.loads((ex / "results.json").read_text())
    assert res["first_phase"]["agreement_with_run"] == 1.0
    assert res["command"] == "explain"
    inst = read_csv(ex / "instances.csv")
    run_rows = read_csv(tmp / "run" / "instances.csv")
    assert [r["id"] for r in inst] == [r["id"] for r in run_rows]
    assert [r["removed_at"] for r in inst] == [r["removed_at"] for r in run_rows]
    removed = [r for r in inst if r["kept"] == "0"]
    assert removed and all(len(r["nearest_kept"].split(";")) == 3 for r in removed)
    kept_ids = {r["id"] for r in inst if r["kept"] == "1"}
    assert all(set(r["nearest_kept"].split(";")) <= kept_ids for r in removed)
    weights = read_csv(ex / "weights.csv")
    assert len(weights) == len(inst)
    summary = (ex / "summary.md").read_text()
    assert "zqx" in summary and "Overlap" in summary


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    _, err = capsys.readouterr()
    return code, err


def test_a_run_of_another_dataset_is_refused_before_writing(explained, capsys, tmp_path):
    tmp, _ = explained
    other = tmp_path / "other.tsv"
    planted(other, n=600, seed=1)
    out = tmp_path / "ex"
    code, err = cli(capsys, "explain", other, tmp / "run", "--out", out, "--quiet")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "does not match the run" in err and "900" in err
    assert not out.exists()


def test_ids_that_do_not_match_the_run_are_refused(explained, capsys, tmp_path):
    tmp, _ = explained
    lines = (tmp / "planted.tsv").read_text().splitlines()
    lines[5] = lines[5].replace("r4\t", "zz4\t", 1)
    bad = tmp_path / "bad.tsv"
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "ex"
    code, err = cli(capsys, "explain", bad, tmp / "run", "--out", out, "--quiet")
    assert code == 2 and "'r4'" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    # a changed label is refused the same way
    lines = (tmp / "planted.tsv").read_text().splitlines()
    parts = lines[1].split("\t")
    parts[3] = "neutral" if parts[3] != "neutral" else "entailment"
    lines[1] = "\t".join(parts)
    bad.write_text("\n".join(lines) + "\n")
    code, err = cli(capsys, "explain", bad, tmp / "run", "--out", out, "--quiet")
    assert code == 2 and "another label" in err, err
    assert not out.exists()


def test_a_folder_that_is_not_a_run_is_refused(capsys, tmp_path):
    data = tmp_path / "d.tsv"
    planted(data, n=60)
    (tmp_path / "notrun").mkdir()
    code, err = cli(capsys, "explain", data, tmp_path / "notrun", "--out", tmp_path / "ex", "--quiet")
    assert code == 2 and "results.json: not found" in err
    assert not (tmp_path / "ex").exists()


def test_stop_rule_reports_what_came_first(explained, tmp_path):
    tmp, _ = explained
    data = tmp / "planted.tsv"
    out = tmp_path / "ex"
    assert main(["explain", str(data), str(tmp / "run"), "--out", str(out), "--quiet", "--min-count", "10",
                 "--random-seeds", "1", "--stop-rule", "--stop-floor", "240"]) == 0
    res = json.loads((out / "results.json").read_text())
    sr = res["checks"]["stop_rule"]["summary"]
    assert sr["enabled"] and sr["stopped_by"] in ("no significant artifact", "floor reached", "no row reaches τ")
    last = sr["trajectory"][-1]
    assert sr["trajectory"][0]["size"] == res["run"]["size_after"]
    assert sr["trajectory"][0]["significant"] == res["checks"]["tokens"]["summary"]["significant_tokens"]["kept"]
    if sr["stopped_by"] == "floor reached":
        assert last["size"] <= 240
    inst = read_csv(out / "instances.csv")
    extra = [r for r in inst if r["stop_rule_removed_at"] != ""]
    assert len(extra) == sr["extra_removed"] and all(r["kept"] == "1" for r in extra)
    assert "Stop rule" in (out / "summary.md").read_text()


def test_without_cleanlab_explain_still_works_and_says_so(explained, tmp_path, monkeypatch):
    import builtins

    from aflite.commands.explain import explain

    real = builtins.__import__

    def no_cleanlab(name, *a, **kw):
        if name.startswith("cleanlab"):
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_cleanlab)
    tmp, _ = explained
    res = explain(tmp / "planted.tsv", tmp / "run", tmp_path / "ex", checks=quick_checks(10),
                  show_progress=False)
    assert res.body.checks["label_issues"].summary["n"] is None
    assert "cleanlab is not installed" in res.body.checks["label_issues"].summary["skipped"]
    assert "label issues skipped" in (tmp_path / "ex" / "summary.md").read_text()
    inst = read_csv(tmp_path / "ex" / "instances.csv")
    assert {r["label_issue"] for r in inst} == {""} and {r["nearest_kept"] for r in inst} == {""}
    assert not any(o["group"] == "label issue" for o in res.body.checks["label_issues"].summary["overlap"])


def test_same_ids_and_labels_but_other_texts_are_refused(explained, capsys, tmp_path):
    tmp, _ = explained
    lines = (tmp / "planted.tsv").read_text().splitlines()
    for k in range(1, 40):  # new hypotheses for 39 rows: same ids and labels, another Φ
        parts = lines[k].split("\t")
        parts[2] = parts[2] + " extra words here"
        lines[k] = "\t".join(parts)
    bad = tmp_path / "edited.tsv"
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "ex"
    code, err = cli(capsys, "explain", bad, tmp / "run", "--out", out, "--quiet", "--cache-dir", tmp_path / "cache")
    assert code == 2 and "the same ids and labels in the same order, but other texts" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not out.exists() and not (tmp_path / "cache").exists()  # refused before Φ: nothing computed or cached


def test_ngram_coefficients_read_the_ensemble_weights(explained, tmp_path):
    tmp, truth = explained
    out = tmp_path / "ex"
    assert main(["explain", str(tmp / "planted.tsv"), str(tmp / "run"), "--out", str(out), "--quiet",
                 "--min-count", "10", "--random-seeds", "1", "--neighbours", "0", "--ngram-coefficients"]) == 0
    res = json.loads((out / "results.json").read_text())
    nc = res["checks"]["ngram_coefficients"]["summary"]
    assert nc["refit_max_abs_diff"] < 1e-4  # the refitted featurizer reproduces the run's Φ
    # the planted token is among the ensemble's strongest pushes towards contradiction (with the cue words)
    contra = [t["token"] for t in nc["top_terms"] if t["label"] == "contradiction"]
    assert "zqx" in contra[:8], nc["top_terms"]
    assert not any(t["token"] == "zqx" for t in nc["top_terms"] if t["label"] != "contradiction")
    inst = {r["id"]: r for r in read_csv(out / "instances.csv")}
    planted_rows = [i for i in truth["planted"] if inst[i]["label"] == "contradiction"]
    assert sum("zqx:" in inst[i]["ensemble_features"] for i in planted_rows) / len(planted_rows) > 0.9


def test_null_uniform_tests_against_one_over_the_label_count(explained):
    """--null uniform: p0 = 1/|Y| (Gardner et al. 2021's null); each z is (p̂ − 1/3)/sqrt((1/3)(2/3)/n)."""
    tmp, _ = explained
    out = tmp / "ex_uniform"
    assert main(["explain", str(tmp / "planted.tsv"), str(tmp / "run"), "--out", str(out), "--quiet",
                 "--min-count", "10", "--random-seeds", "1", "--neighbours", "0", "--null", "uniform"]) == 0
    res = json.loads((out / "results.json").read_text())
    test = res["checks"]["tokens"]["summary"]["token_test"]
    assert test["null"] == "uniform" and "1/|Y|" in test["statistic"]
    full = [r for r in read_csv(out / "tokens.csv") if r["set"] == "full"]
    p0 = 1 / 3
    for r in full[:50]:  # the csv holds 6 significant digits
        n, p_hat = float(r["count"]), float(r["p_label"])
        assert float(r["z"]) == pytest.approx((p_hat - p0) / (p0 * (1 - p0) / n) ** 0.5, rel=1e-4, abs=1e-5)
    base = json.loads((tmp / "ex" / "results.json").read_text())
    assert base["checks"]["tokens"]["summary"]["token_test"]["null"] == "base"


# ------------------------------------------------------------------ a run folder is written by its run only (34, 5)
def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def own_run(tmp_path):
    """A run of the planted data of its own (the tests below delete its cache)."""
    data = tmp_path / "planted.tsv"
    planted(data, n=300)
    assert main(["run", str(data), "--out", str(tmp_path / "run"), *RUN]) == 0
    return data, tmp_path / "run"


def test_explain_recomputes_phi_into_its_own_folder_never_the_runs(own_run, tmp_path, capsys):
    data, run = own_run
    import shutil

    shutil.rmtree(run / "cache")
    before = snapshot(run)
    out = tmp_path / "ex"
    assert main(["explain", str(data), str(run), "--out", str(out), "--quiet", "--random-seeds", "1"]) == 0
    assert snapshot(run) == before and not (run / "cache").exists()
    assert list((out / "cache").glob("ngram-pair-*.npy"))  # Φ went to explain's own cache
    # texts changed under the same ids and labels: refused, and nothing of the wrong Φ is left anywhere
    lines = data.read_text().splitlines()
    for k in range(1, 40):
        parts = lines[k].split("\t")
        parts[2] += " extra words"
        lines[k] = "\t".join(parts)
    edited = tmp_path / "edited.tsv"
    edited.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    code, err = cli(capsys, "explain", edited, run, "--out", tmp_path / "ex2", "--quiet")
    assert code == 2 and "but other texts" in err and len(err.strip().splitlines()) == 1, err
    assert snapshot(run) == before and not (tmp_path / "ex2").exists()
    # the run can still be explained
    assert main(["explain", str(data), str(run), "--out", str(tmp_path / "ex3"), "--quiet", "--random-seeds",
                 "1"]) == 0


def test_explain_reads_the_runs_cache_without_writing_it(own_run, tmp_path):
    data, run = own_run
    before = snapshot(run)
    out = tmp_path / "ex"
    assert main(["explain", str(data), str(run), "--out", str(out), "--quiet", "--random-seeds", "1"]) == 0
    assert snapshot(run) == before
    assert not (out / "cache").exists() or not list((out / "cache").glob("*.npy"))  # read from the run's cache


@pytest.mark.parametrize("command", ["explain", "evaluate", "audit"])
def test_an_out_or_cache_in_a_run_folder_is_refused(own_run, tmp_path, capsys, command):
    """--out equal to the run folder (even with --overwrite), inside it, or --cache-dir inside it: one line, exit
    2, the run folder byte for byte as it was, and it can still be explained."""
    data, run = own_run
    before = snapshot(run)
    argv = {"explain": ["explain", data, run],
            "evaluate": ["evaluate", data, run, "--models", "ppmi:hypothesis", "--seeds", "1"],
            "audit": ["audit", data, "--compare", run, "--featurizer", "ngram", "--no-tra"]}[command]
    for extra, flag, where in ((["--out", run, "--overwrite"], "--out", "is the run folder"),
                               (["--out", run / "sub"], "--out", "is inside the run folder"),
                               (["--out", tmp_path / "o", "--cache-dir", run / "cache"], "--cache-dir",
                                "is inside the run folder")):
        code, err = cli(capsys, *argv, *extra, "--quiet")
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, err
        assert lines[0].startswith(f"aflite {command}: error: {flag} ") and f" {where} " in lines[0], lines[0]
        assert lines[0].endswith(f"a run folder is written by its run only; choose another {flag}")
        assert snapshot(run) == before and not (tmp_path / "o").exists()
    other = tmp_path / "other_run"  # any run folder, not only the one read
    assert main(["run", str(data), "--out", str(other), *RUN]) == 0
    code, err = cli(capsys, *argv, "--out", other / "x", "--quiet")
    assert code == 2 and f"--out {other / 'x'} is inside the run folder {other}: a run folder" in err, err
    assert main(["explain", str(data), str(run), "--out", str(tmp_path / "ok"), "--quiet", "--random-seeds",
                 "1"]) == 0


def test_evaluate_reads_the_runs_cache_without_writing_it(own_run, tmp_path):
    data, run = own_run
    before = snapshot(run)
    assert main(["evaluate", str(data), str(run), "--out", str(tmp_path / "ev"), "--models", "ppmi:hypothesis",
                 "--seeds", "1", "--quiet"]) == 0  # the single-iteration set reads the run's Φ
    assert snapshot(run) == before


# ------------------------------------------------------------------ a verdict, a chance rate, informative reasons
def test_explain_on_real_text_has_a_verdict_a_chance_count_and_no_function_words(counterfactual_runs, tmp_path,
                                                                                  capsys):
    """On the counterfactual set (real SNLI sentences): the page and summary open with a verdict; the label-issue
    count comes with the same measure on permuted labels; the rows' top features are content words."""
    from aflite.explain.reasons import FUNCTION_WORDS
    from aflite.report.explorer import embedded_data

    s = counterfactual_runs["premise"]
    run = Path(s["filtered_dataset"]).parent
    out = tmp_path / "ex"
    capsys.readouterr()
    assert main(["explain", s["dataset"], str(run), "--out", str(out), "--quiet", "--random-seeds", "3"]) == 0
    stdout = capsys.readouterr().out
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    li = res["checks"]["label_issues"]["summary"]
    assert li["rows"] == 1340 and len(li["shuffled_labels"]["per_seed"]) == 3
    assert all(0 < c <= 1340 for c in li["shuffled_labels"]["per_seed"])
    v = res["verdict"]
    assert len(v) == 2 and v[0].startswith("On the hypothesis, ") and "same-size random subsets of D" in v[0]
    assert v[1].startswith(f"Confident learning flags {li['n']:,} of 1,340 rows") and "labels permuted" in v[1]
    assert stdout.startswith("verdict: " + " ".join(v))
    assert (out / "summary.md").read_text(encoding="utf-8").split("\n")[2].startswith("**Verdict.** " + v[0])
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "Confident learning flags" in page
    tops = [t.split(":")[0] for r in read_csv(out / "instances.csv") for t in r["top_features"].split(";") if t]
    assert tops and not set(tops) & FUNCTION_WORDS, sorted(set(tops))
    assert "not" in tops  # the negation the revised hypotheses carry
    assert set(embedded_data(page)["cols"]["top"]) - {""}


# ------------------------------------------------------------------ each check's entry, typed on reading (#41, 2)
@pytest.mark.parametrize("edit, expect", [
    (lambda r: r.pop("checks"), "an explain folder of an earlier aflite (its checks' keys at the top level, not "
                                "under 'checks'): run `aflite explain` again"),
    (lambda r: r["checks"]["tokens"].update(columns="x"), "'checks'['tokens']['columns'] is \"x\", not a list"),
    (lambda r: r["checks"]["datamap"].pop("summary"), "'checks'['datamap'] is {"),
    (lambda r: r["checks"].update(surrogate=[]), "'checks'['surrogate'] is [], not an object with summary, options"),
])
def test_an_explain_folder_of_another_shape_is_refused_in_one_line(explained, tmp_path, edit, expect):
    """Every reader of an explain folder (rundir.read, as card and report use it) checks each check's entry: an
    older folder without ``checks``, or an entry of the wrong type, is refused in one line naming the key."""
    import shutil

    from aflite.errors import InputError
    from aflite.rundir.read import read_folder
    from aflite.rundir.schema import CheckEntry

    tmp, _ = explained
    doc = read_folder(tmp / "ex", ("explain",))
    entry = doc.body.checks["tokens"]  # typed: each entry a CheckEntry
    assert isinstance(entry, CheckEntry) and entry.options["alpha"] == 0.01 and entry.ran
    assert doc.body.checks["datamap"].columns == ["confidence", "variability", "correctness", "region"]
    ex = tmp_path / "ex"
    shutil.copytree(tmp / "ex", ex)
    res = json.loads((ex / "results.json").read_text())
    edit(res)
    (ex / "results.json").write_text(json.dumps(res))
    with pytest.raises(InputError) as err:
        read_folder(ex, ("explain",))
    assert expect in str(err.value) and "\n" not in str(err.value), str(err.value)
