"""scripts/compare_outputs.py on two tiny make_outputs-like folders: timings, paths and dates are masked, a changed
value, key order, a missing or an extra file is reported with exit 1."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("compare_outputs", ROOT / "scripts" / "compare_outputs.py")
assert spec is not None and spec.loader is not None
cmp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cmp)


def make(root: Path, seconds: float, *, size_after: int = 60, extra: dict[str, int] | None = None) -> Path:
    """A folder shaped like make_outputs.sh's: a results.json naming its own path, a stdout with a timing."""
    run = root / "run"
    run.mkdir(parents=True)
    body = {"size_before": 100, "size_after": size_after, "seconds_total": seconds,
            "timings": {"filter": seconds}, "dataset": str(root / "snli2k.tsv"),
            "manifest": {"kept_ids.txt": {"sha256": str(seconds)}}, **(extra or {})}
    (run / "results.json").write_text(json.dumps(body))
    when = f"2026-12-07T11:{int(seconds):02d}:00"
    (root / "run.stdout").write_text(f"filtered {root}/snli2k.tsv in {seconds:.1f} s at {when}\n")
    (run / "features.npy").write_bytes(bytes([int(seconds) % 256]))  # binary: not compared
    return root


def test_timings_paths_and_dates_are_masked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make(tmp_path / "a", 1.5), make(tmp_path / "b", 42.0)
    assert cmp.main([str(a), str(b)]) == 0
    assert "all 2 compared files agree" in capsys.readouterr().out


def test_a_changed_value_is_reported_with_its_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make(tmp_path / "a", 1.5), make(tmp_path / "b", 1.5, size_after=61)
    assert cmp.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "DIFF run/results.json: /size_after: 60 != 61" in out and "1 of 2 files differ" in out


def test_key_order_missing_and_extra_files_differ(tmp_path: Path) -> None:
    a, b = make(tmp_path / "a", 1.0, extra={"x": 1, "y": 2}), make(tmp_path / "b", 1.0, extra={"y": 2, "x": 1})
    (a / "only_a.txt").write_text("a\n")
    (b / "only_b.txt").write_text("b\n")
    problems = cmp.compare(a, b)
    assert problems[:2] == ["missing only_a.txt", "extra only_b.txt"]
    assert problems[2].startswith("DIFF run/results.json: /: keys")
    (b / "run.stdout").write_text("filtered something else\n")
    assert any(p.startswith("DIFF run.stdout: line 1, column 10:") for p in cmp.compare(a, b))


def test_a_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    assert cmp.main([str(tmp_path), str(tmp_path / "absent")]) == 2


def page(seconds: int, pairs: int, src: str) -> str:
    """A report.html-like page: a table with a time column, an inlined script naming a source file, and a long
    run without spaces (the page's inlined plotly.js and base64 columns)."""
    return (f"<table><tr><th>dataset</th><th>pairs</th><th>time (s), featurization included</th></tr>"
            f"<tr><td>D</td><td>{pairs}</td><td>{seconds}</td></tr></table>\n"
            f"<script src=\"{src}/src/aflite/report/explorer.js\"></script>\n" + "x/" * 200_000 + "\n")


def test_html_time_cells_and_source_paths_are_masked(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "report.html").write_text(page(11, 2000, "/one/tree"))
    (b / "report.html").write_text(page(71, 2000, "/another/tree"))
    assert cmp.compare(a, b) == []
    (b / "report.html").write_text(page(71, 2001, "/another/tree"))  # a count that is not a time still differs
    (problem,) = cmp.compare(a, b)
    assert problem.startswith("DIFF report.html: line 1,") and "2000" in problem and "2001" in problem


def test_source_paths_are_masked_back_to_a_space_or_quote() -> None:
    text = 'at /a/b/src/aflite/x.py and "/c/src/aflite/y.js" but /src/aflite/z, src/aflite/no'
    assert cmp._mask_source(text) == ('at <SRC>/src/aflite/x.py and "<SRC>/src/aflite/y.js" but <SRC>/src/aflite/z,'
                                      ' src/aflite/no')
