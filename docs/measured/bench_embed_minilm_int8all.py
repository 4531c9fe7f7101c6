# Run as: cd <checkout> && PYTHONPATH=src python docs/measured/bench_embed_minilm_int8all.py
# Output: docs/measured/bench_embed_minilm_int8all.json
"""MiniLM: the shipped onnx-int8 (FFN down-projections fp32) against int8 of every MatMul, side by side with torch.

Speed: the first 2,000 SNLI dev pairs, every backend once per round after torch, 3 rounds, median. Agreement: per-row
cosine to torch's Φ and the AFLite kept set (scaled Table 8 defaults, seed 0) of all 9,842 dev pairs with each Φ,
as ``aflite bench --embed minilm`` measures the shipped backends."""
import json, os, time
import numpy as np
from aflite.data import load_dataset
from aflite.encoders import tokenize
from aflite.experiments.embed_common import filter_kept, gemm_rates, jaccard
from aflite.encoders import onnx_text as OB
from aflite.features.minilm import MiniLMFeaturizer

N, ROUNDS, SEED = 2000, 3, 0
ds = load_dataset(os.environ.get("DATA", "/work/shared/data/snli/dev.tsv.gz"))
A, B = list(ds.texts_a), list(ds.texts_b)
y = np.asarray(ds.labels)
tf = MiniLMFeaturizer(backend="torch", show_progress=False)
tok, model = tf.loaded()
import torch  # noqa: E402

folder = os.environ.get("EXPORT_DIR", "/tmp/int8all")
fp = OB.export_text_model(model, torch, folder)
paths = {"onnx-int8 (shipped)": OB.quantize_int8(fp), "onnx-int8, every MatMul": OB.quantize_int8(fp, keep_fp32=False)}
runners = {k: OB.OnnxTextRunner(p, 384, tok.pad_token_id) for k, p in paths.items()}
items_all = tokenize(tok, A, B, 256)
items = items_all[:N]


def embed(name, which):
    if name == "torch":
        return tf.transform(A[:N], B[:N]) if which == "timed" else tf.transform(A, B)
    return runners[name].embed(items if which == "timed" else items_all, batch_size=32)


names = ["torch", *runners]
for n in names[1:]:
    runners[n].embed(items[:64], batch_size=32)  # warm-up
times = {n: [] for n in names}
loads = []
for rd in range(ROUNDS):
    for n in names:
        t = time.perf_counter(); embed(n, "timed"); times[n].append(time.perf_counter() - t)
    loads.append(round(os.getloadavg()[0], 2))
    print(rd, loads[-1], {n: round(N / v[-1]) for n, v in times.items()}, flush=True)
med = {n: float(np.median(v)) for n, v in times.items()}
full = {n: embed(n, "all") for n in names}
kept = {n: filter_kept(full[n], y, SEED) for n in names}
res = {
    "n_items": N, "rounds": ROUNDS, "n_kept_set_rows": len(y), "loadavg_1min_per_round": loads,
    "items_per_s": {n: round(N / s, 1) for n, s in med.items()},
    "speedup": {n: round(med["torch"] / s, 3) for n, s in med.items()},
    "speedup_per_round": {n: [round(t / s, 3) for t, s in zip(times["torch"], v)] for n, v in times.items() if n != "torch"},
    "mean_cosine": {n: round(float((full[n] * full["torch"]).sum(1).mean()), 6) for n in runners},
    "min_cosine": {n: round(float((full[n] * full["torch"]).sum(1).min()), 6) for n in runners},
    "kept": {n: len(kept[n][0]) for n in names},
    "stop_reason": {n: kept[n][1] for n in names},
    "kept_jaccard": {n: round(jaccard(kept[n][0], kept["torch"][0]), 4) for n in runners},
    "roofline": gemm_rates(),
}
print(json.dumps(res, indent=1))
with open("docs/measured/bench_embed_minilm_int8all.json", "w") as fh:
    json.dump(res, fh, indent=1)
