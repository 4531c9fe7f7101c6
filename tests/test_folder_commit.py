"""A run folder is committed whole (issue 40): killed with SIGKILL at any moment of a run or of an --overwrite
rerun, the folder is the old complete run, the new complete run, or visibly unfinished (every reader refuses it in
one line that says how to finish it) — never a mix. The child process is a real ``python -m aflite`` that stops at
a named point (``AFLITE_PAUSE_AT``, :func:`aflite.rundir.lock.pause_point`) and is killed there with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli_safety import sample_rows

from aflite.cli import main

SRC = str(Path(__file__).resolve().parents[1] / "src")
FAST = ["--featurizer", "ngram", "--quiet", "-m", "4", "--no-probe"]


@pytest.fixture
def data(tmp_path: Path) -> dict[str, Path]:
    """The same 240 real SNLI pairs as a TSV and as JSONL (a rerun on the other format writes another
    filtered.*)."""
    rows = sample_rows(240)
    tsv = tmp_path / "data.tsv"
    tsv.write_text("id\tpremise\thypothesis\tlabel\n" + "".join("\t".join(r) + "\n" for r in rows))
    jsonl = tmp_path / "data.jsonl"
    jsonl.write_text("".join(json.dumps({"id": r[0], "premise": r[1], "hypothesis": r[2], "label": r[3]}) + "\n"
                             for r in rows))
    return {"tsv": tsv, "jsonl": jsonl}


def aflite(*argv: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    env.pop("AFLITE_PAUSE_AT", None)
    return subprocess.run([sys.executable, "-m", "aflite", *map(str, argv)], env=env, capture_output=True,
                          text=True, timeout=300)


def killed_at(point: str, tmp: Path, *argv: object) -> None:
    """Run ``aflite ARGV`` in a child that stops at ``point``, and kill it there with SIGKILL."""
    signal_file = tmp / f"paused-{point}-{time.monotonic_ns()}"
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1", "AFLITE_PAUSE_AT": point,
           "AFLITE_PAUSE_FILE": str(signal_file)}
    proc = subprocess.Popen([sys.executable, "-m", "aflite", *map(str, argv)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not signal_file.exists():
        if proc.poll() is not None:
            pytest.fail(f"the child ended (code {proc.returncode}) before {point}: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the child never reached {point}")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


def refused_as_unfinished(out: Path, data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every reader of the folder refuses it in one line that says it is unfinished and how to finish it."""
    for argv in (["report", out], ["card", out, "--out", out.parent / "card"],
                 ["explain", data, out, "--out", out.parent / "ex", "--quiet"],
                 ["evaluate", data, out, "--out", out.parent / "ev", "--quiet"]):
        code = main([str(a) for a in argv])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, (argv, err)
        assert "unfinished: no results.json" in err and "--resume" in err, err
    assert not (out.parent / "card").exists() and not (out.parent / "ex").exists()


