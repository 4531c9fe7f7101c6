"""aflite touches nothing but the files it wrote, and never takes its own bookkeeping for a path (issue 55): the
owner marker records each file aflite wrote with its sha256 and size, and ``--overwrite`` removes or replaces only
a plain name of the folder that the marker records and whose bytes are still what it recorded; whatever else a
marker lists (``..``, absolute paths, ``.``, ``''``, subfolders, the user's files) is left alone, with a warning. A
file the user drops into the folder while a run goes on is never adopted. The CLI cases run ``python -m aflite`` in
a child process."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli_safety import sample_rows
from unprivileged import NO_WAY, obeying_mode_bits

from aflite.atomic import write_text
from aflite.errors import OutputError
from aflite.rundir.folder import RunFolder
from aflite.rundir.lock import LOCK, MARKER, read_marker, recorded_files
from aflite.rundir.names import RESULTS, SUMMARY_MD

SRC = str(Path(__file__).resolve().parents[1] / "src")
FAST = ["--featurizer", "ngram", "--quiet", "-m", "4", "--no-probe"]


def aflite(*argv: object, cwd: Path | None = None, env: dict[str, str] | None = None, wait: bool = True,
           prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:
    """``python -m aflite ARGV`` in a child; ``prefix`` starts it through another command (see unprivileged.py)."""
    full = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1", **(env or {})}
    if env is None:
        full.pop("AFLITE_PAUSE_AT", None)
    cmd = [*prefix, sys.executable, "-m", "aflite", *map(str, argv)]
    if not wait:
        return subprocess.Popen(cmd, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    return subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=300, cwd=cwd)


def tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry below ``folder``: a file's bytes, a folder as "dir", a link as its target."""
    out: dict[str, bytes | str] = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = p.read_bytes()
    return out


@pytest.fixture(scope="module")
def tsv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("data") / "pairs.tsv"
    p.write_text("id\tpremise\thypothesis\tlabel\n" + "".join("\t".join(r) + "\n" for r in sample_rows(240)))
    return p


# ------------------------------------------------------------------------ 1. the marker is never a path
def _hostile_marker(out: Path, victim: Path, names: list[str]) -> None:
    listed = ["../victim.txt", str(victim), ".", "", "sub", "mine.txt", *names]
    marker = json.loads((out / MARKER).read_text(encoding="utf-8"))
    marker["written"] = [*marker["written"], *listed]
    marker["files"] = {**{n: {"sha256": "0" * 64, "size": 1} for n in listed}, **marker["files"]}
    (out / MARKER).write_text(json.dumps(marker), encoding="utf-8")


def test_overwrite_never_follows_the_marker_outside_the_folder_nor_onto_the_users_files(tsv, tmp_path):
    out = tmp_path / "shared" / "run"
    assert aflite("run", tsv, "--out", out, *FAST).returncode == 0
    victim = tmp_path / "shared" / "victim.txt"
    victim.write_text("outside")
    (out / "sub").mkdir()
    (out / "sub" / "thesis.tex").write_text("my chapter")
    (out / "mine.txt").write_text("mine")
    _hostile_marker(out, victim, [])
    users = {k: v for k, v in tree(out).items() if k.split("/")[0] in ("sub", "mine.txt")}
    done = aflite("run", tsv, "--out", out, "--overwrite", *FAST)
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "outside"
    assert {k: v for k, v in tree(out).items() if k.split("/")[0] in ("sub", "mine.txt")} == users
    assert f"{out / 'sub'}: left as it is" in done.stderr and f"{out / 'mine.txt'}: left as it is" in done.stderr
    manifest = json.loads((out / RESULTS).read_text())["manifest"]
    assert not any(k.split("/")[0] in ("sub", "mine.txt") for k in manifest)


def test_the_marker_records_each_file_with_its_sha256_and_size(tsv, tmp_path):
    out = tmp_path / "run"
    assert aflite("run", tsv, "--out", out, *FAST).returncode == 0
    files = recorded_files(read_marker(out))
    manifest = json.loads((out / RESULTS).read_text())["manifest"]
    for name, want in manifest.items():
        assert files[name] == {"sha256": want["sha256"], "size": want["size"]}, name
    assert files[SUMMARY_MD]["sha256"] == hashlib.sha256((out / SUMMARY_MD).read_bytes()).hexdigest()


