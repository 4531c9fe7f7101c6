# Run as: cd <checkout> && PYTHONPATH=src python docs/measured/bench_embed_efficientnet_kept_all.py
# Output: docs/measured/bench_embed_efficientnet_kept_all.json
"""EfficientNet-Lite0: the kept set on all 5,000 shared MNIST digits with torch, ONNX fp32 and ONNX int8 Φ, and the
filter's own sensitivity on this data (the noise floor of the kept-set Jaccard).

Every backend embeds all images once (one timed pass each, in the order torch, onnx, onnx-int8); AFLite runs with
the scaled Table 8 defaults and seed 0 on each Φ (``experiments.embed_common.filter_kept``, as ``aflite bench``).
Noise floor: the same filter on torch's Φ with every value multiplied by (1 + 1e-6·N(0, 1)) (a change far below
what any backend makes), and on torch's Φ with seed 1 instead of 0: if those already move the kept set, the
Jaccard bar measures the filter on this data, not the backend."""
import json, os, time
import numpy as np
from aflite.data.images import load_image_dataset
from aflite.experiments.embed_common import filter_kept, jaccard
from aflite.features.images import ImageFeaturizer

DATA = os.environ.get("DATA", "/work/shared/data/images/mnist_5k")
ds = load_image_dataset(DATA)
refs = list(ds.texts_a)
y = np.asarray(ds.labels)
res = {"data": DATA, "n": len(refs), "loadavg": {}, "seconds": {}, "items_per_s": {}}
X = {}
for be in ("torch", "onnx", "onnx-int8"):
    f = ImageFeaturizer("efficientnet-lite0", backend=be, show_progress=False, batch_size=32)
    f.fit(refs)
    f.transform(refs[:4])  # load and export outside the timing
    res["loadavg"][be] = list(os.getloadavg())
    t = time.perf_counter()
    X[be] = f.transform(refs)
    res["seconds"][be] = round(time.perf_counter() - t, 1)
    res["items_per_s"][be] = round(len(refs) / res["seconds"][be], 2)
    print(be, res["seconds"][be], "s", res["loadavg"][be], flush=True)
res["speedup"] = {be: round(res["seconds"]["torch"] / s, 2) for be, s in res["seconds"].items()}


def cosine(a, b):
    return (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)


res["cosine"] = {be: {"mean": round(float(cosine(X[be], X["torch"]).mean()), 6),
                      "min": round(float(cosine(X[be], X["torch"]).min()), 6)} for be in ("onnx", "onnx-int8")}
kept = {be: filter_kept(x, y, 0) for be, x in X.items()}
rng = np.random.default_rng(0)
jitter = (X["torch"] * (1 + 1e-6 * rng.standard_normal(X["torch"].shape))).astype(np.float32)
kept["torch, values x (1 + 1e-6 noise)"] = filter_kept(jitter, y, 0)
kept["torch, filter seed 1"] = filter_kept(X["torch"], y, 1)
res["kept_size"] = {k: int(len(v[0])) for k, v in kept.items()}
res["stop_reason"] = {k: v[1] for k, v in kept.items()}
res["kept_jaccard_to_torch"] = {k: round(jaccard(v[0], kept["torch"][0]), 4) for k, v in kept.items() if k != "torch"}
print(json.dumps(res, indent=1))
with open("docs/measured/bench_embed_efficientnet_kept_all.json", "w") as fh:
    json.dump(res, fh, indent=1)
