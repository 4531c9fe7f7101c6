"""The readable accounts of a run (``summary.md`` of ``aflite run`` / ``aflite demo`` and of ``aflite filter``) and
their verdicts: sizes, parameters, label shift, the probe, examples; kept apart from :mod:`aflite.commands.run` and
:mod:`aflite.commands.filter`, which compute them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from aflite.atomic import JsonValue
from aflite.report import shorten
from aflite.report.pages import pick_examples, probe_rows
from aflite.rundir.schema import LabelShift, ProbeRecord, ProbeRow, RunBody
from aflite.verdict import MIN_SPREAD, SPREAD_FACTOR, markdown, number, phases_text, points


def render_filter_summary(body: RunBody) -> str:
    """The readable account of ``aflite filter``: sizes, parameters, stop reason and label counts."""
    p = body.parameters
    lines = [
        f"# aflite filter: {(body.inputs or {}).get('features', '')}",
        "",
        *([markdown(body.verdict).rstrip("\n"), ""] if body.verdict else []),
        f"- |D| = {body.size_before} → |D(Φ)| = {body.size_after} after "
        f"{phases_text(body.n_iterations)}; stopped because {body.stop_reason}",
        f"- parameters: m={p.n_partitions}, t={p.train_size}, k={p.slice_size}, n={p.target_size}, "
        f"τ={p.threshold}, strategy {p.strategy}, model {p.model}, C={p.C}, seed {p.random_state}",
        PAGE_LINE,
        "",
        "| label | before | after | kept % |",
        "|---|---|---|---|",
    ]
    for lab, before in body.label_counts_before.items():
        after = body.label_counts_after.get(lab, 0)
        lines.append(f"| {_md(str(lab))} | {before} | {after} | {100 * after / max(before, 1):.1f} |")
    return "\n".join(lines) + "\n"


PROBE_MEANING = (
    "A probe that always answers the most frequent label scores the majority rate of the rows it is tested on, so "
    "raw accuracy is not leakage: Δ = accuracy − majority rate of the same rows is what the text adds over that "
    "guess. AFLite worked when Δ on D(Φ) is below Δ on random subsets of the same size, and only if the probe has "
    "signal on D itself (Δ on D above twice its spread across folds); near 0 means the probe finds no more signal "
    "than the label frequencies, and below 0 that texts recurring with other labels mislead it across its folds."
)
PAGE_LINE = ("- every row (sortable, filterable, searchable) and the plots: [report.html](report.html), one offline "
             "page beside this file")


def render_summary(body: RunBody, ds: Any, rows: np.ndarray, p_all: np.ndarray, keep: np.ndarray,
                   per_label: int = 2) -> str:
    """A short human-readable account: sizes, parameters, label shift, probe, and examples (as Table 9)."""
    p, f = body.parameters, body.featurizer
    assert f is not None and body.scaled_defaults is not None  # a run's body has them (RunBody.required_by)
    lines = [
        f"# aflite run: {body.title or body.dataset}",
        "",
        *([markdown(body.verdict).rstrip("\n"), ""] if body.verdict else []),
        f"- Φ: `{f.name}` ({f.dim} dims), view `{f.view}`"
        + (f"; warm-up slice of {body.warmup_rows} rows trained Φ and was discarded" if body.warmup_rows
           else "") + warmup_line(f.info.to_json() if f.info is not None else {}, "; "),
        f"- |D| = {body.dataset_size}, filtered input {p.dataset_size}, |D(Φ)| = {body.size_after}"
        f" after {phases_text(body.n_iterations)}; stopped because {body.stop_reason}",
        *_empty_lines(body),
        f"- parameters: m={p.n_partitions}, t={p.train_size}, k={p.slice_size}, n={p.target_size}, "
        f"τ={p.threshold}, strategy {p.strategy}, seed {p.random_state} (defaults: Table 8 SNLI scaled by "
        f"{body.scaled_defaults['scale']:.4f})",
        PAGE_LINE,
        "",
        "| label | before | after | kept % | share before % | share after % | Δ share (points) |",
        "|---|---|---|---|---|---|---|",
    ]
    shift = body.label_shift or LabelShift.between(body.label_counts_before, body.label_counts_after)
    for lab, before in body.label_counts_before.items():
        after = body.label_counts_after.get(lab, 0)
        lines.append(f"| {_md(str(lab), 60)} | {before} | {after} | {100 * after / max(before, 1):.1f} | "
                     f"{shift.shares_before[lab]:.1f} | {shift.shares_after[lab]:.1f} | "
                     f"{shift.change_points[lab]:+.1f} |")
    if shift.warning:
        lines += ["", f"**Warning:** {shift.warning}."]
    if (pr := body.partial_input_probe) is not None:
        lines += ["", f"Partial-input probe: {pr.model or 'TF-IDF logistic regression'}", "",
                  "| training set | size | accuracy | majority rate (same rows) | Δ over majority |",
                  "|---|---|---|---|---|"]
        lines += ["| " + " | ".join(row) + " |" for row in probe_rows(pr)]  # as the page shows them
        lines += ["", PROBE_MEANING]
    if body.timings is not None:
        lines += ["", "Timings: " + ", ".join(f"{k} {v:.1f}" for k, v in body.timings.items())]

    labels = ds.labels[rows]

    def table(title: str, idx: np.ndarray) -> list[str]:
        out = ["", f"## {title}", "", "| premise | hypothesis | label | p̃ |", "|---|---|---|---|"]
        for i in idx:
            r = rows[i]
            prem = ds.texts_a[r]
            hyp = ds.texts_b[r] if ds.texts_b is not None else ""
            out.append(f"| {_md(prem)} | {_md(hyp)} | {_md(str(labels[i]))} | {p_all[i]:.2f} |")
        return out

    removed_pick, kept_pick = pick_examples(labels, keep, p_all, per_label)  # the rows the page shows too
    lines += table("Removed by AFLite (most predictable, per label)", np.array(removed_pick, dtype=int))
    lines += table("Retained by AFLite (least predictable, per label)", np.array(kept_pick, dtype=int))
    return "\n".join(lines) + "\n"


def _empty_lines(body: RunBody) -> list[str]:
    """The load's count of empty texts (#34): on screen it is a warning that scrolls away, so the summary keeps it."""
    n = body.dataset_size or 0
    return [f"- **empty texts:** {k:,} of {n:,} rows have an empty {c!r} text (featurized as empty: nothing for Φ to "
            "read there)" for c, k in (body.empty_texts_at_load or {}).items() if k]


