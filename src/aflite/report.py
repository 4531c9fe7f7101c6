"""Self-contained HTML report of a leakage audit: inline CSS, plots as base64 PNG, every dataset string escaped.

The file opens from disk in any browser, with no server, script or network access.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import write_text

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1150px;color:#222;
line-height:1.45;padding:0 16px}
h1{font-size:1.6em;margin-bottom:4px}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:36px}
h3{margin-top:24px}
table{border-collapse:collapse;margin:8px 0 16px 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right;vertical-align:top}
th{background:#f2f2f2}td.l,th.l{text-align:left}
.muted{color:#666;font-size:.9em}.grid{display:flex;flex-wrap:wrap;gap:16px}
.grid>div{flex:1 1 340px;min-width:300px}img{max-width:100%;height:auto;border:1px solid #eee}
.ex{font-size:.9em}.tag{display:inline-block;padding:0 6px;border-radius:3px;background:#eef;margin-right:4px}
"""

_METRIC_ROWS: list[tuple[str, str, str]] = [
    ("biased_accuracy", "Biased-condition accuracy (%)", "pct"),
    ("normal_accuracy", "Normal (full-input) accuracy (%)", "pct"),
    ("majority_accuracy", "Majority-class accuracy (%)", "pct"),
    ("delta_maj", "Δmaj (points)", "pct"),
    ("pct_rr", "%R_R (biased / normal, %)", "pct"),
    ("nba", "NBA (%)", "pct"),
    ("nbr", "NBR (%)", "pct"),
    ("tra", "TRA (%)", "pct"),
    ("peco", "PECO (Σ s_i, eq. 12 from t=0)", "num"),
    ("peco_fraction20", "PECO, Table-4 scale (share of clusters, 20 steps)", "num"),
    ("biased_clusters", "Biased clusters (L2 > threshold)", "int"),
]

_PAPER_SNLI_S2 = {"biased_accuracy": 71.6, "normal_accuracy": 90.6, "majority_accuracy": 33.8, "pct_rr": 79.0,
                  "delta_maj": 37.8, "nba": 70.0, "nbr": 71.8, "tra": 63.9, "peco_fraction20": 0.4}


def esc(value: Any) -> str:
    """HTML-escape any value's text (quotes included)."""
    return html.escape(str(value), quote=True)


def _fmt(value: Any, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if kind == "pct":
        return f"{100 * float(value):.1f}"
    if kind == "int":
        return str(int(value))
    return f"{float(value):.3f}"


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="plot" src="data:image/png;base64,{data}">'


def _figure(width: float = 5.0, height: float = 3.6) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(width, height))


def peco_plot(results: Sequence[Any], view: str) -> str:
    """The count-above-threshold curves of one view, one line per audited dataset."""
    fig, ax = _figure()
    for res in results:
        va = res.views.get(view)
        if va is None:
            continue
        pr = va.peco
        ax.step(pr.curve_t, pr.curve_count, where="post", label=f"{res.name}: PECO {pr.score:.3f}")
        ax.fill_between(pr.curve_t, pr.curve_count, step="post", alpha=0.15)
    ax.set_xlabel("threshold t on cluster divergence s_i")
    ax.set_ylabel("# clusters with s_i > t")
    ax.set_title(f"PECO curve ({view}-only)")
    ax.legend(fontsize=8)
    return _png(fig)


def tsne_plot(res: Any, view: str, threshold: float) -> str:
    va = res.views[view]
    if va.tsne is None:
        return '<p class="muted">(no t-SNE map)</p>'
    pr = va.peco
    fig, ax = _figure(5.2, 4.6)
    rows = va.tsne_rows
    ids = pr.cluster_ids[rows]
    biased = pr.l2[ids] > threshold
    labels = np.asarray(res.labels)[rows]
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:gray"]
    for k, cls in enumerate(pr.classes):
        m = labels == cls
        col = colors[k % len(colors)]
        ax.scatter(va.tsne[m & ~biased, 0], va.tsne[m & ~biased, 1], s=3, alpha=0.35, c=col, linewidths=0)
        ax.scatter(va.tsne[m & biased, 0], va.tsne[m & biased, 1], s=16, alpha=0.8, c=col, marker="x",
                   label=f"{cls} ({int((m & biased).sum())} in biased regions)")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(f"{res.name}: t-SNE of {view} embeddings\nlarge markers: clusters with L2 > {threshold:g}",
                 fontsize=9)
    ax.legend(fontsize=7, loc="best", markerscale=1.2)
    return _png(fig)


