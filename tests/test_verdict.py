"""aflite.verdict: the sentences every summary.md starts with, computed from the command's own numbers (issue 25,
case 12). Each branch is checked on hand-made numbers, and once end to end on real data."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aflite.audit.results import audit_verdict
from aflite.commands.summary_md import filter_verdict, run_verdict
from aflite.evaluate.tables import evaluate_verdict
from aflite.experiments.outputs import synthetic_verdict
from aflite.rundir.schema import FeaturizerRecord, LabelShift, ProbeRecord, ProbeRow, RunBody, RunParameters
from aflite.verdict import markdown

SAMPLE = Path(__file__).resolve().parents[1] / "src" / "aflite" / "resources" / "snli_sample.tsv.gz"


PARAMS = RunParameters(1000, 600, 64, 100, 10, 0.75, "slicing", "logistic", 1.0)


def as_body(s: dict[str, Any]) -> RunBody:
    """A run's body from hand-made numbers (the fields a verdict reads), as the run builds it."""
    probe = s.get("partial_input_probe")
    return RunBody(
        parameters=PARAMS, size_before=s["size_before"], size_after=s["size_after"], n_iterations=s["n_iterations"],
        stop_reason=s["stop_reason"], featurizer=FeaturizerRecord(**s["featurizer"]) if "featurizer" in s else None,
        label_shift=LabelShift({}, {}, s["label_shift"]["change_points"], 0.0) if "label_shift" in s else None,
        partial_input_probe=None if probe is None else ProbeRecord(
            [ProbeRow(**{"size": 0, "skipped": None, **r}) for r in probe["results"]], "", model=probe.get("model"),
            skipped=probe.get("skipped")))


def run_verdict_of(s: dict[str, Any]) -> list[str]:
    return run_verdict(as_body(s))


def filter_verdict_of(s: dict[str, Any]) -> list[str]:
    return filter_verdict(as_body(s))


def run_summary(d_phi: float, rand: float, spread: float, view: str = "pair", d: float = 0.26,
                d_std: float = 0.01) -> dict:
    return {
        "size_before": 1000, "size_after": 600, "n_iterations": 4, "stop_reason": "target size reached",
        "featurizer": {"name": "ngram", "view": view},
        "label_shift": {"change_points": {"neutral": -8.0, "entailment": 4.0, "contradiction": 4.0}},
        "partial_input_probe": {"model": "TF-IDF ... on the hypothesis only", "results": [
            {"name": "D", "accuracy": 0.34 + d, "accuracy_std": d_std, "majority": 0.34, "skipped": None},
            {"name": "D(Φ)", "accuracy": 0.40 + d_phi, "accuracy_std": 0.01, "majority": 0.40, "skipped": None},
            {"name": "random subset (mean of 3)", "accuracy": 0.40 + rand, "accuracy_std": spread,
             "majority": 0.40, "skipped": None}]},
    }


def test_run_verdict_within_the_spread_says_no_measurable_reduction_and_why():
    v = run_verdict_of(run_summary(0.195, 0.20, 0.01))
    assert v[0].startswith("AFLite kept 600 of 1,000 rows (60%) in 4 phases (0–3) and stopped because target size")
    assert "largest class-share move was -8.0 points (neutral)" in v[0]
    assert v[1].startswith("No measurable artifact reduction for this probe: the probe's Δ over the majority rate "
                           "is +19.5 points on D(Φ) against +20.0 on same-size random subsets of D (spread ±1.0)")
    assert v[1].endswith("within that spread; Φ saw the pair, the probe only the hypothesis.")


def test_run_verdict_beyond_the_spread_and_the_other_way():
    assert run_verdict_of(run_summary(0.10, 0.20, 0.01))[1].startswith("Artifact reduction measured:")
    assert "a drop of 10.0 points beyond that spread" in run_verdict_of(run_summary(0.10, 0.20, 0.01))[1]
    assert run_verdict_of(run_summary(0.30, 0.20, 0.01))[1].startswith("No artifact reduction:")
    # the same 3-point drop is noise when the random subsets spread 2 points
    assert run_verdict_of(run_summary(0.17, 0.20, 0.02))[1].startswith("No measurable artifact reduction")
    s = run_summary(0.17, 0.20, 0.02, view="hypothesis")
    assert "Φ saw" not in run_verdict_of(s)[1]


