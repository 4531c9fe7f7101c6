"""A house you extend in one place: a toy featurizer registered once (features.registry.register) runs from the CLI
(``aflite run --featurizer toy``), and a toy check registered once (check.register) shows up in what ``aflite
explain`` writes: its entry under results.json's ``checks``, its section and verdict in summary.md, its per-row
scores and flags (or its own columns) in instances.csv, its files in the folder; a toy check with an option takes it
from Python (``checks={...}``) and from the CLI (``--check toy:factor=...``), and lists it in ``aflite explain
--help``; a toy audit check (scope "audit"), registered the same way, shows up in what ``aflite audit`` writes.
Nothing else is edited: the registries are what the commands ask."""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from quick_checks import quick_checks

from aflite import check
from aflite import cli as aflite_cli
from aflite.check import Check, CheckData, CheckResult, CheckSummary, Option
from aflite.cli import main
from aflite.cli.flags import add_out, claim_out_folder
from aflite.errors import ParameterError
from aflite.features import BaseFeaturizer, registry


class ToyFeaturizer(BaseFeaturizer):
    """Φ from the letters alone: how often each of a few letters appears in the premise and the hypothesis."""

    name = "toy"
    LETTERS = "aeinorst"
    output_params = ("letters",)  # get_options (what explain rebuilds a run's Φ from) follows from it

    def __init__(self, letters: str = LETTERS) -> None:
        self.letters = letters

    def transform(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None) -> np.ndarray:
        fields = [texts_a] if texts_b is None else [texts_a, texts_b]
        cols = [[t.lower().count(ch) / max(1, len(t)) for ch in self.letters] for f in fields for t in f]
        n = len(texts_a)
        return np.hstack([np.asarray(cols[i * n:(i + 1) * n], dtype=np.float32) for i in range(len(fields))])


@dataclass
class LongSummary(CheckSummary):
    """The toy checks' summary: the rows read; ``score``: their median length in words."""

    rows: int


class LongHypotheses(Check):
    """Per row: the hypothesis's length in words; flagged when over twice the median."""

    name: ClassVar[str] = "long_hypotheses"

    def find(self, data: CheckData) -> CheckResult:
        lengths = np.asarray([len(t.split()) for t in data.context.dataset.texts_b], dtype=float)
        scores = lengths[data.context.rows]
        flags = scores > 2 * np.median(scores)
        n = int(flags.sum())
        summary = LongSummary(len(scores), score=float(np.median(scores)),
                              verdict=[f"{n} hypothesis(es) are over twice the median length."])
        return CheckResult(self.name, scores, flags, summary,
                           ["## Long hypotheses", "", f"{n} of {len(scores)} rows flagged.", ""])


@dataclass
class LongCounts:
    """What the audit toy check counts: its flags, the rows, those of its flags the biased model gets right, its
    factor."""

    flagged: int
    rows: int
    biased_right: int
    factor: float


@dataclass
class LongSentencesSummary(CheckSummary):
    """The audit toy check's summary: its counts, one key of the view's entry; ``score``: None."""

    long_sentences: LongCounts


class LongSentences(Check):
    """An audit check: per row, the view's sentence length in words, flagged when over ``factor`` (an option, default
    2) times the median; it reads the biased model found before it (how many flagged rows that model gets right)."""

    name: ClassVar[str] = "long_sentences"
    scope: ClassVar[str] = "audit"
    options: ClassVar[tuple[Option, ...]] = (Option("factor", float, 2.0, "times the median length"),)

    def enabled(self, data: CheckData) -> bool:
        return data.texts is not None

    def find(self, data: CheckData) -> CheckResult:
        assert data.texts is not None and data.keep is None  # a dataset's view, no run
        scores = np.asarray([len(t.split()) for t in data.texts], dtype=float)
        flags = scores > self.params["factor"] * np.median(scores)
        right = int((flags & data.found["biased_model"].flags).sum())
        n = int(flags.sum())
        verdict = [f"{n} {data.text_view}(s) are over {self.params['factor']} times the median length."]
        return CheckResult(self.name, scores, flags,
                           LongSentencesSummary(LongCounts(n, len(scores), right, self.params["factor"]),
                                                verdict=verdict),
                           ["## Long sentences", "", f"{n} of {len(scores)} rows flagged.", ""])



