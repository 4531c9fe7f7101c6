"""``aflite card`` writes a release anyone can load and verify (issue 49 item 5), and its minor cases (issue 50
item 5): the folder loads with the real ``datasets.load_dataset`` as it is, ``aflite verify`` checks a copy of it in
another path (one line per mismatch, exit 1; exit 2 for a folder that is no card), the card never replaces a file
it did not write, its pretty_name keeps the dots of the file name, ``--license`` is one of the Hub's identifiers,
and HTML in label names stays inside code spans (and escaped in the notebook view)."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from aflite.card import write_card
from aflite.card.verify import verify_folder
from aflite.cli import main
from aflite.data import demo_dataset_path

DATA = "data/train-00000-of-00001.parquet"
# labels that hold HTML, a backtick and a table's pipe: the card must show them as text
LABELS = {"entailment": "<b>ent</b>", "neutral": "neu`<i>x</i>`", "contradiction": "c|d"}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run (n-gram Φ) of the first 400 pairs of the bundled sample, relabelled with LABELS, read from a file whose
    name has dots (snli_1.0_dev.tsv) and whose texts hold quotes and cells pandas would read as missing."""
    tmp = tmp_path_factory.mktemp("release")
    lines = gzip.decompress(demo_dataset_path().read_bytes()).decode("utf-8").splitlines()[:401]
    rows = [lines[0]]
    for i, line in enumerate(lines[1:]):
        rid, premise, hypothesis, label = line.split("\t")
        if i % 50 == 0:
            premise, hypothesis = f'"{premise}', "NA"  # an open quote (TSV: no quoting) and pandas' NA
        rows.append("\t".join([rid, premise, hypothesis, LABELS[label]]))
    data = tmp / "snli_1.0_dev.tsv"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert main(["run", str(data), "--out", str(tmp / "run"), "--featurizer", "ngram", "--quiet", "-m", "8",
                 "--no-probe"]) == 0
    return tmp / "run"


def load(folder: Path, tmp: Path) -> list[dict[str, str]]:
    """The folder read by the real ``datasets``, offline, with caches under tmp."""
    datasets = pytest.importorskip("datasets")
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_DATASETS_OFFLINE", "1")
    mp.setenv("HF_HOME", str(tmp / "hf_home"))
    try:
        ds = datasets.load_dataset(str(folder), cache_dir=str(tmp / "hf_cache"))
    finally:
        mp.undo()
    assert list(ds) == ["train"]
    return list(ds["train"])


