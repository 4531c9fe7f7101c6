"""Control for the label shift of D(Φ warmup): hypothesis-only TF-IDF LR (aflite.evaluate._NgramLR, as in
aflite evaluate) trained on random subsets of D (warm-up rows excluded) with D(Φ warmup)'s exact label counts,
tested on SNLI dev. Seeds 0-2."""
import json
from collections import Counter

import numpy as np

from aflite.data import load_dataset
from aflite.evaluate import _NgramLR

P = "runs/snli_protocol"
ds = load_dataset("../shared/data/snli/train_100k.tsv.gz")
dev = load_dataset("../shared/data/snli/dev.tsv.gz")
ids = [str(i) for i in ds.ids.tolist()]
row = {i: r for r, i in enumerate(ids)}
warm = {row[i] for i in open(f"{P}/run_warmup/warmup_ids.txt").read().split()}
kept = [row[i] for i in open(f"{P}/run_warmup/kept_ids.txt").read().split()]
classes = np.unique(ds.labels.astype(str))
y = np.searchsorted(classes, ds.labels.astype(str))
target = Counter(ds.labels[kept].astype(str).tolist())
pool = np.array([r for r in range(len(ds)) if r not in warm])
out = {"target_label_counts": dict(target), "seeds": {}}
for seed in range(3):
    rng = np.random.default_rng([seed, 77])
    rows = np.sort(np.concatenate([rng.choice(pool[ds.labels[pool].astype(str) == lab], size=n, replace=False)
                                   for lab, n in sorted(target.items())]))
    m = _NgramLR().fit([ds.texts_b[i] for i in rows], None, y[rows], len(classes))
    pred = classes[m.predict(dev.texts_b, None)]
    gold = dev.labels.astype(str)
    acc = float(np.mean(pred == gold))
    per = {lab: float(np.mean(pred[gold == lab] == lab)) for lab in classes}
    out["seeds"][seed] = {"accuracy": acc, "per_label": per, "size": int(len(rows))}
    print(seed, round(100 * acc, 1), {k: round(100 * v, 1) for k, v in per.items()}, flush=True)
accs = [v["accuracy"] for v in out["seeds"].values()]
out["mean"], out["std"] = float(np.mean(accs)), float(np.std(accs, ddof=1))
json.dump(out, open(f"{P}/label_matched.json", "w"), indent=1)
print("mean", round(100 * out["mean"], 1), "±", round(100 * out["std"], 1))