def test_a_file_of_aflites_changed_since_is_left_alone_and_named(tsv, tmp_path):
    out = tmp_path / "run"
    assert aflite("run", tsv, "--out", out, *FAST).returncode == 0
    (out / "kept_ids.txt").write_text("my edit\n")  # listed by the marker, no longer what aflite wrote
    done = aflite("run", tsv, "--out", out, "--overwrite", *FAST)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "kept_ids.txt" in done.stderr and "differ from what aflite recorded" in done.stderr
    assert (out / "kept_ids.txt").read_text() == "my edit\n"
    assert (out / RESULTS).is_file()  # refused before the folder was touched


_NAMES = st.one_of(
    st.sampled_from(["..", ".", "", "/", "../victim.txt", "../../victim.txt", "ABS", "sub", "sub/inner.txt",
                     "sub/", "./mine.txt", "mine.txt", "ünïcødé.txt", "summary.md", "results.json", "notes",
                     MARKER, LOCK, "a\x00b", "..\\victim.txt", "link"]),
    st.text(max_size=12),
)
_VALUE = st.one_of(st.none(), st.integers(), st.text(max_size=8),
                   st.fixed_dictionaries({"sha256": st.one_of(st.text(max_size=64), st.just("0" * 64)),
                                          "size": st.one_of(st.integers(-1, 10), st.text(max_size=3))}))


ENVELOPE = ("command", "format_version", "argv", "versions", "manifest", "sealed", "seed")


