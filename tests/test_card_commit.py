"""A card folder is committed whole (issue 50 item 3), tested with a real kill -9 at the rename boundary: ``aflite
card`` runs under strace, which holds the process one second after each rename (``delay_exit``); the test reads
strace's report of the N-th rename into the card folder, kills the process inside that pause, and then: the
folder either verifies as one whole card (the previous one, byte for byte) or ``aflite verify`` refuses it — never
a mix that verifies — and a rerun of ``aflite card`` completes and verifies."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from aflite.card import write_card
from aflite.card.verify import verify_folder
from aflite.cli import main
from aflite.data import demo_dataset_path

STRACE = shutil.which("strace")
RENAMES = "rename,renameat,renameat2"
SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run (n-gram Φ) of the bundled sample's first 300 pairs."""
    import gzip

    tmp = tmp_path_factory.mktemp("cardkill")
    lines = gzip.decompress(demo_dataset_path().read_bytes()).splitlines(keepends=True)
    (tmp / "small.tsv.gz").write_bytes(gzip.compress(b"".join(lines[:301]), mtime=0))
    assert main(["run", str(tmp / "small.tsv.gz"), "--out", str(tmp / "run"), "--featurizer", "ngram", "--quiet",
                 "-m", "8", "--no-probe"]) == 0
    return tmp / "run"


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of the folder but the lock (aflite.rundir.lock: the pid of its last writer, no card's file)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
            and p.name != ".aflite.lock"}


def kill_at_rename(argv: list[str], folder: Path, nth: int) -> list[str]:
    """Run ``python -m aflite ARGV`` under strace and kill -9 it inside the pause after its nth successful rename
    into ``folder``; return the renames strace reported (the last is the one it was killed after)."""
    if STRACE is None:
        pytest.skip("strace is not installed (apt-get install strace): the kill at the rename boundary needs it")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    cmd = [STRACE, "-f", "-qq", "-s", "4096", "-o", "/dev/stderr", "-e", f"trace={RENAMES}",
           "-e", f"inject={RENAMES}:delay_exit=1000000", sys.executable, "-m", "aflite", *argv]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    assert proc.stderr is not None
    seen: list[str] = []
    head: list[str] = []
    for line in proc.stderr:
        head.append(line)
        m = re.match(r"(\d+)\s+rename\w*\(.*\)\s+= 0\b", line)
        if m and str(folder) in line:
            seen.append(line.strip())
            if len(seen) == nth:
                os.kill(int(m.group(1)), signal.SIGKILL)  # inside the one-second pause after the rename
                break
    proc.stderr.close()
    rc = proc.wait(timeout=120)
    if not seen and ("Operation not permitted" in "".join(head) or "ptrace" in "".join(head)):
        pytest.skip(f"strace cannot trace here: {''.join(head).strip()[:200]}")
    assert len(seen) == nth, (rc, "".join(head)[-2000:])
    return seen


def check_after_kill(folder: Path, wholes: list[dict[str, bytes]]) -> None:
    """The folder is one of the whole cards (the previous one, the new one) byte for byte, or verify refuses it;
    never two cards' files that verify."""
    found = verify_folder(folder)
    if found.ok:
        assert snapshot(folder) in wholes, "a folder that verifies must be one whole card"
    else:
        assert found.problems and all("\n" not in p for p in found.problems)


