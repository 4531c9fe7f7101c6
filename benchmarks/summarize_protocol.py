"""Summarise the SNLI-train protocol (benchmarks/reproduce_snli.sh) into one Markdown report and one JSON file.

Reads the run directories of ``aflite run`` (results.json) and one ``aflite evaluate`` results.json, and writes
what issue 15 asks to report: per Φ the filtered size, phases, stop reason and label shares; Table 3 shape per
test set with Δ against D and against the same-size random subsets; the hypothesis-only accuracy on D(Φ)
against D_random on SNLI dev; test − test_hard gaps; HANS per heuristic; wall times. It computes nothing new:
every figure is read from those files.

Usage: python benchmarks/summarize_protocol.py EVAL_DIR RUN_DIR [RUN_DIR ...] --out STEM
(writes STEM.md and STEM.json)
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any


def _pct(x: float | None, std: float | None = None, n: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{100 * x:.1f}" + (f" ± {100 * std:.1f}" if std is not None and n > 1 else "")


def _ms(entry: dict[str, Any] | None) -> tuple[float | None, float | None, int]:
    if not entry or entry.get("mean") is None:
        return None, None, 0
    return entry["mean"], entry.get("std"), int(entry.get("n", 1))


def run_rows(run_dirs: list[Path]) -> list[dict[str, Any]]:
    """One record per run: Φ, sizes, phases, stop reason, label shares, timings, the run's own probe."""
    out = []
    for d in run_dirs:
        s = json.loads((d / "results.json").read_text(encoding="utf-8"))
        before, after = s["label_counts_before"], s["label_counts_after"]
        nb, na = sum(before.values()), sum(after.values())
        probe = {r["name"]: r for r in s.get("partial_input_probe", {}).get("results", [])}
        out.append({
            "run": d.name, "featurizer": s["featurizer"]["name"], "view": s["featurizer"]["view"],
            "featurizer_options": s["featurizer"].get("options"), "featurizer_info": s["featurizer"].get("info"),
            "dataset_size": s["dataset_size"], "warmup_rows": s.get("warmup_rows", 0),
            "filtered_input": s["size_before"], "size_after": s["size_after"], "phases": s["n_iterations"],
            "stop_reason": s["stop_reason"], "parameters": s["parameters"],
            "label_share_before": {k: v / nb for k, v in before.items()},
            "label_share_after": {k: v / na for k, v in after.items()},
            "timings": s.get("timings", {}), "probe": probe,
        })
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("eval_dir", type=Path)
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--out", type=Path, required=True, help="output stem (STEM.md, STEM.json)")
    ap.add_argument("--stage-times", type=Path, default=None,
                    help="optional JSON {stage: seconds} measured around the commands (wall time per stage)")
    args = ap.parse_args()

    runs = run_rows(args.runs)
    res = json.loads((args.eval_dir / "results.json").read_text(encoding="utf-8"))
    cfg, agg, sets = res["config"], res["aggregate"], res["training_sets"]
    tests = [t["name"] for t in cfg.get("tests", [])]
    test_info = {t["name"]: t for t in cfg.get("tests", [])}
    models = cfg["models"]
    label = {r["model"]: r["model_label"] for r in res["runs"]}
    # columns per run: its D(Φ), its random subsets (one name), its single-iteration set
    by_run: dict[str, dict[str, str]] = {}
    for si in sets:
        if si["run"]:
            by_run.setdefault(si["run"], {})[si["kind"]] = si["name"]
    sizes = {si["name"]: si["size"] for si in sets}

    def acc(model: str, set_name: str | None, test: str) -> tuple[float | None, float | None, int]:
        if set_name is None:
            return None, None, 0
        return _ms(agg[model].get(set_name, {}).get("tests", {}).get(test, {}).get("accuracy"))

    lines = [f"# {cfg['dataset']}: the paper's protocol (Le Bras et al. 2020, §4), measured", "",
             f"Evaluation: `{args.eval_dir}` — models trained on every row of each training set (no split), scored "
             f"on separate test sets; seeds {cfg['seeds']}; {cfg.get('excluded_warmup_rows', 0)} warm-up rows "
             "excluded from every training set.", "", "## Filtering runs", "",
             "| Φ | rows of D | warm-up rows | filtered input | rows of D(Φ) | phases | stop reason | "
             "labels before (C/E/N %) | labels after (C/E/N %) | featurize s | filter s |", "|---" * 11 + "|"]
    for r in runs:
        b = "/".join(f"{100 * r['label_share_before'][k]:.1f}" for k in sorted(r["label_share_before"]))
        a = "/".join(f"{100 * r['label_share_after'].get(k, 0):.1f}" for k in sorted(r["label_share_before"]))
        t = r["timings"]
        lines.append(f"| {r['featurizer']} | {r['dataset_size']} | {r['warmup_rows']} | {r['filtered_input']} | "
                     f"{r['size_after']} | {r['phases']} | {r['stop_reason']} | {b} | {a} | "
                     f"{t.get('featurize_seconds', float('nan')):.0f} | {t.get('filter_seconds', float('nan')):.0f} |")
    p = runs[0]["parameters"]
    lines += ["", f"Parameters (Table 8 SNLI scaled by |D|/550,152): m={p['n_partitions']}, t={p['train_size']}, "
              f"k={p['slice_size']}, n={p['target_size']}, τ={p['threshold']}, seed {p['random_state']}.", ""]

    report: dict[str, Any] = {"runs": runs, "evaluation": str(args.eval_dir), "tests": {}, "hans": {},
                              "hyp_only_dev": {}, "test_minus_hard": {}}
    for test in tests:
        ti = test_info[test]
        lines += [f"## Table 3 shape on {test} ({ti['size']} rows; majority class {100 * ti['majority']:.1f} %)", ""]
        for cols in by_run.values():
            fname = cols["filtered"]
            lines += [f"### {fname} (|D(Φ)| = {sizes[fname]})", "",
                      "| model | D | D_random | single-iteration | D(Φ) | D(Φ) − D | D(Φ) − D_random |",
                      "|---|---|---|---|---|---|---|"]
            for m in models:
                d, rnd, sgl, flt = (acc(m, "D", test), acc(m, cols.get("random"), test),
                                    acc(m, cols.get("single"), test), acc(m, fname, test))
                dd = "–" if flt[0] is None or d[0] is None else f"{100 * (flt[0] - d[0]):+.1f}"
                dr = "–" if flt[0] is None or rnd[0] is None else f"{100 * (flt[0] - rnd[0]):+.1f}"
                lines.append(f"| {label.get(m, m)} | {_pct(*d)} | {_pct(*rnd)} | {_pct(*sgl)} | {_pct(*flt)} | {dd} "
                             f"| {dr} |")
                report["tests"].setdefault(test, {}).setdefault(fname, {})[m] = {
                    "D": d[0], "D_random": rnd[0], "D_random_std": rnd[1], "single": sgl[0], "filtered": flt[0],
                    "filtered_std": flt[1]}
            lines.append("")

    hyp = [m for m in models if m.endswith(":hypothesis")]
    if "snli-dev" in tests and hyp:
        lines += ["## The artifact signal: hypothesis-only models on SNLI dev, D(Φ) against D_random", "",
                  "| Φ | model | D | D_random | D(Φ) | D(Φ) − D_random |", "|---|---|---|---|---|---|"]
        for cols in by_run.values():
            for m in hyp:
                d, rnd, flt = acc(m, "D", "snli-dev"), acc(m, cols.get("random"), "snli-dev"), \
                    acc(m, cols["filtered"], "snli-dev")
                gap = None if flt[0] is None or rnd[0] is None else flt[0] - rnd[0]
                lines.append(f"| {cols['filtered']} | {label.get(m, m)} | {_pct(*d)} | {_pct(*rnd)} | {_pct(*flt)} | "
                             f"{'–' if gap is None else f'{100 * gap:+.1f}'} |")
                report["hyp_only_dev"].setdefault(cols["filtered"], {})[m] = {"D": d[0], "D_random": rnd[0],
                                                                              "filtered": flt[0], "gap": gap}
        lines.append("")

    if "snli-test" in tests and "snli-test-hard" in tests:
        lines += ["## test − test_hard (points; smaller means less reliance on what a hypothesis-only model finds)",
                  "", "| Φ | model | D | D_random | D(Φ) |", "|---|---|---|---|---|"]
        for cols in by_run.values():
            for m in models:
                gaps: dict[str, float | None] = {}
                for key, nm in (("D", "D"), ("D_random", cols.get("random")), ("filtered", cols["filtered"])):
                    ta, th = acc(m, nm, "snli-test")[0], acc(m, nm, "snli-test-hard")[0]
                    gaps[key] = None if ta is None or th is None else ta - th
                gap_cells = [gaps["D"], gaps["D_random"], gaps["filtered"]]
                lines.append(f"| {cols['filtered']} | {label.get(m, m)} | "
                             + " | ".join("–" if g is None else f"{100 * g:.1f}" for g in gap_cells) + " |")
                report["test_minus_hard"].setdefault(cols["filtered"], {})[m] = gaps
        lines.append("")

    hans = next((e["name"] for e in cfg.get("eval_sets", []) if e["name"] == "HANS"), None)
    if hans:
        lines += [f"## HANS ({next(e['size'] for e in cfg['eval_sets'] if e['name'] == hans)} pairs), per heuristic: "
                  "accuracy on gold entailment / non-entailment", ""]
        for m in models:
            first = agg[m]["D"]["external"][hans]
            groups = list(first.get("per_group", {}))
            head = ["train set"] + [f"{g} E / N" for g in groups] + ["all"]
            lines += [f"### {label.get(m, m)}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            names = ["D"] + [n for cols in by_run.values() for n in (cols.get("random"), cols.get("single"),
                                                                        cols["filtered"]) if n]
            for nm in names:
                e = agg[m].get(nm, {}).get("external", {}).get(hans)
                if not e:
                    continue
                cells = []
                for g in groups:
                    pg = e["per_group"][g]
                    cells.append(f"{_pct(pg.get('entailment', {}).get('mean'))} / "
                                 f"{_pct(pg.get('non-entailment', {}).get('mean'))}")
                lines.append(f"| {nm} | " + " | ".join(cells) + f" | {_pct(*_ms(e['accuracy']))} |")
                report["hans"].setdefault(m, {})[nm] = e
            lines.append("")

    lines += ["## Wall time", "", f"- evaluate (this results.json): {cfg.get('wall_seconds')} s"]
    for r in runs:
        lines.append(f"- run {r['featurizer']} (its last invocation): "
                     + ", ".join(f"{k} {v:.0f}" for k, v in r["timings"].items() if k.endswith("seconds")))
    if args.stage_times and args.stage_times.is_file():
        st = json.loads(args.stage_times.read_text(encoding="utf-8"))
        report["stage_seconds"] = st
        lines += [f"- {k}: {v:.0f} s" for k, v in st.items()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
