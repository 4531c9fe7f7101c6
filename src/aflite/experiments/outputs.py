"""The files the synthetic experiment writes into its ``out`` folder, the same from Python as from
``aflite synthetic``: ``results.json`` (the envelope of :mod:`aflite.rundir.results` and every figure), ``summary.md``,
its table and Figure 2; each written once by :class:`aflite.rundir.folder.RunFolder`
from the experiment's :class:`~aflite.rundir.results.Result`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from aflite.atomic import JSON, write_text
from aflite.experiments.synthetic import SyntheticExperiment, format_table, plot_figure2
from aflite.rundir.folder import RunFolder, claims
from aflite.rundir.results import Result
from aflite.verdict import MIN_SPREAD, SPREAD_FACTOR, markdown, number

__all__ = ["SyntheticResult", "save_synthetic", "synthetic_json", "synthetic_verdict"]


def synthetic_json(result: SyntheticExperiment) -> JSON:
    """The synthetic experiment's figures as JSON, opened by its verdict (:func:`synthetic_verdict`)."""
    obj = result.to_json()
    return {"verdict": synthetic_verdict(obj), **obj}


@dataclass(repr=False)  # Result.__repr__: one line, not the arrays
class SyntheticResult(Result):
    """A :class:`aflite.experiments.synthetic.SyntheticExperiment` as a folder: table.txt and figure2.png besides the
    last files."""

    command: ClassVar[str] = "synthetic"
    out: Path
    result: SyntheticExperiment
    run_seed: int | None = None

    @property
    def seed(self) -> Any:
        return self.run_seed

    def to_json(self) -> JSON:
        return synthetic_json(self.result)

    def summary_md(self) -> str:
        return ("# aflite synthetic\n\n" + markdown(self.verdict_sentences()) + "```\n" + format_table(self.result)
                + "```\n")

    def write_files(self, out: Path) -> None:
        write_text(out / "table.txt", format_table(self.result))
        plot_figure2(self.result, out / "figure2.png")


@claims("synthetic")  # a path given as out is claimed as the CLI claims --out
def save_synthetic(result: SyntheticExperiment, out: str | os.PathLike[str] | RunFolder, *, seed: int | None = None,
                   overwrite: bool = False) -> Path:
    """``out/table.txt``, ``out/summary.md``, ``out/results.json`` and ``out/figure2.png`` of a
    :class:`aflite.experiments.synthetic.SyntheticExperiment`; returns the folder's path."""
    folder = RunFolder.of(out, "synthetic")
    folder.finish(SyntheticResult(folder.path, result, seed))
    return folder.path


def synthetic_verdict(obj: JSON) -> list[str]:
    """``aflite synthetic``: per separation (every one the run made, so that none is silently left out), the share
    of planted (biased) instances before and after filtering, judged against the spread over seeds, and the models'
    dev accuracy on D against D(Φ). The shares are fractions (shown ×100); the accuracies are already percentages,
    as :func:`aflite.experiments.synthetic.format_table` prints them."""
    out: list[str] = []
    for sep, s in (obj.get("summary") or {}).items():
        before, after = s.get("biased_fraction_before") or {}, s.get("biased_fraction_after") or {}
        b, a = number(before.get("mean")), number(after.get("mean"))
        if b is None or a is None:
            continue
        spread = max(number(after.get("std")) or 0.0, number(before.get("std")) or 0.0, MIN_SPREAD)
        judged = ("beyond" if b - a > SPREAD_FACTOR * spread else "within")
        acc = _accuracy_clause(s.get("accuracy_D") or {}, s.get("accuracy_filtered") or {})
        out.append(f"Separation {sep}: AFLite lowered the share of planted (biased) instances from {100 * b:.1f}% to "
                   f"{100 * a:.1f}% over {s.get('n_runs')} seed(s), {judged} the seed spread (±{100 * spread:.1f})"
                   f"{acc}.")
    return out


def _accuracy_clause(acc_d: JSON, acc_f: JSON) -> str:
    """The models' mean dev accuracy (in %, as the summary holds it) on D and on D(Φ), over the models that have
    both; empty when none has."""
    pairs = [(x, y) for x, y in ((number((acc_d.get(m) or {}).get("mean")), number((acc_f.get(m) or {}).get("mean")))
                                 for m in acc_d) if x is not None and y is not None]
    if not pairs:
        return ""
    mean_d = sum(x for x, _ in pairs) / len(pairs)
    mean_f = sum(y for _, y in pairs) / len(pairs)
    return f"; the models' mean dev accuracy went from {mean_d:.1f}% on D to {mean_f:.1f}% on D(Φ)"