@pytest.mark.parametrize("nth", [1, pytest.param(2, marks=pytest.mark.slow), pytest.param(3, marks=pytest.mark.slow)])
def test_a_kill_at_a_rename_never_leaves_a_mix_and_a_rerun_completes(run: Path, tmp_path: Path, nth: int,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    card = tmp_path / "card"
    write_card(run, card, license="mit")  # the previous card, whole
    before = snapshot(card)
    write_card(run, tmp_path / "new", license="cc-by-4.0")  # the new card, elsewhere: its bytes do not name OUT
    after = snapshot(tmp_path / "new")
    assert after != before
    argv = ["card", str(run), "--out", str(card), "--license", "cc-by-4.0"]  # a new card: another README.md
    renames = kill_at_rename(argv, card, nth)
    if nth == 1:  # the first rename is the pending manifest.json: the folder says it is unfinished
        assert renames[0].split("\"")[3] == str(card / "manifest.json")
        assert verify_folder(card).problems == [f"{card / 'manifest.json'}: the card was never committed (aflite card "
                                                f"was interrupted while writing it): its files may be of two cards; "
                                                f"run aflite card again"]
        assert main(["verify", str(card)]) == 1
    check_after_kill(card, [before, after])
    assert main(argv) == 0
    capsys.readouterr()
    assert verify_folder(card).ok and "license: cc-by-4.0" in (card / "README.md").read_text(encoding="utf-8")
    assert sorted(snapshot(card)) == ["README.md", "croissant.json", "data/train-00000-of-00001.parquet",
                                      "manifest.json"]  # no temporary left


@pytest.mark.slow
def test_a_kill_while_the_first_card_is_written_leaves_a_folder_that_says_so(run: Path, tmp_path: Path) -> None:
    card = tmp_path / "card"
    argv = ["card", str(run), "--out", str(card)]
    kill_at_rename(argv, card, 2)  # the pending manifest, then the data file: README.md not yet written
    assert not verify_folder(card).ok
    assert main(argv) == 0 and verify_folder(card).ok


@pytest.fixture(scope="module")
def run2(run: Path) -> Path:
    """A second run of the same rows with another seed: another kept set, so that a mix of two cards shows."""
    out = run.parent / "run2"
    assert main(["run", str(run.parent / "small.tsv.gz"), "--out", str(out), "--featurizer", "ngram", "--quiet",
                 "-m", "8", "--no-probe", "--seed", "3", "-k", "20"]) == 0
    return out


def loaded(folder: Path, tmp: Path) -> list[dict[str, str]] | None:
    """The rows the real ``datasets.load_dataset`` reads from the folder (offline, fresh caches), or None when it
    refuses the folder."""
    datasets = pytest.importorskip("datasets")
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_DATASETS_OFFLINE", "1")
    mp.setenv("HF_HOME", str(tmp / "hf_home"))
    try:
        return list(datasets.load_dataset(str(folder), cache_dir=str(tmp / "hf_cache"))["train"])
    except Exception:  # noqa: BLE001 - any refusal of the loader counts: the point is that it never reads a mix
        return None
    finally:
        mp.undo()


@pytest.mark.parametrize("nth", [2, pytest.param(1, marks=pytest.mark.slow), pytest.param(3, marks=pytest.mark.slow),
                                 pytest.param(4, marks=pytest.mark.slow), pytest.param(5, marks=pytest.mark.slow)])
def test_load_dataset_after_a_kill_at_a_rename_reads_one_whole_card_or_fails(run: Path, run2: Path, tmp_path: Path,
                                                                             nth: int) -> None:
    """Issue 56 item 3: a card replaced by another run's card, killed after its nth rename (1 the pending
    manifest, 2 README.md's placeholder, 3 the data, 4 croissant.json, 5 README.md; 6 the manifest, after which
    the card is committed): ``load_dataset`` either fails,
    or reads one card whole: its README.md with its own rows — never the old card's README over the new data."""
    card = tmp_path / "card"
    write_card(run, card, license="mit")
    write_card(run2, tmp_path / "new", license="cc-by-4.0")
    cards = [((f / "README.md").read_bytes(), loaded(f, tmp_path / f.name)) for f in (card, tmp_path / "new")]
    assert cards[0][1] is not None and cards[1][1] is not None and cards[0][1] != cards[1][1]
    kill_at_rename(["card", str(run2), "--out", str(card), "--license", "cc-by-4.0"], card, nth)
    rows = loaded(card, tmp_path / "after")
    if rows is not None:
        assert ((card / "README.md").read_bytes(), rows) in cards, "load_dataset read a mix of two cards"
    elif nth >= 2:
        assert "Unfinished card" in (card / "README.md").read_text(encoding="utf-8")
