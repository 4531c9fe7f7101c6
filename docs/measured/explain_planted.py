"""The planted check of `aflite explain`: a token inserted into 40 % of one label's hypotheses, and 3 % of the
labels flipped, on NLI-shaped synthetic data (3,000 pairs; each label has cue words, drawn from the row's own label
with probability 0.75). Seeds 0-2. Writes docs/measured/explain_planted.json.

Usage: python docs/measured/explain_planted.py WORKDIR
"""
import csv
import json
import sys
from pathlib import Path

import numpy as np

from aflite.cli import main

LABELS = ("contradiction", "entailment", "neutral")
work = Path(sys.argv[1])
res = {"n": 3000, "flip": 0.03, "planted_share_of_contradiction": 0.4,
       "run": "aflite run DATA --featurizer ngram --no-probe -m 32 -t 0.25 -k 0.05 -n 0.3 --groups none",
       "explain": "aflite explain DATA RUN --out OUT --min-count 10", "seeds": {}}
for seed in range(3):
    rng = np.random.default_rng(seed)
    filler = [f"f{i}" for i in range(200)]
    cues = {lab: [f"{lab[:3]}{i}" for i in range(8)] for lab in LABELS}
    rows, flipped = [], set()
    for i in range(res["n"]):
        lab = LABELS[i % 3]
        hyp = list(rng.choice(filler, 4)) + [str(rng.choice(cues[lab if rng.random() < 0.75 else str(
            rng.choice(LABELS))])) for _ in range(2)]
        if lab == "contradiction" and rng.random() < 0.4:
            hyp.insert(int(rng.integers(0, len(hyp))), "zqx")
        gold = lab
        if rng.random() < res["flip"]:
            gold = LABELS[(LABELS.index(lab) + 1 + int(rng.integers(0, 2))) % 3]
            flipped.add(f"r{i}")
        rows.append([f"r{i}", " ".join(rng.choice(filler, 6)), " ".join(hyp), gold])
    d = work / f"s{seed}"
    d.mkdir(parents=True, exist_ok=True)
    data = d / "planted.tsv"
    data.write_text("id\tpremise\thypothesis\tlabel\n" + "".join("\t".join(r) + "\n" for r in rows))
    assert main(["run", str(data), "--out", str(d / "run"), "--featurizer", "ngram", "--quiet", "--no-probe", "-m",
                 "32", "-t", "0.25", "-k", "0.05", "-n", "0.3", "--groups", "none", "--overwrite"]) == 0
    assert main(["explain", str(data), str(d / "run"), "--out", str(d / "ex"), "--quiet", "--min-count", "10",
                 "--overwrite"]) == 0
    r = json.loads((d / "ex" / "results.json").read_text())
    with open(d / "ex" / "instances.csv", encoding="utf-8", newline="") as fh:
        inst = {x["id"]: x for x in csv.DictReader(fh)}
    flags = {i for i, x in inst.items() if x["label_issue"] == "1"}
    hard = {i for i, x in inst.items() if x["region"] == "hard"}
    top = r["top_artifacts"]["full"][0]
    res["seeds"][str(seed)] = {
        "top_artifact_full": {k: top[k] for k in ("token", "label", "z", "significant")},
        "significant_tokens": r["significant_tokens"],
        "flipped": len(flipped),
        "flipped_in_hard": len(flipped & hard) / len(flipped),
        "flipped_label_issue": len(flipped & flags) / len(flipped),
        "flipped_in_hard_or_label_issue": len(flipped & (hard | flags)) / len(flipped),
        "label_issues": len(flags), "label_issue_precision": len(flipped & flags) / max(len(flags), 1),
        "flipped_removed_by_aflite": sum(inst[i]["kept"] == "0" for i in flipped) / len(flipped),
        "rows_removed_by_aflite": sum(x["kept"] == "0" for x in inst.values()) / len(inst),
    }
(Path(__file__).resolve().parent / "explain_planted.json").write_text(json.dumps(res, indent=1) + "\n")
print(json.dumps(res["seeds"], indent=1))
