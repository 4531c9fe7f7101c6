"""benchmarks/run_speed.py: the whole record run end to end on a tiny input, its timeout, its refusal, and the sized
copies of the scaling table."""

from __future__ import annotations

import gzip
import importlib.util
import json
import random
from pathlib import Path

import pytest

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


def tiny_tsv(path: Path, rows: int) -> Path:
    """A seeded premise/hypothesis/label TSV whose hypotheses carry a label cue, so the filter has rows to remove."""
    rng = random.Random(0)
    words = "man woman dog cat park street runs sits eats sleeps red blue big small".split()
    labels = ["entailment", "neutral", "contradiction"]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("premise\thypothesis\tlabel\n")
        for i in range(rows):
            label = labels[i % 3]
            premise = " ".join(rng.choice(words) for _ in range(6))
            cue = label[:3] if rng.random() < 0.5 else rng.choice(words)
            fh.write(f"{premise} {i // 3}.\t{' '.join(rng.choice(words) for _ in range(4))} {cue}.\t{label}\n")
    return path


@pytest.mark.slow  # four child runs (~40 s on the shared 2 cores); CI passes --run-slow
def test_the_record_end_to_end_on_a_tiny_input(tmp_path: Path) -> None:
    """(a), (b) and (c) as real child processes: this tree against itself agrees exactly, the scaling rows have
    the asked sizes, and the JSON and markdown record hold every figure."""
    data = tiny_tsv(tmp_path / "tiny.tsv", 240)
    prefix = tmp_path / "record" / "speed"
    assert run_speed.main([str(data), "--reference", str(ROOT), "--rows", "300", "--demo",
                           "--demo-args", "-f ngram --no-probe", "--out", str(tmp_path / "o"),
                           "--record", str(prefix), "--", "--seed", "3"]) == 0
    report = json.loads(prefix.with_name("speed.json").read_text(encoding="utf-8"))
    for run in (report["fast"], report["reference"], *report["scaling"], report["demo"]):
        assert run["cpu_seconds"] > 0 and run["wall_seconds"] > 0 and run["peak_rss_mib"] > 0
    assert "--seed 3" in report["fast"]["command"]
    assert {"featurize", "filter", "probe"} <= set(report["fast"]["stages"])
    assert report["comparison"]["kept_jaccard"] == 1.0  # the same tree, the same seed: the same kept set
    probe = report["comparison"]["probe"]
    assert [p["name"] for p in probe][:2] == ["D", "D(Φ)"]
    assert all(p["accuracy"] == p["reference_accuracy"] for p in probe)
    assert [(s["rows"], s["size_before"]) for s in report["scaling"]] == [(300, 300)]
    assert not (tmp_path / "o" / "rows_300.tsv").exists()  # the sized copy is removed once measured
    md = prefix.with_name("speed.md").read_text(encoding="utf-8")
    assert "kept-set Jaccard **1.0000**" in md and "| 300 |" in md and "## (c) `aflite demo`" in md


def test_a_run_past_the_timeout_is_killed_and_recorded(tmp_path: Path) -> None:
    data = tiny_tsv(tmp_path / "tiny.tsv", 60)
    one = run_speed.timed_run(ROOT, data, tmp_path / "o", [], timeout=0.3)
    assert one["timed_out"] is True and one["timeout_seconds"] == 0.3 and "stages" not in one
    assert one["wall_seconds"] < 30


def test_a_spent_budget_cuts_the_run_and_skips_the_larger_sizes(tmp_path: Path) -> None:
    data = tiny_tsv(tmp_path / "tiny.tsv", 60)
    prefix = tmp_path / "rec"
    assert run_speed.main([str(data), "--no-compare", "--rows", "60,120", "--budget", "10.2", "--timeout", "0.5",
                           "--out", str(tmp_path / "o"), "--record", str(prefix)]) == 0
    report = json.loads(prefix.with_name("rec.json").read_text(encoding="utf-8"))
    assert "fast" not in report and report["scaling"][0]["timed_out"] is True
    assert report["scaling"][1] == {"rows": 120, "skipped": "budget of 10 s spent"}
    assert "| 120 | budget of 10 s spent |" in prefix.with_name("rec.md").read_text(encoding="utf-8")
    more = [str(data), "--no-compare", "--rows", "30", "--timeout", "0.5", "--out", str(tmp_path / "o"),
            "--record", str(prefix), "--append"]
    assert run_speed.main(more) == 0  # a second command adds its rows to the same record
    report = json.loads(prefix.with_name("rec.json").read_text(encoding="utf-8"))
    assert [r["rows"] for r in report["scaling"]] == [60, 120, 30]
    assert report["appended"] == [["benchmarks/run_speed.py", *more]]


def test_a_missing_input_exits_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run_speed.main([str(tmp_path / "nope.tsv"), "--out", str(tmp_path / "o")])
    assert exc.value.code == 2 and "no such file" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_sized_copy_of_a_file_without_ids_adds_stable_ones(tmp_path: Path) -> None:
    data = tiny_tsv(tmp_path / "tiny.tsv", 4)
    lines = run_speed.sized_copy(data, 6, tmp_path).read_text(encoding="utf-8").splitlines()
    assert lines[0] == "premise\thypothesis\tlabel\tid"
    assert [line.split("\t")[3] for line in lines[1:]] == ["0", "1", "2", "3", "0~1", "1~1"]
