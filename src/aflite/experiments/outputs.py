"""The files an experiment writes into its ``out`` folder, the same from Python as from ``aflite synthetic`` /
``aflite bench``: ``results.json`` (the envelope of :mod:`aflite.results` and every figure), ``summary.md``, and
for the synthetic experiment its table and Figure 2."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aflite.atomic import write_text
from aflite.results import write_results_json

__all__ = ["save_synthetic", "save_bench", "synthetic_json"]


def synthetic_json(result: Any) -> dict[str, Any]:
    """The synthetic experiment's figures as JSON, opened by its verdict (:func:`aflite.verdict.synthetic_verdict`)."""
    from aflite.verdict import synthetic_verdict

    obj = result.to_json()
    return {"verdict": synthetic_verdict(obj), **obj}


def save_synthetic(result: Any, out: str | os.PathLike[str], *, seed: int | None = None) -> Path:
    """``out/table.txt``, ``out/summary.md``, ``out/results.json`` and ``out/figure2.png`` of a
    :class:`aflite.experiments.synthetic.SyntheticResult`; returns ``out``."""
    from aflite.experiments.synthetic import format_table, plot_figure2

    out = Path(out)
    table = format_table(result)
    write_text(out / "table.txt", table)
    obj = synthetic_json(result)
    from aflite.verdict import markdown

    write_text(out / "summary.md", "# aflite synthetic\n\n" + markdown(obj["verdict"]) + "```\n" + table + "```\n")
    write_results_json(out, obj, command="synthetic", seed=seed)
    plot_figure2(result, out / "figure2.png")
    return out


def save_bench(res: dict[str, Any], report: str, out: str | os.PathLike[str], *, seed: int | None = None) -> Path:
    """``out/results.json`` and ``out/summary.md`` (the text report) of a benchmark result; returns ``out``."""
    out = Path(out)
    write_results_json(out, res, command="bench", seed=None if res.get("seed") is not None else seed)
    write_text(out / "summary.md", "# aflite bench\n\n```text\n" + report.rstrip("\n") + "\n```\n")
    return out
