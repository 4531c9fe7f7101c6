"""A full disk, a read-only file system and damaged cache entries (issue 25, cases 3 and 4): one line on stderr,
exit code 2, no half-written file, nothing already written lost; a damaged cache entry is recomputed.

The full disk is simulated: ``os.fsync`` (which every atomic write calls before its rename, and where a real
delayed-allocation ENOSPC surfaces) raises ``OSError(ENOSPC)`` for the file named; the lock file's write is
failed the same way through a patched ``open``.
"""

from __future__ import annotations

import errno
import gzip
import os
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
    assert not (out / "checkpoint.npz").exists() and not (out / "summary.json").exists()
    no_temporaries(out)
    cached = {p.suffix for p in (out / "cache").iterdir()}
    assert cached == {".npy", ".json"}  # the features computed before the failure are kept, whole
    monkeypatch.undo()
    assert main(["run", str(tsv), "--out", str(out), *FAST, "--resume"]) == 0  # room again: it goes on
    assert (out / "summary.json").is_file()


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
    import aflite.runs.run

    def boom(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / "model.pt"))

    monkeypatch.setattr(aflite.runs.run, "render_summary", boom)
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
