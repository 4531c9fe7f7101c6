"""The n-gram Φ explain of SNLI train_100k (explain_snli100k.json) read again: the known artifacts (nobody,
sleeping, cat, negations, ...) on full D, kept D(Φ) and the random subsets, and the significant (token, label)
pairs recounted with Gardner et al.'s p0 = 1/|Y| instead of the base rate (same n, same Bonferroni family).
Reads only the explain folder's tokens.csv and results.json (no recomputation).

Usage: python docs/measured/explain_snli100k_paper_null.py EXPLAIN_OUT   (the `plain` folder of
explain_snli100k.py) -> docs/measured/explain_snli100k_paper_null.json
"""
import json
import sys
from pathlib import Path

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
(Path(__file__).resolve().parent / "explain_snli100k_paper_null.json").write_text(
    json.dumps(out, indent=1, ensure_ascii=False) + "\n")
