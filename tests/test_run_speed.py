"""benchmarks/run_speed.py: the sized copies of the scaling table and the kept-set agreement it reports."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("run_speed", ROOT / "benchmarks" / "run_speed.py")
assert spec is not None and spec.loader is not None
run_speed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_speed)


def test_sized_copy_repeats_rows_with_distinct_ids_and_texts(tmp_path: Path) -> None:
    src = tmp_path / "d.tsv.gz"
    with gzip.open(src, "wt", encoding="utf-8") as fh:
        fh.write("gold_label\tsentence1\tsentence2\tpairID\n"
                 "neutral\tA man.\tHe sits.\tp1\nentailment\tA dog.\tIt runs.\tp2\n")
    lines = run_speed.sized_copy(src, 5, tmp_path).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 6
    ids = [line.split("\t")[3] for line in lines[1:]]
    assert ids == ["p1", "p2", "p1~1", "p2~1", "p1~2"]
    premises = [line.split("\t")[1] for line in lines[1:]]
    assert len(set(premises)) == 5  # a repeat's premise group is its own
    assert run_speed.sized_copy(src, 1, tmp_path).read_text(encoding="utf-8").count("\n") == 2


def test_jaccard() -> None:
    assert run_speed.jaccard({"a", "b"}, {"b", "c"}) == 1 / 3
    assert run_speed.jaccard(set(), set()) == 0.0
