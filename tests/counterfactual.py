"""A small counterfactual NLI set for the tests, built by a seeded script from the bundled SNLI sample (real
sentences, CC BY-SA 4.0) in the manner of counterfactually augmented NLI (Kaushik et al. 2020): each original
pair gets

* a *revised-premise* twin: the same hypothesis under a minimally edited premise ("In a different scene, ...")
  with another label (drawn with the seed), so the hypothesis text recurs with a different label; and
* for entailment pairs whose hypothesis has "is"/"are", a *revised-hypothesis* twin: "not" inserted, labelled
  contradiction, the negation give-away that annotators write and that AFLite removes.

A hypothesis-only probe whose folds split the twins (premise groups: the twins' premises differ) learns a
hypothesis with one label and is tested on it with another, so it scores far *below* the majority rate on D; with
folds grouped by the ``family`` column (or ``--groups twins``) it does not. 600 originals give 1,340 rows.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np

from aflite.data import demo_dataset_path

LABELS = ("contradiction", "entailment", "neutral")


def write_counterfactual_nli(path: Path, n: int = 600, seed: int = 0) -> Path:
    """Write the set (id, premise, hypothesis, label, family) as a TSV at ``path`` from the first ``n`` pairs."""
    with gzip.open(demo_dataset_path(), "rt", encoding="utf-8") as fh:
        lines = fh.read().splitlines()[1 : n + 1]
    rng = np.random.default_rng(seed)
    out = ["id\tpremise\thypothesis\tlabel\tfamily"]
    family: dict[str, int] = {}
    for line in lines:
        pid, prem, hyp, lab = line.split("\t")
        f = family.setdefault(prem, len(family))
        out.append(f"{pid}\t{prem}\t{hyp}\t{lab}\tf{f}")
        other = [x for x in LABELS if x != lab][int(rng.integers(2))]
        out.append(f"{pid}-p\tIn a different scene, {prem[0].lower()}{prem[1:]}\t{hyp}\t{other}\tf{f}")
        m = re.search(r"\b(is|are)\b", hyp)
        if lab == "entailment" and m:
            out.append(f"{pid}-h\t{prem}\t{hyp[: m.end()]} not{hyp[m.end():]}\tcontradiction\tf{f}")
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path
