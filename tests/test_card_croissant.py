"""The card's croissant.json (issue 56 item 2): read back by the real mlcroissant, whose records are the kept
rows; its Responsible-AI fields hold the figures of the run's and explain's results.json; its FileObject's sha256
is the data file's; ``mlcroissant validate`` accepts it; ``aflite verify`` checks it."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aflite.card import write_card
from aflite.card.verify import verify_folder
from aflite.cli import main
from aflite.data import demo_dataset_path
from aflite.hashing import file_sha256

mlc = pytest.importorskip("mlcroissant", reason="mlcroissant is not installed (the [hf] extra)")
COLUMNS = ("id", "premise", "hypothesis", "label")


def results(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "results.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run (n-gram Φ, with its probe) of the sample's first 900 pairs, an explain folder of it, and its card."""
    tmp = tmp_path_factory.mktemp("croissant")
    lines = gzip.decompress(demo_dataset_path().read_bytes()).splitlines(keepends=True)
    (tmp / "d.tsv").write_bytes(b"".join(lines[:901]))
    assert main(["run", str(tmp / "d.tsv"), "--out", str(tmp / "run"), "--featurizer", "ngram", "--quiet",
                 "-m", "8"]) == 0
    assert main(["explain", str(tmp / "d.tsv"), str(tmp / "run"), "--out", str(tmp / "ex"), "--quiet",
                 "--random-seeds", "2", "--neighbours", "0", "--min-count", "5"]) == 0
    write_card(tmp / "run", tmp / "card", explain=tmp / "ex", license="cc-by-sa-4.0")
    return tmp


def kept_rows(made: Path) -> list[list[str]]:
    kept = set((made / "run" / "kept_ids.txt").read_text(encoding="utf-8").split("\n")[:-1])
    rows = [line.split("\t") for line in (made / "d.tsv").read_text(encoding="utf-8").split("\n")[1:-1]]
    return [r for r in rows if r[0] in kept]


def test_mlcroissant_reads_the_kept_rows(made: Path) -> None:
    ds = mlc.Dataset(jsonld=str(made / "card" / "croissant.json"))
    records = [[r[f"train/{c}"].decode("utf-8") for c in COLUMNS] for r in ds.records("train")]
    assert records == kept_rows(made) and len(records) == results(made / "run")["size_after"]
    assert ds.metadata.name == "d, AFLite-filtered (Φ ngram, pair)"


def test_its_file_object_is_the_data_file_and_verify_checks_it(made: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    card = made / "card"
    doc = json.loads((card / "croissant.json").read_text(encoding="utf-8"))
    assert doc["conformsTo"] == "http://mlcommons.org/croissant/1.1" and doc["@type"] == "sc:Dataset"
    (obj,) = doc["distribution"]
    assert obj["contentUrl"] == "data/train-00000-of-00001.parquet"
    assert obj["sha256"] == file_sha256(card / obj["contentUrl"])
    assert [f["name"] for f in doc["recordSet"][0]["field"]] == list(COLUMNS)
    assert {f["dataType"] for f in doc["recordSet"][0]["field"]} == {"sc:Text"}
    manifest = json.loads((card / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["files"]["croissant.json"]["sha256"] == file_sha256(card / "croissant.json")
    assert verify_folder(card).ok
    copy = tmp_path / "copy"
    shutil.copytree(card, copy)
    doc["distribution"][0]["sha256"] = "0" * 64  # a Croissant file that no longer describes the data
    (copy / "croissant.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    assert main(["verify", str(copy)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [f"{copy / 'croissant.json'}: changed: its sha256 differs from the one {copy / 'manifest.json'} "
                   f"lists", f"{copy / obj['contentUrl']}: its sha256 differs from the one {copy / 'croissant.json'} "
                   f"lists"]


def test_the_rai_fields_hold_the_runs_figures(made: Path) -> None:
    run, ex = results(made / "run"), results(made / "ex")
    ds = mlc.Dataset(jsonld=str(made / "card" / "croissant.json"))
    meta = ds.metadata
    biases, limits = list(meta.data_biases), list(meta.data_limitations)
    probe = run["partial_input_probe"]["results"]
    line = next(s for s in biases if s.startswith("Partial-input probe"))
    for r in probe:  # the probe's accuracy on D, D(Φ) and the random subset, as results.json holds them
        assert f"{r['name']}: {100 * r['accuracy']:.1f} % (majority {100 * r['majority']:.1f} %" in line
    sig = ex["checks"]["tokens"]["summary"]["significant_tokens"]
    assert any(f"D {sig['full']}, D(Φ) {sig['kept']}, same-size random subsets {sig['random']}" in s for s in biases)
    removed = run["size_before"] - run["size_after"]
    assert limits[0].startswith(f"AFLite removed {removed} of {run['size_before']} rows")
    before, after = run["label_counts_before"], run["label_counts_after"]
    for lab in before:
        assert f"{lab!r}: {before[lab] - after[lab]} of {before[lab]} (" in limits[1]
    assert "adversarially filtered for linear models" in limits[2]
    protocol = " ".join(meta.data_preprocessing_protocol)
    assert f"seed {run['seed']}." in protocol
    for key, value in run["parameters"].items():
        assert f"{key} {json.dumps(value)}" in protocol
    assert run["dataset_sha256"] in str(meta.data_collection)


def test_mlcroissant_validate_accepts_it(made: Path) -> None:
    cli = Path(sys.executable).parent / "mlcroissant"
    if not cli.exists():
        pytest.skip("the mlcroissant command is not installed beside this Python")
    proc = subprocess.run([str(cli), "validate", "--jsonld", str(made / "card" / "croissant.json")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Done." in proc.stderr and " error" not in proc.stderr.lower()
