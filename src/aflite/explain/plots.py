"""The two pictures of ``aflite explain``: the competency plot and the data map (matplotlib, Agg backend).

Both are drawn from the same numbers the CSVs hold (tokens.csv, instances.csv), so another viewer can redraw them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.atomic import atomic_open
from aflite.check.tokens import TokenStats, bonferroni_curve

__all__ = ["plot_competency", "plot_datamap"]

_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray")


def _save(fig: Any, path: Path) -> None:
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)


def plot_competency(panels: list[tuple[str, TokenStats]], path: Path, label_top: int = 4) -> None:
    """Count (log x) against p̂(label | token), one colour per label, each label's Bonferroni curve drawn
    (p0 + z_crit·sqrt(p0(1−p0)/n)), the ``label_top`` most significant tokens per label written on the plot;
    one panel per set (full D and D(Φ) side by side)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 5.0), sharey=True, squeeze=False)
    labels = sorted({str(c) for _, st in panels for c in st.base_rates})
    for ax, (title, st) in zip(axes[0], panels, strict=True):
        if len(st.count):
            grid = np.geomspace(max(1.0, float(st.count.min())), float(st.count.max()) * 1.05, 200)
        else:
            grid = np.array([1.0, 10.0])
        for li, lab in enumerate(labels):
            col = _COLOURS[li % len(_COLOURS)]
            sel = st.label.astype(str) == lab
            sig = sel & st.significant
            ax.scatter(st.count[sel & ~st.significant], st.p_label[sel & ~st.significant], s=4, alpha=0.25,
                       color=col, linewidths=0, rasterized=True)
            ax.scatter(st.count[sig], st.p_label[sig], s=12, alpha=0.9, color=col, label=f"{lab} ({int(sig.sum())})",
                       linewidths=0)
            p0 = st.base_rates.get(lab, np.nan) if st.p0 == "base" else 1.0 / max(len(st.base_rates), 1)
            ax.plot(grid, np.minimum(bonferroni_curve(p0, st.z_critical, grid), 1.0), color=col, lw=1.2, ls="--")
            idx = np.flatnonzero(sig)
            for i in idx[np.argsort(-st.z[idx], kind="stable")][:label_top]:
                ax.annotate(str(st.token[i]), (st.count[i], st.p_label[i]), fontsize=7, color=col,
                            xytext=(2, 2), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("texts containing the token (log)")
        ax.set_title(f"{title}: {st.n_significant} significant of {st.n_tests} tests", fontsize=10)
        ax.legend(fontsize=7, loc="upper right", title="label (significant)", title_fontsize=7)
    axes[0][0].set_ylabel("p̂(label | token)")
    fig.suptitle(f"Competency test (Gardner et al. 2021): dashed = Bonferroni-significant threshold "
                 f"(z ≥ {panels[0][1].z_critical:.2f})", fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_datamap(variability: NDArray[np.float64], confidence: NDArray[np.float64], correctness: NDArray[np.float64],
                 removed: NDArray[np.bool_], path: Path, max_points: int = 40_000, seed: int = 0) -> None:
    """Variability (x) against confidence (y), coloured by correctness; removed rows drawn as red crosses.
    Large sets are drawn from a seeded sample of ``max_points`` rows (the CSV keeps every row)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = np.flatnonzero(~(np.isnan(variability) | np.isnan(confidence)))
    if len(ok) > max_points:
        ok = np.sort(np.random.default_rng(np.random.SeedSequence([int(seed), 3])).choice(ok, max_points, False))
    fig, ax = plt.subplots(figsize=(6.4, 5.4))
    kept = ok[~removed[ok]]
    gone = ok[removed[ok]]
    sc = ax.scatter(variability[kept], confidence[kept], c=correctness[kept], cmap="viridis", vmin=0, vmax=1, s=3,
                    alpha=0.5, linewidths=0, rasterized=True)
    ax.scatter(variability[gone], confidence[gone], marker="x", color="tab:red", s=6, alpha=0.35, linewidths=0.6,
               label=f"removed by AFLite ({int(removed.sum())})", rasterized=True)
    fig.colorbar(sc, ax=ax, label="correctness (fraction of held-out models right)")
    ax.set_xlabel("variability (std of gold-label probability over held-out models)")
    ax.set_ylabel("confidence (mean gold-label probability)")
    ax.set_title("Data map of the filter's first phase", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
