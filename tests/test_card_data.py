"""The card as its ecosystem reads it (issue 56 item 1) and its folder's safety rules (issue 55): the real
``datasets.load_dataset`` returns every value of the card's Parquet as written (ids with leading zeros,
numeric-looking labels that are distinct strings, empty cells, unicode), the row count of kept_ids.txt, and no
pandas index column; a pending manifest that lists a user's file never makes the card remove it; two writers of
one card folder: the second is refused in one line; ``aflite verify`` on a card without its manifest says so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aflite.card import write_card
from aflite.card.verify import verify_folder
from aflite.cli import main
from aflite.data import demo_dataset_path

SRC = Path(__file__).resolve().parents[1] / "src"
LABELS = ("0.5", "0.50", ".5")  # three distinct strings of one number: three classes, never one


def tricky_rows() -> list[list[str]]:
    """300 pairs of the bundled sample with ids 00042 and 007 first, labels 0.5 / 0.50 / .5, an empty hypothesis,
    unicode (a line separator U+2028 inside a text, which str.splitlines would split), and a text 'NA'."""
    import gzip

    lines = gzip.decompress(demo_dataset_path().read_bytes()).decode("utf-8").split("\n")[1:301]
    rows = []
    for i, line in enumerate(lines):
        _, premise, hypothesis, _ = line.split("\t")
        rid = ("00042", "007")[i] if i < 2 else f"{i:04d}"
        if i == 2:
            hypothesis = ""
        if i == 3:
            premise = "Ünïcødé ✓ \u2028 naïve café 日本語"
        if i == 4:
            hypothesis = "NA"
        rows.append([rid, premise, hypothesis, LABELS[i % 3]])
    return rows


@pytest.fixture(scope="module")
def tricky(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("exact")
    rows = tricky_rows()
    text = "\n".join("\t".join(r) for r in [["id", "premise", "hypothesis", "label"], *rows]) + "\n"
    (tmp / "d.tsv").write_bytes(text.encode("utf-8"))
    assert main(["run", str(tmp / "d.tsv"), "--out", str(tmp / "run"), "--featurizer", "ngram", "--quiet", "-m", "8",
                 "--no-probe", "--target-size", "299", "--slice-size", "1"]) == 0  # one row removed
    return tmp


def load(folder: Path, tmp: Path) -> Any:
    """The folder read by the real ``datasets``, offline, with caches under tmp."""
    datasets = pytest.importorskip("datasets")
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_DATASETS_OFFLINE", "1")
    mp.setenv("HF_HOME", str(tmp / "hf_home"))
    try:
        return datasets.load_dataset(str(folder), cache_dir=str(tmp / "hf_cache"))
    finally:
        mp.undo()


def test_load_dataset_returns_every_value_as_written(tricky: Path, tmp_path: Path) -> None:
    card = tmp_path / "card"
    write_card(tricky / "run", card, license="mit")
    ds = load(card, tmp_path)
    assert list(ds) == ["train"]
    train = ds["train"]
    assert {k: v.dtype for k, v in train.features.items()} == {c: "string" for c in
                                                             ("id", "premise", "hypothesis", "label")}
    kept = (tricky / "run" / "kept_ids.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(train) == len(kept) == 299
    written = [r for r in tricky_rows() if r[0] in set(kept)]
    assert [r[0] for r in written[:5]] == ["00042", "007", "0002", "0003", "0004"]  # the tricky rows are kept
    assert [[r[c] for c in ("id", "premise", "hypothesis", "label")] for r in train] == written
    assert sorted(set(train["label"])) == sorted(LABELS) and train["id"][:2] == ["00042", "007"]


def test_a_dataframe_input_gives_no_pandas_index_column(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    import aflite

    rows = tricky_rows()[:200]
    frame = pd.DataFrame(rows, columns=["id", "premise", "hypothesis", "label"])
    frame.index = pd.MultiIndex.from_arrays([[f"g{i // 2}" for i in range(200)], [f"{i:03d}" for i in range(200)]])
    aflite.run(frame, tmp_path / "run", params={"n_partitions": 8, "max_iterations": 0}, probe=False,
               show_progress=False, id_column="id")
    write_card(tmp_path / "run", tmp_path / "card", license="mit")
    train = load(tmp_path / "card", tmp_path)["train"]
    assert not [c for c in train.column_names if c.startswith("__")]
    assert train.column_names == ["id", "premise", "hypothesis", "label", "level_0", "level_1"]
    assert train["id"][:2] == ["00042", "007"] and train["level_1"][:2] == ["000", "001"]
    assert [r["label"] for r in train] == [r[3] for r in rows]


# ---------------------------------------------------------------------------------------------- issue 55
@pytest.fixture(scope="module")
def small_run(tricky: Path) -> Path:
    return tricky / "run"


def test_a_pending_manifest_never_removes_a_users_file(small_run: Path, tmp_path: Path) -> None:
    """A pending manifest (aflite 0.4's list of names, or one with sha256s) that lists the user's files — by
    hand, or a killed card's manifest edited since — makes the card remove only what it recorded with those very
    bytes: the user's notes.md, a file reached through a link and a name outside the folder all survive."""
    outside = tmp_path / "outside.txt"
    outside.write_text("not the card's\n", encoding="utf-8")
    for pending in ("list", "hashes"):
        card = tmp_path / pending / "card"
        write_card(small_run, card, license="mit")
        (card / "notes.md").write_text("my notes\n", encoding="utf-8")
        (card / "sub").mkdir()
        (card / "sub" / "mine.txt").write_text("mine\n", encoding="utf-8")
        (card / "linked").symlink_to(card / "sub", target_is_directory=True)
        names = ["README.md", "data/train-00000-of-00001.parquet", "notes.md", "sub/mine.txt", "linked/mine.txt",
                 "../../outside.txt", "manifest.json"]
        doc: dict[str, Any] = {"format": "aflite-card/2", "pending": names if pending == "list" else
                               {n: ["0" * 64] for n in names}}
        (card / "manifest.json").write_text(json.dumps(doc), encoding="utf-8")
        res = write_card(small_run, card, license="mit")
        assert (card / "notes.md").read_text(encoding="utf-8") == "my notes\n"
        assert (card / "sub" / "mine.txt").read_text(encoding="utf-8") == "mine\n"
        assert outside.read_text(encoding="utf-8") == "not the card's\n"
        assert verify_folder(card).ok
        if pending == "hashes":  # each listed entry left alone is named, in one line
            left = [n for n in res.notes if "left alone" in n]
            assert sorted(n.split(": listed in")[0] for n in left) == sorted(
                str(card / n) for n in ("notes.md", "sub/mine.txt", "linked/mine.txt", "../../outside.txt"))
            assert all("\n" not in n for n in left)


def test_two_writers_the_second_is_refused_in_one_line(small_run: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A real second process: ``aflite card`` held inside its lock (AFLITE_PAUSE_AT), then another into the same
    folder: refused in one line naming the first's pid, exit 2, the first's card untouched; once the first is
    killed, a card is made."""
    card = tmp_path / "card"
    signal_file = tmp_path / "paused"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
           "AFLITE_PAUSE_AT": "card-locked", "AFLITE_PAUSE_FILE": str(signal_file)}
    first = subprocess.Popen([sys.executable, "-m", "aflite", "card", str(small_run), "--out", str(card),
                              "--license", "mit"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(1200):
            if signal_file.is_file() and signal_file.read_text(encoding="utf-8").strip():
                break
            assert first.poll() is None, first.stderr.read() if first.stderr else ""
            time.sleep(0.05)
        pid = signal_file.read_text(encoding="utf-8").split()[0]
        assert main(["card", str(small_run), "--out", str(card), "--license", "cc-by-4.0"]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and err == (f"aflite card: error: --out {card}: in use by another aflite process (pid "
                                           f"{pid}); wait for it to finish or choose another --out")
        assert not (card / "README.md").exists() and not (card / "manifest.json").exists()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    assert main(["card", str(small_run), "--out", str(card), "--license", "cc-by-4.0"]) == 0
    assert verify_folder(card).ok


def test_verify_says_a_cards_manifest_is_missing(small_run: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    card = tmp_path / "card"
    write_card(small_run, card, license="mit")
    (card / "manifest.json").unlink()
    assert main(["verify", str(card)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"aflite verify: error: {card / 'manifest.json'}: missing: {card} "
                                              f"holds a card of aflite card (README.md) without its manifest")
