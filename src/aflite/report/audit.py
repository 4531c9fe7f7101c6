"""The leakage audit's page content: metrics tables, PECO curves, t-SNE maps (a PNG, and an interactive map
when plotly's bundle is installed), token artifacts and label-skewed clusters, on the shared page frame
(:mod:`aflite.report.frame`); every dataset string escaped.

The file opens from disk in any browser, with no server and no network access.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import write_text
from aflite.check.tokens import TokenRow
from aflite.errors import ParameterError
from aflite.report.frame import esc, json_for_script, page_head, plotly_js, script_text, shorten

_METRIC_ROWS: list[tuple[str, str, str]] = [
    ("majority_accuracy", "Chance: majority-class rate of these rows (%)", "pct"),
    ("biased_accuracy", "Biased-condition accuracy (%)", "pct"),
    ("delta_maj", "  Δmaj: biased − chance (points)", "pct"),
    ("normal_accuracy", "Normal (full-input) accuracy (%)", "pct"),
    ("normal_delta_maj", "  normal − chance (points)", "pct"),
    ("pct_rr", "%R_R (biased / normal, %)", "pct"),
    ("nba", "NBA (%)", "pct"),
    ("nbr", "NBR (%)", "pct"),
    ("tra", "TRA (%)", "pct"),
    ("peco", "PECO (Σ s_i, eq. 12 from t=0)", "num"),
    ("peco_null_mean", "  PECO with labels shuffled: mean of the null", "num"),
    ("peco_null_p95", "  PECO null: 95th percentile", "num"),
    ("peco_excess", "  PECO − null mean (comparable across sizes)", "num"),
    ("peco_p_value", "  permutation p-value", "num"),
    ("peco_fraction20", "PECO, Table-4 scale (share of clusters, 20 steps)", "num"),
    ("biased_clusters", "Biased clusters (L2 > threshold)", "int"),
]


def _paper(biased: float, rr: float, dmaj: float, ours: float, maj: float, nba: float, nbr: float, tra: float,
           peco: float) -> dict[str, float]:
    return {"biased_accuracy": biased, "pct_rr": rr, "delta_maj": dmaj, "normal_accuracy": ours,
            "majority_accuracy": maj, "normal_delta_maj": round(ours - maj, 1), "nba": nba, "nbr": nbr, "tra": tra,
            "peco_fraction20": peco}


# Saxon et al., as printed: Table 3 (Biased, %R_R, Δmaj), Table 2 (Ours = the replication model, Maj.), Table 4
# (NBA, NBR, TRA, PECO); test sets (dev where no labelled test set exists), fine-tuned RoBERTa-large (XNLI:
# XLM-R, OCNLI: bert-base-chinese). ANLI's rounds are left out: their printed "Biased" column disagrees with
# their own Δmaj and %R_R. Keys: the names ``--reference`` takes.
PAPER_REFERENCE: dict[str, tuple[str, dict[str, dict[str, float]]]] = {
    "sick": ("SICK", {"hypothesis": _paper(60.0, 68.3, 4.0, 87.8, 56.0, 48.8, 49.7, 63.6, 0.407)}),
    "snli": ("SNLI", {"hypothesis": _paper(71.6, 79.0, 37.8, 90.6, 33.8, 70.0, 71.8, 63.9, 0.4)}),
    "mnli-b": ("MNLI-b", {"hypothesis": _paper(59.8, 67.4, 24.2, 88.3, 36.5, 32.5, 33.4, 57.6, 0.357)}),
    "mnli-u": ("MNLI-u", {"hypothesis": _paper(60.9, 69.0, 24.4, 88.7, 35.6, 47.5, 48.6, 59.3, 0.371)}),
    "xnli": ("XNLI", {"hypothesis": _paper(55.0, 74.6, 21.7, 73.7, 33.3, 52.3, 54.0, 64.7, 0.366)}),
    "fever": ("FEVER", {"premise": _paper(63.5, 85.0, 30.2, 74.7, 33.3, 39.4, 38.0, 50.7, 0.124)}),
    "anli": ("ANLI", {"hypothesis": _paper(48.2, 89.3, 14.7, 54.0, 33.5, 37.6, 53.4, 28.0, 0.363)}),
    "ocnli": ("OCNLI", {"hypothesis": _paper(61.5, 85.7, 24.7, 71.8, 36.8, 69.0, 74.1, 78.5, 0.457)}),
    "caugnli": ("CAugNLI", {"premise": _paper(41.9, 49.5, 8.0, 84.7, 33.9, 32.9, 32.7, 39.5, 0.051),
                            "hypothesis": _paper(39.0, 46.0, 5.1, 84.7, 33.9, 43.4, 42.5, 59.7, 0.351)}),
    "snli-debiased": ("SNLI-debiased", {
        "premise": _paper(45.3, 45.3, 2.9, 95.6, 35.5, 32.0, 31.8, 41.5, 0.058),
        "hypothesis": _paper(65.3, 68.3, 29.8, 95.6, 35.5, 60.9, 61.4, 58.4, 0.059)}),
    "mnli-debiased": ("MNLI-debiased", {
        "premise": _paper(34.0, 35.6, -2.2, 96.9, 36.2, 34.7, 34.0, 46.7, 0.055),
        "hypothesis": _paper(57.1, 58.9, 20.9, 96.9, 36.2, 42.2, 42.0, 58.0, 0.055)}),
}


def paper_reference(name: str | None) -> tuple[str, dict[str, dict[str, float]]] | None:
    """The paper's rows for a dataset it reports (``snli``, ``mnli-b``, ...), or None for ``None``/``none``."""
    if name is None or name.lower() == "none":
        return None
    ref = PAPER_REFERENCE.get(name.lower())
    if ref is None:
        raise ParameterError(f"no paper reference named {name!r}; choose from none, {', '.join(PAPER_REFERENCE)}")
    return ref


