"""Bad input and output folders, for every command: one line on stderr, exit code 2, nothing computed, nothing
lost (issue 12). Each test is a fuzz case of the closing note; all use tiny data and the ngram featurizer."""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from unprivileged import NO_WAY, obeying_mode_bits

from aflite.cli import main
from aflite.data import counterfactual_twins, load_dataset, warn_twins
from aflite.rundir import lock as rundir
from aflite.rundir.folder import RunFolder

SAMPLE = Path(__file__).resolve().parents[1] / "src" / "aflite" / "resources" / "snli_sample.tsv.gz"
FAST = ["--featurizer", "ngram", "--quiet", "-m", "4", "--no-probe"]


def sample_rows(n: int) -> list[list[str]]:
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    return [line.split("\t") for line in lines[1 : n + 1]]


@pytest.fixture
def tsv(tmp_path: Path) -> Path:
    """240 real SNLI pairs (id, premise, hypothesis, label)."""
    p = tmp_path / "data.tsv"
    p.write_text("id\tpremise\thypothesis\tlabel\n" + "".join("\t".join(r) + "\n" for r in sample_rows(240)))
    return p


def cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"aflite {command}: error: "), err
    return lines[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------------- every command's --out
def command_lines(tmp: Path, tsv: Path, out: Path) -> dict[str, list[object]]:
    """A valid-looking call of each command that writes to ``out`` (inputs need not exist: the output check
    comes first)."""
    return {
        "run": ["run", tsv, "--out", out, *FAST],
        "filter": ["filter", "--features", tmp / "X.npy", "--labels", tmp / "y.txt", "--out", out, "--quiet"],
        "embed": ["embed", tsv, "--out", out, "--quiet"],
        "evaluate": ["evaluate", tsv, tmp / "run", "--out", out, "--quiet"],
        "audit": ["audit", tsv, "--out", out, "--featurizer", "ngram", "--no-tra", "--quiet"],
        "demo": ["demo", "--out", out, "--featurizer", "ngram", "--quiet"],
        "synthetic": ["synthetic", "--out", out, "--seeds", "1", "--quiet"],
    }


COMMANDS = ("run", "filter", "embed", "evaluate", "audit", "demo", "synthetic")  # the harness: tests/test_bench.py


@pytest.mark.parametrize("command", COMMANDS)
def test_out_is_a_file(tmp_path, tsv, capsys, command):
    target = tmp_path / "a_file"
    target.write_text("precious\n")
    argv = command_lines(tmp_path, tsv, target)[command]
    code, _, err = cli(capsys, *argv)
    assert code == 2
    line = one_line_error(err, command)
    assert "is a file" in line
    assert target.read_text() == "precious\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_out_under_a_file(tmp_path, tsv, capsys, command):
    target = tmp_path / "a_file"
    target.write_text("precious\n")
    code, _, err = cli(capsys, *command_lines(tmp_path, tsv, target / "sub")[command])
    assert code == 2
    assert "a_file is a file, so nothing can be created under it" in one_line_error(err, command)
    assert target.read_text() == "precious\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_unwritable_out_is_refused_before_any_work(tmp_path, tsv, capsys, monkeypatch, command):
    """A read-only folder (simulated: the tests may run as root, who can write anywhere; see the next test for
    the real thing)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    real_access = os.access
    monkeypatch.setattr(rundir.os, "access", lambda p, mode: False if Path(p) == ro else real_access(p, mode))
    computed: list[str] = []
    monkeypatch.setattr("aflite.data.source.load_dataset", lambda *a, **k: computed.append("load"))
    code, _, err = cli(capsys, *command_lines(tmp_path, tsv, ro / "out")[command])
    assert code == 2
    assert "is not writable" in one_line_error(err, command)
    assert computed == []
    assert list(ro.iterdir()) == []


def test_read_only_out_for_real(tmp_path):
    """In a child that obeys mode bits (as root: without CAP_DAC_OVERRIDE, see unprivileged.py): parent read-only
    and --out read-only."""
    prefix = obeying_mode_bits()
    if prefix is None:
        pytest.skip(NO_WAY)
    base = Path(tempfile.mkdtemp(prefix="aflite-ro-"))
    try:
        base.chmod(0o755)
        data = base / "data.tsv"
        data.write_text("id\tpremise\thypothesis\tlabel\n" + "".join("\t".join(r) + "\n" for r in sample_rows(60)))
        data.chmod(0o644)
        ro = base / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        script = ("import sys; from aflite.cli import main; "
                  "print(*(main(['run', sys.argv[1], '--out', o, '--quiet']) for o in sys.argv[2:]))")
        proc = subprocess.run([*prefix, sys.executable, "-c", script, str(data), str(ro / "new"), str(ro)],
                              capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(base)})
        assert proc.stdout.split() == ["2", "2"], proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 2, proc.stderr
        assert lines[0] == f"aflite run: error: --out {ro / 'new'}: cannot create it: {ro} is not writable " \
                           "(read-only or no permission)"
        assert lines[1] == f"aflite run: error: --out {ro}: folder is not writable (read-only or no permission)"
        assert list(ro.iterdir()) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


# --------------------------------------------------------------------------------- no silent overwrites
def test_audit_refuses_a_run_folder_and_run_refuses_a_user_folder(tmp_path, tsv, capsys):
    run_dir = tmp_path / "run"
    assert cli(capsys, "run", tsv, "--out", run_dir, *FAST)[0] == 0
    before = snapshot(run_dir)
    code, _, err = cli(capsys, "audit", tsv, "--out", run_dir, "--featurizer", "ngram", "--no-tra", "--quiet")
    assert code == 2
    assert "made by `aflite run`; pass --overwrite" in one_line_error(err, "audit")
    assert snapshot(run_dir) == before

    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("mine\n")
    code, _, err = cli(capsys, "run", tsv, "--out", user, *FAST)
    assert code == 2
    assert "not empty (1 entry) and was not made by `aflite run`" in one_line_error(err, "run")
    assert sorted(p.name for p in user.iterdir()) == ["notes.txt"]
    # --overwrite writes into it, and leaves the user's file alone
    assert cli(capsys, "run", tsv, "--out", user, *FAST, "--overwrite")[0] == 0
    assert (user / "notes.txt").read_text() == "mine\n" and (user / "kept_ids.txt").is_file()


def test_filter_refuses_a_folder_with_a_stale_kept_ids(tmp_path, capsys):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "X.npy", rng.standard_normal((200, 4)).astype(np.float32))
    (tmp_path / "y.txt").write_text("".join(f"{c}\n" for c in rng.choice(["a", "b"], 200)))
    out = tmp_path / "old"
    out.mkdir()
    (out / "kept_ids.txt").write_text("stale\n")
    code, _, err = cli(capsys, "filter", "--features", tmp_path / "X.npy", "--labels", tmp_path / "y.txt",
                       "--out", out, "-n", "120", "-t", "60", "-k", "20", "-m", "4", "--quiet")
    assert code == 2
    assert "pass --overwrite" in one_line_error(err, "filter")
    assert (out / "kept_ids.txt").read_text() == "stale\n"


def test_a_second_run_in_the_same_folder_is_refused_before_featurizing(tmp_path, tsv, capsys, monkeypatch):
    out = tmp_path / "run"
    assert cli(capsys, "run", tsv, "--out", out, *FAST)[0] == 0
    monkeypatch.setattr("aflite.features.compute.featurize", lambda *a, **k: pytest.fail("featurized"))
    code, _, err = cli(capsys, "run", tsv, "--out", out, *FAST)
    assert code == 2
    assert "holds a previous run: pass --resume to continue it, --overwrite to start over" in one_line_error(
        err, "run")


def test_two_processes_on_one_folder_the_second_refuses(tmp_path, tsv, capsys):
    out = tmp_path / "run"
    holder = RunFolder.claim(out, "run")  # a first process at work (flock: per open file, so this suffices)
    try:
        code, _, err = cli(capsys, "run", tsv, "--out", out, *FAST)
        assert code == 2
        assert f"in use by another aflite process (pid {os.getpid()})" in one_line_error(err, "run")
        assert not (out / "kept_ids.txt").exists()
    finally:
        holder.release()
    with open(out / rundir.LOCK, "a+") as fh:  # released: the lock is free again
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_demo_never_removes_a_folder_it_did_not_make(tmp_path, tsv, capsys):
    run_dir = tmp_path / "run"
    assert cli(capsys, "run", tsv, "--out", run_dir, *FAST)[0] == 0
    before = snapshot(run_dir)
    code, _, err = cli(capsys, "demo", "--out", run_dir, "--featurizer", "ngram", "--quiet")
    assert code == 2
    assert "made by `aflite run`" in one_line_error(err, "demo")
    assert snapshot(run_dir) == before
    # an old run folder without a marker, holding a summary.json (what the demo used to delete)
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "summary.json").write_text("{}\n")
    code, _, err = cli(capsys, "demo", "--out", legacy, "--featurizer", "ngram", "--quiet")
    assert code == 2 and (legacy / "summary.json").read_text() == "{}\n"


def test_clear_own_folder_only_empties_what_the_command_created(tmp_path):
    from aflite.rundir.lock import record_files, record_of, record_written

    own = tmp_path / "own"
    RunFolder.claim(own, "demo").release()
    record_written(own, ["summary.json", "cache"])  # what the demo wrote there
    (own / "summary.json").write_text("{}")
    record_files(own, {"summary.json": record_of(own / "summary.json")})  # as an atomic write records it
    (own / "cache").mkdir()
    assert rundir.clear_own_folder(own, "demo")
    assert sorted(p.name for p in own.iterdir()) == sorted([rundir.MARKER, rundir.LOCK])
    adopted = tmp_path / "adopted"  # a user's folder the demo wrote into with --overwrite: never emptied
    adopted.mkdir()
    (adopted / "thesis.tex").write_text("x")
    RunFolder.claim(adopted, "demo", overwrite=True).release()
    assert not rundir.clear_own_folder(adopted, "demo")
    assert (adopted / "thesis.tex").exists()
    assert not rundir.clear_own_folder(own, "run")


# --------------------------------------------------------------------------------- checks before any work
def test_one_class_file_is_refused_before_featurizing(tmp_path, capsys, monkeypatch):
    p = tmp_path / "one.tsv"
    p.write_text("id\tpremise\thypothesis\tlabel\n" + "".join(
        f"{r[0]}\t{r[1]}\t{r[2]}\tentailment\n" for r in sample_rows(50)))
    monkeypatch.setattr("aflite.features.compute.featurize", lambda *a, **k: pytest.fail("featurized"))
    out = tmp_path / "out"
    code, _, err = cli(capsys, "run", p, "--out", out, *FAST)
    assert code == 2
    assert "every one of the 50 rows has the label 'entailment'" in one_line_error(err, "run")
    assert not out.exists()  # no folder, no cache/
    for where in ("aflite.audit.compute_features", "aflite.audit.runner.compute_features"):
        monkeypatch.setattr(where, lambda *a, **k: pytest.fail("featurized"))
    code, _, err = cli(capsys, "audit", p, "--out", out, "--featurizer", "ngram", "--no-tra", "--quiet")
    assert code == 2
    assert "every one of the 50 rows has the label 'entailment'; an audit needs" in one_line_error(err, "audit")
    assert not out.exists()


@pytest.mark.parametrize("bad", ["nan", "NaN"])
def test_nan_labels_are_refused(tmp_path, capsys, bad):
    rows = sample_rows(40)
    p = tmp_path / "nan.csv"
    p.write_text("premise,hypothesis,label\n" + "".join(
        f"\"{r[1]}\",\"{r[2]}\",{bad if i == 7 else float(i % 3)}\n" for i, r in enumerate(rows)))
    code, _, err = cli(capsys, "run", p, "--out", tmp_path / "o", *FAST)
    assert code == 2
    assert "line 9, column 'label': missing label (NaN)" in one_line_error(err, "run")
    assert not (tmp_path / "o").exists()


def test_nan_and_blank_labels_in_label_files_are_refused(tmp_path):
    from aflite.data import load_labels
    from aflite.errors import InputError

    np.save(tmp_path / "y.npy", np.array([0.0, 1.0, np.nan]))
    with pytest.raises(InputError, match=r"row 2 \(0-based\), column 'label': missing label \(NaN\)"):
        load_labels(tmp_path / "y.npy")
    (tmp_path / "y.txt").write_text("1.0\nnan\n2.0\n")
    with pytest.raises(InputError, match="missing label"):
        load_labels(tmp_path / "y.txt")
    (tmp_path / "y.csv").write_text("label\n1.0\n\n2.0\n")
    with pytest.raises(InputError):
        load_labels(tmp_path / "y.csv")


@pytest.mark.parametrize("flag,value", [("-t", "1.0"), ("-k", "2.0"), ("-n", "1e2")])
def test_sizes_written_as_floats_above_one_are_ambiguous(tmp_path, tsv, capsys, flag, value):
    code, _, err = cli(capsys, "run", tsv, "--out", tmp_path / "o", flag, value)
    assert code == 2
    line = err.strip()
    assert f"{value!r} is ambiguous: write a count as a whole number" in line and "or a fraction below 1" in line
    assert not (tmp_path / "o").exists()


def test_absurd_partitions_are_refused_with_their_cost(tmp_path, tsv, capsys):
    code, _, err = cli(capsys, "run", tsv, "--out", tmp_path / "o", "-m", "1000000")
    assert code == 2
    assert "1,000,000 classifiers per phase would cost 15,625x the paper's m=64" in err
    assert not (tmp_path / "o").exists()


def test_compare_is_checked_before_out_is_created(tmp_path, tsv, capsys):
    out = tmp_path / "audit"
    code, _, err = cli(capsys, "audit", tsv, "--out", out, "--compare", tmp_path / "nope", "--featurizer", "ngram",
                       "--no-tra", "--quiet")
    assert code == 2
    assert "nope: not a folder (expected the --out folder of aflite run" in one_line_error(err, "audit")
    assert not out.exists()


def test_missing_columns_are_named_by_their_flags(tmp_path, capsys):
    p = tmp_path / "cols.tsv"
    p.write_text("a\tb\tc\nx\ty\tz\n")
    code, _, err = cli(capsys, "run", p, "--out", tmp_path / "o", *FAST)
    assert code == 2
    line = one_line_error(err, "run")
    assert "name it with --text-a (and --text-b, --label)" in line and "text_a=" not in line
    q = tmp_path / "q.tsv"
    q.write_text("premise\thypothesis\ty\np\th\tentailment\n")
    code, _, err = cli(capsys, "run", q, "--out", tmp_path / "o", "--label", "gold", *FAST)
    assert "missing column 'gold' (given by --label)" in one_line_error(err, "run")
    assert not (tmp_path / "o").exists()


def test_library_messages_keep_keyword_names(tmp_path):
    from aflite.errors import InputError

    p = tmp_path / "cols.tsv"
    p.write_text("a\tb\tc\nx\ty\tz\n")
    with pytest.raises(InputError, match="name it with text_a="):
        load_dataset(p)


def test_rows_dropped_on_load_are_reported(tmp_path, capsys):
    rows = sample_rows(120)
    p = tmp_path / "dash.tsv"
    p.write_text("id\tpremise\thypothesis\tlabel\n" + "".join(
        "\t".join([r[0], r[1], r[2], "-" if i % 40 == 0 else r[3]]) + "\n" for i, r in enumerate(rows)))
    code, _, err = cli(capsys, "run", p, "--out", tmp_path / "o", *FAST)
    assert code == 0
    assert "dropped 3 row(s) on load (3 no gold label" in err and "117 rows kept" in err


def test_a_50000_character_token_is_shortened_in_report_tables():
    from aflite.report import shorten
    from aflite.report.audit import _artifacts_table

    token = "x" * 50_000
    html = _artifacts_table({"entailment": [{"token": token, "pmi": 1.0, "z": 2.0, "count": 5, "total": 9,
                                             "label_rate": 0.5}]})
    assert token not in html and "(50,000 chars)" in html and len(html) < 2_000
    assert shorten("short") == "short"


# --------------------------------------------------------------------------------- groups
def twins_file(tmp: Path, n: int = 150) -> Path:
    """Counterfactual twins built from real SNLI rows: each pair copied with another premise and another label;
    the ``family`` column ties the pairs of one original premise to their twins."""
    other = {"entailment": "contradiction", "contradiction": "neutral", "neutral": "entailment"}
    lines = ["id\tpremise\thypothesis\tlabel\tfamily"]
    family: dict[str, int] = {}
    for pid, prem, hyp, lab in sample_rows(n):
        f = family.setdefault(prem, len(family))
        lines.append(f"{pid}\t{prem}\t{hyp}\t{lab}\tf{f}")
        lines.append(f"{pid}-cf\tIn a different scene, {prem[0].lower()}{prem[1:]}\t{hyp}\t{other[lab]}\tf{f}")
    p = tmp / "twins.tsv"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_groups_column_none_and_premise(tmp_path):
    p = twins_file(tmp_path)
    by_premise = load_dataset(p)
    by_family = load_dataset(p, groups="family")
    n_families = len(set(by_premise.texts_a[0::2]))
    assert by_family.groups is not None and len(np.unique(by_family.groups)) == n_families
    assert by_premise.groups is not None and len(np.unique(by_premise.groups)) == 2 * n_families
    assert load_dataset(p, groups="none").groups is None
    n_texts, n_rows, example = counterfactual_twins(by_premise.texts_b, by_premise.labels, by_premise.groups)
    assert n_texts > 100 and n_rows >= 2 * n_texts and isinstance(example, str)
    # grouped by family only SNLI's own duplicates remain ('A man is wearing a black shirt' under two premises)
    # and stay under the warning's threshold
    assert counterfactual_twins(by_family.texts_b, by_family.labels, by_family.groups)[0] <= 1
    assert warn_twins(by_family, ("pair", "hypothesis", "premise"), "family") == []
    assert len(warn_twins(by_premise, ("pair", "hypothesis", "premise"), "premise")) == 1  # hypothesis side


def test_run_warns_about_twins_and_groups_by_a_column(tmp_path, capsys):
    p = twins_file(tmp_path)
    code, _, err = cli(capsys, "run", p, "--out", tmp_path / "a", *FAST)
    assert code == 0
    assert "hypothesis text(s)" in err and "counterfactual twins" in err and "--groups COLUMN" in err
    code, _, err = cli(capsys, "run", p, "--out", tmp_path / "b", *FAST, "--groups", "family")
    assert code == 0 and "counterfactual twins" not in err
    assert json.loads((tmp_path / "b" / "results.json").read_text())["groups"] == "family"
    code, _, err = cli(capsys, "run", p, "--out", tmp_path / "c", *FAST, "--groups", "nosuch")
    assert code == 2
    assert "missing column 'nosuch' (given by --groups)" in one_line_error(err, "run")
    assert not (tmp_path / "c").exists()


def test_audit_and_evaluate_take_groups(tmp_path, capsys):
    p = twins_file(tmp_path, n=60)
    for argv in (["audit", p, "--out", tmp_path / "au", "--featurizer", "ngram", "--no-tra", "--quiet"],
                 ["evaluate", p, tmp_path / "run", "--out", tmp_path / "ev", "--quiet"]):
        code, _, err = cli(capsys, *argv, "--groups", "nosuch")
        assert code == 2
        assert "missing column 'nosuch' (given by --groups)" in one_line_error(err, str(argv[0]))
        assert not (tmp_path / "au").exists() and not (tmp_path / "ev").exists()


def test_audit_warns_about_twins(tmp_path, capsys):
    p = twins_file(tmp_path, n=60)
    code, _, err = cli(capsys, "audit", p, "--out", tmp_path / "au", "--featurizer", "ngram", "--no-tra",
                       "--quiet", "--tsne-sample", "0", "--n-components", "5", "--n-clusters", "5",
                       "--peco-shuffles", "2")
    assert code == 0, err
    assert "counterfactual twins" in err


# --------------------------------------------------------------------------------- run's summary and progress
def test_label_shift_warning():
    from aflite.rundir.schema import LabelShift

    calm = LabelShift.between({"a": 50, "b": 50}, {"a": 48, "b": 50})
    assert calm.warning is None and calm.max_change_points < 5
    moved = LabelShift.between({"e": 100, "n": 100, "c": 100}, {"e": 100, "n": 40, "c": 100})
    assert moved.change_points["n"] == pytest.approx(40 / 240 * 100 - 100 / 3)
    assert moved.warning is not None and "read Δ over the majority rate" in moved.warning
    assert moved.to_json()["change_points"] == moved.change_points  # what results.json holds, read back the same
    assert LabelShift(**moved.to_json()) == moved


def test_summary_shows_majority_delta_and_shares(tmp_path, tsv, capsys):
    out = tmp_path / "run"
    code, stdout, _ = cli(capsys, "run", tsv, "--out", out, "--featurizer", "ngram", "--quiet", "-m", "4")
    assert code == 0
    md = (out / "summary.md").read_text()
    assert "| majority rate (same rows) | Δ over majority |" in md
    assert "share before % | share after % | Δ share (points)" in md
    assert "raw accuracy is not leakage" in md
    s = json.loads((out / "results.json").read_text())
    for r in s["partial_input_probe"]["results"]:
        assert r["delta_majority"] == pytest.approx(r["accuracy"] - r["majority"])
    assert "Δ +" in stdout or "Δ -" in stdout
    assert "class shares before → after" in stdout


def test_progress_ngram_stages_and_removed_bar_ends_at_100(tmp_path, tsv, capsys):
    code, _, err = cli(capsys, "run", tsv, "--out", tmp_path / "run", "--featurizer", "ngram", "-m", "4")
    assert code == 0
    assert "ngram features (240 rows)" in err and "6/6" in err
    removed = [chunk for chunk in err.replace("\r", "\n").splitlines() if chunk.startswith("removed:")]
    assert removed and removed[-1].startswith("removed: 100%")
    # the probe's bar ticks once per fold (5 sets x 5 folds), so a long probe shows a rate and an ETA early
    probe = [chunk for chunk in err.replace("\r", "\n").splitlines() if chunk.startswith("probe (D, D(Φ), 3 random")]
    assert probe and "25/25" in probe[-1] and "fold/s" in probe[-1]


def test_embed_refuses_to_replace_its_files_without_overwrite(tmp_path, tsv, capsys):
    out = tmp_path / "feats"
    code, _, _ = cli(capsys, "embed", tsv, "--out", out, "--quiet")
    assert code == 0
    assert np.load(out / "features.npy", mmap_mode="r").shape[0] == 240
    assert len((out / "ids.txt").read_text().split()) == len((out / "labels.txt").read_text().split()) == 240
    res = json.loads((out / "results.json").read_text())
    assert res["command"] == "embed" and res["argv"][0] == "embed" and "versions" in res and res["seed"] == 0
    assert res["rows"] == 240 and (out / "summary.md").is_file() and (out / "cache").is_dir()
    (out / "features.npy").write_bytes(b"precious")
    code, _, err = cli(capsys, "embed", tsv, "--out", out, "--quiet")
    assert code == 2
    assert "features.npy exists; pass --overwrite to replace it" in one_line_error(err, "embed")
    assert (out / "features.npy").read_bytes() == b"precious"
    # changed since aflite wrote it (issue 55): --overwrite leaves it alone too, in one line naming it
    code, _, err = cli(capsys, "embed", tsv, "--out", out, "--quiet", "--overwrite")
    assert code == 2 and "features.npy" in one_line_error(err, "embed")
    assert (out / "features.npy").read_bytes() == b"precious"
    (out / "features.npy").unlink()
    assert cli(capsys, "embed", tsv, "--out", out, "--quiet", "--overwrite")[0] == 0
    assert np.load(out / "features.npy").shape[0] == 240
    # --resume (as `run` has it) goes on from what OUT holds: the same features, from the cache
    first = np.load(out / "features.npy")
    code, stdout, _ = cli(capsys, "embed", tsv, "--out", out, "--quiet", "--resume")
    assert code == 0 and "from cache" in stdout
    assert np.array_equal(np.load(out / "features.npy"), first)
    code, _, err = cli(capsys, "embed", tsv, "--out", out, "--quiet", "--resume", "--overwrite")
    assert code == 2 and "give one" in one_line_error(err, "embed")


def test_groups_none(tmp_path, tsv, capsys):
    for name, extra in (("a", ["--groups", "none"]), ("c", [])):
        assert cli(capsys, "run", tsv, "--out", tmp_path / name, *FAST, *extra)[0] == 0
        s = json.loads((tmp_path / name / "results.json").read_text())
        assert s["groups"] == ("premise" if name == "c" else "none")
        assert s["parameters"].get("groups", False) is (name == "c")


def test_evaluate_warns_about_twins_unless_grouped_by_family(tmp_path, capsys):
    p = twins_file(tmp_path, n=90)
    run_dir = tmp_path / "run"
    assert cli(capsys, "run", p, "--out", run_dir, *FAST, "--groups", "family")[0] == 0
    common = ["--models", "ngram:hypothesis", "--seeds", "1", "--no-random-baseline", "--no-single-iteration",
              "--quiet"]
    code, _, err = cli(capsys, "evaluate", p, run_dir, "--out", tmp_path / "ev1", *common)
    assert code == 0, err
    assert "hypothesis text(s)" in err and "counterfactual twins" in err
    code, _, err = cli(capsys, "evaluate", p, run_dir, "--out", tmp_path / "ev2", *common, "--groups", "family")
    assert code == 0, err
    assert "counterfactual twins" not in err


def test_a_refused_input_leaves_an_existing_empty_folder_as_it_was(tmp_path, capsys):
    out = tmp_path / "empty"
    out.mkdir()
    p = tmp_path / "cols.tsv"
    p.write_text("a\tb\tc\nx\ty\tz\n")
    code, _, err = cli(capsys, "run", p, "--out", out, *FAST)
    assert code == 2 and "cannot tell which column" in one_line_error(err, "run")
    assert list(out.iterdir()) == []


# ------------------------------------------------------------------------------------------- issue 25, case 10
def test_zero_and_negative_partitions_get_the_same_bound(tmp_path, tsv, capsys):
    msgs = []
    for m in ("0", "-5"):
        code, _, err = cli(capsys, "run", tsv, "--out", tmp_path / f"o{m}", "-m", m, "--quiet")
        assert code == 2
        msgs.append(err.strip().replace(f"got {m}", "got M"))
    assert msgs[0] == msgs[1] and "must be >= 1" in msgs[0]


def test_filter_row_count_mismatch_names_both_files(tmp_path, capsys):
    np.save(tmp_path / "X.npy", np.zeros((5, 2), np.float32))
    (tmp_path / "y.txt").write_text("a\nb\na\n")
    code, _, err = cli(capsys, "filter", "--features", tmp_path / "X.npy", "--labels", tmp_path / "y.txt",
                       "--out", tmp_path / "out", "--quiet")
    line = one_line_error(err, "filter")
    assert code == 2 and "X.npy" in line and "y.txt" in line


def test_library_warnings_are_recorded_not_printed_raw(tmp_path, tsv, capsys, monkeypatch):
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    import aflite.commands.run

    real = aflite.commands.run.render_summary

    def noisy(*a, **k):
        for _ in range(3):
            warnings.warn("lbfgs failed to converge", ConvergenceWarning, stacklevel=1)
        warnings.warn("aflite's own", UserWarning, stacklevel=1)
        return real(*a, **k)

    monkeypatch.setattr(aflite.commands.run, "render_summary", noisy)
    with pytest.warns(UserWarning, match="aflite's own"):  # other warnings pass through
        code, _, err = cli(capsys, "run", tsv, "--out", tmp_path / "out", "--featurizer", "ngram", "--quiet", "-m",
                           "4", "--no-probe")
    assert code == 0
    assert "ConvergenceWarning" not in err.replace("e.g. ConvergenceWarning", "")  # one summary line only
    assert [line for line in err.splitlines() if "warning(s) from scikit-learn" in line]
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["warnings"] == [{"warning": "ConvergenceWarning: lbfgs failed to converge", "count": 3}]


def test_quiet_turns_off_library_progress_bars(tmp_path, tsv, capsys, monkeypatch):
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    seen = {}

    def handler(args):
        seen["env"] = os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS")
        return 0

    import aflite.cli.evaluate

    monkeypatch.setattr(aflite.cli.evaluate, "run", handler)
    main(["evaluate", str(tsv), str(tmp_path / "run"), "--out", str(tmp_path / "ev"), "--quiet"])
    assert seen["env"] == "1"


def test_groups_twins_builds_families_and_the_warning_offers_it(tmp_path, capsys):
    p = twins_file(tmp_path)
    ds = load_dataset(p, groups="twins")
    fam = load_dataset(p, groups="family").groups
    # every family of the file's own column lies inside one family found from shared texts (those may join two
    # file families where real SNLI repeats a short hypothesis under two premises)
    inside = {}
    for a, b in zip(ds.groups.tolist(), fam.tolist(), strict=True):
        assert inside.setdefault(b, a) == a
    assert len(set(fam.tolist())) - 3 <= len(set(ds.groups.tolist())) <= len(set(fam.tolist()))
    code, _, err = cli(capsys, "run", p, "--out", tmp_path / "a", *FAST)
    assert code == 0 and "--groups twins (families of rows joined by a shared premise or hypothesis)" in err
    code, _, err = cli(capsys, "run", p, "--out", tmp_path / "b", *FAST, "--groups", "twins")
    assert code == 0 and "counterfactual twins" not in err
    assert json.loads((tmp_path / "b" / "results.json").read_text())["groups"] == "twins"


# --------------------------------------------------------------------------------- --backend (issue 34, 7)
@pytest.mark.parametrize("command", ["run", "embed", "demo"])
def test_a_backend_for_a_featurizer_without_an_encoder_is_refused(tmp_path, tsv, capsys, command):
    out = tmp_path / "out"
    argv = {"run": ["run", tsv], "embed": ["embed", tsv], "demo": ["demo"]}[command]
    code, _, err = cli(capsys, *argv, "--out", out, "--featurizer", "ngram", "--backend", "onnx", "--quiet")
    assert code == 2 and not out.exists()
    assert one_line_error(err, command).endswith(
        "--backend onnx: --featurizer ngram runs no encoder, so there is no runtime to choose (--backend applies to "
        "minilm, warmup, efficientnet-lite0, hf-image); leave --backend out")
    if command == "embed":  # auto chooses nothing either way: accepted
        assert cli(capsys, *argv, "--out", out, "--featurizer", "ngram", "--backend", "auto", "--quiet")[0] == 0


# --------------------------------------------------------------------------------- $TMPDIR (issue 34, 7)
def _tmpdir_after(tmp_path: Path, *argv: object) -> list[str]:
    """Run ``aflite ARGV`` in a fresh interpreter with $TMPDIR an empty folder of its own; what is left there."""
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    assert list(scratch.iterdir()) == []
    env = {**os.environ, "TMPDIR": str(scratch), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1] / "src"),
                                                       os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "aflite", *map(str, argv)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    return sorted(p.name for p in scratch.iterdir())


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_a_dask_cluster_leaves_nothing_in_tmpdir(tmp_path, tsv):
    """Dask's LocalCluster writes dask-scratch-space (and its workers' folders) into $TMPDIR."""
    pytest.importorskip("distributed")
    assert _tmpdir_after(tmp_path, "run", tsv, "--out", tmp_path / "run", *FAST, "--cluster", "local:2") == []


@pytest.mark.slow
def test_torch_and_onnx_runtime_leave_nothing_in_tmpdir(tmp_path, tsv, minilm_model_path):
    """Importing PyTorch's inductor makes $TMPDIR/torchinductor_<user>, importing ONNX Runtime $TMPDIR/.ses."""
    pytest.importorskip("onnxruntime")
    rows = tsv.read_text().splitlines()[:41]
    small = tmp_path / "small.tsv"
    small.write_text("\n".join(rows) + "\n")
    assert _tmpdir_after(tmp_path, "embed", small, "--out", tmp_path / "emb", "--featurizer", "minilm",
                         "--backend", "onnx-int8", "--quiet") == []


# --------------------------------------------------------------------------------- a reader that goes away
def test_a_closed_stdout_pipe_does_not_stop_the_run(tmp_path, small_snli):
    """``aflite run ... | head -1``: the reader is gone before aflite prints. The run still finishes and writes every
    file, exits 0, and prints no BrokenPipeError traceback (it used to die in the middle of its report)."""
    read, write = os.pipe()
    os.close(read)  # nobody reads: the first write or flush to stdout meets EPIPE
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH")]))}
    out = tmp_path / "run"
    try:
        proc = subprocess.run([sys.executable, "-m", "aflite", "run", str(small_snli), "--out", str(out),
                               "--featurizer", "ngram", "--no-probe", "--quiet"], env=env, stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=600)
    finally:
        os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr
    body = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert body["sealed"] and len((out / "kept_ids.txt").read_text(encoding="utf-8").split()) == body["size_after"]
    assert {"report.html", "summary.md", "filtered.tsv.gz"} <= {p.name for p in out.iterdir()}
