"""A command's result where its user looks: one short ``repr`` line (:mod:`aflite.rundir.display`) and a notebook's
HTML (:mod:`aflite.report.inline`: the verdict, the label shift, the page's first plots with plotly inline), checked
as text and, for the plots, in a real browser (headless chromium)."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import shutil
import time
from html import escape
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import aflite
from aflite.check.token_summary import SignificantCounts, TokenSummary, TokenTest
from aflite.commands.filter import FilterResult
from aflite.core.phase import IterationRecord
from aflite.report.inline import result_html
from aflite.rundir import display
from aflite.rundir.results import Result
from aflite.rundir.schema import RunBody, RunParameters

ROOT = Path(__file__).resolve().parents[1]


def all_result_classes() -> list[type[Result]]:
    """Every Result subclass in the package (every module imported, so that a new command's is seen too)."""
    for mod in pkgutil.walk_packages(aflite.__path__, "aflite."):
        if mod.name.startswith(("aflite.cli", "aflite.__main__")):
            continue
        try:
            importlib.import_module(mod.name)
        except ImportError:  # a module of an extra that is not installed here
            continue
    seen: list[type[Result]] = []
    todo: list[type[Result]] = [Result]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("aflite.") and sub not in seen:
                seen.append(sub)
                todo.append(sub)
    return seen


def test_every_result_class_prints_one_line_and_has_the_notebook_view() -> None:
    classes = all_result_classes()
    names = {c.__name__ for c in classes}
    assert {"RunResult", "FilterResult", "AuditResult", "EvaluateResult", "SyntheticResult",
            "EmbedResult", "ExplainResult"} <= names
    # a dataclass writes its own __repr__ (every field: a run's arrays and summary) unless told repr=False
    assert [c.__name__ for c in classes if c.__repr__ is not Result.__repr__] == []
    assert all(c._repr_html_ is Result._repr_html_ for c in classes)


PARAMS = RunParameters(100, 60, 8, 20, 10, 0.75, "slicing", "logistic", 1.0)


def planted_result(label: str = "<script>alert(1)</script>") -> FilterResult:
    """A filter's result as the filter returns it, with a dataset label that is markup."""
    phase = IterationRecord(iteration=0, size_before=100, n_removed=40, size_after=60, n_eligible=55, n_unscored=0,
                            coverage_mean=8.0, p_mean=0.5, p_quantiles={"q25": 0.3, "median": 0.5, "q75": 0.8},
                            seconds=0.1, fit_seconds=0.1, model_iterations=10.0)
    body = RunBody(parameters=PARAMS, size_before=100, size_after=60, label_counts_before={label: 50, "plain": 50},
                   label_counts_after={label: 20, "plain": 40}, iterations=[phase],
                   verdict=["AFLite kept 60 of 100 rows (60%) in 1 phase. Second sentence <b>here</b>.",
                            "A second line."])
    return FilterResult(out=None, body=body, keep=np.ones(100, bool), filtered_path=None)


def test_repr_is_one_short_line_with_command_sizes_verdict_and_folder() -> None:
    r = planted_result()
    text = repr(r)
    assert "\n" not in text and len(text) < 400
    assert text.startswith("<aflite filter: |D| 100 → |D(Φ)| 60 rows; “AFLite kept 60 of 100 rows (60%) in 1 phase.”")
    assert "Second sentence" not in text and "no folder (out=None)" in text and display.GUIDE in text
    assert "result.filtered, .scores" in text
    r.out = Path("runs/x")
    assert f"folder {Path('runs/x')}" in repr(r)


def test_repr_never_raises() -> None:
    class Broken(Result):
        command: ClassVar[str] = "broken"
        out = None

        def to_json(self) -> dict[str, Any]:
            raise KeyError("size_before")

    assert repr(Broken()) == "<aflite broken result (KeyError building its summary)>"


def test_first_sentence() -> None:
    assert display.first_sentence("One. Two.") == "One."
    assert display.first_sentence("no stop at all") == "no stop at all"
    assert display.first_sentence("x" * 300, limit=20) == "x" * 19 + "…"


def test_html_has_the_verdict_the_label_shift_and_the_plots_with_every_label_escaped() -> None:
    html = planted_result()._repr_html_() or ""

    def same(h: str) -> str:  # every output has its own element ids
        return re.sub(r"aflite-[0-9a-f]{32}", "UID", h)

    assert same(html) == same(result_html(planted_result()))  # the hook is report.inline's builder
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Second sentence &lt;b&gt;here&lt;/b&gt;" in html  # verdict text escaped too
    # label shift: rows, shares and the move per label (50 → 20 of 60: 50.0% → 33.3%, -16.7 points)
    assert re.search(r"<td>50</td><td>20</td><td>50\.0%</td><td>33\.3%</td><td>-16\.7</td>", html)
    uid = re.search(r'class="aflite-inline" id="(aflite-[0-9a-f]{32})"', html).group(1)  # type: ignore[union-attr]
    assert f'id="{uid}-phases"' in html and f'id="{uid}-labels"' in html
    data = json.loads(re.search(rf'id="{uid}-data">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    assert data["label_counts_before"]["<script>alert(1)</script>"] == 50  # the JSON escapes, the script parses
    assert 'class="aflite-plotly"' in html and "plotly.js" in html  # the bundle, inline: nothing fetched
    assert not re.search(r"<script[^>]+src=", html)


def test_a_result_without_counts_or_phases_has_no_plot_and_no_bundle() -> None:
    r = planted_result()
    r.body = RunBody(parameters=PARAMS, verdict=["Only words."])
    html = r._repr_html_() or ""
    assert "Only words." in html and "aflite-plotly" not in html and "Label shift" not in html


def test_a_real_run_in_memory(small_snli: Path) -> None:
    pd = pytest.importorskip("pandas")
    df = pd.read_csv(small_snli, sep="\t", quoting=3, keep_default_na=False)
    res = aflite.run(df, show_progress=False, probe=False)
    text = repr(res)
    assert text.startswith(f"<aflite run: |D| {len(df):,} → |D(Φ)| {len(res.filtered):,} rows; “")
    assert res.verdict[0].split(". ")[0] in text and len(text) < 500
    html = res._repr_html_() or ""
    for label, n in df["label"].value_counts().items():
        assert re.search(rf'<td class="l">{label}</td><td>{n:,}</td>', html)


def test_a_card_shows_its_readme(tmp_path: Path, small_snli: Path) -> None:
    run = tmp_path / "run"
    aflite.run(small_snli, run, show_progress=False, probe=False)
    card = aflite.write_card(run, tmp_path / "card")
    assert repr(card).startswith(f"<aflite card: {card.readme} and manifest.json, license ")
    html = card._repr_html_()
    # rendered, not raw Markdown: the front matter as a table, the body's headings and pipe tables as HTML
    assert "<th>license</th>" in html and "<h2>Data</h2>" in html and "<th>label</th>" in html
    assert "\ntask_categories:" not in html and "|---|" not in html and "<pre" not in html
    assert escape(card.manifest["name"], quote=False) in html


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def browser() -> Any:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
    pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the [dev] extra)")
    from test_report_browser import new_driver

    return new_driver()


def plots_drawn(html_file: Path, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Open the file in headless chromium; for every result block on it: its data-plots flag and, per plot div,
    the count of plotly's svg elements drawn in it."""
    d = browser()
    try:
        d.get(html_file.resolve().as_uri())
        script = """return Array.from(document.querySelectorAll('.aflite-inline[id]')).map(function (b) {
          return {plots: b.getAttribute('data-plots'), error: b.getAttribute('data-error'),
            divs: Array.from(b.querySelectorAll('.aflite-plots > div')).map(function (p) {
              return {id: p.id, svgs: p.querySelectorAll('svg.main-svg').length}; })}; });"""
        end = time.monotonic() + timeout
        while True:
            blocks = d.execute_script(script)
            if (blocks and all(b["plots"] == "1" or b["error"] for b in blocks if b["divs"])) or \
                    time.monotonic() > end:
                return list(blocks)
            time.sleep(0.1)
    finally:
        d.quit()


def test_the_plots_are_drawn_in_a_browser_for_four_results_on_one_page(tmp_path: Path) -> None:
    """Four outputs on one page (as in a notebook: a run, an evaluation, an explanation, an audit): each draws in
    its own divs, from one inlined bundle each."""
    evaluate = json.loads((ROOT / "docs/measured/evaluate_snli_devtest_results.json").read_text(encoding="utf-8"))

    class Measured(Result):
        command: ClassVar[str] = "evaluate"
        out = None

        def to_json(self) -> dict[str, Any]:
            return evaluate

    def measured(command_name: str, file: str) -> Result:  # a command's body as measured (docs/measured)
        body = json.loads((ROOT / "docs/measured" / file).read_text(encoding="utf-8"))

        class Body(Result):
            command: ClassVar[str] = command_name
            out = None

            def to_json(self) -> dict[str, Any]:
                return body

        return Body()

    page = tmp_path / "two.html"
    explained = measured("explain", "explain_snli100k.json")
    old = explained.to_json()  # measured before the checks' keys moved under checks[name]: the same numbers there
    tokens = TokenSummary(SignificantCounts(**old["significant_tokens"]), old["significant_tokens_random_per_seed"],
                          old["token_view"], TokenTest("z", 0.01, 20, "base", 5, "means"))  # the tokens check's shape
    explained.to_json = lambda: {"checks": {"tokens": {"summary": tokens.to_json()}}}
    shown = [planted_result(), Measured(), explained,
             measured("audit", "audit_snli_devtest_metrics.json")]
    page.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
                    + "".join(r._repr_html_() or "" for r in shown) + "</body></html>", encoding="utf-8")
    blocks = plots_drawn(page)
    assert [b["error"] for b in blocks] == [None] * 4
    assert [[d["id"].rsplit("-", 1)[1] for d in b["divs"]] for b in blocks] == [
        ["phases", "labels"], ["accuracy"], ["tokens"], ["leakage"]]
    assert all(d["svgs"] > 0 for b in blocks for d in b["divs"]), blocks
