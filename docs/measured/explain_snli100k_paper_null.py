"""The n-gram Φ explain of SNLI train_100k (explain_snli100k.json) read again: the known artifacts (nobody,
sleeping, cat, negations, ...) on full D, kept D(Φ) and the random subsets, and the significant (token, label)
pairs recounted with Gardner et al.'s p0 = 1/|Y| instead of the base rate (same n, same Bonferroni family).
Reads the explain folder's tokens.csv and results.json; given DATA and RUN too, it also recounts the hypotheses
with the paper's n (every occurrence: token_matrix(binary=False)), with either null, through aflite.explain.tokens.

Usage: python docs/measured/explain_snli100k_paper_null.py EXPLAIN_OUT [DATA RUN]   (EXPLAIN_OUT = the `plain`
folder of explain_snli100k.py; DATA = ../shared/data/snli/train_100k.tsv.gz; RUN = the n-gram run folder, ids
row-0 ... in file order) -> docs/measured/explain_snli100k_paper_null.json
"""
import csv
import gzip
import json
import sys
from pathlib import Path

import numpy as np

from aflite.checks import tokens as tk

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explain_snli100k_warmup import known_rows, paper_null, read_tokens  # noqa: E402

ex = Path(sys.argv[1])
res = json.loads((ex / "results.json").read_text())
sets = read_tokens(ex / "tokens.csv")
out = {
    "source": "the explain folder of explain_snli100k.json (n-gram Φ run of ../shared/data/snli/train_100k.tsv.gz)",
    "significant_tokens_base_rate": {k: res["significant_tokens"][k] for k in ("full", "kept")},
    "significant_tokens_paper_null_p0_uniform": paper_null(sets, res["bonferroni"]),
    "known_artifacts": known_rows(sets),
}
if len(sys.argv) > 3:
    with gzip.open(sys.argv[2], "rt", encoding="utf-8", newline="") as fh:
        table = list(csv.DictReader(fh, delimiter="\t"))
    kept_ids = set(Path(sys.argv[3], "kept_ids.txt").read_text().split())
    kept = np.flatnonzero([f"row-{i}" in kept_ids for i in range(len(table))])
    classes, y = np.unique([r["label"] for r in table], return_inverse=True)
    recount = {}
    for binary, unit in ((True, "texts"), (False, "occurrences")):  # texts + base: explain's own (a check)
        B, vocab = tk.token_matrix([r["hypothesis"] for r in table], binary=binary)
        for null in ("base", "uniform"):
            recount[f"{unit}_p0_{null}"] = {
                name: tk.competency(B, vocab, y.astype(np.int64), classes, rows, p0=null).n_significant
                for name, rows in (("full", None), ("kept", kept))}
    out["rows"] = {"full": len(table), "kept": len(kept)}
    out["significant_tokens_recounted"] = recount
(Path(__file__).resolve().parent / "explain_snli100k_paper_null.json").write_text(
    json.dumps(out, indent=1, ensure_ascii=False) + "\n")