def test_the_folder_loads_with_datasets_and_verifies_after_a_copy(run: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    card = tmp_path / "card"
    res = write_card(run, card, license="cc-by-4.0")
    # the lock every writer of a folder takes (aflite.rundir.lock), the card, its Parquet data and its manifest
    assert sorted(p.name for p in card.iterdir()) == [".aflite.lock", "README.md", "croissant.json", "data",
                                                      "manifest.json"]
    assert sorted(p.name for p in (card / "data").iterdir()) == ["train-00000-of-00001.parquet"]
    copy = tmp_path / "downloaded" / "elsewhere"
    shutil.copytree(card, copy)
    rows = load(copy, tmp_path)
    # every row as aflite wrote it: ids and texts as text (a quote is text, NA is not missing), labels with HTML
    written = (run / "filtered.tsv").read_text(encoding="utf-8").splitlines()
    header = written[0].split("\t")
    assert [list(r) for r in rows[:1]] == [header]
    assert [[r[c] for c in header] for r in rows] == [line.split("\t") for line in written[1:]]
    assert len(rows) == res.manifest["filter"]["size_after"]
    assert main(["verify", str(copy)]) == 0
    assert "the card verifies: 3 file(s)" in capsys.readouterr().out


def test_a_changed_byte_or_a_missing_file_fails_verification_naming_it(run: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    card = tmp_path / "card"
    write_card(run, card)
    copy = tmp_path / "copy"
    shutil.copytree(card, copy)
    data = bytearray((copy / DATA).read_bytes())
    data[100] ^= 1  # one byte, same size
    (copy / DATA).write_bytes(bytes(data))
    (copy / "README.md").unlink()
    assert main(["verify", str(copy)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [f"{copy / 'README.md'}: missing (listed in {copy / 'manifest.json'})",
                   f"{copy / DATA}: changed: its sha256 differs from the one {copy / 'manifest.json'} lists"]
    # an edited fact in manifest.json (its seal no longer matches) is a mismatch too
    shutil.rmtree(copy)
    shutil.copytree(card, copy)
    m = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    m["filter"]["size_after"] += 1
    (copy / "manifest.json").write_text(json.dumps(m), encoding="utf-8")
    assert main(["verify", str(copy)]) == 1
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and line.startswith(f"{copy / 'manifest.json'}: edited after aflite wrote it")


def test_the_lines_verify_md_shows_are_the_lines_verify_prints(run: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #59, 5: docs/guide/verify.md's sample lines are what ``aflite verify`` prints (a changed size said
    "lists 35187" beside "35,188 bytes"), with the folder written DIR and the figures as printed."""
    card = tmp_path / "card"
    write_card(run, card)
    guide = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "verify.md").read_text(encoding="utf-8")
    shown = [re.sub(r"\d[\d,]*", "N", line) for line in re.findall(r"^\| `(DIR/[^`]+)` \|", guide, flags=re.M)]
    raw: list[str] = []

    def printed(change: Callable[[Path], None]) -> str:
        copy = tmp_path / "copy"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(card, copy)
        change(copy)
        assert main(["verify", str(copy)]) == 1
        line = capsys.readouterr().out.strip()
        raw.append(line)
        return re.sub(r"\d[\d,]*", "N", line.replace(str(copy), "DIR"))

    def grow(copy: Path) -> None:
        with (copy / DATA).open("ab") as fh:
            fh.write(b"x")

    def same_size(copy: Path) -> None:
        text = (copy / "README.md").read_bytes()
        (copy / "README.md").write_bytes(text[:-2] + bytes([text[-2] ^ 1]) + text[-1:])

    real = [printed(lambda c: (c / DATA).unlink()), printed(grow), printed(same_size)]
    assert real == shown[:3]
    size = (card / DATA).stat().st_size
    assert size >= 1000 and raw[1].endswith(f": changed: {size + 1:,} bytes, but {tmp_path / 'copy' / 'manifest.json'} "
                                            f"lists {size:,}")


def test_verify_refuses_what_is_no_card_and_checks_a_run_folder(run: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "manifest.json").write_text('{"name": "someone else\'s"}', encoding="utf-8")
    for folder in (tmp_path / "plain", tmp_path / "nope", tmp_path):
        assert main(["verify", str(folder)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("aflite verify: error:") and "\n" not in err
    old = tmp_path / "old"  # a card of aflite 0.3 (format /1): no file hashes to check against
    old.mkdir()
    (old / "manifest.json").write_text('{"format": "aflite-card/1", "name": "x"}', encoding="utf-8")
    assert main(["verify", str(old)]) == 1
    assert "format 'aflite-card/1', written by an older aflite card" in capsys.readouterr().out
    assert main(["verify", str(run)]) == 0
    assert "aflite run folder verifies" in capsys.readouterr().out
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    with (copy / "kept_ids.txt").open("a", encoding="utf-8") as fh:
        fh.write("x\n")
    assert main(["verify", str(copy)]) == 1
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"{copy / 'kept_ids.txt'}: ") and "\n" not in out


def test_a_users_own_file_is_never_replaced(run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "repo"
    out.mkdir()
    (out / "README.md").write_text("# my own notes\n", encoding="utf-8")
    assert main(["card", str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"aflite card: error: {out / 'README.md'}: not written by aflite card")
    assert sorted(p.name for p in out.iterdir()) == ["README.md"]  # nothing written
    assert (out / "README.md").read_text(encoding="utf-8") == "# my own notes\n"
    # the data file copied by hand (the 0.3 card's instruction) holds the card's bytes: kept, and the card is made
    (out / "README.md").unlink()
    shutil.copy(run / "filtered.tsv", out)
    (out / ".gitattributes").write_text("*.tsv filter=lfs\n", encoding="utf-8")
    assert main(["card", str(run), "--out", str(out)]) == 0
    capsys.readouterr()
    # a file added beside the card stays when the card is made again; one under the card's names that differs
    # from what aflite wrote there is refused
    (out / "notes.md").write_text("mine\n", encoding="utf-8")
    assert main(["card", str(run), "--out", str(out), "--license", "mit"]) == 0
    assert (out / "notes.md").read_text(encoding="utf-8") == "mine\n" and (out / ".gitattributes").is_file()
    assert verify_folder(out).ok
    # README.md edited by hand after the card: the user's now, never replaced
    with (out / "README.md").open("a", encoding="utf-8") as fh:
        fh.write("\nMy own paragraph.\n")
    edited = (out / "README.md").read_bytes()
    assert main(["card", str(run), "--out", str(out)]) == 2
    assert f"{out / 'README.md'}: changed since aflite card wrote it" in capsys.readouterr().err
    assert (out / "README.md").read_bytes() == edited
    (out / "manifest.json").unlink()
    assert main(["card", str(run), "--out", str(out)]) == 2
    assert "README.md: not written by aflite card" in capsys.readouterr().err


def test_pretty_name_keeps_the_dots_of_the_file_name(run: Path, tmp_path: Path) -> None:
    from aflite.card.facts import dataset_stem

    res = write_card(run, tmp_path / "card")
    assert res.manifest["name"].startswith("snli_1.0_dev, AFLite-filtered")
    assert "pretty_name: snli_1.0_dev, AFLite-filtered" in res.readme.read_text(encoding="utf-8")
    assert [dataset_stem(n) for n in ("snli_1.0_dev.tsv", "snli_1.0_dev.tsv.gz", "mnli.v2", "data.jsonl")] == [
        "snli_1.0_dev", "snli_1.0_dev", "mnli.v2", "data"]


@pytest.mark.parametrize("given", ["cc-by-4", "MIT License", "gpl-4.0", "foo"])
def test_a_license_the_hub_does_not_know_is_refused_before_anything_is_written(
        run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str) -> None:
    out = tmp_path / "card"
    assert main(["card", str(run), "--out", str(out), "--license", given]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"--license {given!r}: not a license identifier of the Hugging Face Hub" in err
    assert not out.exists()
    assert write_card(run, out, license="CC-BY-4.0").license == "cc-by-4.0"  # the Hub's ids, in any case


def test_html_in_label_names_stays_text(run: Path, tmp_path: Path) -> None:
    from markdown_it import MarkdownIt

    res = write_card(run, tmp_path / "card")
    text = res.readme.read_text(encoding="utf-8")
    body = text.split("\n---\n", 1)[1]
    tokens = MarkdownIt("commonmark").enable("table").parse(body)
    inline = [c for t in tokens if t.children for c in t.children]
    assert not [c.content for c in inline if c.type == "html_inline"]  # no HTML outside code spans
    spans = {c.content for c in inline if c.type == "code_inline"}
    assert set(LABELS.values()) <= spans  # each label whole, in one code span
    html = res._repr_html_()
    assert "<b>ent</b>" not in html and "<i>x</i>" not in html
    assert "<code>&lt;b&gt;ent&lt;/b&gt;</code>" in html and "<code>neu`&lt;i&gt;x&lt;/i&gt;`</code>" in html