def test_run_verdict_with_a_skipped_probe():
    s = run_summary(0, 0, 0)
    s["partial_input_probe"] = {"skipped": "all 10 rows have one label ('a')", "results": []}
    assert run_verdict_of(s)[1] == "The partial-input probe was not run: all 10 rows have one label ('a')."


def test_filter_verdict_and_markdown():
    v = filter_verdict_of({"size_before": 400, "size_after": 120, "n_iterations": 3, "stop_reason": "x"})
    assert v[0] == "AFLite kept 120 of 400 rows (30%) in 3 phases (0–2) and stopped because x."
    assert "aflite evaluate" in v[1]
    assert markdown(["A.", "B."]) == "**Verdict.** A. B.\n\n" and markdown([]) == ""


def _entry(mean, std, not_trained=False):
    e = {"original_heldout": {"mean": mean, "std": std, "n": 3}}
    if not_trained:
        e["not_trained"] = {"reason": "r"}
    return e


def test_evaluate_verdict_counts_models_against_the_random_spread():
    sets = [{"name": "D", "kind": "D"}, {"name": "D_random(50)", "kind": "random", "run": "r"},
            {"name": "D(Φ ngram)", "kind": "filtered", "run": "r"}]
    agg = {"lr": {"D_random(50)": _entry(0.60, 0.01), "D(Φ ngram)": _entry(0.55, 0.0)},
           "ppmi": {"D_random(50)": _entry(0.50, 0.02), "D(Φ ngram)": _entry(0.49, 0.0)},
           "ft": {"D_random(50)": _entry(0.33, 0.0), "D(Φ ngram)": _entry(0.33, 0.0, not_trained=True)}}
    v = evaluate_verdict(sets, agg)
    assert v[0] == ("Trained on D(Φ ngram) instead of same-size random subsets of D, 2 model(s) changed accuracy on "
                    "D's held-out part by -5.0 to -1.0 points: 1 lower beyond the random subsets' seed spread, 1 "
                    "within it, 0 higher.")
    assert v[-1] == "Not counted: ft (not trained: see the tables)."


def test_audit_verdict_reconciles_majority_level_accuracy_with_tokens_and_peco():
    view = {"biased_accuracy": 0.345, "majority_accuracy": 0.340, "delta_maj": 0.005, "peco": 0.046,
            "peco_null_mean": 0.010, "peco_p_value": 0.0,
            "token_artifacts": {"contradiction": [{"token": "nobody", "z": 12.3, "count": 40}],
                                "neutral": [{"token": "tall", "z": 3.0, "count": 9}]}}
    v = audit_verdict({"results": [{"name": "D", "views": {"hypothesis": view}}]})
    assert v == ["On D, the hypothesis-only model scores 34.5% against a majority rate of 34.0% (Δ +0.5 points); "
                 "strong single tokens exist ('nobody' → contradiction, z = 12, 40 rows) but cover too few rows to "
                 "beat the majority guess overall; PECO 0.046 is 4.6× its shuffled-label null (0.010, p = 0.00): "
                 "label-skewed regions exist in embedding space even where a linear model finds little."]
    after = dict(view, delta_maj=-0.01, peco_p_value=0.4)
    v2 = audit_verdict({"results": [{"name": "D", "views": {"hypothesis": view}},
                                    {"name": "D(Φ)", "views": {"hypothesis": after}}]})
    assert "PECO 0.046 is within its shuffled-label null" in v2[1]
    assert v2[2].startswith("From D to D(Φ) the hypothesis-only Δ over the majority fell (+0.5 → -1.0 points")


