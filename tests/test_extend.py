"""A house you extend in one place: a toy featurizer registered once (features.registry.register) runs from the CLI
(``aflite run --featurizer toy``), and a toy check registered once (checks.register) shows up in what ``aflite
explain`` writes: its keys in results.json, its section and verdict in summary.md, its per-row scores and flags in
instances.csv; a toy audit check (scope "audit"), registered the same way, shows up in what ``aflite audit``
writes. Nothing else is edited: the registries are what the commands ask."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from aflite import checks
from aflite.checks import Check, CheckData, CheckResult
from aflite.cli import main
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


class LongHypotheses(Check):
    """Per row: the hypothesis's length in words; flagged when over twice the median."""

    name: ClassVar[str] = "long_hypotheses"

    def find(self, data: CheckData) -> CheckResult:
        lengths = np.asarray([len(t.split()) for t in data.context["dataset"].texts_b], dtype=float)
        scores = lengths[data.context["rows"]]
        flags = scores > 2 * np.median(scores)
        n = int(flags.sum())
        return CheckResult(self.name, scores, flags, {"long_hypotheses": {"flagged": n, "rows": len(scores)}},
                           [f"{n} hypothesis(es) are over twice the median length."],
                           ["## Long hypotheses", "", f"{n} of {len(scores)} rows flagged.", ""])


class LongSentences(Check):
    """An audit check: per row, the view's sentence length in words, flagged when over twice the median; it reads
    the biased model found before it (how many flagged rows that model gets right)."""

    name: ClassVar[str] = "long_sentences"
    scope: ClassVar[str] = "audit"

    def enabled(self, data: CheckData) -> bool:
        return data.texts is not None

    def find(self, data: CheckData) -> CheckResult:
        assert data.texts is not None and data.keep is None  # a dataset's view, no run
        scores = np.asarray([len(t.split()) for t in data.texts], dtype=float)
        flags = scores > 2 * np.median(scores)
        right = int((flags & data.found["biased_model"].flags).sum())
        n = int(flags.sum())
        return CheckResult(self.name, scores, flags,
                           {"long_sentences": {"flagged": n, "rows": len(scores), "biased_right": right}},
                           [f"{n} {data.text_view}(s) are over twice the median length."],
                           ["## Long sentences", "", f"{n} of {len(scores)} rows flagged.", ""])



def test_a_registered_featurizer_and_check_work_from_the_cli(tmp_path: Path, small_snli: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.REGISTRY, "toy", registry.FeaturizerSpec(
        "toy", "text", (), ("run", "embed"), "letter frequencies", factory=ToyFeaturizer))
    monkeypatch.setitem(checks.CHECKS, LongHypotheses.name, LongHypotheses)
    run, ex = tmp_path / "run", tmp_path / "ex"
    assert main(["run", str(small_snli), "--out", str(run), "--featurizer", "toy", "--quiet", "--no-probe",
                 "-m", "8"]) == 0
    res = json.loads((run / "results.json").read_text())
    assert res["featurizer"]["name"] == "toy" and res["featurizer"]["dim"] == 2 * len(ToyFeaturizer.LETTERS)
    assert res["featurizer"]["options"] == {"letters": ToyFeaturizer.LETTERS}
    assert (run / "kept_ids.txt").read_text().split() and (run / "filtered.tsv.gz").is_file()
    assert main(["explain", str(small_snli), str(run), "--out", str(ex), "--quiet", "--random-seeds", "1"]) == 0
    out = json.loads((ex / "results.json").read_text())
    flagged = out["long_hypotheses"]["flagged"]
    assert out["long_hypotheses"]["rows"] == res["size_before"] and flagged > 0
    assert f"{flagged} hypothesis(es) are over twice the median length." in out["verdict"]
    md = (ex / "summary.md").read_text()
    assert "## Long hypotheses" in md and f"{flagged} of {res['size_before']} rows flagged." in md
    with open(ex / "instances.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert sum(int(r["long_hypotheses_flag"]) for r in rows) == flagged
    assert all(float(r["long_hypotheses_score"]) >= 1 for r in rows)


LETTERS_OPTION = registry.FeaturizerOption("letters", str, "toy: the letters whose frequencies are Φ",
                                           metavar="LETTERS")


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
    from aflite.runs.embed import embed

    got = run_api(small_snli, None, featurizer="toy", featurizer_options={"letters": "st"}, probe=False,
                  params={"n_partitions": 8}, show_progress=False)
    assert got.summary["featurizer"]["dim"] == 4
    assert embed(small_snli, tmp_path / "emb2", featurizer="toy", featurizer_options={"letters": "s"},
                 show_progress=False).results["dim"] == 2

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
        registry.register(toy, registry.FeaturizerOption("lr", int, "another lr"))
    assert "toy" not in registry.REGISTRY


def test_an_unregistered_featurizer_is_no_choice(tmp_path: Path, small_snli: Path, capsys: Any) -> None:
    """Without its registry entry the toy featurizer is refused by the CLI's choices (so the test above is the
    registration at work, not a name the CLI knew)."""
    assert main(["run", str(small_snli), "--out", str(tmp_path / "r"), "--featurizer", "toy"]) == 2
    assert "invalid choice: 'toy'" in capsys.readouterr().err


def test_a_registered_audit_check_works_from_the_cli(tmp_path: Path, small_snli: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An audit check goes where an explain check goes (checks.CHECKS), with scope "audit": ``aflite audit`` runs
    it per view after the built-in ones (it sees the biased model's per-row flags) and writes its keys into the
    view's entry of results.json, its verdict sentence (named by set and view) and its section into summary.md;
    an explain check registered beside it is not run by the audit."""
    monkeypatch.setitem(checks.CHECKS, LongSentences.name, LongSentences)
    monkeypatch.setitem(checks.CHECKS, LongHypotheses.name, LongHypotheses)
    assert checks.check_names("audit")[-1] == "long_sentences"
    assert "long_sentences" not in checks.check_names("explain")
    out = tmp_path / "audit"
    assert main(["audit", str(small_snli), "--out", str(out), "--featurizer", "ngram", "--views", "hypothesis",
                 "--no-tra", "--n-components", "5", "--n-clusters", "8", "--peco-shuffles", "2",
                 "--tsne-sample", "0", "--quiet"]) == 0
    res = json.loads((out / "results.json").read_text())
    view = res["results"][0]["views"]["hypothesis"]
    found = view["long_sentences"]
    assert found["rows"] == res["results"][0]["n"] == 300 and 0 < found["flagged"] < 300
    assert 0 <= found["biased_right"] <= found["flagged"]
    assert list(view)[-1] == "long_sentences" and "long_hypotheses" not in view  # after the built-in keys
    assert "biased_accuracy" in view and "token_artifacts" in view
    sentence = f"D, hypothesis-only: {found['flagged']} hypothesis(s) are over twice the median length."
    assert sentence in res["verdict"]
    md = (out / "summary.md").read_text()
    assert sentence in md and "**D, hypothesis-only**" in md
    assert "## Long sentences" in md and f"{found['flagged']} of 300 rows flagged." in md
    assert "long_hypotheses" not in json.dumps(res)