def test_a_registered_featurizer_and_check_work_from_the_cli(tmp_path: Path, small_snli: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.REGISTRY, "toy", registry.FeaturizerSpec(
        "toy", "text", (), ("run", "embed"), "letter frequencies", factory=ToyFeaturizer))
    monkeypatch.setitem(check.CHECKS, LongHypotheses.name, LongHypotheses)
    run, ex = tmp_path / "run", tmp_path / "ex"
    assert main(["run", str(small_snli), "--out", str(run), "--featurizer", "toy", "--quiet", "--no-probe",
                 "-m", "8"]) == 0
    res = json.loads((run / "results.json").read_text())
    assert res["featurizer"]["name"] == "toy" and res["featurizer"]["dim"] == 2 * len(ToyFeaturizer.LETTERS)
    assert res["featurizer"]["options"] == {"letters": ToyFeaturizer.LETTERS}
    assert (run / "kept_ids.txt").read_text().split() and (run / "filtered.tsv.gz").is_file()
    assert main(["explain", str(small_snli), str(run), "--out", str(ex), "--quiet", "--random-seeds", "1"]) == 0
    out = json.loads((ex / "results.json").read_text())
    entry = out["checks"]["long_hypotheses"]
    flagged = entry["summary"]["flagged"]  # set by run_checks from its flags
    assert entry["summary"]["rows"] == res["size_before"] and flagged > 0
    assert list(entry["summary"]) == ["score", "flagged", "verdict", "rows"]  # the common keys, then its own
    assert LongSummary.from_json(entry["summary"]).verdict == [f"{flagged} hypothesis(es) are over twice the median "
                                                               f"length."]
    assert entry["columns"] == ["long_hypotheses_score", "long_hypotheses_flag"]
    assert entry["options"] == {} and entry["files"] == [] and entry["ran"] is True
    assert list(out["checks"])[-1] == "long_hypotheses"  # after the built-in ones, in registry order
    assert f"{flagged} hypothesis(es) are over twice the median length." in out["verdict"]
    md = (ex / "summary.md").read_text()
    assert "## Long hypotheses" in md and f"{flagged} of {res['size_before']} rows flagged." in md
    with open(ex / "instances.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert sum(int(r["long_hypotheses_flag"]) for r in rows) == flagged
    assert all(float(r["long_hypotheses_score"]) >= 1 for r in rows)


LETTERS_OPTION = Option("letters", str, help="toy: the letters whose frequencies are Φ", metavar="LETTERS",
                        optional=True)


@pytest.fixture
def restored_registry() -> Iterator[None]:
    """The featurizer registry's tables as they were, after the test (register() changes them in place)."""
    saved = dict(registry.REGISTRY), dict(registry.OPTIONS)
    yield
    for table, before in zip((registry.REGISTRY, registry.OPTIONS), saved, strict=True):
        table.clear()
        table.update(before)  # type: ignore[attr-defined]


@pytest.fixture
def toy_with_option(restored_registry: None) -> None:
    """The toy featurizer registered with one option of its own, declared once in the register() call."""
    registry.register(registry.FeaturizerSpec("toy", "text", ("letters",), ("run", "embed", "evaluate"),
                                              "letter frequencies", factory=ToyFeaturizer), LETTERS_OPTION)


@pytest.mark.usefixtures("toy_with_option")
def test_a_featurizer_option_is_declared_once_and_reaches_it(tmp_path: Path, small_snli: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The option shows in the --help of every command that offers the featurizer (and only there), reaches the
    featurizer from the CLI and from Python, and is refused in one line for a featurizer that does not take it."""
    for command in ("run", "embed", "demo"):
        assert main([command, "--help"]) == 0
        assert "--letters LETTERS" in capsys.readouterr().out, command
    assert main(["audit", "--help"]) == 0  # audit does not offer the toy featurizer: no flag
    assert "--letters" not in capsys.readouterr().out

    run = tmp_path / "run"
    assert main(["run", str(small_snli), "--out", str(run), "-f", "toy", "--letters", "aeo", "--quiet",
                 "--no-probe", "-m", "8"]) == 0
    res = json.loads((run / "results.json").read_text())
    assert res["featurizer"]["options"] == {"letters": "aeo"} and res["featurizer"]["dim"] == 2 * 3
    emb = tmp_path / "emb"
    assert main(["embed", str(small_snli), "--out", str(emb), "-f", "toy", "--letters", "xyz", "--quiet"]) == 0
    assert np.load(emb / "features.npy").shape[1] == 2 * 3

    from aflite import run as run_api
    from aflite.commands.embed import embed

    got = run_api(small_snli, None, featurizer="toy", featurizer_options={"letters": "st"}, probe=False,
                  params={"n_partitions": 8}, show_progress=False)
    assert got.summary["featurizer"]["dim"] == 4
    assert embed(small_snli, tmp_path / "emb2", featurizer="toy", featurizer_options={"letters": "s"},
                 show_progress=False).body.dim == 2

    from aflite.evaluate import ModelSpec

    assert ModelSpec.parse("probe:toy:hypothesis").featurizer == "toy"  # evaluate reads the registry when asked

    capsys.readouterr()
    assert main(["run", str(small_snli), "--out", str(tmp_path / "r2"), "-f", "ngram", "--letters", "ae"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["aflite run: error: --letters: featurizer ngram does not take it (letters is an option of toy)"]
    assert not (tmp_path / "r2").exists()
    with pytest.raises(ParameterError, match="letters is an option of toy"):
        run_api(small_snli, None, featurizer="minilm", featurizer_options={"letters": "ae"}, show_progress=False)


@pytest.mark.usefixtures("restored_registry")
def test_register_checks_what_it_is_given() -> None:
    toy = registry.FeaturizerSpec("toy", "text", ("letters",), ("run",), "letters", factory=ToyFeaturizer)
    with pytest.raises(ParameterError, match="letters not declared"):
        registry.register(toy)
    with pytest.raises(ParameterError, match="modality 'sound'"):
        registry.register(registry.FeaturizerSpec("toy", "sound", (), ("run",), "x", factory=ToyFeaturizer))
    with pytest.raises(ParameterError, match="no '\\+'"):
        registry.register(registry.FeaturizerSpec("a+b", "text", (), ("run",), "x", factory=ToyFeaturizer))
    with pytest.raises(ParameterError, match="already declared differently"):
        registry.register(toy, Option("lr", int, help="another lr", optional=True))
    assert "toy" not in registry.REGISTRY


def test_an_unregistered_featurizer_is_no_choice(tmp_path: Path, small_snli: Path, capsys: Any) -> None:
    """Without its registry entry the toy featurizer is refused by the CLI's choices (so the test above is the
    registration at work, not a name the CLI knew)."""
    assert main(["run", str(small_snli), "--out", str(tmp_path / "r"), "--featurizer", "toy"]) == 2
    assert "invalid choice: 'toy'" in capsys.readouterr().err


def test_a_registered_audit_check_works_from_the_cli(tmp_path: Path, small_snli: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An audit check goes where an explain check goes (check.CHECKS), with scope "audit": ``aflite audit`` runs
    it per view after the built-in ones (it sees the biased model's per-row flags) and writes its keys into the
    view's entry of results.json, its verdict sentence (named by set and view) and its section into summary.md;
    an explain check registered beside it is not run by the audit."""
    monkeypatch.setitem(check.CHECKS, LongSentences.name, LongSentences)
    monkeypatch.setitem(check.CHECKS, LongHypotheses.name, LongHypotheses)
    assert check.check_names("audit")[-1] == "long_sentences"
    assert "long_sentences" not in check.check_names("explain")
    out = tmp_path / "audit"
    assert main(["audit", str(small_snli), "--out", str(out), "--featurizer", "ngram", "--views", "hypothesis",
                 "--no-tra", "--n-components", "5", "--n-clusters", "8", "--peco-shuffles", "2",
                 "--tsne-sample", "0", "--quiet", "--check", "long_sentences:factor=1.5"]) == 0
    res = json.loads((out / "results.json").read_text())
    view = res["results"][0]["views"]["hypothesis"]
    found = view["long_sentences"]
    assert found["rows"] == res["results"][0]["n"] == 300 and 0 < found["flagged"] < 300
    assert found["factor"] == 1.5  # its option, from --check (AuditConfig.checks)
    assert res["results"][0]["config"]["checks"] == {"long_sentences": {"factor": 1.5}}
    assert 0 <= found["biased_right"] <= found["flagged"]
    assert list(view)[-1] == "long_sentences" and "long_hypotheses" not in view  # after the built-in keys
    assert "biased_accuracy" in view and "token_artifacts" in view
    sentence = f"D, hypothesis-only: {found['flagged']} hypothesis(s) are over 1.5 times the median length."
    assert sentence in res["verdict"]
    md = (out / "summary.md").read_text()
    assert sentence in md and "**D, hypothesis-only**" in md
    assert "## Long sentences" in md and f"{found['flagged']} of 300 rows flagged." in md
    assert "long_hypotheses" not in json.dumps(res)


def test_an_audit_checks_option_is_refused_in_one_line(tmp_path: Path, small_snli: Path, capsys: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown audit check, an explain check, an unknown key or a bad value: one line, before --out exists; from
    Python (AuditConfig(checks=...)) a ParameterError before any work."""
    from aflite.audit import AuditConfig
    from aflite.commands.audit import audit_file

    monkeypatch.setitem(check.CHECKS, LongSentences.name, LongSentences)
    out = tmp_path / "audit"
    for flag, line in (("long_sentences:factor=big", "check 'long_sentences': option 'factor' must be a number"),
                       ("long_sentences:size=1", "check 'long_sentences' has no option 'size'; its options: factor"),
                       ("tokens:alpha=0.1", "check 'tokens' is not a check of 'audit' (an 'explain' check)")):
        capsys.readouterr()
        assert main(["audit", str(small_snli), "--out", str(out), "--featurizer", "ngram", "--no-tra",
                     "--check", flag]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and line in err[0], err
        assert not out.exists()
    with pytest.raises(ParameterError, match="check 'long_sentences' has no option 'size'"):
        audit_file(small_snli, out, AuditConfig(featurizer="ngram", tra=False, checks={"long_sentences": {"size": 1}}))
    assert not out.exists()


# ------------------------------------------------------------------ a check with an option, a column and a file
@dataclass
class ToySummary(CheckSummary):
    """The toy check's summary: how many hypotheses are long; ``score``: None."""

    long: int


class ToyCheck(Check):
    """The toy check, declared here and nowhere else: its option ``factor`` (a hypothesis is long when over
    ``factor`` times the median length in words), its per-row columns (the words, the flag) and a file of the
    long rows' ids."""

    name: ClassVar[str] = "toy"
    options: ClassVar[tuple[Option, ...]] = (
        Option("factor", float, 2.0, "a hypothesis over this many times the median length is long",
                    valid=lambda f: f > 0, rule="must be > 0"),)

    def find(self, data: CheckData) -> CheckResult:
        words = np.asarray([len(t.split()) for t in data.context.dataset.texts_b])[data.context.rows]
        long = words > self.params["factor"] * np.median(words)
        rows = [["id", "words"]] + [[str(i), int(w)] for i, w in zip(data.ids[long], words[long], strict=True)]
        return CheckResult(self.name, summary=ToySummary(int(long.sum())),
                           columns={"toy_words": [int(w) for w in words], "toy_long": [int(f) for f in long]},
                           files={"toy_long.csv": rows})


@pytest.fixture
def toy_check() -> Iterator[None]:
    """The toy check registered (check.register checks it), the check registry as it was after the test."""
    saved = dict(check.CHECKS)
    check.register(ToyCheck)
    yield
    check.CHECKS.clear()
    check.CHECKS.update(saved)


def _long_ids(data: Path, factor: float) -> set[str]:
    """The ids whose hypothesis is over ``factor`` times the median length, read from the file itself."""
    with gzip.open(data, "rt", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    words = np.asarray([len(r["hypothesis"].split()) for r in rows])
    return {r["id"] for r, w in zip(rows, words, strict=True) if w > factor * np.median(words)}


@pytest.mark.usefixtures("toy_check")
@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_a_check_option_is_declared_once_and_reaches_it(tmp_path: Path, small_snli: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The toy check's option is listed by ``aflite explain --help``, reaches the check from the CLI and from Python,
    and is refused in one line when unknown or bad; its entry (summary, options, columns, files) lands under
    results.json's checks["toy"], its columns in instances.csv, its file in the folder and its manifest."""
    from aflite.commands.explain import explain

    assert main(["explain", "--help"]) == 0
    assert "toy:factor=FLOAT: a hypothesis over this many times the median length is long (default 2.0)" in \
        " ".join(capsys.readouterr().out.split())
    run = tmp_path / "run"
    assert main(["run", str(small_snli), "--out", str(run), "-f", "ngram", "--quiet", "--no-probe", "-m", "8"]) == 0
    fast = ["--quiet", "--random-seeds", "1", "--neighbours", "0"]
    ex = tmp_path / "ex"
    assert main(["explain", str(small_snli), str(run), "--out", str(ex), "--check", "toy:factor=1.5", *fast]) == 0
    want = _long_ids(small_snli, 1.5)
    assert 0 < len(want) < 300
    res = json.loads((ex / "results.json").read_text())
    entry = res["checks"]["toy"]
    assert entry["options"] == {"factor": 1.5}
    assert entry["summary"] == {"score": None, "flagged": None, "verdict": [], "long": len(want)}
    assert entry["columns"] == ["toy_words", "toy_long"] and entry["files"] == ["toy_long.csv"]
    assert res["checks"]["neighbours"]["options"] == {"k": 0}  # an older flag sets its check's option
    with open(ex / "instances.csv", newline="") as fh:
        inst = list(csv.DictReader(fh))
    assert {r["id"] for r in inst if r["toy_long"] == "1"} == want
    with open(ex / "toy_long.csv", newline="") as fh:
        assert {r["id"] for r in csv.DictReader(fh)} == want
    assert "toy_long.csv" in res["manifest"]  # within the folder's manifest: verified by every reader
    assert "toy_long.csv" in (ex / "summary.md").read_text()
    _the_columns_show_on_the_page(ex, {r["id"]: int(r["toy_words"]) for r in inst})

    got = explain(small_snli, run, tmp_path / "ex2", checks=quick_checks(toy={"factor": 1}),
                  show_progress=False)
    assert got.body.checks["toy"].options == {"factor": 1.0}
    assert got.checks is not None and got.checks["toy"].summary == ToySummary(len(_long_ids(small_snli, 1.0)))
    assert got.body.checks["toy"].summary["long"] == len(_long_ids(small_snli, 1.0)) != len(want)

    for flag, line in (("toy:factor=-1", "check 'toy': option 'factor' must be > 0, got -1.0"),
                       ("toy:factor=big", "check 'toy': option 'factor' must be a number, got 'big'"),
                       ("toy:size=3", "--check 'toy:size=3': check 'toy' has no option 'size'; its options: factor"),
                       ("toys:factor=3", "check 'toys' is not a check of 'explain' (no such check); choose one of")):
        capsys.readouterr()
        bad = tmp_path / "bad"
        assert main(["explain", str(small_snli), str(run), "--out", str(bad), "--check", flag, *fast]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"aflite explain: error: {line}"), err
        assert not bad.exists()
    with pytest.raises(ParameterError, match="check 'toy': option 'factor' must be a number, got '2'"):
        explain(small_snli, run, tmp_path / "bad", checks={"toy": {"factor": "2"}}, show_progress=False)
    with pytest.raises(ParameterError, match="check 'toy' has no option 'size'"):
        explain(small_snli, run, tmp_path / "bad", checks={"toy": {"size": 2}}, show_progress=False)
    assert not (tmp_path / "bad").exists()


def _the_columns_show_on_the_page(folder: Path, words: dict[str, int]) -> None:
    """The toy check's columns on the explain folder's report.html, in headless Chromium (skipped without it):
    shown under their names, with no edit in report/; sorted as numbers; the rows' values are the check's."""
    browser = pytest.importorskip("test_report_browser")  # skipped where chromium is not installed
    from selenium.webdriver.common.by import By

    driver = browser.new_driver()
    try:
        browser.open_page(driver, folder)
        heads = {th.text.strip(): th.get_attribute("data-col")
                 for th in driver.find_elements(By.CSS_SELECTOR, "#rows-head th")}
        assert "toy_words" in heads and "toy_long" in heads, heads
        names = [th.get_attribute("data-col") for th in driver.find_elements(By.CSS_SELECTOR, "#rows-head th")]
        driver.find_element(By.CSS_SELECTOR, f"th[data-col='{heads['toy_words']}']").click()
        at = names.index(heads["toy_words"]) + 1
        cells = [int(c.text) for c in driver.find_elements(By.CSS_SELECTOR, f"#rows-body tr td:nth-child({at})")]
        assert cells and cells == sorted(words.values())[:len(cells)]
    finally:
        driver.quit()


def test_register_checks_a_check_and_its_options() -> None:
    """register refuses a check it could not run or whose options it could not read, in one line."""

    def toy2(name: str = "toy2", options: Any = (), find: bool = True) -> type:
        body: dict[str, Any] = {"name": name, "options": options}
        if find:
            body["find"] = lambda self, data: CheckResult(self.name)
        return type("Toy2", (Check,), body)

    opt = Option("factor", float, 2.0, "x")
    for cls, match in ((toy2("a:b"), "a name of the form"), (toy2(find=False), "needs a find"),
                       (toy2(options=(opt, opt)), "option name 'factor' is given twice"),
                       (toy2(options=(Option("f", float, -1.0, "x", valid=lambda v: v > 0, rule="must be > 0"),)),
                        "option 'f' must be > 0, got -1.0"),
                       (toy2(options=(Option("f", list, [], "x"),)), "type must be int, float, str or bool"),
                       (toy2(options=(Option("a b", int, 1, "x"),)), "not a name"),
                       (toy2(options=({"name": "f"},)), "must be Option objects"),
                       (ToyFeaturizer, "a subclass of aflite.check.Check")):
        with pytest.raises(ParameterError, match=match):
            check.register(cls)
    assert "toy2" not in check.CHECKS and "a:b" not in check.CHECKS


def test_a_summary_is_a_check_summary_and_its_flagged_count_is_the_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """A check's summary is a CheckSummary (a plug-in's plain dict is refused in one line naming the check, before
    anything is written); ``flagged`` is counted by run_checks from the flags, whatever the check set."""

    class Dicty(Check):
        name: ClassVar[str] = "dicty"

        def find(self, data: CheckData) -> CheckResult:
            return CheckResult(self.name, summary={"long": 1})  # type: ignore[arg-type]  # the old shape

    class Counted(Check):
        name: ClassVar[str] = "counted"

        def find(self, data: CheckData) -> CheckResult:
            return CheckResult(self.name, flags=np.array([True, False, True]), summary=ToySummary(2, flagged=99))

    data = CheckData(np.array(["r0", "r1", "r2"]), np.array(["a", "b", "a"]), np.array(["a", "b"]),
                     np.array([0, 1, 0]), np.zeros((3, 1)), 0)
    monkeypatch.setitem(check.CHECKS, "dicty", Dicty)
    monkeypatch.setitem(check.CHECKS, "counted", Counted)
    with pytest.raises(ParameterError, match="^check 'dicty' returns its summary as dict: a summary is a dataclass "
                                             "subclass of aflite.check.CheckSummary$"):
        check.run_checks(data, ("dicty",))
    found = check.run_checks(data, ("counted",))["counted"].summary
    assert found == ToySummary(2, flagged=2) and found.to_json() == {"score": None, "flagged": 2, "verdict": [],
                                                                     "long": 2}
    assert ToySummary.from_json({"flagged": 2, "long": 2, "later": "ignored"}) == found  # unknown keys ignored
    from aflite.errors import InputError
    with pytest.raises(InputError, match="^toy: no 'long'"):
        ToySummary.from_json({"score": 1.0}, "toy")
    with pytest.raises(InputError, match="^toy: 'long' is \"many\", not an integer"):
        ToySummary.from_json({"long": "many"}, "toy")


def test_the_files_a_check_returns_are_checked() -> None:
    """A check's file is a plain name, none of the command's own, one check's only, and bytes, text or rows."""
    ok = CheckResult("toy", files={"toy.txt": "x"})
    assert check.check_files({"toy": ok}, {"tokens.csv"}) == {"toy.txt": "toy"}
    for files, match in (({"../x.csv": "x"}, "a plain name"), ({"sub/x.csv": "x"}, "a plain name"),
                         ({".hidden": "x"}, "a plain name"), ({"Tokens.csv": "x"}, "which the command writes itself"),
                         ({"toy.txt": "y"}, "both return a file named 'toy.txt'"),
                         ({"n.bin": 3}, "bytes, text or rows")):
        with pytest.raises(ParameterError, match=match):
            check.check_files({"toy": ok, "other": CheckResult("other", files=files)}, {"tokens.csv"})


@pytest.mark.usefixtures("toy_check")
def test_a_check_cannot_overwrite_explains_own_files_or_columns(tmp_path: Path, small_snli: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A check returning tokens.csv, or a column explain writes itself, is refused before the folder is begun."""
    from aflite.commands.explain import explain

    run = tmp_path / "run"
    assert main(["run", str(small_snli), "--out", str(run), "-f", "ngram", "--quiet", "--no-probe", "-m", "8"]) == 0
    real = ToyCheck.find
    for change, match in (({"files": {"tokens.csv": "x"}}, "returns a file named 'tokens.csv', which the command"),
                          ({"columns": {"weight": [0] * 300}}, "adds a column 'weight' to instances.csv, which"),
                          ({"columns": {"toy_words": [0] * 299}}, "a column 'toy_words' of 299 cells to instances")):
        def find(self: ToyCheck, data: CheckData, change: dict[str, Any] = change) -> CheckResult:
            r = real(self, data)
            for key, value in change.items():
                setattr(r, key, value)
            return r

        monkeypatch.setattr(ToyCheck, "find", find)
        with pytest.raises(ParameterError, match=match):
            explain(small_snli, run, tmp_path / "ex", checks=quick_checks(), show_progress=False)
        assert not (tmp_path / "ex").exists()


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_a_command_with_a_page_is_declared_in_one_place(tmp_path: Path, small_snli: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A toy command, ``words`` (the words of each hypothesis), declared here and nowhere else: a function that
    claims its folder and returns a typed Result whose page hooks build its page (from memory when it commits,
    from the verified folder for ``aflite report``). Defining the Result registers the page: ``aflite report``
    and the folder's kind know it with no edit in rundir/ or report/. Its CLI module, added with
    ``cli.add_command``, runs it as ``aflite words`` and passes the keyword test. Opened in headless Chromium, the
    page shows its rows, its numbers (sortable as numbers) and its text column (searchable)."""
    browser = pytest.importorskip("test_report_browser")  # skipped where chromium is not installed
    from selenium.webdriver.common.by import By

    from aflite.commands.report import rebuilt_page
    from aflite.data import load_dataset
    from aflite.report.explorer import embedded_data, render
    from aflite.report.rows import instance_columns, table_columns
    from aflite.rundir import page as page_registry
    from aflite.rundir import schema
    from aflite.rundir.folder import RunFolder, claims
    from aflite.rundir.names import INSTANCES
    from aflite.rundir.page import PageData
    from aflite.rundir.read import read_columns
    from aflite.rundir.results import Result, Table
    from aflite.rundir.schema import Body, Document

    monkeypatch.setattr(page_registry, "_PAGES", dict(page_registry._PAGES))  # the toy leaves no trace
    monkeypatch.setattr(schema, "BODIES", list(schema.BODIES))

    @dataclass(frozen=True)
    class WordsBody(Body):
        commands: ClassVar[tuple[str, ...]] = ("words",)
        required: ClassVar[tuple[str, ...]] = ("rows", "longest")
        rows: int = 0
        longest: int = 0

    @dataclass(repr=False)
    class WordsResult(Result):
        command: ClassVar[str] = "words"
        out: Path
        ids: list[str]
        labels: list[str]
        hypotheses: list[str]

        def to_json(self) -> dict[str, Any]:
            counts = [len(h.split()) for h in self.hypotheses]
            return {"verdict": [f"The longest hypothesis has {max(counts)} words."], "rows": len(counts),
                    "longest": max(counts)}

        def summary_md(self) -> str:
            return "# aflite words\n"

        def table(self) -> Table:
            return Table(("id", "label", "words", "first_word"),
                         [[i, lab, len(h.split()), h.split()[0] if h.split() else ""]
                          for i, lab, h in zip(self.ids, self.labels, self.hypotheses, strict=True)])

        def page(self, document: Document) -> str:
            t = self.table()
            return render(self.page_data(document, table_columns(t.columns, t.rows), t.name))

        @classmethod
        def page_of(cls, folder: Path, document: Document) -> PageData:
            return cls.page_data(document, read_columns(folder / INSTANCES), folder / INSTANCES)

        @staticmethod
        def page_data(document: Document, columns: dict[str, list[str]], where: Any) -> PageData:
            body = document.body  # results.json typed, the same in memory and from the folder
            assert isinstance(body, WordsBody)
            data = {"kind": "words", "plots": {}, "cols": instance_columns(columns, where)}
            return PageData("aflite words", "The words of each hypothesis.", data,
                            [("rows", body.rows), ("longest", body.longest)], verdict=list(body.verdict or []))

    @claims("words")
    def words(data_path: Path, out: Any, overwrite: bool = False) -> WordsResult:
        ds = load_dataset(data_path)
        assert ds.texts_b is not None
        result = WordsResult(Path(out), [str(i) for i in ds.ids], [str(x) for x in ds.labels],
                             [str(h) for h in ds.texts_b])
        RunFolder.of(out, "words").finish(result)
        return result

    # its thin CLI module, added with one call: the flags are the function's keywords (the keyword test reads
    # LIBRARY), the handler calls the function; the claim of --out comes from the parser's defaults as everywhere
    cli_words = types.ModuleType("cli_words")

    def register(sub: Any) -> None:
        p = sub.add_parser("words", help="the words of each hypothesis")
        p.add_argument("data_path", type=Path)
        add_out(p)
        claim_out_folder(p)  # --overwrite with it
        p.set_defaults(handler=lambda args: words(args.data_path, args.out_folder) and 0)  # the claimed --out

    cli_words.register, cli_words.LIBRARY = register, (words,)  # type: ignore[attr-defined]
    monkeypatch.setattr(aflite_cli, "_ADDED", {})
    aflite_cli.add_command("words", cli_words)
    keywords = pytest.importorskip("test_cli_keywords")
    parser = next(a for a in aflite_cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert keywords.wrong_flags(parser.choices["words"], cli_words) == []

    folder = tmp_path / "words"
    assert main(["words", str(small_snli), "--out", str(folder)]) == 0
    res = words(small_snli, folder, overwrite=True)
    assert "words" in page_registry.page_commands() and rebuilt_page(folder).title.startswith("aflite words")
    written = (folder / "report.html").read_text(encoding="utf-8")
    data = embedded_data(written)
    assert [m["name"] for m in data["cols"]["more"]] == ["words", "first_word"]
    assert data["cols"]["more"][0]["num"] and not data["cols"]["more"][1]["num"]
    assert main(["report", str(folder)]) == 0  # rebuilt from the verified folder: the same page
    assert (folder / "report.html").read_text(encoding="utf-8") == written

    counts = [len(h.split()) for h in res.hypotheses]
    driver = browser.new_driver()
    try:
        browser.open_page(driver, folder)
        assert browser.shown(driver) == len(res.ids) == 300
        heads = [th.get_attribute("data-col") for th in driver.find_elements(By.CSS_SELECTOR, "#rows-head th")]
        assert heads == ["id", "label", "more-0", "more-1"]
        assert f"The longest hypothesis has {max(counts)} words." in driver.page_source
        driver.find_element(By.CSS_SELECTOR, "th[data-col='more-0']").click()
        cells = [int(c.text) for c in driver.find_elements(By.CSS_SELECTOR, "#rows-body tr td:nth-child(3)")]
        assert cells == sorted(counts)[:200]  # numbers, sorted as numbers
        word = res.hypotheses[0].split()[0]
        browser.search(driver, word)
        firsts = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "#rows-body tr td:nth-child(4)")]
        assert word in firsts and browser.shown(driver) < 300
    finally:
        driver.quit()


@pytest.mark.parametrize("command", ["explain", "audit"])
def test_a_check_option_given_twice_is_refused_in_one_line(tmp_path: Path, small_snli: Path, capsys: Any,
                                                          command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """#50: ``--check tokens:alpha=0.05 --check tokens:alpha=0.01`` silently took the last value; refused in one line
    naming the option, before --out exists (a dict, ``checks={...}``, cannot hold one key twice)."""
    out = tmp_path / "out"
    monkeypatch.setitem(check.CHECKS, LongSentences.name, LongSentences)
    name, key = ("tokens", "alpha") if command == "explain" else ("long_sentences", "factor")
    pre = [str(small_snli), str(tmp_path / "no-run")] if command == "explain" else [str(small_snli)]
    assert main([command, *pre, "--out", str(out), "--check", f"{name}:{key}=0.05", "--check",
                 f"{name}:{key}=0.01"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"option {key!r} of check {name!r} is given twice" in err[0], err
    assert not out.exists()
    if command == "explain":  # and against the flag that is its alias: named as the command line spells both
        assert main([command, *pre, "--out", str(out), "--check", "neighbours:k=3", "--neighbours", "4"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].endswith("option 'k' given twice, 3 from --check and 4 from --neighbours"), err
        assert not out.exists()
def _plugin(*names: str) -> types.ModuleType:
    """A CLI module whose register() adds a parser under each of ``names``."""
    module = types.ModuleType("cli_plugin")

    def register(sub: Any) -> None:
        for n in names:
            sub.add_parser(n, help="a plug-in").set_defaults(handler=lambda args: 0)

    module.register, module.LIBRARY = register, ()  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize(("name", "module", "match"), [
    ("", _plugin(""), "add_command\\(''\\): a command's name is lowercase letters"),
    ("Run me", _plugin("Run me"), "a command's name is"),
    ("run", _plugin("run"), "aflite has a command of that name"),
    ("mine", _plugin("run"), "its register\\(subparsers\\) adds 'run' \\(run: aflite's own\\), not only 'mine'"),
    ("mine", _plugin("other"), "adds 'other', not only 'mine'"),
    ("mine", _plugin("mine", "card"), "adds 'mine', 'card' \\(card: aflite's own\\)"),
    ("mine", _plugin(), "adds nothing, not only 'mine'"),
])
def test_add_command_refuses_a_name_that_would_break_the_cli_in_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, module: types.ModuleType,
        match: str) -> None:
    monkeypatch.setattr(aflite_cli, "_ADDED", {})
    with pytest.raises(ParameterError, match=match) as err:
        aflite_cli.add_command(name, module)
    assert "\n" not in str(err.value) and aflite_cli._ADDED == {}
    assert main(["--help"]) == 0 and "COMMAND" in capsys.readouterr().out  # every aflite call still works


def test_a_plugin_that_changes_after_add_command_is_left_out_not_fatal(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(aflite_cli, "_ADDED", {})
    module = _plugin("mine")
    aflite_cli.add_command("mine", module)
    assert main(["mine"]) == 0
    module.register = _plugin("mine", "run").register  # type: ignore[attr-defined]
    assert main(["--help"]) == 0
    captured = capsys.readouterr()
    assert "the added command 'mine' is left out: its register(subparsers) adds 'mine', 'run'" in captured.err
    assert "\n    run " in captured.out and "mine" not in captured.out
    assert main(["run", "--help"]) == 0  # aflite's own run, not the plug-in's