def test_verdict_imports_nothing_heavy():
    code = "import sys, aflite.verdict; print(any(m in sys.modules for m in ('numpy', 'sklearn', 'torch')))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_run_summary_and_results_start_with_the_verdict(tmp_path):
    from aflite.cli import main

    with gzip.open(SAMPLE, "rt", encoding="utf-8") as fh:
        lines = fh.read().splitlines()[:301]
    data = tmp_path / "d.tsv"
    data.write_text("\n".join(lines) + "\n")
    assert main(["run", str(data), "--out", str(tmp_path / "run"), "--featurizer", "ngram", "--quiet", "-m", "8"]) == 0
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert len(res["verdict"]) == 2 and res["verdict"][0].startswith("AFLite kept ")
    md = (tmp_path / "run" / "summary.md").read_text().splitlines()
    assert md[2] == "**Verdict.** " + " ".join(res["verdict"])
    assert main(["evaluate", str(data), str(tmp_path / "run"), "--out", str(tmp_path / "ev"), "--models",
                 "ppmi:hypothesis", "--seeds", "2", "--no-single-iteration", "--quiet"]) == 0
    ev = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert ev["verdict"] and ev["verdict"][0].startswith("Trained on D(Φ ngram) instead of same-size random")
    assert (tmp_path / "ev" / "summary.md").read_text().startswith("**Verdict.** " + ev["verdict"][0])


@pytest.mark.parametrize("command", ["filter"])
def test_filter_summary_starts_with_the_verdict(tmp_path, command):
    import numpy as np

    from aflite.cli import main

    rng = np.random.default_rng(0)
    np.save(tmp_path / "X.npy", rng.standard_normal((300, 4)).astype(np.float32))
    (tmp_path / "y.txt").write_text("".join(f"{'abc'[i % 3]}\n" for i in range(300)))
    assert main(["filter", "--features", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.txt"), "--out",
                 str(tmp_path / "f"), "-m", "8", "--quiet"]) == 0
    res = json.loads((tmp_path / "f" / "results.json").read_text())
    assert res["verdict"][0].startswith("AFLite kept ")
    assert "**Verdict.** AFLite kept" in (tmp_path / "f" / "summary.md").read_text()


def test_audit_summary_and_results_start_with_the_verdict(tmp_path):
    from aflite.cli import main

    with gzip.open(SAMPLE, "rt", encoding="utf-8") as fh:
        lines = fh.read().splitlines()[:301]
    data = tmp_path / "d.tsv"
    data.write_text("\n".join(lines) + "\n")
    assert main(["audit", str(data), "--out", str(tmp_path / "au"), "--featurizer", "ngram", "--quiet",
                 "--peco-shuffles", "3", "--n-clusters", "5"]) == 0
    res = json.loads((tmp_path / "au" / "results.json").read_text())
    assert res["verdict"] and res["verdict"][0].startswith("On D, the hypothesis-only model scores ")
    assert (tmp_path / "au" / "summary.md").read_text().splitlines()[2].startswith("**Verdict.** On D, the ")


def test_synthetic_verdict_judges_the_biased_share_against_the_seed_spread():
    ms = {"mean": 0.0, "std": 0.0}
    s = {"0.7": {"n_runs": 3, "biased_fraction_before": {"mean": 0.30, "std": 0.01},
                 "biased_fraction_after": {"mean": 0.05, "std": 0.02},
                 "accuracy_D": {"lr": dict(ms, mean=90.0)}, "accuracy_filtered": {"lr": dict(ms, mean=60.0)}},
         "1.0": {"n_runs": 3, "biased_fraction_before": {"mean": 0.30, "std": 0.05},
                 "biased_fraction_after": {"mean": 0.25, "std": 0.05}}}
    v = synthetic_verdict({"summary": s})
    assert v[0] == ("Separation 0.7: AFLite lowered the share of planted (biased) instances from 30.0% to 5.0% over "
                    "3 seed(s), beyond the seed spread (±2.0); the models' mean dev accuracy went from 90.0% on D to "
                    "60.0% on D(Φ).")
    assert "within the seed spread (±5.0)" in v[1]


