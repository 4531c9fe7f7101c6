"""A full disk, a read-only file system and damaged cache entries (issue 25, cases 3 and 4): one line on stderr,
exit code 2, no half-written file, nothing already written lost; a damaged cache entry is recomputed.

The full disk is simulated: ``os.fsync`` (which every atomic write calls before its rename, and where a real
delayed-allocation ENOSPC surfaces) raises ``OSError(ENOSPC)`` for the file named; the lock file's write is
failed the same way through a patched ``open``.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from aflite import atomic
from aflite.cli import main
from aflite.errors import OutputError
from aflite.rundir import lock as rundir

SAMPLE = Path(__file__).resolve().parents[1] / "src" / "aflite" / "resources" / "snli_sample.tsv.gz"
FAST = ["--featurizer", "ngram", "--quiet", "-m", "4", "--no-probe"]


@pytest.fixture
def tsv(tmp_path: Path) -> Path:
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as fh:
        lines = fh.read().splitlines()[: 241]
    p = tmp_path / "data.tsv"
    p.write_text("\n".join(lines) + "\n")
    return p


def full_disk(monkeypatch: pytest.MonkeyPatch, name_part: str, folder: str = "") -> None:
    """Every atomic write of a file whose temporary name contains ``name_part`` (and whose path contains
    ``folder``) fails with ENOSPC."""
    real = os.fsync

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if name_part in path and folder in path:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)


def one_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"aflite {command}: error: "), err
    return lines[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def no_temporaries(folder: Path) -> None:
    assert not [p for p in folder.rglob("*.tmp")], sorted(folder.rglob("*"))


def test_write_npy_disk_full_is_one_error_and_no_file(tmp_path, monkeypatch):
    full_disk(monkeypatch, "x.npy")
    with pytest.raises(OutputError, match=r"cannot write .*x\.npy: No space left on device; free some"):
        atomic.write_npy(tmp_path / "x.npy", np.zeros(3))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_disk_full_at_the_checkpoint(tmp_path, tsv, capsys, monkeypatch):
    out = tmp_path / "out"
    full_disk(monkeypatch, "checkpoint.npz")
    code = main(["run", str(tsv), "--out", str(out), *FAST])
    line = one_line(capsys.readouterr().err, "run")
    assert code == 2
    assert "checkpoint.npz: No space left on device" in line
    assert not (out / "checkpoint.npz").exists() and not (out / "results.json").exists()
    no_temporaries(out)
    cached = {p.suffix for p in (out / "cache").iterdir()}
    assert cached == {".npy", ".json"}  # the features computed before the failure are kept, whole
    monkeypatch.undo()
    assert main(["run", str(tsv), "--out", str(out), *FAST, "--resume"]) == 0  # room again: it goes on
    assert (out / "results.json").is_file()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("which", [".npy", ".json"])
def test_disk_full_at_the_cache_never_leaves_a_json_without_its_matrix(tmp_path, tsv, capsys, monkeypatch, which):
    out, cache = tmp_path / "out", tmp_path / "cache"
    full_disk(monkeypatch, f"{which}.", f"{cache}/")  # the temporary name is .<stem><which>.<random>.tmp
    code = main(["run", str(tsv), "--out", str(out), "--cache-dir", str(cache), *FAST])
    line = one_line(capsys.readouterr().err, "run")
    assert code == 2 and "No space left on device" in line
    no_temporaries(cache)
    for meta in cache.glob("*.json"):
        assert meta.with_suffix(".npy").is_file(), sorted(cache.iterdir())
    monkeypatch.undo()
    assert main(["run", str(tsv), "--out", str(out), "--cache-dir", str(cache), *FAST, "--resume"]) == 0


def test_disk_full_at_the_lock(tmp_path, tsv, capsys, monkeypatch):
    out = tmp_path / "out"
    real_open = open

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

    def fake_open(path, *a, **k):
        fh = real_open(path, *a, **k)
        return Full(fh) if str(path).endswith(rundir.LOCK) else fh

    monkeypatch.setattr(rundir, "open", fake_open, raising=False)
    code = main(["run", str(tsv), "--out", str(out), *FAST])
    line = one_line(capsys.readouterr().err, "run")
    assert code == 2 and line.endswith("cannot write into the folder: No space left on device")
    assert not out.exists()  # the folder this call created is gone again


def test_unexpected_storage_error_outside_atomic_writes_is_one_line(tmp_path, tsv, capsys, monkeypatch):
    import aflite.commands.run

    def boom(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / "model.pt"))

    monkeypatch.setattr(aflite.commands.run, "render_summary", boom)
    code = main(["run", str(tsv), "--out", str(tmp_path / "out"), *FAST])
    line = one_line(capsys.readouterr().err, "run")
    assert code == 2 and "model.pt: No space left on device" in line


def test_a_damaged_cache_entry_is_recomputed_with_a_warning(tmp_path, tsv, capsys, caplog):
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert main(["run", str(tsv), "--out", str(out), "--cache-dir", str(cache), *FAST]) == 0
    kept = (out / "kept_ids.txt").read_text()
    (npy,) = cache.glob("*.npy")
    npy.write_bytes(npy.read_bytes()[:200])  # truncated, as by a crash of another tool or a bad copy
    capsys.readouterr()
    assert main(["run", str(tsv), "--out", str(out), "--cache-dir", str(cache), *FAST, "--overwrite"]) == 0
    assert any("damaged feature cache entry" in r.getMessage() and "recomputing" in r.getMessage()
               for r in caplog.records)
    assert (out / "kept_ids.txt").read_text() == kept
    assert np.load(npy).shape[0] == 240  # rewritten whole
    # a matrix without its description (a write that failed in between) is not trusted either
    next(cache.glob("*.json")).unlink()
    caplog.clear()
    assert main(["run", str(tsv), "--out", str(tmp_path / "o2"), "--cache-dir", str(cache), *FAST]) == 0
    assert any("damaged" in r.getMessage() for r in caplog.records)
    assert (tmp_path / "o2" / "kept_ids.txt").read_text() == kept


def test_load_cached_npy_drops_a_damaged_file(tmp_path, caplog):
    p = tmp_path / "p.npy"
    atomic.write_npy(p, np.arange(5))
    assert atomic.load_cached_npy(p, 5) is not None
    assert atomic.load_cached_npy(p, 4) is None and not p.exists()
    p.write_bytes(b"\x93NUMPY garbage")
    assert atomic.load_cached_npy(p) is None and not p.exists()
    assert "damaged cache entry" in caplog.text


# ------------------------------------------------------------------ a real full disk: a small tmpfs (issue 34, 3)
# A full file system does not fail where a patched fsync does: numpy's np.save raises
# "OSError: 307200 requested and 74720 written" (no errno) from inside its own fwrite, a memory-mapped file gets
# SIGBUS, PyTorch reports "file write failed". These tests mount a real tmpfs of a few hundred KB (root only;
# skipped where mounting is not permitted), fill it with each command, then grow it and run again.
class Tmpfs:
    def __init__(self, path: Path) -> None:
        self.path = path

    def resize(self, size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True, capture_output=True)

    def used(self) -> int:
        st = os.statvfs(self.path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize


@pytest.fixture
def small_disk(tmp_path: Path):
    """A factory: ``small_disk(size)`` mounts a fresh tmpfs of ``size`` (e.g. ``"200k"``) under tmp_path."""
    mounted: list[Path] = []

    def make(size: str) -> Tmpfs:
        where = tmp_path / f"disk{len(mounted)}"
        where.mkdir()
        if os.geteuid() != 0 or shutil.which("mount") is None:
            pytest.skip("mounting a tmpfs needs root")
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
        mounted.append(where)
        return Tmpfs(where)

    yield make
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def whole_files(folder: Path) -> None:
    """What a failed write leaves: no temporary file, and every file that is there reads back whole."""
    no_temporaries(folder)
    for p in folder.rglob("*"):
        if p.suffix == ".npy":
            np.load(p, allow_pickle=False)
        elif p.suffix == ".npz":
            with np.load(p, allow_pickle=False) as z:
                [z[k] for k in z.files]
        elif p.suffix == ".json":
            json.loads(p.read_text(encoding="utf-8"))


def full_disk_error(capsys: pytest.CaptureFixture[str], command: str) -> str:
    line = one_line(capsys.readouterr().err, command)
    assert "No space left on device" in line and "free some space" in line, line
    return line


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_run_on_a_real_full_disk_is_one_line_and_resumes(tmp_path, tsv, capsys, small_disk):
    ref = tmp_path / "ref"
    assert main(["run", str(tsv), "--out", str(ref), *FAST]) == 0
    kept = (ref / "kept_ids.txt").read_text()
    total = sum(p.stat().st_size for p in ref.rglob("*") if p.is_file())
    capsys.readouterr()
    # disks that fill at the features cache, at the checkpoint, among the run's tables, inside report.html
    for frac in (0.04, 0.13, 0.2, 0.5):
        disk = small_disk(f"{int(frac * total) // 1024}k")
        out = disk.path / "out"
        code = main(["run", str(tsv), "--out", str(out), *FAST])
        assert code == 2, frac
        full_disk_error(capsys, "run")
        whole_files(out)
        disk.resize("64m")  # room again: the same run goes on and ends as if nothing had happened
        assert main(["run", str(tsv), "--out", str(out), *FAST, "--resume"]) == 0
        assert (out / "kept_ids.txt").read_text() == kept
        capsys.readouterr()


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_embed_explain_evaluate_audit_on_a_real_full_disk(tmp_path, tsv, capsys, small_disk):
    run = tmp_path / "run"
    assert main(["run", str(tsv), "--out", str(run), *FAST]) == 0
    calls = {
        "embed": ["embed", str(tsv), "--quiet"],
        "explain": ["explain", str(tsv), str(run), "--quiet", "--random-seeds", "1", "--neighbours", "0"],
        "evaluate": ["evaluate", str(tsv), str(run), "--quiet", "--models", "ppmi:hypothesis", "--seeds", "1",
                     "--no-single-iteration"],
        "audit": ["audit", str(tsv), "--featurizer", "ngram", "--no-tra", "--tsne-sample", "0", "--peco-shuffles",
                  "5", "--quiet"],
    }
    run_before = snapshot(run)
    capsys.readouterr()
    for command, argv in calls.items():
        for size in ("64k", "400k"):
            disk = small_disk(size)
            out = disk.path / "out"
            assert main([*argv, "--out", str(out)]) == 2, (command, size)
            full_disk_error(capsys, command)
            whole_files(out)
            disk.resize("64m")
            again = [*argv, "--out", str(out)] + (["--resume"] if command == "embed" else [])
            assert main(again) == 0, (command, size, capsys.readouterr().err)
            assert (out / "results.json").is_file()
            capsys.readouterr()
    assert snapshot(run) == run_before  # the run folder they read is never written


def test_report_on_a_real_full_disk_keeps_the_page_it_had(tmp_path, tsv, capsys, small_disk):
    disk = small_disk("64m")
    out = disk.path / "out"
    assert main(["run", str(tsv), "--out", str(out), *FAST]) == 0
    page = (out / "report.html").read_bytes()
    disk.resize(f"{disk.used() // 1024 + 64}k")  # the page needs megabytes; 64 KB are left
    capsys.readouterr()
    assert main(["report", str(out)]) == 2
    full_disk_error(capsys, "report")
    whole_files(out)
    assert (out / "report.html").read_bytes() == page


def test_new_memmap_on_a_real_full_disk(small_disk):
    disk = small_disk("64k")
    with pytest.raises(OutputError, match="No space left on device"):
        atomic.new_memmap(disk.path / "x.npy", (1000, 100))  # 400 KB: a SIGBUS later without the reservation
    assert list(disk.path.iterdir()) == []
    mm = atomic.new_memmap(disk.path / "y.npy", (10, 10))
    mm[:] = 1
    mm.flush()
    assert np.load(disk.path / "y.npy").sum() == 100