def warmup_line(info: Mapping[str, JsonValue], lead: str = "") -> str:
    """The warm-up's loss in words (start → end over its steps, against chance), or "" without a warm-up."""
    if "warmup_loss_start" not in info:
        return ""
    verdict = ("it fell: fine-tuning moved Φ" if info["warmup_loss_judgement"] == "fell" else
               "it barely moved: Φ is close to the frozen encoder (more rows or steps would be needed)")
    return (f"{lead}warm-up loss {info['warmup_loss_start']:.3f} → {info['warmup_loss_end']:.3f} over "
            f"{info.get('warmup_steps')} steps (chance ln K = {info['warmup_loss_chance']:.3f}): {verdict}")


def _md(text: str, limit: int = 300) -> str:
    """Dataset text in a Markdown table cell: shortened, on one line, and plain: the text as written (``isn't``,
    not ``isn&#x27;t``), with Markdown's backslash escapes for what a renderer would otherwise read as HTML or as
    a cell border (``<``, ``>``, ``&``, ``|``). HTML escaping belongs to the HTML pages only."""
    out = shorten(text, limit).replace("\\", "\\\\")
    for ch in "<>&|":
        out = out.replace(ch, "\\" + ch)
    return out.replace("\r", " ").replace("\n", " ")


def _kept(body: RunBody) -> str:
    before, after = body.size_before, body.size_after
    if not before:
        return ""
    return (f"AFLite kept {after:,} of {before:,} rows ({100 * after / before:.0f}%) in "
            f"{phases_text(body.n_iterations)} and stopped because {body.stop_reason}.")


def _shift(body: RunBody) -> str:
    moves = body.label_shift.change_points if body.label_shift is not None else {}
    if not moves:
        return ""
    worst = max(moves, key=lambda k: abs(moves[k]))
    return (f" The largest class-share move was {moves[worst]:+.1f} points ({worst}), so compare accuracies over the "
            f"majority rate, not raw.") if abs(moves[worst]) > 1.0 else ""