def complete(out: Path) -> dict[str, object]:
    """The folder is one complete run: report and card accept it, and its manifest lists exactly its files (all
    but the page, which is derived from them and rebuilt by aflite report)."""
    assert main(["report", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    listed = set(results["manifest"])
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()
               and p.name not in ("results.json", ".aflite-owner.json", ".aflite.lock")
               and "cache" not in p.relative_to(out).parts}
    assert "report.html" in on_disk and listed == on_disk - {"report.html"}
    return results


@pytest.mark.slow  # about 30 s on two busy cores: three runs in subprocesses
def test_a_run_killed_after_a_phase_is_unfinished_and_resumes_to_the_same_result(tmp_path, data, capsys):
    ref = tmp_path / "ref"
    assert aflite("run", data["tsv"], "--out", ref, *FAST).returncode == 0
    out = tmp_path / "run"
    killed_at("checkpoint#2", tmp_path, "run", data["tsv"], "--out", out, *FAST)
    assert (out / "checkpoint.npz").is_file() and not (out / "results.json").exists()
    refused_as_unfinished(out, data["tsv"], capsys)
    done = aflite("run", data["tsv"], "--out", out, *FAST, "--resume")
    assert done.returncode == 0, done.stderr
    complete(out)
    assert (out / "kept_ids.txt").read_bytes() == (ref / "kept_ids.txt").read_bytes()
    assert (out / "filtered.tsv").read_bytes() == (ref / "filtered.tsv").read_bytes()


@pytest.mark.parametrize("point", [pytest.param("begun", marks=pytest.mark.slow),
                                   pytest.param("checkpoint", marks=pytest.mark.slow), "filtered",
                                   pytest.param("files", marks=pytest.mark.slow)])
@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_an_overwrite_killed_midway_is_unfinished_never_a_mix(tmp_path, data, capsys, point):
    out = tmp_path / "run"
    assert aflite("run", data["tsv"], "--out", out, *FAST).returncode == 0
    killed_at(point, tmp_path, "run", data["jsonl"], "--out", out, *FAST, "--overwrite")
    assert not (out / "results.json").exists()
    if point != "begun":  # the build removed the previous run's files before its first write
        assert not (out / "filtered.tsv").exists()
    if point in ("filtered", "files"):
        assert (out / "filtered.jsonl").is_file()  # the new filtered file has landed; the folder is unfinished
    refused_as_unfinished(out, data["jsonl"], capsys)
    how = "--resume" if point != "begun" else "--overwrite"
    done = aflite("run", data["jsonl"], "--out", out, *FAST, how)
    assert done.returncode == 0, done.stderr
    results = complete(out)
    assert "filtered.jsonl" in results["manifest"] and not (out / "filtered.tsv").exists()


@pytest.mark.slow  # about 30 s on two busy cores: three runs in subprocesses
def test_an_overwrite_killed_before_its_first_write_leaves_the_old_run(tmp_path, data):
    out = tmp_path / "run"
    assert aflite("run", data["tsv"], "--out", out, *FAST).returncode == 0
    before = (out / "results.json").read_bytes()
    killed_at("claimed", tmp_path, "run", data["jsonl"], "--out", out, *FAST, "--overwrite")
    assert (out / "results.json").read_bytes() == before
    complete(out)  # the old run, whole: every file matches its manifest


@pytest.mark.slow  # about 30 s on two busy cores: three runs in subprocesses
def test_a_run_killed_right_after_its_commit_is_the_new_run(tmp_path, data):
    out = tmp_path / "run"
    assert aflite("run", data["tsv"], "--out", out, *FAST).returncode == 0
    killed_at("committed", tmp_path, "run", data["jsonl"], "--out", out, *FAST, "--overwrite")
    results = complete(out)
    assert "filtered.jsonl" in results["manifest"] and not (out / "filtered.tsv").exists()


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_overwrite_removes_the_previous_runs_files_but_never_the_users(tmp_path, data):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes\n")
    refused = aflite("run", data["tsv"], "--out", out, *FAST)
    assert refused.returncode == 2 and "--overwrite" in refused.stderr
    assert aflite("run", data["tsv"], "--out", out, *FAST, "--overwrite").returncode == 0
    assert aflite("run", data["jsonl"], "--out", out, *FAST, "--overwrite").returncode == 0
    results = complete_with_foreign(out, {"notes.txt"})
    assert "filtered.jsonl" in results["manifest"] and not (out / "filtered.tsv").exists()
    assert (out / "notes.txt").read_text() == "my notes\n"


def complete_with_foreign(out: Path, foreign: set[str]) -> dict[str, object]:
    assert main(["report", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert not foreign & set(results["manifest"])
    return results


# ------------------------------------------------------------------ one claim for every entry point (Python)
def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_python_entry_point_refuses_a_users_folder_and_an_empty_path(tmp_path, committed):
    from aflite import audit_file, embed, evaluate_runs, explain_run, filter_files, run
    from aflite.errors import AfliteError

    user = tmp_path / "mine"
    user.mkdir()
    (user / "summary.md").write_text("my summary\n")
    (user / "results.json").write_text('{"mine": true}\n')
    before = snapshot(user)
    data, run_dir = committed["data"], committed["run"]
    calls = {
        "run": lambda out, **kw: run(data, out, featurizer="ngram", probe=False, show_progress=False, **kw),
        "embed": lambda out, **kw: embed(data, out, featurizer="ngram", show_progress=False, **kw),
        "filter": lambda out, **kw: filter_files(tmp_path / "X.npy", tmp_path / "y.txt", out, **kw),
        "evaluate": lambda out, **kw: evaluate_runs(data, [run_dir], out, show_progress=False, **kw),
        "explain": lambda out, **kw: explain_run(data, run_dir, out, show_progress=False, **kw),
        "audit": lambda out, **kw: audit_file(data, out, show_progress=False, **kw),
    }
    for name, call in calls.items():
        with pytest.raises(AfliteError, match=r"not empty .* pass overwrite=True"):
            call(user)
        assert snapshot(user) == before, name
        with pytest.raises(AfliteError, match="an empty path"):
            call("")
    assert not list(Path.cwd().glob("results.json")) or Path.cwd() == user


def test_a_python_run_with_overwrite_keeps_the_users_other_files_unlisted(tmp_path, committed):
    from aflite.commands.run import run

    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("keep me\n")
    run(committed["data"], user, featurizer="ngram", probe=False, show_progress=False, params={"n_partitions": 4},
        overwrite=True)
    results = json.loads((user / "results.json").read_text())
    assert "notes.txt" not in results["manifest"] and (user / "notes.txt").read_text() == "keep me\n"
    assert main(["card", str(user), "--out", str(tmp_path / "card")]) == 0
    from aflite.errors import AfliteError

    before = snapshot(user)  # the resume rules are the CLI's: another run here needs resume= or overwrite=
    with pytest.raises(AfliteError, match="holds a previous run: pass resume=True to continue it, overwrite=True"):
        run(committed["data"], user, featurizer="ngram", probe=False, show_progress=False)
    assert snapshot(user) == before


# ------------------------------------------------------------------ hand-edited folders: one line, nothing written
def _edit_results(run_dir: Path, **changes: object) -> None:
    res = json.loads((run_dir / "results.json").read_text())
    res.update(changes)
    (run_dir / "results.json").write_text(json.dumps(res))


def _swap_rows(run_dir: Path) -> None:
    """Two rows of the filtered file swapped: the same size, other bytes."""
    lines = (run_dir / "filtered.tsv").read_bytes().splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]
    (run_dir / "filtered.tsv").write_bytes(b"".join(lines))


EDITS = {
    "emptied_filtered": (lambda r: (r / "filtered.tsv").write_text(""), "filtered.tsv: 0 bytes"),
    "truncated_filtered": (lambda r: (r / "filtered.tsv").write_bytes((r / "filtered.tsv").read_bytes()[:500]),
                           "filtered.tsv: 500 bytes"),
    "swapped_filtered": (_swap_rows, "filtered.tsv: its sha256 differs"),
    "missing_kept_ids": (lambda r: (r / "kept_ids.txt").unlink(), "kept_ids.txt: missing"),
    "unlisted_warmup_ids": (lambda r: (r / "warmup_ids.txt").write_text("p1\n"), "warmup_ids.txt: not listed"),
    "edited_label_counts": (lambda r: _edit_results(r, label_counts_after={"neutral": 1}),
                            "results.json: edited after aflite wrote it"),
    "size_as_text": (lambda r: _edit_results(r, size_before="600"),
                     "results.json: 'size_before' is \"600\", not an integer"),
    "parameters_null": (lambda r: _edit_results(r, parameters=None), "results.json: 'parameters' is null"),
    "featurizer_a_name": (lambda r: _edit_results(r, featurizer="ngram"), "results.json: 'featurizer' is \"ngram\""),
    "before_the_format": (lambda r: _edit_results(r, format_version=None),
                          "results.json: made by aflite < 0.3 (no format_version): run it again"),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_a_hand_edited_run_is_refused_in_one_line_by_every_reader(tmp_path, committed, capsys, case):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(committed["run"], run_dir)
    edit, expect = EDITS[case]
    edit(run_dir)
    before = snapshot(run_dir)
    for argv in (["card", run_dir, "--out", tmp_path / "card"], ["report", run_dir],
                 ["explain", committed["data"], run_dir, "--out", tmp_path / "ex", "--quiet"],
                 ["evaluate", committed["data"], run_dir, "--out", tmp_path / "ev", "--quiet"],
                 ["audit", committed["data"], "--compare", run_dir, "--out", tmp_path / "au", "--featurizer", "ngram",
                  "--no-tra", "--quiet"]):
        code = main([str(a) for a in argv])
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 2 and len(err) == 1 and expect in err[0], (argv[0], err)
    assert snapshot(run_dir) == before  # nothing changed, nothing written beside it
    assert not any((tmp_path / name).exists() for name in ("card", "ex", "ev", "au"))


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_a_report_killed_midway_leaves_the_commit_and_a_whole_page(tmp_path, data):
    """``aflite report`` rewrites only the page, atomically, and the page is not in the manifest: killed (SIGKILL)
    once the new page is rendered, the folder is the committed run with its old page; let finish, it leaves
    results.json as it was, and the page it rebuilt from the verified files is the page the run wrote from memory."""
    from aflite.report.explorer import embedded_data, notes_of
    from aflite.rundir.read import read_run

    out = tmp_path / "run"
    assert aflite("run", data["tsv"], "--out", out, *FAST).returncode == 0
    results, page = (out / "results.json").read_bytes(), (out / "report.html").read_bytes()
    assert "report.html" not in json.loads(results)["manifest"]
    killed_at("page", tmp_path, "report", out)
    assert (out / "results.json").read_bytes() == results and (out / "report.html").read_bytes() == page
    read_run(out)  # every listed file verifies
    done = aflite("report", out)
    assert done.returncode == 0, done.stderr
    assert (out / "results.json").read_bytes() == results
    read_run(out)
    rebuilt = (out / "report.html").read_text(encoding="utf-8")
    assert embedded_data(rebuilt) == embedded_data(page.decode("utf-8"))
    assert notes_of(rebuilt) == notes_of(page.decode("utf-8"))
