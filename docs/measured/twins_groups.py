"""Counterfactual twins and the folds' groups (issue 12): build a twins set from SNLI dev and audit it twice.

Every one of the first 3,000 SNLI dev pairs is copied with an edited premise ("In a different scene, ...") and
another label (entailment→contradiction→neutral→entailment); the `family` column ties the pairs of one original
premise to their twins. Grouped by premise, a hypothesis sits in training with one label and in test with
another; grouped by family, a twin pair is on one side. Reproduce (from the repository root, 2 cores):

    python docs/measured/twins_groups.py ../shared/data/snli/dev.tsv.gz twins.tsv
    OMP_NUM_THREADS=1 aflite audit twins.tsv --out audit_premise --featurizer ngram --no-tra --tsne-sample 0 \
        --groups premise --quiet
    OMP_NUM_THREADS=1 aflite audit twins.tsv --out audit_family --featurizer ngram --no-tra --tsne-sample 0 \
        --groups family --quiet

The two results.json are twins_groups_audit_premise.json and twins_groups_audit_family.json.
"""

from __future__ import annotations

import gzip
import sys

OTHER = {"entailment": "contradiction", "contradiction": "neutral", "neutral": "entailment"}


def main(src: str, dst: str, n: int = 3000) -> None:
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        rows = [dict(zip(header, line.rstrip("\n").split("\t"), strict=True)) | {"id": f"dev-{i}"}
                for i, line in enumerate(fh)][:n]
    family: dict[str, int] = {}
    out = ["id\tpremise\thypothesis\tlabel\tfamily"]
    for r in rows:
        if r["label"] not in OTHER:
            continue
        f = family.setdefault(r["premise"], len(family))
        out.append(f"{r['id']}\t{r['premise']}\t{r['hypothesis']}\t{r['label']}\tf{f}")
        out.append(f"{r['id']}-cf\tIn a different scene, {r['premise']}\t{r['hypothesis']}\t{OTHER[r['label']]}\tf{f}")
    with open(dst, "w", encoding="utf-8") as fh:
        fh.write("\n".join(out) + "\n")
    print(f"{len(out) - 1} rows, {len(family)} families -> {dst}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