def run_verdict(body: RunBody) -> list[str]:
    """``aflite run`` / ``demo``: sizes and stop, then the hypothesis-only probe on D(Φ) against same-size random
    subsets of D (Δ over the majority rate of the same rows), judged against the random subsets' spread.

    A reduction is claimed only where there was something to reduce: the probe must find signal on D itself (Δ on
    D above twice its spread across folds, :func:`_signal_on_d`), and the random subsets must keep some (Δ > 0):
    a difference between two numbers at or below the majority rate is not a reduction of signal."""
    out = [_kept(body) + _shift(body)]
    probe = body.partial_input_probe
    phi_view = body.featurizer.view if body.featurizer is not None else "pair"
    probe_side = "the hypothesis" if probe is None or "hypothesis" in (probe.model or "hypothesis") else "the text"
    if probe is None:
        return [s for s in out if s]
    if probe.skipped:
        out.append(f"The partial-input probe was not run: {probe.skipped}.")
        return [s for s in out if s]
    rows = {r.name: r for r in probe.results}
    dphi = rows.get("D(Φ)")
    rand = next((r for n, r in rows.items() if n.startswith("random subset")), None)
    if not dphi or not rand:
        return [s for s in out if s]
    if dphi.skipped or rand.skipped:
        out.append(f"The probe could not be compared on D(Φ) and random subsets: {dphi.skipped or rand.skipped}.")
        return [s for s in out if s]
    no_signal = _signal_on_d(rows.get("D"), probe)
    if no_signal:
        out.append(no_signal)
        return [s for s in out if s]
    a_d, m_d = number(dphi.accuracy), number(dphi.majority)
    a_r, m_r = number(rand.accuracy), number(rand.majority)
    if a_d is None or m_d is None or a_r is None or m_r is None:
        return [s for s in out if s]
    d_phi, d_rand = a_d - m_d, a_r - m_r
    spread = max(number(rand.accuracy_std) or 0.0, MIN_SPREAD)
    diff = d_phi - d_rand
    base = (f"the probe's Δ over the majority rate is {points(d_phi)} points on D(Φ) against {points(d_rand)} on "
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


def _signal_on_d(d: ProbeRow | None, probe: ProbeRecord) -> str:
    """The sentence that ends the verdict when the probe has no signal on D itself ("" when it has): its Δ over
    the majority rate on D must exceed twice its standard deviation across folds (at least MIN_SPREAD). Below
    minus that, the probe is misled (texts that recur with other labels on both sides of its folds); within
    it, D gives the probe nothing that filtering could remove, and a change on D(Φ) measures no reduction."""
    acc, maj = (None, None) if d is None else (number(d.accuracy), number(d.majority))
    if d is None or d.skipped or acc is None or maj is None:
        return ""
    delta = acc - maj
    spread = max(number(d.accuracy_std) or 0.0, MIN_SPREAD)
    if delta > SPREAD_FACTOR * spread:
        return ""
    figures = (f"on D itself it scores {100 * acc:.1f}% against a majority rate of {100 * maj:.1f}% (Δ {points(delta)} "
               f"points; its spread across folds ±{100 * spread:.1f})")
    if delta < -SPREAD_FACTOR * spread:
        groups = probe.groups or "none"
        grouped = f" even with folds grouped by {groups}" if groups != "none" else ""
        return (f"No artifact reduction can be measured with this probe: {figures}, below the majority rate by more "
                f"than twice that spread: texts that recur with other labels (e.g. counterfactual twins) sit on both "
                f"sides of its folds{grouped}; group them together (--groups twins, or --groups COLUMN with a "
                f"family id) and run again.")
    return (f"No artifact reduction can be measured with this probe: {figures}, within twice that spread of the "
            f"majority rate, so D gives it no signal that filtering could remove.")


def filter_verdict(body: RunBody) -> list[str]:
    """``aflite filter``: sizes and stop; it reads features only, so it says where the effect is measured."""
    first = _kept(body) + _shift(body)
    return [s for s in (first, "No probe ran here (aflite filter sees features, not text): measure the effect "
                               "with `aflite evaluate` or `aflite audit --compare` on this run.") if s]
