"""The shared vocabulary of verdicts: two or three plain sentences that say what a command's numbers mean (what
changed, against which baseline, and whether the change is beyond the null or the seed spread).

Every ``summary.md`` starts with them and every ``results.json`` carries them as ``"verdict"`` (a list of
sentences), so that a reader who opens only the first lines learns the answer. Each command's sentences live with
its result (:func:`aflite.commands.summary_md.run_verdict`, :func:`~aflite.commands.summary_md.filter_verdict`,
:func:`aflite.evaluate.tables.evaluate_verdict`, :func:`aflite.audit.results.audit_verdict`,
:func:`aflite.experiments.outputs.synthetic_verdict`) and reads the plain JSON-like dictionary its command writes;
this module holds what they share. A sentence states a comparison only when the numbers for it are there; it never
guesses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["MIN_SPREAD", "SPREAD_FACTOR", "TERMS", "define_terms", "markdown", "number", "phases_text", "points"]

MIN_SPREAD = 0.005  # half a point: the smallest seed spread a difference is judged against
SPREAD_FACTOR = 2.0  # "beyond the spread" = more than twice the baseline's standard deviation


def number(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def points(x: float) -> str:
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


# The symbols a verdict uses, each defined where it first appears (issue #49: the terminal verdict used k, p̃, τ, Φ
# and Δ before any line said what they are): (pattern of its first use, the definition put right after that use).
TERMS: tuple[tuple[str, str], ...] = (
    (r"D\(Φ\)", " (the rows AFLite kept; Φ: the features its models read)"),
    (r"\bk=[\d,]+", " (the most rows one phase removes)"),
    (r"p̃", " (predictability: the share of held-out models that predicted the row's label)"),
    (r"τ=[\d.]+", " (the p̃ a row needs to be removable)"),
    (r"Δ(?: over the majority rate)?", " (accuracy minus the majority-class rate of the same rows)"),
)


def define_terms(sentences: Sequence[str]) -> list[str]:
    """``sentences`` with each symbol of :data:`TERMS` defined at its first use (later uses stay bare), so that a
    reader who sees only the verdict, in the terminal, knows what k, p̃, τ, Φ and Δ mean."""
    out = list(sentences)
    for pattern, definition in TERMS:
        for i, sentence in enumerate(out):
            m = re.search(pattern, sentence)
            if m is not None:
                out[i] = sentence[: m.end()] + definition + sentence[m.end():]
                break
    return out

