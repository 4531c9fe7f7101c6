"""Collect `aflite explain` on SNLI train_100k (ngram Φ run) into docs/measured/explain_snli100k.json.

Measured with (2-core machine shared with three other jobs; /proc/loadavg before and after each call is recorded):

    aflite run ../shared/data/snli/train_100k.tsv.gz --out RUN --featurizer ngram --no-probe --quiet
    /usr/bin/time -o time_plain.json aflite explain ../shared/data/snli/train_100k.tsv.gz RUN --out M/plain --quiet
    /usr/bin/time -o time_stop.json aflite explain ../shared/data/snli/train_100k.tsv.gz RUN --out M/stop --quiet \
        --stop-rule
    /usr/bin/time -o time_ngc.json aflite explain ../shared/data/snli/train_100k.tsv.gz RUN --out M/ngc --quiet \
        --ngram-coefficients --neighbours 0

Usage: python docs/measured/explain_snli100k.py RUN M
"""
import json
import shutil
import sys
from pathlib import Path

run, m = Path(sys.argv[1]), Path(sys.argv[2])
here = Path(__file__).resolve().parent
plain = json.loads((m / "plain" / "results.json").read_text())
stop = json.loads((m / "stop" / "results.json").read_text())
summary = json.loads((run / "summary.json").read_text())


def load(name):
    return [float(x) for x in (m / name).read_text().split()[:3]]


def short(top):
    return [{k: t[k] for k in ("token", "label", "count", "p_label", "z", "significant")} for t in top]


out = {
    "dataset": "../shared/data/snli/train_100k.tsv.gz",
    "run": {"command": "aflite run ../shared/data/snli/train_100k.tsv.gz --out RUN --featurizer ngram --no-probe",
            "size_before": summary["size_before"], "size_after": summary["size_after"],
            "stop_reason": summary["stop_reason"], "parameters": summary["parameters"],
            "timings": summary["timings"]},
    "explain_command": "aflite explain ../shared/data/snli/train_100k.tsv.gz RUN --out OUT --quiet",
    "token_view": plain["token_view"],
    "token_test": {k: plain["token_test"][k] for k in ("alpha", "min_count", "random_subsets")},
    "significant_tokens": plain["significant_tokens"],
    "significant_tokens_random_per_seed": plain["significant_tokens_random_per_seed"],
    "bonferroni": plain["bonferroni"],
    "top_artifacts_full": short(plain["top_artifacts"]["full"]),
    "top_artifacts_kept": short(plain["top_artifacts"]["kept"]),
    "datamap_regions": plain["datamap"]["regions"],
    "label_issues": plain["label_issues"]["n"],
    "overlap": plain["overlap"],
    "surrogate": {"r2": plain["surrogate"]["r2"], "n_terms": plain["surrogate"]["n_terms"],
                  "top_terms": plain["surrogate"]["top_terms"][:10]},
    "first_phase_agreement_with_run": plain["first_phase"]["agreement_with_run"],
    "explain_time": json.loads((m / "time_plain.json").read_text()),
    "explain_stage_seconds": plain["timings"],
    "loadavg_before_after": [load("load_before_plain.txt"), load("load_after_plain.txt")],
    "cpus": int((m / "nproc.txt").read_text()),
    "stop_rule": {"command": "... --stop-rule", **{k: v for k, v in stop["stop_rule"].items()},
                  "time": json.loads((m / "time_stop.json").read_text()),
                  "loadavg_before_after": [load("load_before_stop.txt"), load("load_after_stop.txt")]},
}
if (m / "ngc" / "results.json").is_file():
    ngc = json.loads((m / "ngc" / "results.json").read_text())
    out["ngram_coefficients"] = {
        "command": "... --ngram-coefficients --neighbours 0",
        "refit_max_abs_diff": ngc["ngram_coefficients"]["refit_max_abs_diff"],
        "top_terms": ngc["ngram_coefficients"]["top_terms"][:15],
        "time": json.loads((m / "time_ngc.json").read_text()),
        "stage_seconds": ngc["timings"]}
(here / "explain_snli100k.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
for name in ("competency.png", "datamap.png"):
    shutil.copy(m / "plain" / name, here / f"explain_snli100k_{name}")