def _metrics_table(results: Sequence[Any], view: str, paper: bool) -> str:
    head = "".join(f"<th>{esc(r.name)} (n={r.n:,})</th>" for r in results)
    if paper:
        head += "<th>Paper, SNLI s2 (RoBERTa-large)</th>"
    rows = []
    for key, label, kind in _METRIC_ROWS:
        cells = []
        for r in results:
            d = r.views[view].to_dict() if view in r.views else {}
            cells.append(f"<td>{_fmt(d.get(key), kind)}</td>")
        if paper:
            pv = _PAPER_SNLI_S2.get(key)
            cells.append(f"<td>{'–' if pv is None else esc(pv)}</td>")
        rows.append(f'<tr><th class="l">{esc(label)}</th>{"".join(cells)}</tr>')
    return f'<table><tr><th class="l">metric</th>{head}</tr>{"".join(rows)}</table>'


def _finetuned_table(results: Sequence[Any], view: str) -> str:
    if not any(view in r.views and r.views[view].finetuned for r in results):
        return ""
    keys = [("biased_accuracy", "pct"), ("normal_accuracy", "pct"), ("majority_accuracy", "pct"),
            ("delta_maj", "pct"), ("pct_rr", "pct"), ("nba", "pct"), ("nbr", "pct"), ("n_train", "int"),
            ("n_eval", "int"), ("steps", "int"), ("batch_size", "int")]
    head = "".join(f"<th>{esc(r.name)}</th>" for r in results)
    body = []
    for key, kind in keys:
        cells = "".join(
            f"<td>{_fmt(r.views[view].finetuned.get(key) if view in r.views else None, kind)}</td>" for r in results
        )
        body.append(f'<tr><th class="l">{esc(key)}</th>{cells}</tr>')
    return (
        "<h3>Fine-tuned MiniLM (the TRA models), on a held-out sample</h3>"
        f'<table><tr><th class="l">metric</th>{head}</tr>{"".join(body)}</table>'
    )


def _artifacts_table(arts: dict[str, list[dict[str, Any]]]) -> str:
    parts = []
    for label, rows in arts.items():
        body = "".join(
            f'<tr><td class="l">{esc(r["token"])}</td><td>{r["pmi"]:.2f}</td><td>{r["z"]:.1f}</td>'
            f'<td>{r["count"]:,} / {r["total"]:,}</td><td>{100 * r["label_rate"]:.0f}%</td></tr>'
            for r in rows
        )
        parts.append(
            f"<div><h4>{esc(label)}</h4><table><tr><th class=\"l\">token</th><th>PMI</th><th>z</th>"
            f"<th>with label / all</th><th>label rate</th></tr>{body}</table></div>"
        )
    return f'<div class="grid">{"".join(parts)}</div>'


def _examples(va: Any) -> str:
    items = []
    for ex in va.examples:
        dist = ", ".join(f"{esc(k)} {v:.2f}" for k, v in ex["label_dist"].items())
        sents = "".join(
            f'<li><span class="tag">{esc(s["label"])}</span>{esc(s["text"])}</li>' for s in ex["sentences"]
        )
        items.append(
            f'<li>cluster {ex["cluster"]} — {ex["size"]} sentences, s_i = {ex["divergence"]:.4f}, '
            f'L2 = {ex["l2"]:.3f}; labels: {dist}<ul>{sents}</ul></li>'
        )
    return f'<ul class="ex">{"".join(items)}</ul>'