# ------------------------------------------------------------------ a verdict the numbers support (issue 34, 1)
def test_run_verdict_asks_whether_d_had_signal_for_the_probe():
    below = run_verdict_of(run_summary(-0.22, -0.18, 0.01, d=-0.16, d_std=0.02))  # the issue's counterfactual numbers
    assert len(below) == 2 and "reduction measured" not in below[1]
    assert below[1] == ("No artifact reduction can be measured with this probe: on D itself it scores 18.0% against "
                        "a majority rate of 34.0% (Δ -16.0 points; its spread across folds ±2.0), below the majority "
                        "rate by more than twice that spread: texts that recur with other labels (e.g. "
                        "counterfactual twins) sit on both sides of its folds; group them together (--groups twins, "
                        "or --groups COLUMN with a family id) and run again.")
    flat = run_verdict_of(run_summary(0.0, 0.06, 0.01, d=0.03, d_std=0.02))  # Δ +3 on D: within 2 x 2 points
    assert flat[1].startswith("No artifact reduction can be measured with this probe: on D itself it scores 37.0%")
    assert flat[1].endswith("within twice that spread of the majority rate, so D gives it no signal that filtering "
                            "could remove.")
    assert "reduction measured" in run_verdict_of(run_summary(0.10, 0.20, 0.01, d=0.05, d_std=0.02))[1]  # Δ +5 > 4


def test_run_verdict_never_calls_a_difference_of_two_below_chance_numbers_a_reduction():
    v = run_verdict_of(run_summary(-0.10, -0.02, 0.01))  # D has signal; D(Φ) and the random subsets are both below
    assert v[1].startswith("No artifact reduction claimed: the probe's Δ over the majority rate is -10.0 points on "
                           "D(Φ) against -2.0")
    assert "a difference between two below-chance numbers is not a reduction of signal" in v[1]
    gone = run_verdict_of(run_summary(-0.03, 0.15, 0.01))  # signal on the random subsets, none left on D(Φ)
    assert gone[1].startswith("Artifact reduction measured") and gone[1].endswith(
        "; on D(Φ) it falls below the majority rate.")


def test_run_verdict_on_a_real_counterfactual_set(counterfactual_runs):
    """The issue's case for real: AFLite removes the negation twins, the probe is far below the majority rate on D,
    D(Φ) and the random subsets alike, and the verdict claims no reduction but says why."""
    s = counterfactual_runs["premise"]
    probe = {r["name"][:6]: r for r in s["partial_input_probe"]["results"]}
    assert s["size_after"] < s["size_before"]
    assert probe["D"]["delta_majority"] < -0.10 and probe["D(Φ)"]["delta_majority"] < -0.10
    assert probe["random"]["delta_majority"] < -0.10
    v = s["verdict"]
    assert len(v) == 2 and "reduction measured" not in " ".join(v)
    assert v[1].startswith("No artifact reduction can be measured with this probe: on D itself it scores ")
    assert "below the majority rate by more than twice that spread" in v[1]
    assert "even with folds grouped by premise" in v[1] and "--groups twins" in v[1]
    md = (Path(s["filtered_dataset"]).parent / "summary.md").read_text(encoding="utf-8")
    assert v[1] in md


def test_run_verdict_on_the_counterfactual_set_grouped_by_family(counterfactual_runs):
    """Grouped by family, the probe is no longer misled; it finds little on D, and the verdict says that."""
    s = counterfactual_runs["family"]
    d = s["partial_input_probe"]["results"][0]
    assert abs(d["delta_majority"]) <= 2 * d["accuracy_std"]
    assert s["verdict"][1].startswith("No artifact reduction can be measured with this probe: on D itself")
    assert s["verdict"][1].endswith("so D gives it no signal that filtering could remove.")


