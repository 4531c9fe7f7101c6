import os, time, json
import numpy as np
from aflite.core.ensemble import FastLogisticEnsemble
from aflite.experiments.shapes import make_snli_like
from aflite.runs.run import scaled_defaults
from aflite.splits import draw_partitions
d = make_snli_like(27508, 768, random_state=0)
p = scaled_defaults(len(d.y))
mask = draw_partitions(len(d.y), p["n_partitions"], p["train_size"], np.random.default_rng(0))
rows = np.arange(len(d.y))
ens = {k: FastLogisticEnsemble(device="torch-cpu", **kw) for k, kw in
       (("device_lbfgs", {"device_lbfgs": True}), ("device_onepass", {"device_onepass": True}))}
for e in ens.values():
    e.prepare(d.X, d.y, 3)
out = {k: [] for k in ens}
preds = {}
for rep in range(3):
    for k, e in ens.items():
        t0 = time.perf_counter(); preds[k] = e.fit_predict(rows, mask); dt = time.perf_counter() - t0
        out[k].append((round(dt, 2), e.last_stats.passes, round(float(np.mean(e.last_stats.iterations)), 1), os.getloadavg()[0]))
        print(k, out[k][-1], flush=True)
held = ~mask
print("held-out prediction agreement", float((preds["device_lbfgs"][held] == preds["device_onepass"][held]).mean()))
print(json.dumps({"partitions": p["n_partitions"], "train_size": p["train_size"], **out}))