@pytest.fixture(scope="module")
def run_body(tsv: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The body of a real run's results.json: what the property's command commits, without computing it again."""
    out = tmp_path_factory.mktemp("body") / "run"
    assert aflite("run", tsv, "--out", out, *FAST).returncode == 0
    return {k: v for k, v in json.loads((out / RESULTS).read_text()).items() if k not in ENVELOPE}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(written=st.one_of(st.lists(st.one_of(_NAMES, st.integers(), st.none()), max_size=10), st.text(max_size=5),
                         st.none()),
       files=st.one_of(st.dictionaries(_NAMES, _VALUE, max_size=10), st.lists(_NAMES, max_size=3)),
       created=st.booleans(), command=st.sampled_from(["run", "explain", "evaluate"]))
def test_overwrite_never_changes_a_file_aflite_did_not_write_whatever_the_marker_says(run_body, written, files,
                                                                                     created, command):
    from committed import _ByHand

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        outside = root / "victim.txt"
        outside.write_text("outside")
        (root / "outside_dir").mkdir()
        (root / "outside_dir" / "x").write_text("x")
        out = root / "out"
        out.mkdir()
        (out / "mine.txt").write_text("mine")
        (out / "ünïcødé.txt").write_text("ü")
        (out / "notes").mkdir()
        (out / "notes" / "a.md").write_text("a")
        (out / "sub").mkdir()
        (out / "sub" / "inner.txt").write_text("inner")
        (out / "link").symlink_to(outside)

        def swap(n: object) -> object:
            return str(outside) if n == "ABS" else str(root / "outside_dir") if n == "/" else n

        listed = [swap(n) for n in written] if isinstance(written, list) else written
        recs = {swap(k): v for k, v in files.items()} if isinstance(files, dict) else files
        # the marker as another command (or the same one) left it: its lists are what the property varies
        (out / MARKER).write_text(json.dumps({"command": command, "created": created, "written": listed,
                                              "files": recs}), encoding="utf-8")
        before_out = {k: v for k, v in tree(out).items() if k != MARKER}
        before_root = {k: v for k, v in tree(root).items() if not k.startswith("out/")}
        try:
            with RunFolder.claim(out, "run", overwrite=True, resume=False) as folder:
                folder.begin(writes=["table.txt"])
                write_text(out / "table.txt", "aflite's\n")
                folder.finish(_ByHand(out, dict(run_body)))
        except OutputError:
            pass  # a clash with a user's file (summary.md, results.json) is refused: nothing of theirs changes
        after = tree(out)
        for name, content in before_out.items():
            assert after.get(name) == content, name
        assert {k: v for k, v in tree(root).items() if not k.startswith("out/")} == before_root


def _paused_at_begun(tsv: Path, out: Path, tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    """``aflite run`` in a child process, held just after it claimed ``out`` until the returned file appears."""
    signal, go = tmp_path / "paused", tmp_path / "go"
    proc = aflite("run", tsv, "--out", out, *FAST, wait=False,
                  env={"AFLITE_PAUSE_AT": "begun", "AFLITE_PAUSE_FILE": str(signal), "AFLITE_PAUSE_UNTIL": str(go)})
    assert isinstance(proc, subprocess.Popen)
    for _ in range(1200):
        if signal.exists() or proc.poll() is not None:
            break
        time.sleep(0.1)
    if not signal.exists():
        proc.kill()
        pytest.fail(proc.communicate()[1] or "never paused")
    return proc, go


# ------------------------------------------------------------------------ 2. never adopt what it finds
def test_a_file_dropped_into_out_during_a_run_is_never_adopted(tsv, tmp_path):
    out = tmp_path / "run"
    proc, go = _paused_at_begun(tsv, out, tmp_path)
    try:
        (out / "dropped.txt").write_text("the user's, written mid-run")
        go.write_text("")
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    marker = read_marker(out)
    assert marker is not None and "dropped.txt" not in marker["written"]
    assert "dropped.txt" not in recorded_files(marker)
    assert "dropped.txt" not in json.loads((out / RESULTS).read_text())["manifest"]
    again = aflite("run", tsv, "--out", out, "--overwrite", *FAST)
    assert again.returncode == 0, again.stderr
    assert (out / "dropped.txt").read_text() == "the user's, written mid-run"


# ------------------------------------------------------------------------ 3. --out spelled with '..'
@pytest.fixture(scope="module")
def made(tsv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed run folder and the features embed writes: what explain, evaluate, card and filter read."""
    root = tmp_path_factory.mktemp("made")
    assert aflite("run", tsv, "--out", root / "run", *FAST).returncode == 0
    assert aflite("embed", tsv, "--out", root / "feats", "--featurizer", "ngram", "--quiet").returncode == 0
    return root


def _argv(command: str, tsv: Path, made: Path) -> list[object]:
    run = made / "run"
    return {
        "run": ["run", tsv, *FAST],
        "filter": ["filter", "--features", made / "feats" / "features.npy", "--labels", made / "feats" / "labels.txt",
                   "--ids", made / "feats" / "ids.txt", "-m", "4", "--quiet"],
        "embed": ["embed", tsv, "--featurizer", "ngram", "--quiet"],
        "explain": ["explain", tsv, run, "--quiet", "--random-seeds", "1", "--neighbours", "0"],
        "evaluate": ["evaluate", tsv, run, "--quiet", "--models", "ppmi:hypothesis", "--seeds", "1",
                     "--no-single-iteration"],
        "audit": ["audit", tsv, "--featurizer", "ngram", "--no-tra", "--tsne-sample", "0", "--peco-shuffles", "5",
                  "--quiet"],
        "card": ["card", run],
        "demo": ["demo", "--featurizer", "ngram", "--quiet"],
        "synthetic": ["synthetic", "--seeds", "1", "--n-samples", "250", "-m", "16", "-n", "150", "--quiet"],
    }[command]


@pytest.mark.parametrize("command", ["run", "filter", "embed", "explain", "evaluate", "audit", "card", "demo",
                                     "synthetic"])
def test_out_spelled_with_dotdot_is_the_folder_it_names_for_every_command(command, tsv, made, tmp_path):
    """``sub/../out`` and ``../out`` are resolved as the kernel resolves them, once, at the boundary: the command
    writes and commits that folder, and a rerun with --overwrite (its cache there) replaces it cleanly."""
    (tmp_path / "sub").mkdir()
    argv = _argv(command, tsv, made)
    committed = "manifest.json" if command == "card" else RESULTS  # the file a command commits last
    first = aflite(*argv, "--out", "sub/../out", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "out" / committed).is_file() and not (tmp_path / "sub" / "out").exists()
    again = aflite(*argv, "--out", "../out", *([] if command == "card" else ["--overwrite"]), cwd=tmp_path / "sub")
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr and (tmp_path / "out" / committed).is_file()
    assert "left as it is" not in again.stderr  # every file of the first run was aflite's, and replaced


@pytest.mark.parametrize("spelling", ["sub/../run", "../run", "link/../run"])
def test_report_dir_spelled_with_dotdot_reads_and_writes_the_folder_it_names(spelling, made, tmp_path):
    """``aflite report DIR`` takes its folder as a positional DIR, not --out: ``sub/../run`` (from tmp_path),
    ``../run`` (from sub) and ``link/../run`` (link -> deep/inner, so the kernel means deep/run, not ./run) each
    rebuild the report.html of the folder the kernel names, from that folder's files, and touch nothing else."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "deep" / "inner").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "deep" / "inner")
    for where in (tmp_path / "run", tmp_path / "deep" / "run"):
        shutil.copytree(made / "run", where)
        (where / "report.html").unlink()
    # for link/../run, ./run is the lexical reading's decoy: a page written there shows in the changed set
    named = tmp_path / "deep" / "run" if spelling.startswith("link") else tmp_path / "run"
    before = tree(tmp_path)
    cwd = tmp_path / "sub" if spelling == "../run" else tmp_path
    done = aflite("report", spelling, cwd=cwd)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    page = named / "report.html"
    printed = done.stdout.strip().splitlines()[-1]  # the page it names, as the kernel reads it from cwd
    assert page.is_file() and (cwd / printed).resolve() == page.resolve(), printed
    after = tree(tmp_path)
    rel = page.relative_to(tmp_path).as_posix()
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    lock = (named / LOCK).relative_to(tmp_path).as_posix()  # the folder's own lock, held while the page is built
    assert rel in changed and changed <= {rel, lock}, sorted(changed)
    # the page was built from the folder named: the same bytes as a report built with DIR spelled plainly
    again = aflite("report", named)
    assert again.returncode == 0, again.stderr
    assert page.read_bytes() == after[rel]
    assert {k: v for k, v in tree(tmp_path).items() if k != lock} == {k: v for k, v in after.items() if k != lock}


# ------------------------------------------------------------------------ 4. every write checked first
def one_line(done: subprocess.CompletedProcess[str]) -> str:
    err = done.stderr.strip()
    assert done.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, (done.returncode, err)
    return err


def test_evaluate_refuses_a_users_tables_md_before_touching_an_explain_folder(tsv, made, tmp_path):
    out = tmp_path / "ex"
    done = aflite(*_argv("explain", tsv, made), "--out", out)
    assert done.returncode == 0, done.stderr
    (out / "tables.md").write_text("my tables")
    before = {k: v for k, v in tree(out).items() if k != LOCK}
    err = one_line(aflite(*_argv("evaluate", tsv, made), "--out", out, "--overwrite"))
    assert "tables.md" in err and "not written by aflite" in err
    assert {k: v for k, v in tree(out).items() if k != LOCK} == before  # the explain output is all there


@pytest.mark.parametrize("command", ["run", "explain", "evaluate", "audit", "embed"])
def test_a_cache_dir_that_is_a_file_is_refused_before_out_is_touched(command, tsv, made, tmp_path):
    cache = tmp_path / "cache.bin"
    cache.write_bytes(b"not a folder")
    err = one_line(aflite(*_argv(command, tsv, made), "--out", tmp_path / "out", "--cache-dir", cache))
    assert "--cache-dir" in err and "is a file" in err
    assert not (tmp_path / "out").exists() and cache.read_bytes() == b"not a folder"


def test_a_cache_dir_inside_another_run_folder_is_refused_before_out_is_touched(tsv, made, tmp_path):
    before = tree(made / "run")
    err = one_line(aflite(*_argv("run", tsv, made), "--out", tmp_path / "out", "--cache-dir",
                          made / "run" / "mycache"))
    assert "is inside the run folder" in err and not (tmp_path / "out").exists()
    assert tree(made / "run") == before


def test_a_read_only_cache_dir_is_refused_before_out_is_touched(tsv, made, tmp_path):
    """Run for real as root too: the child drops CAP_DAC_OVERRIDE, so the 0o555 folder is read-only for it."""
    prefix = obeying_mode_bits()
    if prefix is None:
        pytest.skip(NO_WAY)
    cache = tmp_path / "ro"
    cache.mkdir()
    cache.chmod(0o555)
    probe = "import sys\ntry:\n    open(sys.argv[1], 'x').close()\nexcept PermissionError:\n    sys.exit(3)\n"
    try:
        wrote = subprocess.run([*prefix, sys.executable, "-c", probe, str(cache / "probe")], timeout=60)
        assert wrote.returncode == 3 and list(cache.iterdir()) == [], "the child could write: the test would be void"
        proc = aflite(*_argv("run", tsv, made), "--out", tmp_path / "out", "--cache-dir", cache, prefix=prefix)
    finally:
        cache.chmod(0o755)
    assert isinstance(proc, subprocess.CompletedProcess)
    err = one_line(proc)
    assert err == f"aflite run: error: --cache-dir {cache}: folder is not writable (read-only or no permission)"
    assert not (tmp_path / "out").exists() and list(cache.iterdir()) == []


# ------------------------------------------------------------------------ 6. the smaller ones
@pytest.mark.parametrize("damage", ["broken", "missing"])
def test_a_broken_or_missing_marker_is_named_as_the_cause_with_the_way_out(damage, tsv, made, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(made / "run", out)
    if damage == "broken":
        (out / MARKER).write_text("{not json")
    else:
        (out / MARKER).unlink()
    before = {k: v for k, v in tree(out).items() if k not in (LOCK, MARKER)}
    err = one_line(aflite(*_argv("run", tsv, made), "--out", out, "--overwrite"))
    assert MARKER in err and "no readable" in err and "move or delete it yourself" in err
    assert {k: v for k, v in tree(out).items() if k not in (LOCK, MARKER)} == before


def test_a_users_cache_folder_is_called_a_folder(tsv, made, tmp_path):
    out = tmp_path / "mine"
    (out / "cache").mkdir(parents=True)
    (out / "cache" / "notes.txt").write_text("mine")
    err = one_line(aflite(*_argv("run", tsv, made), "--out", out, "--overwrite"))
    assert "cache: a folder not written by aflite" in err and "writes a folder of that name" in err
    assert "a file of that name" not in err and (out / "cache" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("command", ["run", "explain", "card"])
def test_a_300_character_path_component_is_one_line(command, tsv, made, tmp_path):
    err = one_line(aflite(*_argv(command, tsv, made), "--out", tmp_path / ("x" * 300)))
    assert "300 characters" in err and "at most 255 bytes" in err


def test_a_dangling_symlink_as_out_is_a_clear_message(tsv, made, tmp_path):
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "gone")
    err = one_line(aflite(*_argv("run", tsv, made), "--out", link))
    assert "which does not exist" in err and "File exists" not in err
    assert link.is_symlink() and not (tmp_path / "gone").exists()


@pytest.mark.parametrize("change", ["deleted", "linked"])
def test_out_whose_parent_changes_mid_run_is_never_committed(change, tsv, tmp_path):
    parent = tmp_path / "parent"
    out = parent / "run"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "run").mkdir(parents=True)
    proc, go = _paused_at_begun(tsv, out, tmp_path)
    try:
        shutil.rmtree(parent)
        if change == "linked":
            parent.symlink_to(elsewhere)
        go.write_text("")
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "no longer the folder this command claimed" in err
    assert list((elsewhere / "run").iterdir()) == []  # nothing written into a folder it never claimed
    assert not (out / RESULTS).exists()


def test_the_demos_clean_start_removes_only_unchanged_files_it_recorded(tmp_path):
    from aflite.rundir import lock as rundir
    from aflite.rundir.lock import record_written

    own = tmp_path / "own"
    RunFolder.claim(own, "demo").release()
    (own / "summary.json").write_text("{}")  # listed below, but never recorded by a write of aflite's
    (tmp_path / "victim.txt").write_text("outside")
    record_written(own, ["summary.json", "../victim.txt"])
    assert rundir.clear_own_folder(own, "demo")
    assert (own / "summary.json").read_text() == "{}" and (tmp_path / "victim.txt").read_text() == "outside"
