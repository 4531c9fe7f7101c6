# Run as: cd <checkout> && PYTHONPATH=src python docs/measured/run_snli100k_minilm_noise_floor.py TORCH_RUN INT8_RUN
# (the two run folders of docs/measured/run_snli100k_minilm_backends_v2.json, with their cache/ inside)
# Output: docs/measured/run_snli100k_minilm_noise_floor.json
"""How much the kept set of `aflite run train_100k --featurizer minilm` moves when Φ barely changes.

Refilters the torch run's cached Φ (same data, premise groups, scaled Table 8 parameters, seed 0, as the run) with
(a) every value multiplied by (1 + 1e-6·N(0, 1)), (b) seed 1, and reports the kept-set Jaccard of each, and of the
onnx-int8 run's Φ, to the torch run's kept set; plus the per-row cosine of the int8 Φ to torch's on all rows."""
import json, sys
from pathlib import Path
import numpy as np
from aflite import AFLite
from aflite.data import load_dataset

torch_run, int8_run = Path(sys.argv[1]), Path(sys.argv[2])
res_t = json.loads((torch_run / "results.json").read_text())
ds = load_dataset(res_t["dataset"])
X = {be: np.load(next((run / "cache").glob("minilm-pair-*.npy"))) for be, run in (("torch", torch_run), ("onnx-int8", int8_run))}
y, groups, ids = ds.labels, ds.groups, np.asarray(ds.ids)
p = res_t["parameters"]
kw = {k: p[k] for k in ("target_size", "n_partitions", "train_size", "slice_size", "threshold")}


def kept(Xm, seed):
    af = AFLite(**kw, random_state=seed).fit(Xm, y, groups=groups)
    return set(ids[af.keep_mask_].tolist())


def jac(a, b):
    return round(len(a & b) / len(a | b), 4)


base = set((torch_run / "kept_ids.txt").read_text().split())
again = kept(X["torch"], 0)
rng = np.random.default_rng(0)
jitter = (X["torch"] * (1 + 1e-6 * rng.standard_normal(X["torch"].shape))).astype(np.float32)
cos = (X["onnx-int8"] * X["torch"]).sum(1) / (np.linalg.norm(X["onnx-int8"], axis=1) * np.linalg.norm(X["torch"], axis=1))
out = {
    "rows": int(len(y)), "parameters": kw,
    "refilter_of_torch_phi_reproduces_the_run": again == base,
    "kept_jaccard_to_torch_run": {
        "torch Φ x (1 + 1e-6 noise), seed 0": jac(kept(jitter, 0), base),
        "torch Φ, seed 1": jac(kept(X["torch"], 1), base),
        "onnx-int8 Φ (the int8 run's kept set)": jac(set((int8_run / "kept_ids.txt").read_text().split()), base),
    },
    "int8_cosine_to_torch_all_rows": {"mean": round(float(cos.mean()), 6), "min": round(float(cos.min()), 6)},
}
print(json.dumps(out, indent=1))
Path("docs/measured/run_snli100k_minilm_noise_floor.json").write_text(json.dumps(out, indent=1))