def explain_results(kept: int, random: list[int], issues: int | None, shuffled: list[int] | None,
                    skipped: str | None = None) -> tuple[Any, Any]:
    """The tokens and label_issues checks' summaries, typed, with these counts."""
    import numpy as np

    from aflite.check.token_summary import SignificantCounts, TokenSummary, TokenTest
    from aflite.explain.check_summaries import LabelIssueSummary, ShuffledLabels

    tokens = TokenSummary(SignificantCounts(12, kept, sum(random) / len(random)), random, "hypothesis",
                          TokenTest("z", 0.01, 20, "base", len(random), "means"))
    sh = None if shuffled is None else ShuffledLabels(shuffled, sum(shuffled) / len(shuffled), float(np.std(shuffled)),
                                                      "permuted")
    return tokens, LabelIssueSummary(issues, 1000, skipped, "cleanlab", "probabilities", sh, [])


def explain_verdict(results: tuple[Any, Any]) -> list[str]:
    """explain's verdict: its checks' sentences in registry order (token artifacts, then label issues)."""
    from aflite.explain.checks import label_issue_verdict, token_verdict

    return token_verdict(results[0]) + label_issue_verdict(results[1])


def test_explain_verdict_reads_tokens_against_random_cuts_and_issues_against_permuted_labels():
    v = explain_verdict(explain_results(2, [12, 11, 13], 150, [500, 510, 490]))
    assert v[0] == ("On the hypothesis, 12 (token, label) pair(s) are significant artifacts on D and 2 on D(Φ), "
                    "against 12.0 (±0.8) on same-size random subsets of D: fewer than a random cut of the same size "
                    "leaves, beyond the subsets' spread.")
    assert v[1].startswith("Confident learning flags 150 of 1,000 rows (15%) as possible label errors, against 500.0 "
                           "(50%) with the labels permuted") and v[1].endswith("candidates worth reading as label "
                                                                              "errors.")
    assert "as many as a random cut" in explain_verdict(explain_results(12, [12, 11, 13], 450, [500, 510, 490]))[0]
    assert "close to that chance count" in explain_verdict(explain_results(12, [12], 450, [500, 510, 490]))[1]
    assert "but not far" in explain_verdict(explain_results(12, [12], 300, [500, 510, 490]))[1]
    assert len(explain_verdict(explain_results(1, [1], None, None, skipped="cleanlab is not installed"))) == 1


def test_phases_are_counted_with_their_numbers():
    from aflite.verdict import phases_text

    assert phases_text(5) == "5 phases (0–4)" and phases_text(1) == "1 phase (phase 0)" and phases_text(0) == \
        "no phase"
    v = run_verdict_of({**run_summary(0.1, 0.2, 0.01), "n_iterations": 5,
                     "stop_reason": "fewer than k=24 instances had p̃ >= τ=0.75 (12 qualified) in phase 4"})
    assert v[0].startswith("AFLite kept 600 of 1,000 rows (60%) in 5 phases (0–4) and stopped because fewer than "
                           "k=24 instances had p̃ >= τ=0.75 (12 qualified) in phase 4.")


def test_the_run_verdict_defines_its_symbols_at_their_first_use():
    """Issue #49 item 4: k, p̃, τ, Φ and Δ were used in the terminal verdict before anything defined them."""
    from aflite.verdict import TERMS, define_terms

    s = {"size_before": 2949, "size_after": 2056, "n_iterations": 17,
         "stop_reason": "fewer than k=54 instances had p̃ >= τ=0.75 (29 qualified) in phase 16",
         "partial_input_probe": {"model": "hypothesis only", "results": [
             {"name": "D", "accuracy": 0.54, "accuracy_std": 0.02, "majority": 0.34},
             {"name": "D(Φ)", "accuracy": 0.43, "accuracy_std": 0.02, "majority": 0.34},
             {"name": "random subset (mean of 3)", "accuracy": 0.52, "accuracy_std": 0.005, "majority": 0.34}]}}
    text = " ".join(define_terms(run_verdict_of(s)))  # as aflite run / demo print it (cli/run.py)
    for pattern, definition in TERMS:
        assert definition in text, pattern
        assert text.count(definition) == 1  # defined once, at the first use
    assert text.index("k=54 (the most rows") < text.index("p̃ (predictability") < text.index("τ=0.75 (the p̃")
    assert define_terms(["no symbols here"]) == ["no symbols here"]
