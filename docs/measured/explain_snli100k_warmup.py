"""Collect `aflite explain` on SNLI train_100k with the warm-up Φ into docs/measured/explain_snli100k_warmup.json,
next to the n-gram Φ explain of the same file (explain_snli100k.json, explain_snli100k_paper_null.json).

Measured with (2-core machine shared with four other helpers' jobs; /proc/loadavg before and after is recorded):

    aflite run ../shared/data/snli/train_100k.tsv.gz --featurizer warmup --max-steps 300 --device cpu --no-probe \
        --cache-dir CACHE --out RUN                                  # under nice -n 5, capped by timeout 6000
    /usr/bin/time -o M/time.json aflite explain ../shared/data/snli/train_100k.tsv.gz RUN --out M/ex --quiet

Usage: python docs/measured/explain_snli100k_warmup.py RUN M

M holds ex/ (the explain folder), time.json, load_before.txt, load_after.txt, nproc.txt and run_time.txt (the
run's /usr/bin/time -v output). "paper_null" recounts the significant pairs of tokens.csv with the paper's
p0 = 1/|Y| (same n, same Bonferroni family), through aflite.explain.tokens.
"""
import csv
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np

from aflite.checks import tokens as tk

KNOWN = ("nobody", "sleeping", "cat", "no", "not", "never", "nothing", "outdoors", "outside", "for", "to", "tall",
         "sad")


def read_tokens(path: Path) -> dict[str, list[dict[str, str]]]:
    sets: dict[str, list[dict[str, str]]] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        for r in csv.DictReader(fh):
            sets.setdefault(r["set"], []).append(r)
    return sets


def known_rows(sets: dict[str, list[dict[str, str]]]) -> dict[str, dict[str, object]]:
    """Per known token: its strongest label on full D, and that (token, label) pair on full and kept."""
    out: dict[str, dict[str, object]] = {}
    for tok in KNOWN:
        full = [r for r in sets.get("full", []) if r["token"] == tok]
        if not full:
            continue
        best = max(full, key=lambda r: float(r["z"]))
        entry: dict[str, object] = {"label": best["label"]}
        for s in ("full", "kept", "random"):
            hit = [r for r in sets.get(s, []) if r["token"] == tok and r["label"] == best["label"]]
            entry[s] = ({"count": float(hit[0]["count"]), "p_label": round(float(hit[0]["p_label"]), 3),
                         "z": round(float(hit[0]["z"]), 2), "significant": hit[0]["significant"] == "1"}
                        if hit else "not tested (seen < min_count times)")
        out[tok] = entry
    return out


def paper_null(sets: dict[str, list[dict[str, str]]], bonf: dict[str, dict[str, object]]) -> dict[str, int]:
    counts = {}
    for s in ("full", "kept"):
        rows = sets[s]
        k = len(bonf[s]["base_rates"])  # type: ignore[arg-type]
        n = np.array([float(r["count"]) for r in rows])
        p = np.array([float(r["p_label"]) for r in rows])
        z = tk.z_statistic(p, 1.0 / k, n)
        counts[s] = int((z >= tk.critical_z(0.01, int(bonf[s]["n_tests"]))).sum())  # type: ignore[call-overload]
    return counts


def null_changes(sets: dict[str, list[dict[str, str]]], bonf: dict[str, dict[str, object]], s: str) -> dict:
    """Per label: pairs significant with p0 = 1/|Y| but not with the base rate (gained), and the reverse (lost)."""
    rows = sets[s]
    k = len(bonf[s]["base_rates"])  # type: ignore[arg-type]
    zc = tk.critical_z(0.01, int(bonf[s]["n_tests"]))  # type: ignore[call-overload]
    out: dict[str, dict[str, int]] = {"gained": {}, "lost": {}}
    for r in rows:
        uni = bool(tk.z_statistic(float(r["p_label"]), 1.0 / k, float(r["count"])) >= zc)
        base = r["significant"] == "1"
        if uni != base:
            d = out["gained" if uni else "lost"]
            d[r["label"]] = d.get(r["label"], 0) + 1
    return out


def load(path: Path) -> list[float]:
    return [float(x) for x in path.read_text().split()[:3]]


def run_time(path: Path) -> dict[str, object]:
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", text)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    user = re.search(r"User time \(seconds\): (\S+)", text)
    return {"wall": wall.group(1) if wall else None, "user_seconds": float(user.group(1)) if user else None,
            "max_rss_kb": int(rss.group(1)) if rss else None}


def main() -> None:
    run, m = Path(sys.argv[1]), Path(sys.argv[2])
    here = Path(__file__).resolve().parent
    ex = m / "ex"
    res = json.loads((ex / "results.json").read_text())
    summary = json.loads((run / "summary.json").read_text())
    sets = read_tokens(ex / "tokens.csv")
    short = ("token", "label", "count", "p_label", "z", "significant")
    out: dict[str, object] = {
        "dataset": "../shared/data/snli/train_100k.tsv.gz",
        "run": {"command": "aflite run ../shared/data/snli/train_100k.tsv.gz --featurizer warmup --max-steps 300 "
                           "--device cpu --no-probe --cache-dir CACHE --out RUN",
                "size_before": summary["size_before"], "size_after": summary["size_after"],
                "n_iterations": summary.get("n_iterations"), "stop_reason": summary["stop_reason"],
                "label_counts_after": summary.get("label_counts_after"), "timings": summary.get("timings"),
                "time": run_time(m / "run_time.txt")},
        "explain_command": "aflite explain ../shared/data/snli/train_100k.tsv.gz RUN --out OUT --quiet",
        "token_view": res["token_view"],
        "token_test": {k: res["token_test"][k] for k in ("alpha", "min_count", "random_subsets")},
        "significant_tokens": res["significant_tokens"],
        "significant_tokens_random_per_seed": res["significant_tokens_random_per_seed"],
        "significant_tokens_paper_null_p0_uniform": paper_null(sets, res["bonferroni"]),
        "paper_null_changes_kept": null_changes(sets, res["bonferroni"], "kept"),
        "bonferroni": res["bonferroni"],
        "top_artifacts_full": [{k: t[k] for k in short} for t in res["top_artifacts"]["full"]],
        "top_artifacts_kept": [{k: t[k] for k in short} for t in res["top_artifacts"]["kept"]],
        "known_artifacts": known_rows(sets),
        "datamap_regions": res["datamap"]["regions"],
        "removed_by_region": res["datamap"]["removed_by_region"],
        "label_issues": res["label_issues"]["n"],
        "overlap": res["overlap"],
        "surrogate": {"r2": res["surrogate"]["r2"], "n_terms": res["surrogate"]["n_terms"],
                      "top_terms": res["surrogate"]["top_terms"][:10]},
        "first_phase_agreement_with_run": res["first_phase"]["agreement_with_run"],
        "explain_time": json.loads((m / "time.json").read_text()),
        "explain_stage_seconds": res["timings"],
        "loadavg_before_after": [load(m / "load_before.txt"), load(m / "load_after.txt")],
        "cpus": int((m / "nproc.txt").read_text()),
    }
    (here / "explain_snli100k_warmup.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    for name in ("competency.png", "datamap.png"):
        shutil.copy(ex / name, here / f"explain_snli100k_warmup_{name}")


if __name__ == "__main__":
    main()
