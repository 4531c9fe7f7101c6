"""The ladder of Φ strength (issue #30) from one `aflite evaluate` folder and its run folders: per Φ the filtered
size, phases and stop reason, and per test set the fine-tuned evaluator's accuracy on D, the same-size random
subsets (mean ± std over seeds), the single-iteration set and D(Φ), with the gap D(Φ) − random; the learning
rate the check chose (with each candidate's held-out accuracy and loss) and each set's training loss. It reads
every figure from those files and computes nothing new.

Usage: python benchmarks/ladder_summary.py EVAL_DIR RUN_DIR [RUN_DIR ...] --out STEM [--stages stages.tsv]
       [--note TEXT]   (writes STEM.md and STEM.json)
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any


def _ms(entry: Any) -> tuple[float | None, float | None]:
    if not isinstance(entry, dict) or entry.get("mean") is None:
        return None, None
    return float(entry["mean"]), entry.get("std")


def _pct(mean: float | None, std: float | None = None) -> str:
    if mean is None or math.isnan(mean):
        return "–"
    return f"{100 * mean:.1f}" + (f" ± {100 * std:.1f}" if std else "")


def ladder(eval_dir: Path, runs: list[Path], stages: dict[str, float]) -> dict[str, Any]:
    res = json.loads((eval_dir / "results.json").read_text(encoding="utf-8"))
    cfg, agg, sets = res["config"], res["aggregate"], res["training_sets"]
    model = "finetune:pair" if "finetune:pair" in agg else next(iter(agg))
    per = agg[model]
    tests = [t["name"] for t in cfg.get("tests", [])] + [e["name"] for e in cfg.get("eval_sets", [])]
    out: dict[str, Any] = {"model": model, "finetune": {k: cfg.get("finetune", {}).get(k) for k in (
        "device", "lr", "lr_source", "epochs", "batch_size", "train_cap_used", "eval_cap_used", "max_steps")},
        "lr_check": None, "seeds": cfg.get("seeds"), "model_seeds": cfg.get("model_seeds"),
        "dataset_size": cfg.get("dataset_size"), "excluded_warmup_rows": cfg.get("excluded_warmup_rows"),
        "wall_seconds": cfg.get("wall_seconds"), "stages": stages, "tests": tests, "phi": []}
    check = (cfg.get("finetune") or {}).get("lr_check")
    if check:
        out["lr_check"] = {"chosen": check["chosen"], "rows": [check["train_rows"], check["heldout_rows"]],
                           "heldout_majority": check["heldout_majority"],
                           "candidates": [{k: c[k] for k in ("lr", "accuracy", "loss_start", "loss_end", "steps")}
                                          for c in check["candidates"]]}

    def acc(name: str, test: str) -> tuple[float | None, float | None]:
        e = per.get(name) or {}
        if e.get("not_trained"):
            return None, None
        t = (e.get("tests") or {}).get(test) or (e.get("external") or {}).get(test) or {}
        return _ms(t.get("accuracy"))

    def loss(name: str) -> dict[str, Any] | None:
        tl = (per.get(name) or {}).get("training_loss")
        if not tl:
            return None
        return {"start": _ms(tl["start"])[0], "end": _ms(tl["end"])[0], "steps": tl["steps"]}

    for run in runs:
        s = json.loads((run / "results.json").read_text(encoding="utf-8"))
        mine = {si["kind"]: si["name"] for si in sets if si.get("run") and Path(si["run"]).name == run.name}
        f = s.get("featurizer") or {}
        rec: dict[str, Any] = {
            "run": run.name, "featurizer": f.get("name"), "options": {k: v for k, v in (f.get("options") or {}).items()
                                                                     if k in ("epochs", "max_steps", "lr")},
            "warmup_rows": s.get("warmup_rows", 0), "filtered": s["size_before"], "kept": s["size_after"],
            "phases": s["n_iterations"], "stop_reason": s["stop_reason"], "parameters": s["parameters"],
            "kept_in_evaluation": next((si["size"] for si in sets if si["name"] == mine.get("filtered")), None),
            "stage_seconds": stages.get(run.name), "sets": mine, "not_trained": sorted(
                k for k, nm in mine.items() if (per.get(nm) or {}).get("not_trained")),
            "training_loss": {k: loss(nm) for k, nm in mine.items()}, "scores": {}}
        for test in tests:
            d = acc("D", test)
            r = acc(mine.get("random", ""), test)
            si = acc(mine.get("single", ""), test)
            f_ = acc(mine.get("filtered", ""), test)
            rec["scores"][test] = {"D": d, "random": r, "single": si, "filtered": f_,
                                   "gap_to_random": None if f_[0] is None or r[0] is None else f_[0] - r[0]}
            if "matched" in mine:  # evaluate --label-matched: a random subset with D(Φ)'s label counts
                m = acc(mine["matched"], test)
                rec["scores"][test] |= {"matched": m, "gap_to_matched": None if f_[0] is None or m[0] is None
                                        else f_[0] - m[0]}
        out["phi"].append(rec)
    out["D_training_loss"] = loss("D")
    return out


def _cap(cap: int | None, none: str) -> str:
    return none if cap is None else f"capped at {cap:,}"


def markdown(lad: dict[str, Any], note: str) -> str:
    ft = lad["finetune"]
    lines = ["# The ladder of Φ strength, fine-tuned evaluator", "",
             f"{note}. Evaluator: {lad['model']}, lr {ft['lr']:g} ({ft['lr_source']}), {ft['epochs']} epochs, batch "
             f"{ft['batch_size']}, training rows {_cap(ft['train_cap_used'], 'whole sets')}, test sets "
             f"{_cap(ft['eval_cap_used'], 'whole')} (stratified); random subsets: seeds {lad['seeds']}; D, "
             f"single-iteration and D(Φ): seeds {lad['model_seeds']}. |D| = {lad['dataset_size']:,}; "
             f"{lad['excluded_warmup_rows']:,} rows of the warm-up slices are left out of every training set. "
             "Accuracy in %."]
    if lad["lr_check"]:
        c = lad["lr_check"]
        lines += ["", f"Learning-rate check ({c['rows'][0]:,} + {c['rows'][1]:,} rows of D's training part; held-out "
                  f"majority {100 * c['heldout_majority']:.1f} %): " + ", ".join(
                      f"{x['lr']:g} → {100 * x['accuracy']:.1f} % (loss {x['loss_start']:.3f} → {x['loss_end']:.3f}, "
                      f"{x['steps']} steps)" for x in c["candidates"]) + f"; chosen {c['chosen']:g}."]
    lines += ["", "| Φ | \\|D(Φ)\\| (of filtered) | phases | stage s | " + " | ".join(
        f"{t}: D / random / single / D(Φ) / gap" for t in lad["tests"]) + " |",
        "|---|---|---|---|" + "---|" * len(lad["tests"])]
    for p in lad["phi"]:
        name = p["run"].removeprefix("run_")
        cells = []
        for t in lad["tests"]:
            sc = p["scores"][t]
            gap = sc["gap_to_random"]
            cells.append(" / ".join([_pct(*sc["D"]), _pct(*sc["random"]), _pct(*sc["single"]), _pct(*sc["filtered"]),
                                     "–" if gap is None else f"**{100 * gap:+.1f}**"]))
        stage = "–" if p["stage_seconds"] is None else f"{p['stage_seconds']:.0f}"
        lines.append(f"| {name} | {p['kept_in_evaluation'] or p['kept']:,} ({p['kept']:,} of {p['filtered']:,}) | "
                     f"{p['phases']} | {stage} | " + " | ".join(cells) + " |")
    matched = [(p, t) for p in lad["phi"] for t in lad["tests"] if "matched" in p["scores"][t]]
    if matched:
        lines += ["", "Random subsets with D(Φ)'s label counts (`--label-matched`), and D(Φ)'s gap to them: "
                  + "; ".join(
            f"{p['run'].removeprefix('run_')} on {t}: {_pct(*p['scores'][t]['matched'])} / "
            + ("–" if p["scores"][t]["gap_to_matched"] is None else f"{100 * p['scores'][t]['gap_to_matched']:+.1f}")
            for p, t in matched) + "."]
    lines += ["", "Training loss (first → last steps) per set: " + "; ".join(
        f"{p['run'].removeprefix('run_')}: " + ", ".join(
            f"{k} {v['start']:.3f} → {v['end']:.3f} ({v['steps']} steps)" for k, v in p["training_loss"].items() if v)
        for p in lad["phi"]) + (f"; D {lad['D_training_loss']['start']:.3f} → {lad['D_training_loss']['end']:.3f}"
                                 if lad.get("D_training_loss") else "") + "."]
    bad = [f"{p['run']}: {', '.join(p['not_trained'])}" for p in lad["phi"] if p["not_trained"]]
    lines += ["", "Not trained: " + ("; ".join(bad) if bad else "none") + "."]
    if lad["stages"]:
        lines += ["", "Wall time per stage (s): " + ", ".join(f"{k} {v:.0f}" for k, v in lad["stages"].items())
                  + f"; total {sum(lad['stages'].values()):.0f}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("eval_dir", type=Path)
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--stages", type=Path, default=None, help="NAME<TAB>seconds lines (protocol_gpu.sh)")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    stages: dict[str, float] = {}
    if args.stages and args.stages.is_file():
        for line in args.stages.read_text(encoding="utf-8").splitlines():
            if "\t" in line:
                k, v = line.split("\t", 1)
                stages[k] = float(v)
    lad = ladder(args.eval_dir, args.runs, stages)
    lad["note"] = args.note
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(lad, indent=1) + "\n", encoding="utf-8")
    args.out.with_suffix(".md").write_text(markdown(lad, args.note), encoding="utf-8")


if __name__ == "__main__":
    main()
