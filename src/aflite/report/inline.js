// A result's view in a notebook (inlined by aflite.report.inline, once per displayed result): reads its data from
// <script type="application/json" id="UID-data"> with JSON.parse, starts the plotly.js bundled in the same output
// unless the page already has it, and draws the run's per-phase curve and label mix, an evaluation's accuracy
// bars, explain's significant pairs per set or the audit's biased-condition accuracy, in this output's own divs (ids prefixed by UID, so that several results on one page never collide).
(function (uid) {
  "use strict";
  var root = document.getElementById(uid); if (!root) return;
  var D = JSON.parse(document.getElementById(uid + "-data").textContent);
  var CFG = {displaylogo: false, responsive: true, displayModeBar: false};
  function plain(s) { return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"); }
  function lay(title, x, y, extra) {
    var l = {title: {text: title, font: {size: 13}}, margin: {t: 36, l: 55, r: 45, b: 40}, height: 320,
      xaxis: {title: {text: x}}, yaxis: {title: {text: y}}, legend: {font: {size: 10}, orientation: "h", y: -0.25, x: 0}};
    for (var k in (extra || {})) l[k] = extra[k];
    return l;
  }
  function phases(P, h) {
    var x = h.map(function (r) { return r.iteration; });
    var q = function (k) { return h.map(function (r) { return r.p_quantiles ? r.p_quantiles[k] : null; }); };
    P.newPlot(uid + "-phases", [
      {x: x, y: h.map(function (r) { return r.size_before; }), name: "|S| before", mode: "lines+markers"},
      {x: x, y: h.map(function (r) { return r.n_removed; }), name: "removed", mode: "lines+markers"},
      {x: x, y: h.map(function (r) { return r.n_eligible; }), name: "eligible (p̃ ≥ τ)", mode: "lines+markers"},
      {x: x, y: q("median"), name: "p̃ median", yaxis: "y2", mode: "lines", line: {dash: "dot"}}],
      lay("Per phase", "phase", "rows", {yaxis2: {overlaying: "y", side: "right", range: [0, 1], autorange: false, showgrid: false,
        title: {text: "p̃"}}, hovermode: "x"}), CFG);
  }
  function labels(P, b, a) {
    var names = Object.keys(b), xs = names.map(plain);
    P.newPlot(uid + "-labels", [
      {type: "bar", x: xs, y: names.map(function (k) { return b[k]; }), name: "before (D)"},
      {type: "bar", x: xs, y: names.map(function (k) { return a[k] || 0; }), name: "after (D(Φ))"}],
      lay("Label mix before / after", "label", "rows"), CFG);
  }
  function accuracy(P, A) {
    var sets = [], models = [];
    A.bars.forEach(function (b) { if (sets.indexOf(b.set) < 0) sets.push(b.set); if (models.indexOf(b.model) < 0) models.push(b.model); });
    var tr = sets.map(function (s) {
      var bs = models.map(function (m) { return A.bars.filter(function (b) { return b.model === m && b.set === s; })[0]; });
      return {type: "bar", name: plain(s), x: models.map(plain), y: bs.map(function (b) { return b ? 100 * b.mean : null; }),
        error_y: {type: "data", array: bs.map(function (b) { return b ? 100 * b.std : 0; }), visible: true}};
    });
    var shapes = A.chance == null ? [] : [{type: "line", xref: "paper", x0: 0, x1: 1, y0: 100 * A.chance,
      y1: 100 * A.chance, line: {dash: "dash", color: "#c00"}}];
    P.newPlot(uid + "-accuracy", tr, lay("Held-out accuracy (dashed: chance)", "model", "accuracy (%)",
      {barmode: "group", shapes: shapes}), CFG);
  }
  function tokens(P, T) {
    var names = Object.keys(T);
    P.newPlot(uid + "-tokens", [{type: "bar", x: names.map(plain), y: names.map(function (k) { return T[k]; }),
      name: "significant pairs"}], lay("Significant (token, label) pairs", "set", "pairs"), CFG);
  }
  function leakage(P, L) {
    var sets = [];
    L.forEach(function (r) { if (sets.indexOf(r.set) < 0) sets.push(r.set); });
    var tr = sets.map(function (s) {
      var rs = L.filter(function (r) { return r.set === s; });
      return {type: "bar", name: plain(s), x: rs.map(function (r) { return plain(r.view); }),
        y: rs.map(function (r) { return 100 * r.biased; })};
    });
    var maj = L.filter(function (r) { return r.set === sets[0] && r.majority != null; });
    if (maj.length) tr.push({type: "scatter", mode: "markers", name: "majority class", marker: {symbol: "line-ew-open", size: 30},
      x: maj.map(function (r) { return plain(r.view); }), y: maj.map(function (r) { return 100 * r.majority; })});
    P.newPlot(uid + "-leakage", tr, lay("Biased-condition accuracy (one sentence only)", "view", "accuracy (%)",
      {barmode: "group"}), CFG);
  }
  if (!window.Plotly) {  // the bundled plotly.js of this output, started once per page
    var src = root.querySelector("script.aflite-plotly");
    if (src) { var el = document.createElement("script"); el.textContent = src.textContent; document.head.appendChild(el); }
  }
  var P = window.Plotly; if (!P) return;
  try {
    if (D.history && D.history.length && document.getElementById(uid + "-phases")) phases(P, D.history);
    if (D.label_counts_before && document.getElementById(uid + "-labels")) labels(P, D.label_counts_before, D.label_counts_after || {});
    if (D.accuracy && D.accuracy.bars && D.accuracy.bars.length && document.getElementById(uid + "-accuracy")) accuracy(P, D.accuracy);
    if (D.tokens && document.getElementById(uid + "-tokens")) tokens(P, D.tokens);
    if (D.leakage && D.leakage.length && document.getElementById(uid + "-leakage")) leakage(P, D.leakage);
    root.setAttribute("data-plots", "1");
  } catch (e) { console.error("aflite plot failed: " + e); root.setAttribute("data-error", String(e)); }
})
