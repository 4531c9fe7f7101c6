// The explorer page's script (inlined by aflite.report.explorer). Reads the data from
// <script type="application/json" id="aflite-data"> with JSON.parse (gzip+base64 inflated with DecompressionStream
// first when packed), renders rows with textContent only, and draws the plots with the inlined plotly.js.
(function () {
  "use strict";
  var PAGE = 200, MAXPTS = 5000;
  var D, C, N, view, page = 0, sortCol = null, sortDir = 1, pointFilter = null, lower = null;
  var $ = function (id) { return document.getElementById(id); };
  function plain(s) { return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"); }
  function short(s, k) { s = String(s); return s.length > k ? s.slice(0, k - 1) + "…" : s; }
  function milli(v) { return v < 0 ? "" : (v / 1000).toFixed(3); }

  var T = window.afliteTimes = {start: performance.now()};
  async function load() {
    var raw = JSON.parse($("aflite-data").textContent);
    if (!raw.packed) return raw;
    var bin = atob(raw.packed), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    T.decoded = performance.now();
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    var text = await new Response(stream).text();
    T.inflated = performance.now();
    var obj = JSON.parse(text);
    T.parsed = performance.now();
    return obj;
  }

  // ------------------------------------------------------------------ columns of the table
  function columns() {
    var cols = [{key: "id", title: "id", get: function (r) { return C.id[r]; }, num: false}];
    if (C.thumb) cols.push({key: "thumb", title: "image", thumb: true, get: function (r) { return C.thumb[r] || ""; }});
    if (C.ta) cols.push({key: "ta", title: C.tb ? "text A" : "text", get: function (r) { return C.ta[r]; }, wide: true});
    if (C.tb) cols.push({key: "tb", title: "text B", get: function (r) { return C.tb[r]; }, wide: true});
    cols.push({key: "label", title: "label", get: function (r) { return C.labels[C.label[r]]; }, sortKey: C.label});
    if (C.p) cols.push({key: "p", title: "p̃", get: function (r) { return milli(C.p[r]); }, sortKey: C.p, num: true});
    if (C.phase) cols.push({key: "phase", title: "removed in phase", sortKey: C.phase, num: true,
      get: function (r) { return C.phase[r] === -2 ? "warm-up" : C.phase[r] < 0 ? "kept" : String(C.phase[r]); }});
    if (C.conf) cols.push({key: "conf", title: "confidence", get: function (r) { return milli(C.conf[r]); }, sortKey: C.conf, num: true});
    if (C["var"]) cols.push({key: "var", title: "variability", get: function (r) { return milli(C["var"][r]); }, sortKey: C["var"], num: true});
    if (C.region) cols.push({key: "region", title: "region", get: function (r) { return C.regions[C.region[r]]; }, sortKey: C.region});
    if (C.issue) cols.push({key: "issue", title: "label issue", get: function (r) { return C.issue[r] ? "yes" : ""; }, sortKey: C.issue});
    if (C.w) cols.push({key: "w", title: C.w_name || "weight", num: true, sortKey: C.w.map(function (v) { return v == null ? -Infinity : v; }),
      get: function (r) { return C.w[r] == null ? "" : String(C.w[r]); }});
    if (C.top) cols.push({key: "top", title: "top features", get: function (r) { return C.top[r]; }, wide: true});
    // every other column of the per-row table (a check's), as it is: numbers sort as numbers, text is set as text
    (C.more || []).forEach(function (m, k) {
      var col = {key: "more-" + k, title: m.name, num: m.num, wide: !m.num};
      if (m.num) {
        col.sortKey = m.v.map(function (v) { return v == null ? -Infinity : v; });
        col.get = function (r) { return m.v[r] == null ? "" : String(m.v[r]); };
      } else col.get = function (r) { return m.v[r]; };
      cols.push(col);
    });
    return cols;
  }
  var COLS;

  // ------------------------------------------------------------------ filtering, sorting, paging
  function filter() {
    var lab = $("f-label").value, st = $("f-status").value, reg = $("f-region") ? $("f-region").value : "";
    var q = $("f-search").value.trim().toLowerCase();
    if (q && !lower) {
      lower = new Array(N);
      for (var i = 0; i < N; i++) {
        lower[i] = (C.id[i] + "\u0001" + (C.ta ? C.ta[i] : "") + "\u0001" + (C.tb ? C.tb[i] : "") + "\u0001" +
          (C.top ? C.top[i] : "") + (C.more || []).map(function (m) { return "\u0001" + (m.v[i] == null ? "" : m.v[i]); }).join("")).toLowerCase();
      }
    }
    var labN = lab === "" ? -1 : +lab, regN = reg === "" ? -1 : +reg, out = [];
    for (var r = 0; r < N; r++) {
      if (labN >= 0 && C.label[r] !== labN) continue;
      if (st === "kept" && C.phase && C.phase[r] !== -1) continue;
      if (st === "warmup" && C.phase && C.phase[r] !== -2) continue;
      if (st === "removed" && C.phase && C.phase[r] < 0) continue;
      if (regN >= 0 && C.region[r] !== regN) continue;
      if (pointFilter && !pointFilter.test(r)) continue;
      if (q && lower[r].indexOf(q) < 0) continue;
      out.push(r);
    }
    view = out;
    if (sortCol) doSort();
    page = 0;
    render();
  }

  function doSort() {
    var col = sortCol, d = sortDir, key = col.sortKey;
    if (key) view.sort(function (a, b) { return d * (key[a] - key[b]) || a - b; });
    else view.sort(function (a, b) { var x = col.get(a), y = col.get(b); return d * (x < y ? -1 : x > y ? 1 : 0) || a - b; });
  }

  function header() {
    var tr = document.createElement("tr");
    COLS.forEach(function (col) {
      var th = document.createElement("th");
      th.textContent = col.title + (sortCol === col ? (sortDir > 0 ? " ▲" : " ▼") : "");
      th.className = col.num ? "" : "l";
      th.setAttribute("data-col", col.key);
      th.style.cursor = "pointer";
      th.addEventListener("click", function () {
        if (sortCol === col) sortDir = -sortDir; else { sortCol = col; sortDir = 1; }
        doSort(); page = 0; render();
      });
      tr.appendChild(th);
    });
    var thead = $("rows-head");
    thead.replaceChildren(tr);
  }

  function render() {
    header();
    var body = $("rows-body"), frag = document.createDocumentFragment();
    var start = page * PAGE, end = Math.min(view.length, start + PAGE);
    for (var k = start; k < end; k++) {
      var r = view[k], tr = document.createElement("tr");
      tr.setAttribute("data-row", String(r));
      COLS.forEach(function (col) {
        var td = document.createElement("td");
        var v = col.get(r);
        if (col.thumb) {
          if (typeof v === "string" && v.indexOf("data:image/") === 0) {
            var img = document.createElement("img"); img.src = v; img.width = 48; img.height = 48; img.alt = "";
            td.appendChild(img);
          }
        } else td.textContent = v;
        td.className = (col.num ? "" : "l") + (col.wide ? " wide" : "");
        tr.appendChild(td);
      });
      frag.appendChild(tr);
    }
    body.replaceChildren(frag);
    var pages = Math.max(1, Math.ceil(view.length / PAGE));
    $("row-count").textContent = view.length.toLocaleString("en") + " of " + N.toLocaleString("en") + " rows" +
      (pointFilter ? " · " + pointFilter.what : "");
    $("page-info").textContent = "page " + (page + 1) + " of " + pages;
    $("clear-point").hidden = !pointFilter;
    document.body.setAttribute("data-shown", String(view.length));
  }

  function setPoint(what, test) { pointFilter = what ? {what: what, test: test} : null; filter(); }

  function controls() {
    var sel = $("f-label");
    C.labels.forEach(function (name, k) { var o = document.createElement("option"); o.value = k; o.textContent = name; sel.appendChild(o); });
    if (C.region) {
      var rs = $("f-region");
      C.regions.forEach(function (name, k) { var o = document.createElement("option"); o.value = k; o.textContent = name; rs.appendChild(o); });
      $("f-region-wrap").hidden = false;
    }
    if (!C.phase) $("f-status-wrap").hidden = true;
    ["f-label", "f-status", "f-region"].forEach(function (id) { if ($(id)) $(id).addEventListener("change", filter); });
    var timer = null;
    $("f-search").addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(filter, 200); });
    $("clear-point").addEventListener("click", function () { setPoint(null); });
    $("prev").addEventListener("click", function () { if (page > 0) { page--; render(); } });
    $("next").addEventListener("click", function () { if ((page + 1) * PAGE < view.length) { page++; render(); } });
  }

  // ------------------------------------------------------------------ plots
  function rowText(r) {  // plotly reads hover text as HTML-like markup: every piece of data is escaped
    var t = "id " + C.id[r] + " · " + C.labels[C.label[r]];
    if (C.p && C.p[r] >= 0) t += " · p̃ " + milli(C.p[r]);
    if (C.phase) t += C.phase[r] === -2 ? " · warm-up" : C.phase[r] < 0 ? " · kept" : " · removed in phase " + C.phase[r];
    var lines = [plain(t)];
    if (C.ta) lines.push(plain(short(C.ta[r], 90)));
    if (C.tb) lines.push(plain(short(C.tb[r], 90)));
    return lines.join("<br>");
  }
  var CFG = {displaylogo: false, responsive: true, displayModeBar: false};
  function lay(title, x, y, extra) {
    var l = {title: {text: title, font: {size: 14}}, margin: {t: 40, l: 55, r: 45, b: 40}, height: 380,
      xaxis: {title: {text: x}}, yaxis: {title: {text: y}},
      legend: {font: {size: 10}, orientation: "h", y: -0.22, x: 0}};
    for (var k in (extra || {})) l[k] = extra[k];
    return l;
  }

  function plotPhases(P) {
    var h = D.plots.history; if (!h || !h.length || !$("plot-phases")) return;
    var x = h.map(function (r) { return r.iteration; });
    var r3 = function (v) { return v == null ? null : Math.round(v * 1000) / 1000; };  // hovers: 0.569, not 0.5689655
    var q = function (k) { return h.map(function (r) { return r.p_quantiles ? r3(r.p_quantiles[k]) : null; }); };
    var tr = [
      {x: x, y: h.map(function (r) { return r.size_before; }), name: "|S| before", mode: "lines+markers"},
      {x: x, y: h.map(function (r) { return r.n_removed; }), name: "removed", mode: "lines+markers"},
      {x: x, y: h.map(function (r) { return r.n_eligible; }), name: "eligible (p̃ ≥ τ)", mode: "lines+markers"},
      {x: x, y: q("median"), name: "p̃ median", yaxis: "y2", mode: "lines", line: {dash: "dot"}},
      {x: x, y: q("q25"), name: "p̃ q25", yaxis: "y2", mode: "lines", line: {dash: "dot"}},
      {x: x, y: q("q75"), name: "p̃ q75", yaxis: "y2", mode: "lines", line: {dash: "dot"}}];
    P.newPlot("plot-phases", tr, lay("Per phase (click: rows removed in that phase)", "phase", "rows",
      {yaxis2: {overlaying: "y", side: "right", range: [0, 1], autorange: false, tickmode: "auto", showgrid: false,
        hoverformat: ".3f", title: {text: "p̃"}}, hovermode: "x"}), CFG);
    $("plot-phases").on("plotly_click", function (ev) {
      var j = ev.points[0].x;
      setPoint("removed in phase " + j, function (r) { return C.phase[r] === j; });
    });
  }

  function plotLabels(P) {
    var b = D.plots.label_counts_before, a = D.plots.label_counts_after; if (!b || !$("plot-labels")) return;
    var names = Object.keys(b), xs = names.map(plain);
    P.newPlot("plot-labels", [
      {type: "bar", x: xs, y: names.map(function (k) { return b[k]; }), name: "before (D)"},
      {type: "bar", x: xs, y: names.map(function (k) { return a[k] || 0; }), name: "after (D(Φ))"}],
      lay("Label mix before / after (click: that label)", "label", "rows"), CFG);
    $("plot-labels").on("plotly_click", function (ev) {
      var k = C.labels.indexOf(names[ev.points[0].pointIndex]);
      if (k >= 0) { $("f-label").value = String(k); filter(); }
    });
  }

  function sample(rows) {
    if (rows.length <= MAXPTS) return rows;
    var step = rows.length / MAXPTS, out = [];
    for (var i = 0; i < MAXPTS; i++) out.push(rows[Math.floor(i * step)]);
    return out;
  }

  function plotDataMap(P) {
    if (!C || !C.conf || !C["var"] || !$("plot-datamap")) return;
    var all = [];
    for (var r = 0; r < N; r++) if (C.conf[r] >= 0 && C["var"][r] >= 0) all.push(r);
    var pts = sample(all), kept = [], rem = [];
    pts.forEach(function (r) { (C.phase && C.phase[r] >= 0 ? rem : kept).push(r); });
    function trace(rows, name, sym) {
      return {type: "scatter", mode: "markers", name: name, x: rows.map(function (r) { return C["var"][r] / 1000; }),
        y: rows.map(function (r) { return C.conf[r] / 1000; }), customdata: rows, text: rows.map(rowText),
        hoverinfo: "text", marker: {size: 5, symbol: sym, opacity: 0.6}};
    }
    P.newPlot("plot-datamap", [trace(kept, "kept", "circle"), trace(rem, "removed by AFLite", "x")],
      lay("Data map" + (all.length > pts.length ? " (" + pts.length.toLocaleString("en") + " of " +
        all.length.toLocaleString("en") + " rows drawn)" : "") + " (click: rows in that cell)",
        "variability", "confidence"), CFG);
    $("plot-datamap").on("plotly_click", function (ev) {
      var r = ev.points[0].customdata, cx = Math.floor(C.conf[r] / 50), vx = Math.floor(C["var"][r] / 25);
      setPoint("data-map cell: confidence " + (cx * 0.05).toFixed(2) + "–" + ((cx + 1) * 0.05).toFixed(2) +
        ", variability " + (vx * 0.025).toFixed(3) + "–" + ((vx + 1) * 0.025).toFixed(3), function (s) {
          return C.conf[s] >= 0 && Math.floor(C.conf[s] / 50) === cx && Math.floor(C["var"][s] / 25) === vx;
        });
    });
  }

  // a log axis labelled 1, 2, 5, 10, 20, 50, ... in full: plotly's own labels between decades read "2 5 100 2 5"
  function logTicks(values) {
    var lo = Math.max(1, Math.min.apply(null, values)), hi = Math.max.apply(null, values), vals = [];
    for (var d = Math.pow(10, Math.floor(Math.log10(lo))); d <= hi * 10; d *= 10)
      [1, 2, 5].forEach(function (m) { var v = m * d; if (v >= lo / 2 && v <= hi * 2) vals.push(v); });
    return {tickvals: vals, ticktext: vals.map(function (v) { return v.toLocaleString("en-US"); })};
  }

  function plotCompetency(P, name, div) {
    var T = D.plots.tokens; if (!T || !T.sets[name] || !$(div)) return;
    var S = T.sets[name], labels = {}, tr = [];
    S.tokens.forEach(function (t) { (labels[t.label] = labels[t.label] || []).push(t); });
    Object.keys(labels).forEach(function (lab) {
      var ts = labels[lab];
      tr.push({type: "scatter", mode: "markers", name: plain(lab), x: ts.map(function (t) { return t.count; }),
        y: ts.map(function (t) { return t.p; }), customdata: ts.map(function (t) { return t.token; }),
        text: ts.map(function (t) { return plain("“" + t.token + "” → " + lab + ": n=" + t.count + ", p̂=" +
          t.p.toFixed(3) + (t.sig ? " (significant)" : "")); }), hoverinfo: "text",
        marker: {size: ts.map(function (t) { return t.sig ? 8 : 4; }), opacity: 0.6}});
      var top = ts.filter(function (t) { return t.sig; }).sort(function (a, b) { return b.p * Math.sqrt(b.count) -
        a.p * Math.sqrt(a.count); }).slice(0, 8);  // the strongest significant tokens, named on the plot
      if (top.length) tr.push({type: "scatter", mode: "text", showlegend: false, hoverinfo: "skip",
        x: top.map(function (t) { return t.count; }), y: top.map(function (t) { return t.p; }),
        text: top.map(function (t) { return plain(short(t.token, 18)); }), textposition: "top center",
        textfont: {size: 10}});
      var c = S.curves[lab];
      if (c) tr.push({type: "scatter", mode: "lines", name: plain("Bonferroni: " + lab), x: c.n, y: c.p,
        hoverinfo: "skip", line: {dash: "dash", width: 1}});
    });
    P.newPlot(div, tr, lay("Competency: " + plain(name) + " (" + S.n_significant + " significant of " + S.n_tests +
      " tests; click: search the token)", "count (log)", "p̂(label | token)",
      {xaxis: Object.assign({type: "log", title: {text: "count (log)"}},
                            logTicks(S.tokens.length ? S.tokens.map(function (t) { return t.count; }) : [1, 10])),
       yaxis: {range: [0, 1.08], title: {text: "p̂(label | token)"}}}), CFG);
    $(div).on("plotly_click", function (ev) {
      var tok = ev.points[0].customdata; if (typeof tok !== "string") return;
      $("f-search").value = tok; filter();
    });
  }

  function plotAccuracy(P) {
    var A = D.plots.accuracy; if (!A || !A.bars.length || !$("plot-accuracy")) return;
    var tr = A.sets.map(function (s) {
      var bs = A.bars.filter(function (b) { return b.set === s; });
      return {type: "bar", name: plain(s), x: bs.map(function (b) { return plain(b.model); }),
        y: bs.map(function (b) { return 100 * b.mean; }), error_y: {type: "data", array: bs.map(function (b) { return 100 * b.std; })},
        text: bs.map(function (b) { return plain(s + " · " + b.model + ": " + (100 * b.mean).toFixed(1) + "%" +
          (b.chance != null ? " (chance " + (100 * b.chance).toFixed(1) + "%)" : "")); }), hoverinfo: "text"};
    });
    var shapes = A.chance == null ? [] : [{type: "line", xref: "paper", x0: 0, x1: 1, y0: 100 * A.chance,
      y1: 100 * A.chance, line: {dash: "dash", color: "#c00"}}];
    var where = A.where && A.where !== "own held-out" ? "Accuracy on " + plain(A.where) + " (dashed: chance, its majority class)"
      : "Held-out accuracy (dashed: chance, D's majority class)";
    P.newPlot("plot-accuracy", tr, lay(where, "model", "accuracy (%)", {barmode: "group", shapes: shapes, height: 380}), CFG);
  }

  function plotLoss(P) {  // fine-tuned models: one training-loss curve per (model, training set, seed)
    var A = D.plots.accuracy; if (!A || !A.losses || !A.losses.length || !$("plot-loss")) return;
    var tr = A.losses.map(function (c) {
      var name = plain(c.set + " · " + c.model + " · seed " + c.seed + (c.not_trained ? " (not trained)" : ""));
      return {type: "scatter", mode: "lines", name: name, x: c.step, y: c.loss, hoverinfo: "x+y+name",
        line: {width: 1.5, dash: c.not_trained ? "dot" : "solid"}};
    });
    P.newPlot("plot-loss", tr, lay("Fine-tuning: training loss per training set (mean over bins of steps)", "step",
      "training loss", {height: 380}), CFG);
  }

  function plotLrCheck(P) {  // the learning-rate check: one curve per candidate, its held-out accuracy in the legend
    var A = D.plots.accuracy, L = A && A.lr_check; if (!L || !$("plot-lrcheck")) return;
    var tr = L.candidates.map(function (c) {
      return {type: "scatter", mode: "lines", x: c.step, y: c.loss, hoverinfo: "x+y+name",
        name: plain("lr " + (c.lr < 1e-3 ? c.lr.toExponential() : String(c.lr)) + ": " + (100 * c.accuracy).toFixed(1) +
          "% held-out" + (c.lr === L.chosen ? " (chosen)" : "")),
        line: {width: c.lr === L.chosen ? 3 : 1.5}};
    });
    P.newPlot("plot-lrcheck", tr, lay("Learning-rate check on " + L.rows[0] + " + " + L.rows[1] +
      " rows of D's training part: training loss", "step", "training loss", {height: 380}), CFG);
  }

  function plots() {
    var src = $("aflite-plotly");
    if (!window.Plotly && src) {  // the bundled plotly.js, inline in this page, started only now
      var el = document.createElement("script");
      el.textContent = src.textContent;
      document.head.appendChild(el);
    }
    var P = window.Plotly; if (!P) return;
    [plotPhases, plotLabels, plotDataMap, function (p) { plotCompetency(p, "full", "plot-comp-full"); },
      function (p) { plotCompetency(p, "kept", "plot-comp-kept"); }, plotAccuracy, plotLoss, plotLrCheck].forEach(function (f) {
      try { f(P); } catch (e) { console.error("plot failed: " + e); }
    });
    window.aflitePlotsMs = performance.now();
    document.body.setAttribute("data-plots", "1");
  }

  async function main() {
    D = await load();
    C = D.cols || null;
    if (C) {
      N = C.id.length; view = []; for (var i = 0; i < N; i++) view.push(i);
      COLS = columns(); controls(); render();
    }
    window.afliteUsableMs = performance.now();
    performance.mark("aflite-usable");
    document.body.setAttribute("data-ready", "1");
    requestAnimationFrame(function () { setTimeout(plots, 0); });  // the table is painted first
  }
  main().catch(function (e) { console.error(e); document.body.setAttribute("data-error", String(e)); });
})();
