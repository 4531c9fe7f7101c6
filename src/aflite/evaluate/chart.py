"""accuracy.png of ``aflite evaluate``: the accuracies of every model on every training set, one panel per test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import atomic_open

__all__ = ["plot_report"]


def plot_report(report: Any, path: Path) -> None:
    """Bar chart of an :class:`aflite.evaluate.EvaluateResult`: own held-out accuracy per model and training set
    (± std), and the test and external sets if any."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    agg = report.aggregate
    models = list(agg)
    cols = list(dict.fromkeys(si["name"] for si in report.training_sets))
    ext_names = [e["name"] for e in report.config["eval_sets"]]
    test_names = [t["name"] for t in report.config.get("tests", [])]
    panels: list[tuple[str, str | None]] = [("own held-out", None)] if report.config.get("split", True) else []
    panels += [(t, "test:" + t) for t in test_names] + [(e, e) for e in ext_names]
    fig, axes = plt.subplots(1, len(panels), figsize=(max(6.0, 1.1 * len(models) * len(panels) + 2), 4.2),
                             squeeze=False)
    width = 0.8 / max(1, len(cols))
    for ax, (title, ext) in zip(axes[0], panels, strict=True):
        for j, c in enumerate(cols):
            means, stds = [], []
            for m in models:
                e = agg[m].get(c, {})
                if ext is None:
                    ms = e.get("own_heldout")
                elif ext.startswith("test:") and ext[5:] in test_names:
                    ms = e.get("tests", {}).get(ext[5:], {}).get("accuracy")
                else:
                    ms = e.get("external", {}).get(ext, {}).get("accuracy")
                means.append(100 * ms["mean"] if ms and ms["mean"] is not None else np.nan)
                stds.append(100 * ms["std"] if ms and ms["std"] is not None else 0.0)
            ax.bar(np.arange(len(models)) + (j - (len(cols) - 1) / 2) * width, means, width, yerr=stds, label=c,
                   capsize=2)
        ax.set_xticks(np.arange(len(models)))
        ax.set_xticklabels(models, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("accuracy (%)")
        ax.set_title(title)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120)
    plt.close(fig)
