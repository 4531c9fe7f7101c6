"""The checks of ``aflite explain`` (:mod:`aflite.check`), one per question about a run, in the order they run:
token artifacts with significance, the optional stop rule, the first phase's data map, cleanlab's label issues
(and their overlap with the removed set), the surrogate of p̃ ("why was a row easy"), each removed row's nearest
kept rows, and the n-gram ensemble's own token weights. Each declares its options (``--check name:key=value``;
the older flags ``--alpha``, ``--min-count``, ... set them too), and returns its per-row values, its summary
(its class in :mod:`aflite.explain.check_summaries`; results.json's ``checks[name]["summary"]``) and its section of
summary.md; :func:`aflite.commands.explain.explain` runs them and writes the folder."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from aflite.check import Check, CheckData, CheckResult, Option, register
from aflite.check.format import cell, md_cell, md_table, pct
from aflite.check.token_summary import BonferroniSet, SignificantCounts, TokenSummary, TokenTest
from aflite.check.tokens import TokenStats, competency, random_competency
from aflite.errors import ParameterError
from aflite.explain.check_summaries import (
    DataMapSummary,
    LabelIssueSummary,
    NeighboursSummary,
    NgramSummary,
    ShuffledLabels,
    StopRuleSummary,
    SurrogateSummary,
)
from aflite.explain.datamap import REGION_RULE, label_issues, overlap_table, regions
from aflite.explain.reasons import IMAGE_INPUTS, fit_surrogate, image_inputs, nearest_kept, text_inputs
from aflite.explain.recompute import ngram_terms
from aflite.explain.stoprule import continue_until_clean
from aflite.verdict import SPREAD_FACTOR

__all__ = ["DataMap", "LabelIssueCheck", "Neighbours", "NgramCoefficients", "StopRule", "Surrogate", "TokenArtifacts",
           "label_issue_verdict", "token_verdict"]


def _positive(v: Any) -> bool:
    return bool(v >= 1)


MIN_COUNT = Option("min_count", int, 20, "test only tokens seen in at least this many texts of a set",
                        valid=_positive, rule="must be >= 1", alias="min_count")


@register  # a built-in check: registered where it is defined
class TokenArtifacts(Check):
    """Gardner et al. (2021)'s competency test on full D, the kept D(Φ) and same-size random subsets. Per row: the
    largest z of a significant (token, its label) pair among its tokens (flag: it has one)."""

    name: ClassVar[str] = "tokens"
    options: ClassVar[tuple[Option, ...]] = (
        Option("alpha", float, 0.01, "family-wise α of the Bonferroni test", valid=lambda a: 0.0 < a < 1.0,
                    rule="must lie in (0, 1)", alias="alpha"),
        MIN_COUNT,
        Option("null", str, "base", "the test's p0: each label's share of the set (base) or 1/|Y| (uniform, "
                    "Gardner et al. 2021's choice)", choices=("base", "uniform"), alias="null"),
        Option("random_seeds", int, 5, "same-size random subsets averaged for the 'random' set",
                    valid=_positive, rule="must be >= 1", alias="random_seeds"))

    def enabled(self, data: CheckData) -> bool:
        return data.texts is not None

    def _test(self) -> TokenTest:
        """The test as it ran, said in words (results.json's ``test``)."""
        o = self.params
        null = o["null"]
        return TokenTest("z = (p̂ − p0) / sqrt(p0 (1 − p0) / n), p0 = "
                         + ("the label's base rate in the set (Gardner et al. 2021, Eq. 1, whose p0 is 1/|Y|)"
                            if null == "base" else "1/|Y| (Gardner et al. 2021, Eq. 1)")
                         + "; one-sided normal p-value; Bonferroni over every (token, label) pair of tokens seen >= "
                           "min_count texts of the set",
                         o["alpha"], o["min_count"], null, o["random_seeds"],
                         "means over the subsets in which the pair was tested; significant = in at least half of "
                         "the subsets; significant_tokens.random = mean count per subset")

    def disabled(self, data: CheckData) -> CheckResult:
        return CheckResult(self.name, summary=TokenSummary(None, [], None, self._test()))

    def competency(self, data: CheckData, rows: np.ndarray | None = None) -> TokenStats:
        B, vocab = data.token_matrix()
        o = self.params
        return competency(B, vocab, data.y, data.classes, rows, alpha=o["alpha"], min_count=o["min_count"],
                          p0=o["null"])

    def find(self, data: CheckData) -> CheckResult:
        B, vocab = data.token_matrix()
        o = self.params
        sets: dict[str, TokenStats] = {"full": self.competency(data), "kept": self.competency(
            data, np.flatnonzero(data.kept()))}
        sets["random"], per_seed = random_competency(
            B, vocab, data.y, data.classes, int(data.kept().sum()), data.seed, o["random_seeds"],
            alpha=o["alpha"], min_count=o["min_count"], p0=o["null"])
        sig = SignificantCounts(sets["full"].n_significant, sets["kept"].n_significant, float(np.mean(per_seed)))
        summary = TokenSummary(
            sig, per_seed, data.text_view, self._test(),
            {k: BonferroniSet(v.n_rows, v.n_tests, v.z_critical, v.base_rates) for k, v in sets.items()},
            {k: sets[k].top(10) for k in ("full", "kept")})
        scores = _row_scores(B, vocab, data.y, data.classes, sets["full"])
        summary.verdict = token_verdict(summary)
        line = (f"significant (token, label) pairs on the {data.text_view}: full {sig.full}, kept {sig.kept}, "
                f"random {sig.random:.1f}")
        return CheckResult(self.name, scores, ~np.isnan(scores), summary, _token_markdown(summary, sets),
                           columns={}, detail=sets, headline=line)


def token_verdict(res: TokenSummary) -> list[str]:
    """Token artifacts significant on D(Φ) against same-size random subsets of D, judged against the subsets'
    spread (in counts: at least half a pair)."""
    sig = res.significant_tokens
    if sig is None:
        return []
    full, kept, rand = sig.full, sig.kept, sig.random
    per_seed = [float(x) for x in res.significant_tokens_random_per_seed]
    mean = sum(per_seed) / len(per_seed) if per_seed else rand
    sd = (sum((v - mean) ** 2 for v in per_seed) / len(per_seed)) ** 0.5 if per_seed else 0.0
    spread = max(sd, 0.5)
    if kept < rand - SPREAD_FACTOR * spread:
        judged = "fewer than a random cut of the same size leaves, beyond the subsets' spread"
    elif kept > rand + SPREAD_FACTOR * spread:
        judged = "more than a random cut of the same size leaves: the filter did not target them"
    else:
        judged = "as many as a random cut of the same size leaves, within the subsets' spread"
    return [f"On the {res.token_view or 'text'}, {full:.0f} (token, label) pair(s) are significant artifacts "
            f"on D and {kept:.0f} on D(Φ), against {rand:.1f} (±{sd:.1f}) on same-size random subsets of D: "
            f"{judged}."]


def _row_scores(B: Any, vocab: np.ndarray, y: np.ndarray, classes: np.ndarray, full: TokenStats) -> np.ndarray:
    """Per row, the largest z of a significant (token, the row's label) pair among its tokens; NaN when none."""
    K = len(classes)
    Z = np.full((len(vocab), K), -np.inf)
    sig = np.flatnonzero(full.significant)
    if len(sig):
        t = np.searchsorted(vocab, full.token[sig])
        k = np.searchsorted(np.asarray(classes).astype(str), np.asarray(full.label[sig]).astype(str))
        Z[t, k] = full.z[sig]
    csr = B.tocsr()
    rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
    vals = Z[csr.indices, y[rows]] if len(rows) else np.empty(0)
    out = np.full(csr.shape[0], -np.inf)
    np.maximum.at(out, rows, vals)
    out[~np.isfinite(out)] = np.nan
    return out


def _token_markdown(res: TokenSummary, sets: dict[str, TokenStats]) -> list[str]:
    s, b, tt = res.significant_tokens, res.bonferroni, res.token_test
    assert s is not None  # the check ran
    counts = {"full": s.full, "kept": s.kept, "random": f"{s.random:.1f}"}
    lines = ["## Token artifacts (Gardner et al. 2021 competency test)", "",
             f"Computed on the **{res.token_view}** text. z against each label's base rate, one-sided, "
             f"Bonferroni α = {tt.alpha} over all (token, label) pairs of tokens seen ≥ {tt.min_count} times.",
             "",
             md_table(["set", "rows", "tests", "z critical", "significant (token, label) pairs"], [
                 [k, f"{b[k].n_rows:,}", f"{b[k].n_tests:,}", f"{b[k].z_critical:.2f}", counts[k]]
                 for k in ("full", "kept", "random")]), "",
             f"random = the mean over {tt.random_subsets} seeded random subsets of |D(Φ)| rows "
             f"(per subset: {res.significant_tokens_random_per_seed}).", ""]
    for k, title in (("full", "before filtering (D)"), ("kept", "after filtering (D(Φ))")):
        lines += [f"Five most significant artifacts {title}:", "",
                  md_table(["token", "label", "count", "p̂(label|token)", "z", "significant"],
                           [[md_cell(t["token"]), md_cell(t["label"]), f"{t['count']:.0f}", f"{t['p_label']:.3f}",
                             f"{t['z']:.1f}", "yes" if t["significant"] else "no"] for t in sets[k].top(5)]), ""]
    kept_sig = s.kept
    lines += [("AFLite's k-rule stopped with " + (f"{kept_sig} (token, label) pair(s) still significant in D(Φ)."
                                                   if kept_sig else "no significant (token, label) pair left in "
                                                   "D(Φ).")), ""]
    return lines


@register  # a built-in check: registered where it is defined
class StopRule(Check):
    """Optional (``stop_rule:enabled=true``): continue filtering past the run's stop until no token artifact is
    significant by the ``tokens`` check's test and options (:mod:`aflite.explain.stoprule`); per row, the extra
    phase that removed it."""

    name: ClassVar[str] = "stop_rule"
    options: ClassVar[tuple[Option, ...]] = (
        Option("enabled", bool, False, "continue filtering past the run's stop with slices of k/4 until no "
                    "(token, label) pair is Bonferroni-significant on the kept set, or the floor is reached",
                    alias="stop_rule"),
        Option("floor", int, None, "the smallest kept set the stop rule may reach; unset: the run's target size n",
                    valid=_positive, rule="must be >= 1", alias="stop_floor"),
        Option("max_phases", int, 40, "cap on the stop rule's extra phases", valid=_positive,
                    rule="must be >= 1", alias="stop_max_phases"))

    def enabled(self, data: CheckData) -> bool:
        return bool(self.params["enabled"]) and data.texts is not None

    def _summary(self, data: CheckData, **more: Any) -> StopRuleSummary:
        tokens = data.found.get("tokens")
        sig = tokens.summary.significant_tokens if tokens is not None and isinstance(tokens.summary,
                                                                                      TokenSummary) else None
        return StopRuleSummary(data.run_body().stop_reason, None if sig is None else sig.kept, **more)

    def disabled(self, data: CheckData) -> CheckResult:
        return CheckResult(self.name, summary=self._summary(data, enabled=False),
                           columns={"stop_rule_removed_at": [""] * len(data)})

    def find(self, data: CheckData) -> CheckResult:
        found = data.found.get("tokens")
        tokens = TokenArtifacts(found.options if found is not None else None)  # the token test as the check ran it
        o = self.params
        stop = continue_until_clean(
            data.X, data.labels, data.context.groups, data.run_body().parameters, data.seed, data.kept(),
            data.run_body().n_iterations, lambda r: tokens.competency(data, r).n_significant,
            floor=o["floor"], max_phases=o["max_phases"])
        sr = self._summary(data, enabled=True, stopped_by=stop.stopped_by, slice_size=stop.slice_size,
                           floor=stop.floor, extra_removed=stop.extra_removed, trajectory=stop.trajectory)
        last = stop.trajectory[-1]
        md = [f"Stop rule (continue with slices of {sr.slice_size} until no pair is significant, floor "
              f"{sr.floor:,}): stopped by **{sr.stopped_by}** after removing {sr.extra_removed:,} more rows; "
              f"|S| = {last['size']:,} with {last['significant']} significant pair(s).", ""]
        removed = np.asarray(stop.removed_at)
        return CheckResult(self.name, removed.astype(float), removed >= 0, sr, markdown=md,
                           columns={"stop_rule_removed_at": ["" if r < 0 else int(r) for r in removed]},
                           headline=f"stop rule: stopped by {sr.stopped_by} after removing {sr.extra_removed} "
                                    f"more rows")


@register  # a built-in check: registered where it is defined
class DataMap(Check):
    """The first phase's data map (Swayamdipta et al.): per row, confidence, variability, correctness and region."""

    name: ClassVar[str] = "datamap"

    def find(self, data: CheckData) -> CheckResult:
        af = data.phase
        region = regions(af.confidence_, af.variability_)
        counts = {r: int((region == r).sum()) for r in ("easy", "ambiguous", "hard", "unscored")}
        summary = DataMapSummary(REGION_RULE, counts,
                                 {r: int(((region == r) & ~data.kept()).sum()) for r in counts})
        md = ["## Data map of the first phase and label issues", "", f"Regions: {REGION_RULE}.", ""]
        columns = {"confidence": [cell(v) for v in af.confidence_], "variability": [cell(v) for v in af.variability_],
                   "correctness": [cell(v) for v in af.correctness_], "region": list(region)}
        return CheckResult(self.name, np.asarray(af.confidence_, float), None, summary, markdown=md, columns=columns,
                           detail=region)


@register  # a built-in check: registered where it is defined
class LabelIssueCheck(Check):
    """cleanlab's label-issue candidates from the first phase's held-out probabilities, and how the removed set
    overlaps them and the data map's regions."""

    name: ClassVar[str] = "label_issues"
    options: ClassVar[tuple[Option, ...]] = (
        Option("permutations", int, 5, "seeded permutations of the labels for the chance count",
                    valid=_positive, rule="must be >= 1", alias="random_seeds"),)

    def find(self, data: CheckData) -> CheckResult:
        issues = label_issues(data.phase.first_phase_proba_, data.y)
        # the same measure with the labels permuted (seeded; the probabilities unchanged): what confident learning
        # flags when the labels carry no information for the first phase's models, for the count to be read against
        shuffled: list[int] = []
        if issues.flags is not None and issues.skipped is None:
            perm_rng = np.random.default_rng([data.seed, 34])
            for _ in range(self.params["permutations"]):
                sh = label_issues(data.phase.first_phase_proba_, perm_rng.permutation(data.y))
                if sh.flags is not None and sh.skipped is None:
                    shuffled.append(int(sh.flags.sum()))
        region = data.found["datamap"].detail
        overlap = overlap_table(~data.kept(), region, issues.flags)
        flags = issues.flags
        li = LabelIssueSummary(None if flags is None else int(flags.sum()), len(data), issues.skipped, issues.method,
                               "mean held-out probabilities of the first phase", _shuffled(shuffled), overlap)
        md = ["Label issues: " + (_issues_line(li) if li.skipped is None else f"skipped — {li.skipped}."), "",
              "Overlap of AFLite's removed set with each group:", "",
              md_table(["group", "rows", "removed", "share of group removed", "share of removed set"],
                       [[o["group"], f"{o['size']:,}", f"{o['removed']:,}", pct(o["share_of_group_removed"]),
                         pct(o["share_of_removed_in_group"])] for o in overlap]), ""]
        li.verdict = label_issue_verdict(li)
        datamap = data.found["datamap"].summary
        line = (f"regions: {datamap.regions if isinstance(datamap, DataMapSummary) else None}; label issues: "
                f"{li.n if li.skipped is None else li.skipped}")
        return CheckResult(self.name, None, flags, li, md,
                           {"label_issue": [""] * len(data) if flags is None else [int(f) for f in flags]},
                           headline=line)


# label issues against the count with permuted labels ("chance"): at or above CHANCE_CLOSE of it the flags are read
# as the models' blind spots, under CHANCE_HALF as label-error candidates, in between as a mix
CHANCE_CLOSE = 0.8
CHANCE_HALF = 0.5


def _shuffled(counts: list[int]) -> ShuffledLabels | None:
    """The label-issue count with permuted labels: per permutation, mean and standard deviation."""
    if not counts:
        return None
    arr = np.asarray(counts, dtype=float)
    return ShuffledLabels(counts, float(arr.mean()), float(arr.std()),
                          "cleanlab's count on the same first-phase probabilities with the labels permuted (seeded): "
                          "what it flags when the labels carry no information for these models")


def _issues_line(li: LabelIssueSummary) -> str:
    sh = li.shuffled_labels
    chance = (f"; with the labels permuted, {sh.mean:,.1f} (± {sh.std:.1f}, {len(sh.per_seed)} "
              f"permutations)") if sh else ""
    return f"{li.n or 0:,} candidate(s) of {li.rows:,} rows from {li.method} on the {li.input}{chance}."


def label_issue_verdict(li: LabelIssueSummary) -> list[str]:
    """cleanlab's label-issue count against the same measure with the labels permuted (chance): within twice the
    permutations' spread or at CHANCE_CLOSE of it and above, the flags are the models' blind spots; under CHANCE_HALF
    of it, label-error candidates."""
    n, rows, sh = li.n, li.rows, li.shuffled_labels
    if li.skipped is not None or n is None or not rows or sh is None:
        return []
    s_mean, s_sd = sh.mean, sh.std
    spread = max(s_sd, 0.5)
    pct = f"{n:,.0f} of {rows:,.0f} rows ({100 * n / rows:.0f}%)"
    against = (f"against {s_mean:,.1f} ({100 * s_mean / rows:.0f}%) with the labels permuted, the count when labels "
               f"carry no information for Φ's models")
    ratio = n / s_mean if s_mean > 0 else 0.0
    if n >= s_mean - SPREAD_FACTOR * spread or ratio >= CHANCE_CLOSE:
        reading = ("close to that chance count, so the flags mark rows Φ's models cannot predict (e.g. texts that "
                   "recur with other labels), not label errors one can tell apart")
    elif ratio >= CHANCE_HALF:
        reading = ("below that chance count but not far: read the flags as rows the models find hard, among which "
                   "label errors may be")
    else:
        reading = ("well under half that chance count: the flagged rows disagree with a pattern the models learned, "
                   "candidates worth reading as label errors")
    return [f"Confident learning flags {pct} as possible label errors, {against}: {reading}."]


@register  # a built-in check: registered where it is defined
class Surrogate(Check):
    """Why rows were easy: a sparse (Lasso) surrogate of the first phase's p̃ on tokens × label (or image
    statistics × label); per row, its top terms."""

    name: ClassVar[str] = "surrogate"
    options: ClassVar[tuple[Option, ...]] = (
        Option("min_count", int, 20, "the surrogate's inputs: tokens seen in at least this many texts",
                    valid=_positive, rule="must be >= 1", alias="min_count"),)

    def find(self, data: CheckData) -> CheckResult:
        min_count = self.params["min_count"]
        if data.texts is not None:
            F, token_names = text_inputs(*data.token_matrix(), min_count)
            names = [str(t) for t in token_names]
            inputs = f"{data.text_view} tokens (seen >= {min_count} times) × label"
        else:
            F, names = image_inputs(data.refs or []), list(IMAGE_INPUTS)
            inputs = "image statistics × label"
        sur = fit_surrogate(F, names, data.y, data.classes, data.phase.first_phase_predictability_,
                            random_state=data.seed)
        s = SurrogateSummary("p̃ of the first phase", inputs, "Lasso (L1)", sur.alpha, sur.r2, sur.n_inputs,
                             len(sur.terms), sur.terms[:25])
        md = ["## Why rows were easy (surrogate of p̃)", "",
              f"{s.model} on {s.inputs}: R² = {s.r2:.3f} on the scored rows, {s.n_terms} nonzero terms. "
              f"Strongest (input → label, coefficient, rows):", "",
              md_table(["input", "label", "coef", "rows"], [[md_cell(t["name"]), md_cell(t["label"]),
                                                             f"{t['coef']:+.3f}", t["support"]]
                                                            for t in s.top_terms[:10]]), ""]
        return CheckResult(self.name, summary=s, markdown=md, columns={"top_features": list(sur.top_features)})


@register  # a built-in check: registered where it is defined
class Neighbours(Check):
    """Each removed row's nearest kept rows in Φ (``k`` of them)."""

    name: ClassVar[str] = "neighbours"
    options: ClassVar[tuple[Option, ...]] = (
        Option("k", int, 3, "nearest kept rows listed per removed row (0: none)", valid=lambda k: k >= 0,
                    rule="must be >= 0", alias="neighbours"),)

    def find(self, data: CheckData) -> CheckResult:
        k = self.params["k"]
        near = nearest_kept(data.X, data.kept(), k=k, seed=data.seed) if k else [[] for _ in range(len(data))]
        return CheckResult(self.name, summary=NeighboursSummary(),
                           columns={"nearest_kept": [";".join(str(data.ids[j]) for j in row) for row in near]})


@register  # a built-in check: registered where it is defined
class NgramCoefficients(Check):
    """Optional (``ngram_coefficients:enabled=true``, an n-gram Φ): each token's push towards each label from the
    ensemble's own weights; per row, its tokens that push most towards its label."""

    name: ClassVar[str] = "ngram_coefficients"
    options: ClassVar[tuple[Option, ...]] = (
        Option("enabled", bool, False, "n-gram Φ only: refit the run's featurizer (one more featurizing pass) "
                    "and list, per row and overall, the tokens the ensemble's own weights push towards the gold "
                    "label", alias="ngram_coefficients"),
        Option("min_count", int, 20, "tokens seen in at least this many texts", valid=_positive,
                    rule="must be >= 1", alias="min_count"))

    def enabled(self, data: CheckData) -> bool:
        return (bool(self.params["enabled"]) and data.texts is not None
                and data.phase.first_phase_coef_ is not None)

    def disabled(self, data: CheckData) -> CheckResult:
        return CheckResult(self.name, summary=NgramSummary(), columns={"ensemble_features": [""] * len(data)})

    def find(self, data: CheckData) -> CheckResult:
        B, vocab = data.token_matrix()
        fz = data.run_body().featurizer
        if data.context.rows is None or fz is None:
            raise ParameterError("check 'ngram_coefficients' reads the rows and Φ of a run of `aflite run`")
        diff, top, per_row = ngram_terms(data.context.dataset, data.context.rows, fz, data.X, B, vocab,
                            data.y, data.classes, self.params["min_count"], data.phase.first_phase_coef_,
                            data.text_view)
        summary = NgramSummary(
            rule="Φ of each token alone (the n-gram featurizer refitted with the run's options and seed) times the "
                 "first phase's mean coefficients, centred over labels",
            refit_max_abs_diff=diff, top_terms=top)
        return CheckResult(self.name, summary=summary, columns={"ensemble_features": list(per_row)})
