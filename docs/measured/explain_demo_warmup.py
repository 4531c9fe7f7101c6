"""`aflite explain` on a warm-up-Φ run of the bundled SNLI sample (2,949 pairs; 268 warm-up pairs discarded):

    aflite run src/aflite/resources/snli_sample.tsv.gz --featurizer warmup --out RUN --quiet --no-probe
    aflite explain src/aflite/resources/snli_sample.tsv.gz RUN --out OUT --quiet

Usage: python docs/measured/explain_demo_warmup.py OUT  (writes docs/measured/explain_demo_warmup.json)
"""
import json
import sys
from pathlib import Path

r = json.loads((Path(sys.argv[1]) / "results.json").read_text())
keep = ("significant_tokens", "significant_tokens_random_per_seed", "token_view", "bonferroni", "run", "overlap",
        "first_phase", "timings")
out = {k: r[k] for k in keep}
out["top_artifacts"] = {k: [{f: t[f] for f in ("token", "label", "count", "z", "significant")} for t in v[:5]]
                        for k, v in r["top_artifacts"].items()}
out["regions"] = r["datamap"]["regions"]
out["label_issues"] = r["label_issues"]["n"]
out["surrogate"] = {k: r["surrogate"][k] for k in ("r2", "n_terms")}
out["surrogate"]["top_terms"] = r["surrogate"]["top_terms"][:5]
out["run"]["folder"] = "RUN"
out["run"]["dataset"] = "src/aflite/resources/snli_sample.tsv.gz"
(Path(__file__).resolve().parent / "explain_demo_warmup.json").write_text(json.dumps(out, indent=1,
                                                                                   ensure_ascii=False) + "\n")
