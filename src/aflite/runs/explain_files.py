"""The files of an explain folder: CSVs, plots, results.json and summary.md (each written atomically).

Column contracts (another viewer reads them; keep names and order):

* ``tokens.csv`` — ``set,token,label,count,label_count,p_label,z,p_value,significant``; set ∈ full, kept, random;
  significant is 1/0; random rows are averages over the random subsets (see :func:`random_competency`).
* ``instances.csv`` — ``id,label,predictability,removed_at,confidence,variability,correctness,region,label_issue,
  top_features`` then ``kept,first_phase_predictability,weight,nearest_kept,stop_rule_removed_at,
  ensemble_features``; one row per filtered row, in the run's order; empty cells where a value is unknown (never a
  default). ``stop_rule_removed_at``: the phase in which the optional stop rule removed the row (empty when it did
  not or was off); ``ensemble_features`` (with ``--ngram-coefficients``): the row's tokens that the n-gram
  ensemble's own weights push most towards its label.
* ``weights.csv`` — ``id,label,weight,first_phase_predictability``.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import atomic_open, write_text
from aflite.hashing import file_sha256

__all__ = ["write_all", "TOKEN_COLUMNS", "INSTANCE_COLUMNS", "WEIGHT_COLUMNS", "FILES"]

TOKEN_COLUMNS = ("set", "token", "label", "count", "label_count", "p_label", "z", "p_value", "significant")
INSTANCE_COLUMNS = ("id", "label", "predictability", "removed_at", "confidence", "variability", "correctness",
                    "region", "label_issue", "top_features", "kept", "first_phase_predictability", "weight",
                    "nearest_kept", "stop_rule_removed_at", "ensemble_features")
WEIGHT_COLUMNS = ("id", "label", "weight", "first_phase_predictability")

FILES = {
    "tokens.csv": "one row per tested (token, label) pair and set (full D, kept D(Φ), random same-size subsets): "
                  "count of texts with the token, how many carry the label, p̂(label | token), Gardner et al.'s z "
                  "against the label's base rate in that set, its one-sided p-value, and whether it passes the "
                  "Bonferroni-corrected test (1/0). Random rows are means over the subsets; significant = in at "
                  "least half of them.",
    "competency.png": "count (log x) against p̂(label | token) for full D and D(Φ): dots above a label's dashed "
                      "curve are significant artifacts; the most significant are named.",
    "instances.csv": "per row: the run's last p̃ and removal phase (-1 = kept), the first phase's data map "
                     "(confidence, variability, correctness, region), cleanlab's label-issue flag, the surrogate's "
                     "top terms for the row (name:+contribution) and, for removed rows, the ids of the nearest kept "
                     "rows in Φ.",
    "datamap.png": "variability against confidence of the first phase, colour = correctness, removed rows as red "
                   "crosses.",
    "weights.csv": "soft training weights for users who reweight instead of dropping (rule in results.json).",
    "results.json": "every number above in one place (significant counts, Bonferroni thresholds, top artifacts, "
                    "overlap table, surrogate terms, rules used, timings).",
    "summary.md": "this summary.",
}


def _num(x: Any, digits: int = 6) -> str:
    if x is None:
        return ""
    v = float(x)
    return "" if math.isnan(v) else f"{v:.{digits}g}"


def _token_rows(name: str, st: Any) -> Any:
    integral = name != "random"
    for i in range(len(st.token)):
        yield [name, st.token[i], st.label[i],
               int(st.count[i]) if integral else f"{st.count[i]:.2f}",
               int(st.label_count[i]) if integral else f"{st.label_count[i]:.2f}",
               _num(st.p_label[i]), _num(st.z[i]), _num(st.p_value[i], 4), int(bool(st.significant[i]))]


def _shuffled(counts: list[int]) -> dict[str, Any] | None:
    """The label-issue count with permuted labels: per permutation, mean and standard deviation."""
    if not counts:
        return None
    arr = np.asarray(counts, dtype=float)
    return {"per_seed": counts, "mean": float(arr.mean()), "std": float(arr.std()),
            "meaning": "cleanlab's count on the same first-phase probabilities with the labels permuted (seeded): "
                       "what it flags when the labels carry no information for these models"}


def _issues_line(li: dict[str, Any]) -> str:
    sh = li.get("shuffled_labels")
    chance = (f"; with the labels permuted, {sh['mean']:,.1f} (± {sh['std']:.1f}, {len(sh['per_seed'])} "
              f"permutations)") if sh else ""
    return f"{li['n']:,} candidate(s) of {li.get('rows', 0):,} rows from {li['method']} on the {li['input']}{chance}."


def _md_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_all(out: Path, *, run: Any, ids: np.ndarray, labels: np.ndarray, af: Any, region: np.ndarray,
              issues: Any, overlap: list[dict[str, Any]], token_sets: dict[str, Any], random_per_seed: list[int],
              token_view: str, alpha: float, min_count: int, random_seeds: int, surrogate: Any,
              near: list[list[int]], agreement: float, seed: int, is_images: bool, stop: Any, ens_terms: Any,
              data_path: str, null: str = "base", issues_shuffled: list[int] | None = None,
              timings: dict[str, float], t_start: float) -> dict[str, Any]:
    """Write every file of the folder; returns the results.json body."""
    import time

    from aflite.core.heldout import WEIGHT_RULE
    from aflite.explain.datamap import REGION_RULE
    from aflite.explain.plots import plot_competency, plot_datamap

    out.mkdir(parents=True, exist_ok=True)
    keep = np.asarray(run.kept, dtype=bool)
    if token_sets:
        with atomic_open(out / "tokens.csv") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(TOKEN_COLUMNS)
            for name in ("full", "kept", "random"):
                w.writerows(_token_rows(name, token_sets[name]))
        plot_competency([("full D", token_sets["full"]), ("kept D(Φ)", token_sets["kept"])], out / "competency.png")
    flags = issues.flags
    with atomic_open(out / "instances.csv") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(INSTANCE_COLUMNS)
        for i in range(len(ids)):
            w.writerow([ids[i], labels[i], _num(run.predictability[i]), int(run.removed_at[i]), _num(af.confidence_[i]),
                        _num(af.variability_[i]), _num(af.correctness_[i]), region[i],
                        "" if flags is None else int(flags[i]), surrogate.top_features[i], int(keep[i]),
                        _num(af.first_phase_predictability_[i]), _num(af.weights_[i]),
                        ";".join(str(ids[j]) for j in near[i]),
                        "" if stop is None or stop.removed_at[i] < 0 else int(stop.removed_at[i]),
                        "" if ens_terms is None else ens_terms["per_row"][i]])
    with atomic_open(out / "weights.csv") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(WEIGHT_COLUMNS)
        for i in range(len(ids)):
            w.writerow([ids[i], labels[i], _num(af.weights_[i]), _num(af.first_phase_predictability_[i])])
    plot_datamap(af.variability_, af.confidence_, af.correctness_, ~keep, out / "datamap.png", seed=seed)

    sig: dict[str, float] = {k: int(v.n_significant) for k, v in token_sets.items() if k != "random"}
    if "random" in token_sets:
        sig["random"] = float(np.mean(random_per_seed))
    counts = {r: int((region == r).sum()) for r in ("easy", "ambiguous", "hard", "unscored")}
    results: dict[str, Any] = {
        "significant_tokens": sig if token_sets else None,
        "significant_tokens_random_per_seed": random_per_seed,
        "token_view": token_view if token_sets else None,
        "token_test": {"statistic": "z = (p̂ − p0) / sqrt(p0 (1 − p0) / n), p0 = "
                                    + ("the label's base rate in the set (Gardner et al. 2021, Eq. 1, whose p0 is "
                                       "1/|Y|)" if null == "base" else "1/|Y| (Gardner et al. 2021, Eq. 1)")
                                    + "; one-sided normal p-value; "
                                    "Bonferroni over every (token, label) pair of tokens seen >= min_count texts of "
                                    "the set",
                       "alpha": alpha, "min_count": min_count, "null": null, "random_subsets": random_seeds,
                       "random_rows": "means over the subsets in which the pair was tested; significant = in at "
                                      "least half of the subsets; significant_tokens.random = mean count per subset"},
        "bonferroni": {k: {"n_rows": v.n_rows, "n_tests": v.n_tests, "z_critical": v.z_critical,
                           "base_rates": v.base_rates} for k, v in token_sets.items()},
        "top_artifacts": {k: token_sets[k].top(10) for k in ("full", "kept") if k in token_sets},
        # where report.html finds the run and the texts: resolved, and relative to this folder
        "run_dir": str(run.path.resolve()), "dataset": str(Path(data_path).resolve()),
        "run_dir_relative": os.path.relpath(run.path.resolve(), out.resolve()),
        "dataset_relative": os.path.relpath(Path(data_path).resolve(), out.resolve()),
        "run": {"folder": str(run.path.resolve()), "dataset": str(Path(data_path).resolve()),
                "size_before": int(len(keep)),
                "size_after": int(keep.sum()), "stop_reason": run.summary.get("stop_reason"),
                "featurizer": run.summary["featurizer"].get("name"), "view": run.summary["featurizer"].get("view"),
                # which run and data this explains (a dataset card ties this folder to its run by them)
                "dataset_fingerprint": run.summary.get("dataset_fingerprint"),
                "kept_ids_sha256": file_sha256(run.path / "kept_ids.txt") if (run.path / "kept_ids.txt").is_file()
                else None},
        "first_phase": {"source": "recomputed from the run's Φ, parameters and seed (phase 0 of AFLite.fit)",
                        "seed": seed, "agreement_with_run": agreement,
                        "agreement_meaning": "share of rows removed in phase 0 whose recomputed p̃ equals the p̃ "
                                             "the run recorded"},
        "datamap": {"region_rule": REGION_RULE, "regions": counts,
                    "removed_by_region": {r: int(((region == r) & ~keep).sum()) for r in counts}},
        "label_issues": {"n": None if flags is None else int(flags.sum()), "rows": int(len(keep)),
                         "skipped": issues.skipped, "method": issues.method,
                         "input": "mean held-out probabilities of the first phase",
                         "shuffled_labels": _shuffled(issues_shuffled or [])},
        "overlap": overlap,
        "surrogate": {"target": "p̃ of the first phase", "inputs": "image statistics × label" if is_images else
                      f"{token_view} tokens (seen >= {min_count} times) × label", "model": "Lasso (L1)",
                      "alpha": surrogate.alpha, "r2": surrogate.r2, "n_inputs": surrogate.n_inputs,
                      "n_terms": len(surrogate.terms), "top_terms": surrogate.terms[:25]},
        "weights": {"rule": WEIGHT_RULE},
        "ngram_coefficients": None if ens_terms is None else {
            "rule": "Φ of each token alone (the n-gram featurizer refitted with the run's options and seed) times the "
                    "first phase's mean coefficients, centred over labels",
            "refit_max_abs_diff": ens_terms["refit_max_abs_diff"], "top_terms": ens_terms["top_terms"]},
        "stop_rule": {"k_rule": run.summary.get("stop_reason"),
                      "significant_after_filtering": sig.get("kept") if token_sets else None,
                      **(stop.to_dict() if stop is not None else {"enabled": False})},
        "files": FILES,
    }
    from aflite.verdict import explain_verdict

    results["verdict"] = explain_verdict(results)
    results["timings"] = {**timings, "total_seconds": time.perf_counter() - t_start}
    from aflite.results import write_results_json

    write_results_json(out, results, command="explain", seed=seed)  # the envelope; the CLI adds its argv
    write_text(out / "summary.md", summary_md(results, token_sets))
    return results


def summary_md(res: dict[str, Any], token_sets: dict[str, Any]) -> str:
    """The readable summary: artifacts before/after, counts, overlap table, and how to read each file."""
    run = res["run"]
    from aflite.verdict import markdown

    lines = [f"# aflite explain: {_md_cell(run['dataset'])}", "",
             *([markdown(res["verdict"]).rstrip("\n"), ""] if res.get("verdict") else []),
             f"Run `{_md_cell(run['folder'])}` (Φ = {run['featurizer']}, view {run['view']}): "
             f"|D| = {run['size_before']:,} → |D(Φ)| = {run['size_after']:,}; "
             f"stopped: {_md_cell(run['stop_reason'])}.", ""]
    if token_sets:
        s = res["significant_tokens"]
        b = res["bonferroni"]
        tt = res["token_test"]
        lines += ["## Token artifacts (Gardner et al. 2021 competency test)", "",
                  f"Computed on the **{res['token_view']}** text. z against each label's base rate, one-sided, "
                  f"Bonferroni α = {tt['alpha']} over all (token, label) pairs of tokens seen ≥ {tt['min_count']} "
                  f"times.", "",
                  _md_table(["set", "rows", "tests", "z critical", "significant (token, label) pairs"], [
                      [k, f"{b[k]['n_rows']:,}", f"{b[k]['n_tests']:,}", f"{b[k]['z_critical']:.2f}",
                       f"{s[k]:.1f}" if k == "random" else s[k]] for k in ("full", "kept", "random")]), "",
                  f"random = the mean over {tt['random_subsets']} seeded random subsets of |D(Φ)| rows "
                  f"(per subset: {res['significant_tokens_random_per_seed']}).", ""]
        for k, title in (("full", "before filtering (D)"), ("kept", "after filtering (D(Φ))")):
            top = token_sets[k].top(5)
            lines += [f"Five most significant artifacts {title}:", "",
                      _md_table(["token", "label", "count", "p̂(label|token)", "z", "significant"],
                                [[_md_cell(t["token"]), _md_cell(t["label"]), f"{t['count']:.0f}",
                                  f"{t['p_label']:.3f}", f"{t['z']:.1f}", "yes" if t["significant"] else "no"]
                                 for t in top]), ""]
        kept_sig = s["kept"]
        lines += [("AFLite's k-rule stopped with " + (f"{kept_sig} (token, label) pair(s) still significant in D(Φ)."
                                                        if kept_sig else "no significant (token, label) pair left in "
                                                        "D(Φ).")), ""]
        sr = res["stop_rule"]
        if sr.get("enabled"):
            last = sr["trajectory"][-1]
            lines += [f"Stop rule (continue with slices of {sr['slice_size']} until no pair is significant, floor "
                      f"{sr['floor']:,}): stopped by **{sr['stopped_by']}** after removing {sr['extra_removed']:,} "
                      f"more rows; |S| = {last['size']:,} with {last['significant']} significant pair(s).", ""]
    dm = res["datamap"]
    li = res["label_issues"]
    lines += ["## Data map of the first phase and label issues", "",
              f"Regions: {dm['region_rule']}.", "",
              "Label issues: " + (_issues_line(li) if li["skipped"] is None else f"skipped — {li['skipped']}."),
              "",
              "Overlap of AFLite's removed set with each group:", "",
              _md_table(["group", "rows", "removed", "share of group removed", "share of removed set"],
                        [[o["group"], f"{o['size']:,}", f"{o['removed']:,}", _pct(o["share_of_group_removed"]),
                          _pct(o["share_of_removed_in_group"])] for o in res["overlap"]]), ""]
    sur = res["surrogate"]
    lines += ["## Why rows were easy (surrogate of p̃)", "",
              f"{sur['model']} on {sur['inputs']}: R² = {sur['r2']:.3f} on the scored rows, {sur['n_terms']} "
              f"nonzero terms. Strongest (input → label, coefficient, rows):", "",
              _md_table(["input", "label", "coef", "rows"], [[_md_cell(t["name"]), _md_cell(t["label"]),
                                                              f"{t['coef']:+.3f}", t["support"]]
                                                             for t in sur["top_terms"][:10]]), "",
              f"First phase: {res['first_phase']['source']}; agreement with the run's recorded p̃ of its phase-0 "
              f"removals: {_pct(res['first_phase']['agreement_with_run'])}.", "",
              f"Soft weights: {res['weights']['rule']}.", "", "## Files", ""]
    lines += [f"- `{name}` — {text}" for name, text in res["files"].items() if name != "summary.md"]
    return "\n".join(lines) + "\n"


def _pct(x: Any) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * float(x):.1f}%"
