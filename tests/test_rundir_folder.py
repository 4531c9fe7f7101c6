"""aflite removes or replaces only what it wrote (issue 50): the user's files in an output folder — there before
aflite first claimed it, added between two commands, or the input itself — are never deleted nor written over; a
name clash is refused in one line naming the file before anything is written; what can be refused (the device) is
refused before the folder is touched, leaving the last good run byte for byte; ``aflite report`` holds the folder's
lock; ``--out ''`` is refused. The CLI cases run ``python -m aflite`` in a child process."""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_safety import sample_rows

SRC = str(Path(__file__).resolve().parents[1] / "src")
FAST = ["--featurizer", "ngram", "--quiet", "-m", "4", "--no-probe"]


def aflite(*argv: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    env.pop("AFLITE_PAUSE_AT", None)
    return subprocess.run([sys.executable, "-m", "aflite", *map(str, argv)], env=env, capture_output=True,
                          text=True, timeout=300, cwd=cwd)


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The refusal: exit 2, one line on stderr."""
    err = done.stderr.strip()
    assert done.returncode == 2 and len(err.splitlines()) == 1, (done.returncode, err)
    return err


def hashes(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` (the lock aside: it holds the pid of the last process that held it)."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".aflite.lock"}


@pytest.fixture(scope="module")
def tsv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("data") / "pairs.tsv"
    p.write_text("id\tpremise\thypothesis\tlabel\n" + "".join("\t".join(r) + "\n" for r in sample_rows(240)))
    return p


@pytest.fixture(scope="module")
def good_run(tsv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed run folder (copied by each test that changes one)."""
    out = tmp_path_factory.mktemp("good") / "run"
    done = aflite("run", tsv, "--out", out, *FAST)
    assert done.returncode == 0, done.stderr
    return out


def copy_of(run: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "run"
    shutil.copytree(run, dest, symlinks=True)
    return dest


# ------------------------------------------------------------------------ files the user adds later stay
@pytest.mark.slow  # two runs and two explains in child processes
def test_files_the_user_adds_after_the_claim_stay(tsv, good_run, tmp_path):
    run = copy_of(good_run, tmp_path)
    (run / "notes.md").write_text("my notes\n")
    done = aflite("run", tsv, "--out", run, *FAST, "--resume")
    assert done.returncode == 0, done.stderr
    assert (run / "notes.md").read_text() == "my notes\n"
    assert "notes.md" not in json.loads((run / "results.json").read_text())["manifest"]
    assert aflite("report", run).returncode == 0  # the folder verifies with the user's file in it

    ex = tmp_path / "ex"
    assert aflite("explain", tsv, run, "--out", ex, "--quiet").returncode == 0
    (ex / "notes.md").write_text("x\n")
    (ex / "mine").mkdir()
    (ex / "mine" / "a.txt").write_text("a\n")
    done = aflite("explain", tsv, run, "--out", ex, "--quiet")
    assert done.returncode == 0, done.stderr
    assert (ex / "notes.md").read_text() == "x\n" and (ex / "mine" / "a.txt").read_text() == "a\n"


# ------------------------------------------------------------------------ the user's own files, by name
@pytest.mark.slow  # a run in a child process, refused after loading the data
def test_overwrite_refuses_a_name_clash_with_the_users_files_and_keeps_them(tsv, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("summary.md", "instances.csv", "report.html", "results.json", "kept_ids.txt"):
        (mine / name).write_text(f"my {name}\n")
    before = hashes(mine)
    err = one_line(aflite("run", tsv, "--out", mine, *FAST, "--overwrite"))
    assert "not written by aflite" in err and "nothing was replaced or removed" in err
    assert any(f"{mine}/{name}" in err for name in before), err
    assert hashes(mine) == before and sorted(p.name for p in mine.iterdir()) == sorted(before)


@pytest.mark.parametrize("name", ["filtered.tsv", "instances.csv"])
def test_an_input_inside_out_is_never_written_over(tsv, tmp_path, name):
    d = tmp_path / "d"
    d.mkdir()
    with (d / name).open("w", newline="", encoding="utf-8") as fh:  # the data in the format its name says
        rows = [r.split("\t") for r in tsv.read_text(encoding="utf-8").splitlines()]
        csv.writer(fh, delimiter="\t" if name.endswith(".tsv") else ",", lineterminator="\n").writerows(rows)
    before = hashes(d)
    err = one_line(aflite("run", d / name, "--out", d, *FAST, "--overwrite"))
    assert name in err and "nothing was replaced or removed" in err
    assert hashes(d) == before


def test_the_refusal_of_a_users_folder_says_what_is_kept(tsv, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("x")
    err = one_line(aflite("run", tsv, "--out", mine, *FAST))
    assert "every entry there stays" in err and "--overwrite" in err


# ------------------------------------------------------------------------ refused before the folder is touched
def _no_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return True
    return not torch.cuda.is_available()


@pytest.mark.skipif(not _no_cuda(), reason="a GPU is present: cuda is not refused here")
@pytest.mark.parametrize("flags", [["--overwrite", "--device", "cuda"], ["--overwrite", "--device", "nonsense"],
                                   pytest.param(["--overwrite", "--device", "cuda:3"], marks=pytest.mark.slow),
                                   pytest.param(["--overwrite", "--device", "mps"], marks=pytest.mark.slow),
                                   pytest.param(["--resume", "--device", "cuda"], marks=pytest.mark.slow)])
def test_a_refused_device_leaves_the_last_good_run_byte_identical(tsv, good_run, tmp_path, flags):
    run = copy_of(good_run, tmp_path)
    before = hashes(run)
    err = one_line(aflite("run", tsv, "--out", run, *FAST, *flags))
    assert "device" in err
    assert hashes(run) == before


@pytest.mark.skipif(not _no_cuda(), reason="a GPU is present: cuda is not refused here")
def test_a_python_run_with_a_refused_device_leaves_the_last_good_run(tsv, good_run, tmp_path):
    from aflite import run as run_fn
    from aflite.errors import ParameterError

    run = copy_of(good_run, tmp_path)
    before = hashes(run)
    for kw in ({"device": "cuda"}, {"storage": "nonsense"}):
        with pytest.raises(ParameterError):
            run_fn(tsv, run, featurizer="ngram", probe=False, show_progress=False, overwrite=True,
                   params={"n_partitions": 4}, **kw)
        assert hashes(run) == before


@pytest.mark.slow  # over 6 s on two busy cores: Dask is imported
def test_a_cluster_that_cannot_be_reached_is_one_line_and_leaves_the_run(tsv, good_run, tmp_path):
    pytest.importorskip("distributed")
    run = copy_of(good_run, tmp_path)
    before = hashes(run)
    err = one_line(aflite("run", tsv, "--out", run, *FAST, "--overwrite", "--cluster", "nonsense://"))
    assert "--cluster nonsense://" in err
    assert hashes(run) == before


# ------------------------------------------------------------------------ report's lock, --out ''
def test_report_holds_the_folders_lock(good_run, tmp_path, capsys):
    from aflite.cli import main
    from aflite.rundir.folder import RunFolder

    run = copy_of(good_run, tmp_path)
    page = (run / "report.html").read_bytes()
    held = RunFolder.claim(run, "run", overwrite=True)  # a run --overwrite holding the folder (its own open file)
    try:
        assert main(["report", str(run)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "in use by another aflite process" in err, err
        assert (run / "report.html").read_bytes() == page
    finally:
        held.release()
    assert main(["report", str(run)]) == 0


def test_an_empty_out_on_the_command_line_is_refused(tsv, tmp_path):
    err = one_line(aflite("run", tsv, "--out", "", *FAST, cwd=tmp_path))
    assert "--out" in err and "empty path" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_empty_out_of_every_command_is_refused(tmp_path):
    """Every command's --out (the card's too, which declares its own) refuses '' before anything is read."""
    from aflite.cli import build_parser

    parser = build_parser()
    for name, sub in parser._subparsers._group_actions[0].choices.items():  # type: ignore[union-attr]
        action = sub._option_string_actions.get("--out")
        if action is None:
            continue
        with pytest.raises(argparse.ArgumentTypeError, match="empty path"):
            action.type("")  # the parser turns this into one line and exit 2
        assert name


def test_an_empty_card_out_is_refused_on_the_command_line(tmp_path):
    err = one_line(aflite("card", str(tmp_path / "run"), "--out", "", cwd=tmp_path))
    assert "--out" in err and "empty path" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# ------------------------------------------------------------------------ what aflite wrote, recorded
def test_a_0_3_0_folder_says_what_aflite_wrote_by_its_marker_and_manifest(tmp_path):
    """aflite 0.3.0 listed the user's entries of the claim (``foreign``); what it wrote is what its manifest
    lists and the names it writes unlisted; a file added later is the user's."""
    from aflite.rundir.lock import MARKER, foreign_of, read_marker, written_of

    out = tmp_path / "old"
    out.mkdir()
    for name in ("instances.csv", "kept_ids.txt", "summary.md", "report.html", "results.json", "mine.txt",
                 "later.md"):
        (out / name).write_text("x")
    (out / "results.json").write_text(json.dumps({"manifest": {"instances.csv": {}, "kept_ids.txt": {}}}))
    (out / MARKER).write_text(json.dumps({"command": "run", "created": False, "foreign": ["mine.txt"]}))
    marker = read_marker(out)
    assert written_of(out, marker) == {"instances.csv", "kept_ids.txt", "summary.md", "report.html", "results.json"}
    assert foreign_of(out, marker) == ["later.md", "mine.txt"]


def test_the_demos_clean_start_keeps_what_the_user_added(tmp_path):
    from aflite.rundir import lock as rundir
    from aflite.rundir.folder import RunFolder
    from aflite.rundir.lock import record_files, record_of, record_written

    own = tmp_path / "own"
    RunFolder.claim(own, "demo").release()
    record_written(own, ["summary.md"])
    (own / "summary.md").write_text("aflite's")
    record_files(own, {"summary.md": record_of(own / "summary.md")})  # as an atomic write records it
    (own / "notes.md").write_text("mine")
    assert rundir.clear_own_folder(own, "demo")
    assert sorted(p.name for p in own.iterdir()) == sorted([rundir.MARKER, rundir.LOCK, "notes.md"])