def _fmt(value: Any, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if kind == "pct":
        return f"{100 * float(value):.1f}"
    if kind == "int":
        return str(int(value))
    return f"{float(value):.3f}"


def png_bytes(fig: Any) -> bytes:
    """A matplotlib figure as PNG bytes (the figure is closed)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _png(fig: Any) -> str:
    data = base64.b64encode(png_bytes(fig)).decode("ascii")
    return f'<img alt="plot" src="data:image/png;base64,{data}">'


def _figure(width: float = 5.0, height: float = 3.6) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(width, height))


def peco_plot(results: Sequence[Any], view: str, what: str | None = None) -> str:
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
    ax.set_title(f"PECO curve ({what or view + '-only'})")
    ax.legend(fontsize=8)
    return _png(fig)


def tsne_plot(res: Any, view: str, threshold: float, what: str | None = None) -> str:
    fig = tsne_figure(res, view, threshold, what)
    return '<p class="muted">(no t-SNE map)</p>' if fig is None else _png(fig)


def tsne_figure(res: Any, view: str, threshold: float, what: str | None = None) -> Any:
    """The t-SNE map of one audited condition (a matplotlib figure; None without a map): points coloured by
    label, those in biased clusters (label distribution at L2 > ``threshold`` from the global one) marked."""
    va = res.views[view]
    if va.tsne is None:
        return None
    pr = va.peco
    fig, ax = _figure(5.2, 4.6)
    rows = va.tsne_rows
    ids = pr.cluster_ids[rows]
    biased = pr.l2[ids] > threshold
    labels = np.asarray(res.labels)[rows]
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray",
              "tab:olive", "tab:cyan"]  # ten distinct colours: e.g. the ten digit classes
    for k, cls in enumerate(pr.classes):
        m = labels == cls
        col = colors[k % len(colors)]
        ax.scatter(va.tsne[m & ~biased, 0], va.tsne[m & ~biased, 1], s=3, alpha=0.35, c=col, linewidths=0)
        ax.scatter(va.tsne[m & biased, 0], va.tsne[m & biased, 1], s=16, alpha=0.8, c=col, marker="x",
                   label=f"{cls} ({int((m & biased).sum())} in biased regions)")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(f"{res.name}: t-SNE of {what or view + ' embeddings'}\nlarge markers: clusters with L2 > "
                 f"{threshold:g}", fontsize=9)
    if len(pr.classes) > 4:  # many classes: the legend beside the map, where it hides no point
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), markerscale=1.2)
    else:
        ax.legend(fontsize=7, loc="best", markerscale=1.2)
    return fig


def _metrics_table(results: Sequence[Any], view: str, paper: tuple[str, dict[str, float]] | None,
                   skip: Sequence[str] = ()) -> str:
    head = "".join(f"<th>{esc(r.name)} (n={r.n:,})</th>" for r in results)
    if paper:
        cond = "s2" if view == "hypothesis" else "s1"
        head += f"<th>Paper: {esc(paper[0])} {cond} (fine-tuned, test set)</th>"
    rows = []
    for key, label, kind in _METRIC_ROWS:
        if key in skip:
            continue
        cells = []
        for r in results:
            d = r.views[view].to_dict() if view in r.views else {}
            cells.append(f"<td>{_fmt(d.get(key), kind)}</td>")
        if paper:
            pv = paper[1].get(key)
            cells.append(f"<td>{'–' if pv is None else esc(pv)}</td>")
        rows.append(f'<tr><th class="l">{esc(label)}</th>{"".join(cells)}</tr>')
    return f'<table><tr><th class="l">metric</th>{head}</tr>{"".join(rows)}</table>'


def _finetuned_table(results: Sequence[Any], view: str) -> str:
    if not any(view in r.views and r.views[view].finetuned for r in results):
        return ""
    keys = [("majority_accuracy", "pct"), ("biased_accuracy", "pct"), ("delta_maj", "pct"),
            ("normal_accuracy", "pct"), ("normal_delta_maj", "pct"), ("pct_rr", "pct"), ("nba", "pct"),
            ("nbr", "pct"), ("n_train", "int"), ("n_eval", "int"), ("steps", "int"), ("batch_size", "int")]
    titles = {k: t for k, t, _ in _METRIC_ROWS} | {
        "n_train": "training pairs", "n_eval": "held-out pairs scored", "steps": "steps", "batch_size": "batch size"}
    head = "".join(f"<th>{esc(r.name)}</th>" for r in results)
    body = []
    for key, kind in keys:
        cells = "".join(
            f"<td>{_fmt(r.views[view].finetuned.get(key) if view in r.views else None, kind)}</td>" for r in results
        )
        body.append(f'<tr><th class="l">{esc(titles.get(key, key))}</th>{cells}</tr>')
    return (
        "<h3>Fine-tuned MiniLM (the TRA models), on a held-out sample</h3>"
        f'<table><tr><th class="l">metric</th>{head}</tr>{"".join(body)}</table>'
    )


def _artifacts_table(arts: dict[str, list[TokenRow]]) -> str:
    parts = []
    for label, rows in arts.items():
        body = "".join(
            f'<tr><td class="l">{esc(shorten(r["token"], 40))}</td><td>{r["pmi"]:.2f}</td><td>{r["z"]:.1f}</td>'
            f'<td>{r["count"]:,} / {r["total"]:,}</td><td>{100 * r["label_rate"]:.0f}%</td></tr>'
            for r in rows
        )
        parts.append(
            f"<div><h4>{esc(shorten(label))}</h4><table><tr><th class=\"l\">token</th><th>PMI</th><th>z</th>"
            f"<th>with label / all</th><th>label rate</th></tr>{body}</table></div>"
        )
    return f'<div class="grid">{"".join(parts)}</div>'


def _examples(va: Any, noun: str = "sentences") -> str:
    items = []
    for ex in va.examples:
        dist = ", ".join(f"{esc(k)} {v:.2f}" for k, v in ex["label_dist"].items())
        sents = "".join(
            f'<li><span class="tag">{esc(shorten(s["label"]))}</span>{esc(shorten(s["text"], 400))}</li>'
            for s in ex["sentences"]
        )
        items.append(
            f'<li>cluster {ex["cluster"]} — {ex["size"]} {esc(noun)}, s_i = {ex["divergence"]:.4f}, '
            f'L2 = {ex["l2"]:.3f}; labels: {dist}<ul>{sents}</ul></li>'
        )
    return f'<ul class="ex">{"".join(items)}</ul>'


def render(results: Sequence[Any], title: str = "Label-leakage audit", notes: Sequence[str] = (),
           reference: str | None = None, verdict: Sequence[str] = ()) -> str:
    """The whole report as one HTML string. ``results`` are AuditResults (D first, then e.g. D(Φ)).

    ``reference`` names a dataset the paper reports (``snli``, ``mnli-b``, ... see :data:`PAPER_REFERENCE`):
    its printed figures are shown beside ours for the conditions it reports. None (default): no paper column,
    because the paper's SNLI row says nothing about another file.
    """
    ref = paper_reference(reference)
    if not results:
        raise ParameterError("nothing to render: give at least one audit result")
    first = results[0]
    cfg = first.config
    views = list(first.views)
    out = _page_head(title, "Single-sentence label leakage (Saxon et al.): how well a model that sees only one "
                     "sentence predicts the pair's label, how much it agrees with a full-input model, and whether "
                     "labels cluster in the sentence's embedding space (PECO).", notes, verdict)
    out.extend(_datasets_table(results, "pairs", str))
    out.append(
        "<p class=\"muted\">Models: biased (single sentence) and normal (pair) condition = L2 logistic regression "
        f"on frozen {esc(cfg.featurizer)} features with {cfg.n_folds}-fold out-of-fold predictions (premise groups "
        f"kept within a fold). PECO: {esc(cfg.peco_encoder)} embeddings of the sentence → PCA "
        f"({cfg.n_components}) → k-means (k={cfg.n_clusters}); s_i = mean over classes of squared differences "
        "between the cluster's and the global label distribution; PECO = ∫ #{i: s_i &gt; t} dt from t = 0 (= Σ s_i). "
        f"Biased regions: clusters whose label distribution is at L2 distance &gt; {cfg.bias_threshold:g} from "
        "the global one. "
        f"PECO null: the same clusters with the labels shuffled {cfg.peco_shuffles} times (seeded); "
        "a raw PECO grows as the data shrinks (small clusters differ from the global label mix by chance), so "
        "read it against its null: the excess over the null mean is the figure comparable across sizes. "
        + (f"TRA: MiniLM fine-tuned {cfg.tra_steps} steps (batch {cfg.tra_batch_size}) per condition, "
           f"gradient-norm relevance on {cfg.tra_sample} held-out pairs." if cfg.tra else
           "TRA: not computed (off by default without a GPU; --tra runs it).")
        + "</p>"
    )
    out.append(
        "<p class=\"muted\">Every accuracy is shown next to chance, the majority-class rate of the same rows, "
        "and its difference from it. "
        + (f"The last column holds the paper's printed figures for {esc(ref[0])} (Saxon et al., Tables 2–4: "
           "fine-tuned large models on the test set), for orientation only: models and splits differ."
           if ref is not None else "No paper column: the paper's figures belong to the datasets it reports; "
           "pass --reference NAME (snli, mnli-b, ...) when auditing one of them.")
        + "</p>"
    )
    for view in views:
        cond = "s2, hypothesis only" if view == "hypothesis" else "s1, premise only"
        out.append(f"<h2>{esc(view.capitalize())}-only condition ({esc(cond)})</h2>")
        paper = None if ref is None or view not in ref[1] else (ref[0], ref[1][view])
        out.append(_metrics_table(results, view, paper))
        out.append(_finetuned_table(results, view))
        out.append('<div class="grid"><div>' + peco_plot(results, view) + "</div>")
        for r in results:
            if view in r.views:
                out.append("<div>" + tsne_plot(r, view, cfg.bias_threshold) + "</div>")
        out.append("</div>")
        maps = [tsne_interactive(r, view, cfg.bias_threshold, f"tsne-{view}-{k}") for k, r in enumerate(results)]
        if any(maps):
            out.append('<div class="grid">' + "".join(f"<div>{m}</div>" for m in maps if m) + "</div>")
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
    out.extend(_page_tail(interactive=any("data-tsne" in part for part in out)))
    return "\n".join(out)


BODY_START = "<!--aflite:audit-body-->"
BODY_END = "<!--/aflite:audit-body-->"


def _page_head(title: str, intro: str, notes: Sequence[str], verdict: Sequence[str] = ()) -> list[str]:
    """The opening of a report page (the shared frame), then the start of the audit's own content: the marker
    lets ``aflite report`` put the same content on a fresh frame (with a newer verdict) without the audit's
    in-memory results."""
    return [*page_head(title, "", (), verdict), BODY_START, f"<p class=\"muted\">{intro}</p>",
            *(f"<p class=\"muted\">{esc(note)}</p>" for note in notes)]


def _page_tail(interactive: bool) -> list[str]:
    """plotly's bundle and the map-drawing script when an interactive map is on the page, then the end."""
    js = plotly_js() if interactive else None
    tail = [] if js is None else [f"<script>{script_text(js)}</script>", f"<script>{script_text(_TSNE_JS)}</script>"]
    return [*tail, BODY_END, "</body></html>"]


# Draws every <div data-tsne=ID> from the JSON in <script id=ID>: one trace per label, biased-cluster points
# larger; the hover shows the row's id, label and cluster (set with textContent-equivalent plotly text, escaped).
_TSNE_JS = """
(function(){
  function plain(s){return String(s).replace(/&/g,'&amp;').replace(/</g,'&lt;').replace(/>/g,'&gt;');}
  document.querySelectorAll('div[data-tsne]').forEach(function(div){
    var d=JSON.parse(document.getElementById(div.getAttribute('data-tsne')).textContent);
    var traces=d.classes.map(function(c,k){
      var idx=[];for(var i=0;i<d.label.length;i++){if(d.label[i]===k)idx.push(i);}
      return {type:'scatter',mode:'markers',name:plain(c),x:idx.map(function(i){return d.x[i];}),
        y:idx.map(function(i){return d.y[i];}),
        text:idx.map(function(i){return plain('id '+d.id[i]+' · '+c+' · cluster '+d.cluster[i]+
          (d.biased[i]?' (biased)':''));}),hoverinfo:'text',
        marker:{size:idx.map(function(i){return d.biased[i]?7:4;}),opacity:0.7}};
    });
    window.Plotly.newPlot(div,traces,{title:{text:plain(d.title)},margin:{t:40,l:20,r:10,b:20},
      xaxis:{showticklabels:false},yaxis:{showticklabels:false},height:420,legend:{font:{size:10}}},
      {displaylogo:false,responsive:true});
  });
})();
"""


def tsne_interactive(res: Any, view: str, threshold: float, key: str) -> str:
    """The t-SNE map of one audited condition as data for the page's interactive map (hover: the row's id,
    label and cluster); empty without a map or without plotly's bundle."""
    va = res.views.get(view)
    if va is None or va.tsne is None or plotly_js() is None:
        return ""
    pr = va.peco
    rows = np.asarray(va.tsne_rows)
    ids = pr.cluster_ids[rows]
    classes = [str(c) for c in pr.classes]
    labels = np.asarray(res.labels).astype(str)[rows]
    code = {c: k for k, c in enumerate(classes)}
    row_ids = np.asarray(res.ids).astype(str)[rows] if len(res.ids) else rows.astype(str)
    data = {"title": f"{res.name}: t-SNE ({view}), interactive", "classes": classes,
            "x": np.round(va.tsne[:, 0], 3).tolist(), "y": np.round(va.tsne[:, 1], 3).tolist(),
            "label": [code.get(lab, -1) for lab in labels], "id": row_ids.tolist(),
            "cluster": ids.astype(int).tolist(), "biased": (pr.l2[ids] > threshold).astype(int).tolist()}
    return (f'<div class="plot" data-tsne="{esc(key)}"></div>'
            f'<script type="application/json" id="{esc(key)}">{json_for_script(data)}</script>')


def _datasets_table(results: Sequence[Any], unit: str, label: Callable[[str], str]) -> list[str]:
    """One row per audited set: size in ``unit``, label counts (names passed through ``label``, then escaped),
    chance (the majority-class rate) and time."""
    out = [f"<h2>Datasets</h2><table><tr><th class=\"l\">dataset</th><th>{unit}</th><th class=\"l\">labels</th>"
           "<th>chance (majority class, %)</th><th>time (s), featurization included</th></tr>"]
    for r in results:
        labels = ", ".join(f"{esc(label(k))}: {v:,}" for k, v in r.label_counts.items())
        chance = max(r.label_counts.values()) / max(1, r.n)
        out.append(f"<tr><td class=\"l\">{esc(r.name)}</td><td>{r.n:,}</td><td class=\"l\">{labels}</td>"
                   f"<td>{100 * chance:.1f}</td><td>{r.timings.get('total', 0.0):.0f}</td></tr>")
    out.append("</table>")
    return out


def write_report(path: str | Path, results: Sequence[Any], **kwargs: Any) -> Path:
    """Render and write the report atomically; returns the path."""
    p = Path(path)
    write_text(p, render(results, **kwargs))
    return p


def render_images(results: Sequence[Any], title: str = "Label-leakage audit (images)",
                  notes: Sequence[str] = (), verdict: Sequence[str] = ()) -> str:
    """The report of an image audit (:func:`aflite.commands.audit.audit_file` on an image folder): the metrics table of
    the ``colour`` condition, the PECO curve, a t-SNE map per set and the most label-skewed clusters, their images
    named by id (escaped like every dataset string). No TRA and no token table: both read text."""
    if not results:
        raise ParameterError("nothing to render: give at least one audit result")
    cfg = results[0].config
    view = next(iter(results[0].views))
    out = _page_head(title, "Label leakage in an image dataset, after Saxon et al.: how well a model that sees "
                     "only the colours of an image (its colour histogram, shape and position thrown away) predicts "
                     "the label, how much it agrees with a model on the full image embedding, and whether labels "
                     "cluster in the embedding space (PECO).", notes, verdict)
    out.extend(_datasets_table(results, "images", shorten))
    out.append(
        "<p class=\"muted\">Models: biased condition = L2 logistic regression on the colour histogram "
        f"(4×4×4 RGB cells of the non-black pixels); normal condition = the same on frozen {esc(cfg.featurizer)} "
        f"image embeddings; {cfg.n_folds}-fold out-of-fold predictions. PECO: the embeddings → PCA "
        f"({cfg.n_components}) → k-means (k={cfg.n_clusters}), s_i and PECO as in the text audit, next to its null "
        f"(labels shuffled {cfg.peco_shuffles} times); biased regions: clusters at L2 &gt; {cfg.bias_threshold:g} "
        "from the global label distribution. Every accuracy is shown next to chance, the majority-class rate.</p>")
    out.append("<h2>Colour-only condition</h2>")
    out.append(_metrics_table(results, view, None, skip=("tra",)))
    out.append('<div class="grid"><div>' + peco_plot(results, view, what="image embeddings") + "</div>")
    for r in results:
        out.append("<div>" + tsne_plot(r, view, cfg.bias_threshold, what="image embeddings") + "</div>")
    out.append("</div>")
    maps = [tsne_interactive(r, view, cfg.bias_threshold, f"tsne-{view}-{k}") for k, r in enumerate(results)]
    if any(maps):
        out.append('<div class="grid">' + "".join(f"<div>{m}</div>" for m in maps if m) + "</div>")
    for r in results:
        out.append(f"<h3>{esc(r.name)}: most label-skewed clusters (image ids)</h3>")
        out.append(_examples(r.views[view], noun="images"))
    out.extend(_page_tail(interactive=any("data-tsne" in part for part in out)))
    return "\n".join(out)