def render(results: Sequence[Any], title: str = "Label-leakage audit", notes: Sequence[str] = (),
           paper_reference: bool = True) -> str:
    """The whole report as one HTML string. ``results`` are AuditResults (D first, then e.g. D(Φ))."""
    if not results:
        raise ValueError("nothing to render")
    first = results[0]
    cfg = first.config
    views = list(first.views)
    out = [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        "<p class=\"muted\">Single-sentence label leakage (Saxon et al.): how well a model that sees only one "
        "sentence predicts the pair's label, how much it agrees with a full-input model, and whether labels "
        "cluster in the sentence's embedding space (PECO).</p>",
    ]
    for note in notes:
        out.append(f"<p class=\"muted\">{esc(note)}</p>")
    out.append("<h2>Datasets</h2><table><tr><th class=\"l\">dataset</th><th>pairs</th><th class=\"l\">labels</th>"
               "<th>audit time (s)</th></tr>")
    for r in results:
        labels = ", ".join(f"{esc(k)}: {v:,}" for k, v in r.label_counts.items())
        out.append(f"<tr><td class=\"l\">{esc(r.name)}</td><td>{r.n:,}</td><td class=\"l\">{labels}</td>"
                   f"<td>{r.timings.get('total', 0.0):.0f}</td></tr>")
    out.append("</table>")
    out.append(
        "<p class=\"muted\">Models: biased (single sentence) and normal (pair) condition = L2 logistic regression "
        f"on frozen {esc(cfg.featurizer)} features with {cfg.n_folds}-fold out-of-fold predictions (premise groups "
        f"kept within a fold). PECO: {esc(cfg.peco_encoder)} embeddings of the sentence → PCA "
        f"({cfg.n_components}) → k-means (k={cfg.n_clusters}); s_i = mean over classes of squared differences "
        "between the cluster's and the global label distribution; PECO = ∫ #{i: s_i &gt; t} dt from t = 0 (= Σ s_i). "
        f"Biased regions: clusters whose label distribution is at L2 distance &gt; {cfg.bias_threshold:g} from "
        "the global one. "
        + (f"TRA: MiniLM fine-tuned {cfg.tra_steps} steps (batch {cfg.tra_batch_size}) per condition, "
           f"gradient-norm relevance on {cfg.tra_sample} held-out pairs." if cfg.tra else "TRA: not computed.")
        + "</p>"
    )
    paper = paper_reference and "hypothesis" in views
    for view in views:
        cond = "s2, hypothesis only" if view == "hypothesis" else "s1, premise only"
        out.append(f"<h2>{esc(view.capitalize())}-only condition ({esc(cond)})</h2>")
        out.append(_metrics_table(results, view, paper and view == "hypothesis"))
        out.append(_finetuned_table(results, view))
        out.append('<div class="grid"><div>' + peco_plot(results, view) + "</div>")
        for r in results:
            if view in r.views:
                out.append("<div>" + tsne_plot(r, view, cfg.bias_threshold) + "</div>")
        out.append("</div>")
        for r in results:
            if view not in r.views:
                continue
            out.append(f"<h3>{esc(r.name)}: token artifacts ({esc(view)})</h3>")
            out.append("<p class=\"muted\">Per label, the tokens with the highest PMI (add-1 smoothed, log2) "
                       "between token presence and label; z: the z-statistic of the token's label rate against "
                       "the base rate.</p>")
            out.append(_artifacts_table(r.views[view].artifacts))
            out.append(f"<h3>{esc(r.name)}: most label-skewed clusters ({esc(view)})</h3>")
            out.append(_examples(r.views[view]))
    out.append("</body></html>")
    return "\n".join(out)


def write_report(path: str | Path, results: Sequence[Any], **kwargs: Any) -> Path:
    """Render and write the report atomically; returns the path."""
    p = Path(path)
    write_text(p, render(results, **kwargs))
    return p
