"""The files the synthetic experiment writes into its ``out`` folder, the same from Python as from
``aflite synthetic``: ``results.json`` (the envelope of :mod:`aflite.rundir.results` and every figure), ``summary.md``,
its table and Figure 2; each written once by :class:`aflite.rundir.folder.RunFolder`
from the experiment's :class:`~aflite.rundir.results.Result`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from aflite.atomic import atomic_open, write_text
from aflite.errors import ParameterError
from aflite.experiments.synthetic import Figure2Panel, SyntheticExperiment, _acc, format_table
from aflite.features.base import JsonValue
from aflite.rundir.folder import RunFolder, claims
from aflite.rundir.results import Result
from aflite.verdict import MIN_SPREAD, SPREAD_FACTOR, markdown, number

__all__ = ["SyntheticResult", "plot_figure2", "save_synthetic", "synthetic_json", "synthetic_verdict"]


def synthetic_json(result: SyntheticExperiment) -> dict[str, JsonValue]:
    """The synthetic experiment's figures as JSON, opened by its verdict (:func:`synthetic_verdict`)."""
    obj = result.to_json()
    verdict: list[JsonValue] = [*synthetic_verdict(obj)]
    return {"verdict": verdict, **obj}


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

    def to_json(self) -> dict[str, JsonValue]:
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


def synthetic_verdict(obj: dict[str, JsonValue]) -> list[str]:
    """``aflite synthetic``: per separation (every one the run made, so that none is silently left out), the share
    of planted (biased) instances before and after filtering, judged against the spread over seeds, and the models'
    dev accuracy on D against D(Φ). The shares are fractions (shown ×100); the accuracies are already percentages,
    as :func:`aflite.experiments.synthetic.format_table` prints them."""
    out: list[str] = []
    for sep, figures in _obj(obj.get("summary")).items():
        s = _obj(figures)
        before, after = _obj(s.get("biased_fraction_before")), _obj(s.get("biased_fraction_after"))
        b, a = number(before.get("mean")), number(after.get("mean"))
        if b is None or a is None:
            continue
        spread = max(number(after.get("std")) or 0.0, number(before.get("std")) or 0.0, MIN_SPREAD)
        judged = ("beyond" if b - a > SPREAD_FACTOR * spread else "within")
        acc = _accuracy_clause(_obj(s.get("accuracy_D")), _obj(s.get("accuracy_filtered")))
        out.append(f"Separation {sep}: AFLite lowered the share of planted (biased) instances from {100 * b:.1f}% to "
                   f"{100 * a:.1f}% over {s.get('n_runs')} seed(s), {judged} the seed spread (±{100 * spread:.1f})"
                   f"{acc}.")
    return out


def _obj(value: JsonValue | None) -> dict[str, JsonValue]:
    """``value`` when it is a JSON object, else empty (a figure the run did not make)."""
    return value if isinstance(value, dict) else {}


def _accuracy_clause(acc_d: dict[str, JsonValue], acc_f: dict[str, JsonValue]) -> str:
    """The models' mean dev accuracy (in %, as the summary holds it) on D and on D(Φ), over the models that have
    both; empty when none has."""
    pairs = [(x, y) for x, y in ((number(_obj(acc_d.get(m)).get("mean")), number(_obj(acc_f.get(m)).get("mean")))
                                 for m in acc_d) if x is not None and y is not None]
    if not pairs:
        return ""
    mean_d = sum(x for x, _ in pairs) / len(pairs)
    mean_f = sum(y for _, y in pairs) / len(pairs)
    return f"; the models' mean dev accuracy went from {mean_d:.1f}% on D to {mean_f:.1f}% on D(Φ)"


def plot_figure2(result_or_panels: SyntheticExperiment | Sequence[Figure2Panel], path: Any) -> None:
    """Figure 2: per separation, the 2-D points before (top) and after AFLite (bottom), coloured by label.

    Captions give that run's LR / SVM dev accuracy; flipped instances are drawn as crosses. The PNG is written
    atomically. Accepts a :class:`SyntheticExperiment` (its first seed per separation) or explicit panels.
    """
    from matplotlib.figure import Figure  # the object API renders with Agg and never touches pyplot's backend

    panels = list(result_or_panels.panels if isinstance(result_or_panels, SyntheticExperiment) else result_or_panels)
    if not panels:
        raise ParameterError("nothing to plot: no panels")
    ncol = len(panels)
    fig = Figure(figsize=(3.2 * ncol, 7.4), dpi=110, layout="constrained")
    axes = fig.subplots(2, ncol, squeeze=False)
    colours = np.array(["tab:blue", "tab:orange"])
    lim = max(1.0, float(np.abs(np.concatenate([p.coords for p in panels])).max()) * 1.02)
    for j, panel in enumerate(panels):
        for row, (mask, acc, name) in enumerate((
            (np.ones(len(panel.y), dtype=bool), panel.accuracy_D, "D"),
            (panel.keep, panel.accuracy_filtered, "D(Φ)"),
        )):
            ax = axes[row, j]
            for flipped, marker in ((False, "o"), (True, "x")):
                sel = mask & (panel.flipped == flipped)
                if sel.any():
                    ax.scatter(panel.coords[sel, 0], panel.coords[sel, 1], c=colours[panel.y[sel] % 2], s=6 if
                               not flipped else 14, marker=marker, linewidths=0.0 if not flipped else 0.9, alpha=0.8)
            ax.set_xlim(-lim, lim)
            ax.set_ylim(-lim, lim)
            ax.set_aspect("equal")
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0:
                ax.set_title(f"separation {panel.separation:g}", fontsize=10)
            ax.set_xlabel(f"{name}, |{name}| = {int(mask.sum())}\nLR {_acc(acc, 'lr')}%  SVM {_acc(acc, 'svm')}%",
                          fontsize=9)
    axes[0, 0].set_ylabel("before AFLite")
    axes[1, 0].set_ylabel("after AFLite")
    fig.suptitle("Synthetic biased datasets before (top) and after AFLite (bottom); seed "
                 f"{panels[0].seed}, dev accuracy", fontsize=10)
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png")
