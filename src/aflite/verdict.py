"""Two or three plain sentences that say what a command's numbers mean: what changed, against which baseline, and
whether the change is beyond the null or the seed spread.

Every ``summary.md`` starts with them and every ``results.json`` carries them as ``"verdict"`` (a list of
sentences), so that a reader who opens only the first lines learns the answer. Each function reads the plain
JSON-like dictionary its command writes (no numpy, no scikit-learn: this module sits below the CLI and imports
nothing heavy). A sentence states a comparison only when the numbers for it are there; it never guesses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["audit_verdict", "evaluate_verdict", "explain_verdict", "filter_verdict", "markdown", "phases_text",
           "run_verdict", "synthetic_verdict"]

MIN_SPREAD = 0.005  # half a point: the smallest seed spread a difference is judged against
SPREAD_FACTOR = 2.0  # "beyond the spread" = more than twice the baseline's standard deviation
STRONG_Z = 5.0  # a token whose label rate is this many standard errors above the base rate
PECO_P = 0.05
# label issues against the count with permuted labels ("chance"): at or above CHANCE_CLOSE of it the flags are
# read as the models' blind spots, under CHANCE_HALF as label-error candidates, in between as a mix
CHANCE_CLOSE = 0.8
CHANCE_HALF = 0.5


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def markdown(sentences: Sequence[str]) -> str:
    """The verdict as the first paragraph of a summary.md (plain text: Markdown needs no HTML escaping)."""
    return ("**Verdict.** " + " ".join(sentences) + "\n\n") if sentences else ""


def phases_text(n: Any) -> str:
    """How many filtering phases ran, with their numbers: phases are numbered from 0 (a row's ``removed_at`` in
    instances.csv, "in phase 4" of a stop reason), so 5 phases are "5 phases (0–4)"."""
    try:
        k = int(n)
    except (TypeError, ValueError):
        return f"{n} phases"
    return "no phase" if k <= 0 else "1 phase (phase 0)" if k == 1 else f"{k} phases (0–{k - 1})"


def _kept(summary: dict[str, Any]) -> str:
    before, after = summary.get("size_before"), summary.get("size_after")
    phases, why = summary.get("n_iterations"), summary.get("stop_reason")
    if not before or after is None:
        return ""
    return (f"AFLite kept {after:,} of {before:,} rows ({100 * after / before:.0f}%) in {phases_text(phases)} and "
            f"stopped because {why}.")


def _shift(summary: dict[str, Any]) -> str:
    shift = summary.get("label_shift") or {}
    moves = shift.get("change_points") or {}
    if not moves:
        return ""
    worst = max(moves, key=lambda k: abs(moves[k]))
    return (f" The largest class-share move was {moves[worst]:+.1f} points ({worst}), so compare accuracies over the "
            f"majority rate, not raw.") if abs(moves[worst]) > 1.0 else ""


def run_verdict(summary: dict[str, Any]) -> list[str]:
    """``aflite run`` / ``demo``: sizes and stop, then the hypothesis-only probe on D(Φ) against same-size random
    subsets of D (Δ over the majority rate of the same rows), judged against the random subsets' spread.

    A reduction is claimed only where there was something to reduce: the probe must find signal on D itself (Δ on
    D above twice its spread across folds, :func:`_signal_on_d`), and the random subsets must keep some (Δ > 0):
    a difference between two numbers at or below the majority rate is not a reduction of signal."""
    out = [_kept(summary) + _shift(summary)]
    probe = summary.get("partial_input_probe") or {}
    f = summary.get("featurizer") or {}
    phi_view = f.get("view", "pair")
    probe_side = "the hypothesis" if "hypothesis" in str(probe.get("model", "hypothesis")) else "the text"
    if probe.get("skipped"):
        out.append(f"The partial-input probe was not run: {probe['skipped']}.")
        return [s for s in out if s]
    rows = {str(r.get("name", "")): r for r in probe.get("results") or []}
    dphi = rows.get("D(Φ)")
    rand = next((r for n, r in rows.items() if n.startswith("random subset")), None)
    if not dphi or not rand:
        return [s for s in out if s]
    if dphi.get("skipped") or rand.get("skipped"):
        why = dphi.get("skipped") or rand.get("skipped")
        out.append(f"The probe could not be compared on D(Φ) and random subsets: {why}.")
        return [s for s in out if s]
    no_signal = _signal_on_d(rows.get("D") or {}, probe)
    if no_signal:
        out.append(no_signal)
        return [s for s in out if s]
    a_d, m_d = _num(dphi.get("accuracy")), _num(dphi.get("majority"))
    a_r, m_r = _num(rand.get("accuracy")), _num(rand.get("majority"))
    if None in (a_d, m_d, a_r, m_r):
        return [s for s in out if s]
    assert a_d is not None and m_d is not None and a_r is not None and m_r is not None
    d_phi, d_rand = a_d - m_d, a_r - m_r
    spread = max(_num(rand.get("accuracy_std")) or 0.0, MIN_SPREAD)
    diff = d_phi - d_rand
    base = (f"the probe's Δ over the majority rate is {_pts(d_phi)} points on D(Φ) against {_pts(d_rand)} on "
            f"same-size random subsets of D (spread ±{100 * spread:.1f})")
    if diff < -SPREAD_FACTOR * spread and d_rand <= 0:
        out.append(f"No artifact reduction claimed: {base}; the probe finds no signal on the random subsets either "
                   f"(Δ at or below the majority rate), and a difference between two below-chance numbers is not "
                   f"a reduction of signal.")
    elif diff < -SPREAD_FACTOR * spread:
        below = "; on D(Φ) it falls below the majority rate" if d_phi < 0 else ""
        out.append(f"Artifact reduction measured: {base}, a drop of {100 * -diff:.1f} points beyond that "
                   f"spread{below}.")
    elif diff > SPREAD_FACTOR * spread:
        out.append(f"No artifact reduction: {base}; D(Φ) is easier for this probe than a random subset.")
    else:
        seen = {"pair": "the pair", "hypothesis": "the hypothesis", "premise": "the premise"}.get(phi_view, phi_view)
        why = f"; Φ saw {seen}, the probe only {probe_side}" if seen != probe_side else ""
        out.append(f"No measurable artifact reduction for this probe: {base}, within that spread{why}.")
    return [s for s in out if s]


def _signal_on_d(d: dict[str, Any], probe: dict[str, Any]) -> str:
    """The sentence that ends the verdict when the probe has no signal on D itself ("" when it has): its Δ over
    the majority rate on D must exceed twice its standard deviation across folds (at least MIN_SPREAD). Below
    minus that, the probe is misled (texts that recur with other labels on both sides of its folds); within
    it, D gives the probe nothing that filtering could remove, and a change on D(Φ) measures no reduction."""
    acc, maj = _num(d.get("accuracy")), _num(d.get("majority"))
    if d.get("skipped") or acc is None or maj is None:
        return ""
    delta = acc - maj
    spread = max(_num(d.get("accuracy_std")) or 0.0, MIN_SPREAD)
    if delta > SPREAD_FACTOR * spread:
        return ""
    figures = (f"on D itself it scores {100 * acc:.1f}% against a majority rate of {100 * maj:.1f}% (Δ {_pts(delta)} "
               f"points; its spread across folds ±{100 * spread:.1f})")
    if delta < -SPREAD_FACTOR * spread:
        groups = str(probe.get("groups") or "none")
        grouped = f" even with folds grouped by {groups}" if groups != "none" else ""
        return (f"No artifact reduction can be measured with this probe: {figures}, below the majority rate by more "
                f"than twice that spread: texts that recur with other labels (e.g. counterfactual twins) sit on both "
                f"sides of its folds{grouped}; group them together (--groups twins, or --groups COLUMN with a "
                f"family id) and run again.")
    return (f"No artifact reduction can be measured with this probe: {figures}, within twice that spread of the "
            f"majority rate, so D gives it no signal that filtering could remove.")


def explain_verdict(res: dict[str, Any]) -> list[str]:
    """``aflite explain``: token artifacts significant on D(Φ) against same-size random subsets of D (judged against
    the subsets' spread), and cleanlab's label-issue count against the same measure with the labels permuted
    (chance): within twice the permutations' spread or at CHANCE_CLOSE of it and above, the flags are the models'
    blind spots; under CHANCE_HALF of it, label-error candidates."""
    out: list[str] = []
    sig = res.get("significant_tokens") or {}
    full, kept, rand = _num(sig.get("full")), _num(sig.get("kept")), _num(sig.get("random"))
    per_seed = [v for v in (_num(x) for x in res.get("significant_tokens_random_per_seed") or []) if v is not None]
    if full is not None and kept is not None and rand is not None:
        mean = sum(per_seed) / len(per_seed) if per_seed else rand
        sd = (sum((v - mean) ** 2 for v in per_seed) / len(per_seed)) ** 0.5 if per_seed else 0.0
        spread = max(sd, 0.5)  # counts: at least half a pair
        if kept < rand - SPREAD_FACTOR * spread:
            judged = "fewer than a random cut of the same size leaves, beyond the subsets' spread"
        elif kept > rand + SPREAD_FACTOR * spread:
            judged = "more than a random cut of the same size leaves: the filter did not target them"
        else:
            judged = "as many as a random cut of the same size leaves, within the subsets' spread"
        out.append(f"On the {res.get('token_view') or 'text'}, {full:.0f} (token, label) pair(s) are significant "
                   f"artifacts on D and {kept:.0f} on D(Φ), against {rand:.1f} (±{sd:.1f}) on same-size random "
                   f"subsets of D: {judged}.")
    li = res.get("label_issues") or {}
    n, rows, sh = _num(li.get("n")), _num(li.get("rows")), li.get("shuffled_labels") or {}
    s_mean, s_sd = _num(sh.get("mean")), _num(sh.get("std")) or 0.0
    if li.get("skipped") is None and n is not None and rows and s_mean is not None:
        spread = max(s_sd, 0.5)
        pct = f"{n:,.0f} of {rows:,.0f} rows ({100 * n / rows:.0f}%)"
        against = (f"against {s_mean:,.1f} ({100 * s_mean / rows:.0f}%) with the labels permuted, the count when "
                   f"labels carry no information for Φ's models")
        ratio = n / s_mean if s_mean > 0 else 0.0
        if n >= s_mean - SPREAD_FACTOR * spread or ratio >= CHANCE_CLOSE:
            reading = ("close to that chance count, so the flags mark rows Φ's models cannot predict (e.g. texts that "
                       "recur with other labels), not label errors one can tell apart")
        elif ratio >= CHANCE_HALF:
            reading = ("below that chance count but not far: read the flags as rows the models find hard, among which "
                       "label errors may be")
        else:
            reading = ("well under half that chance count: the flagged rows disagree with a pattern the models "
                       "learned, candidates worth reading as label errors")
        out.append(f"Confident learning flags {pct} as possible label errors, {against}: {reading}.")
    return out[:3]


def filter_verdict(summary: dict[str, Any]) -> list[str]:
    """``aflite filter``: sizes and stop; it reads features only, so it says where the effect is measured."""
    first = _kept(summary) + _shift(summary)
    return [s for s in (first, "No probe ran here (aflite filter sees features, not text): measure the effect "
                               "with `aflite evaluate` or `aflite audit --compare` on this run.") if s]


def evaluate_verdict(body: dict[str, Any]) -> list[str]:
    """``aflite evaluate``: per model, accuracy after training on D(Φ) against same-size random subsets of D (the
    baseline), on D's held-out part (or the first test set), judged against the random subsets' seed spread.
    Models marked ``not_trained`` are left out and counted."""
    sets = body.get("training_sets") or []
    agg = body.get("aggregate") or {}
    filtered = [s["name"] for s in sets if s.get("kind") == "filtered"]
    out: list[str] = []
    skipped = sorted({m for m, per in agg.items() for e in per.values() if isinstance(e, dict)
                      and e.get("not_trained")})
    for fname in filtered[:2]:
        run = next((s.get("run") for s in sets if s["name"] == fname), None)
        rname = next((s["name"] for s in sets if s.get("kind") == "random" and s.get("run") == run), None)
        if rname is None:
            continue
        lower = within = higher = 0
        diffs: list[float] = []
        where = ""
        for model, per in agg.items():
            if model in skipped:
                continue
            e_f, e_r = per.get(fname), per.get(rname)
            if not e_f or not e_r:
                continue
            a_f, a_r, where = _score(e_f), _score(e_r), _where(e_f)
            if a_f is None or a_r is None:
                continue
            diff = a_f[0] - a_r[0]
            spread = max(a_r[1], MIN_SPREAD)
            diffs.append(diff)
            if diff < -SPREAD_FACTOR * spread:
                lower += 1
            elif diff > SPREAD_FACTOR * spread:
                higher += 1
            else:
                within += 1
        if not diffs:
            continue
        n = len(diffs)
        out.append(f"Trained on {fname} instead of same-size random subsets of D, {n} model(s) changed accuracy on "
                   f"{where} by {_pts(min(diffs))} to {_pts(max(diffs))} points: {lower} lower beyond the random "
                   f"subsets' seed spread, {within} within it, {higher} higher.")
    if out:
        out.append("Lower means the filter removed instances these models relied on; within the spread means no "
                   "measurable effect on them.")
    if skipped:
        out.append(f"Not counted: {', '.join(skipped)} (not trained: see the tables).")
    return out


def _where(entry: dict[str, Any]) -> str:
    if "original_heldout" in entry:
        return "D's held-out part"
    tests = entry.get("tests") or {}
    return f"the test set {next(iter(tests))}" if tests else "the held-out part"


def _score(entry: dict[str, Any]) -> tuple[float, float] | None:
    """(mean, std) accuracy on D's held-out part, else on the first separate test set."""
    acc: Any = entry.get("original_heldout")
    if acc is None:
        tests: dict[str, Any] = entry.get("tests") or {}
        first: dict[str, Any] = next(iter(tests.values()), {})
        acc = first.get("accuracy")
    if not isinstance(acc, dict):
        return None
    mean, std = _num(acc.get("mean")), _num(acc.get("std")) or 0.0
    return None if mean is None else (mean, std)


def audit_verdict(metrics: dict[str, Any]) -> list[str]:
    """``aflite audit``: per audited set, the single-sentence (biased) model against the majority rate, reconciled
    with the strongest token association and with PECO against its shuffled-label null."""
    out: list[str] = []
    results = metrics.get("results") or []
    for r in results[:2]:
        views = r.get("views") or {}
        view = "hypothesis" if "hypothesis" in views else next(iter(views), None)
        if view is None:
            continue
        v = views[view]
        acc, maj, dm = _num(v.get("biased_accuracy")), _num(v.get("majority_accuracy")), _num(v.get("delta_maj"))
        if acc is None or maj is None or dm is None:
            continue
        side = {"hypothesis": "hypothesis-only", "premise": "premise-only"}.get(view, f"{view}-only")
        s = (f"On {r.get('name', 'D')}, the {side} model scores {100 * acc:.1f}% against a majority rate of "
             f"{100 * maj:.1f}% (Δ {_pts(dm)} points)")
        tok = _strongest_token(v.get("token_artifacts") or {})
        null_mean, p = _num(v.get("peco_null_mean")), _num(v.get("peco_p_value"))
        peco = _num(v.get("peco"))
        parts = []
        if tok is not None:
            word, label, z, count = tok
            if dm < 0.02:
                parts.append(f"strong single tokens exist ('{word}' → {label}, z = {z:.0f}, {count} rows) but "
                             f"cover too few rows to beat the majority guess overall")
            else:
                parts.append(f"the strongest single token is '{word}' → {label} (z = {z:.0f}, {count} rows)")
        if peco is not None and null_mean is not None and p is not None:
            ratio = f"{peco / null_mean:.1f}× " if null_mean > 0 else ""
            if p <= PECO_P:
                parts.append(f"PECO {peco:.3f} is {ratio}its shuffled-label null ({null_mean:.3f}, p = {p:.2f}): "
                             f"label-skewed regions exist in embedding space even where a linear model finds "
                             f"little")
            else:
                parts.append(f"PECO {peco:.3f} is within its shuffled-label null ({null_mean:.3f}, p = {p:.2f})")
        out.append(s + ("; " + "; ".join(parts) if parts else "") + ".")
    if len(results) >= 2:
        views0, views1 = results[0].get("views") or {}, results[1].get("views") or {}
        view = "hypothesis" if "hypothesis" in views0 else next(iter(views0), None)
        if view and view in views1:
            d0, d1 = _num(views0[view].get("delta_maj")), _num(views1[view].get("delta_maj"))
            if d0 is not None and d1 is not None:
                change = "fell" if d1 < d0 else "did not fall"
                out.append(f"From {results[0].get('name')} to {results[1].get('name')} the {view}-only Δ over the "
                           f"majority {change} ({_pts(d0)} → {_pts(d1)} points; a single audit has no seed spread, "
                           f"so treat changes under ~2 points as noise).")
    return out[:3]


def _strongest_token(artifacts: dict[str, Any]) -> tuple[str, str, float, int] | None:
    best = None
    for label, rows in artifacts.items():
        for t in rows or []:
            z = _num(t.get("z"))
            if z is not None and z >= STRONG_Z and (best is None or z > best[2]):
                best = (str(t.get("token")), str(label), z, int(t.get("count") or 0))
    return best


def synthetic_verdict(obj: dict[str, Any]) -> list[str]:
    """``aflite synthetic``: per separation, the share of planted (biased) instances before and after filtering
    and the models' accuracy on D against D(Φ), judged against the spread over seeds."""
    out: list[str] = []
    for sep, s in (obj.get("summary") or {}).items():
        before, after = s.get("biased_fraction_before") or {}, s.get("biased_fraction_after") or {}
        b, a = _num(before.get("mean")), _num(after.get("mean"))
        if b is None or a is None:
            continue
        spread = max(_num(after.get("std")) or 0.0, _num(before.get("std")) or 0.0, MIN_SPREAD)
        judged = ("beyond" if b - a > SPREAD_FACTOR * spread else "within")
        acc_d = [_num(v.get("mean")) for v in (s.get("accuracy_D") or {}).values()]
        acc_f = [_num(v.get("mean")) for v in (s.get("accuracy_filtered") or {}).values()]
        pairs = [(x, y) for x, y in zip(acc_d, acc_f, strict=False) if x is not None and y is not None]
        acc = ""
        if pairs:
            mean_d = sum(x for x, _ in pairs) / len(pairs)
            mean_f = sum(y for _, y in pairs) / len(pairs)
            acc = f"; the models' mean accuracy went from {100 * mean_d:.1f}% on D to {100 * mean_f:.1f}% on D(Φ)"
        out.append(f"Separation {sep}: AFLite lowered the share of planted (biased) instances from {100 * b:.1f}% to "
                   f"{100 * a:.1f}% over {s.get('n_runs')} seed(s), {judged} the seed spread (±{100 * spread:.1f})"
                   f"{acc}.")
    return out[:3]
