"""Agreement of the warm-up Φ embedded with ONNX Runtime (fp32, int8) against torch, after one real fine-tuning.

Fine-tunes the warm-up encoder once on the bundled SNLI sample's warm-up slice (the fine-tuned model is cached
without the backend in its key, so the other backends reuse it), embeds the remaining pairs with torch,
``onnx`` and ``onnx-int8``, and reports per-row cosine to torch's Φ, the seconds each embedding took, and the
Jaccard of AFLite's kept sets (Table 8 scaled to |D|, seed 0) on each Φ.

    python benchmarks/warmup_backend_agreement.py --cache DIR --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from aflite import AFLite, demo_dataset_path, featurize, load_dataset
from aflite.commands.run import scaled_defaults


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", required=True)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    ds = load_dataset(demo_dataset_path())
    out: dict = {"data": "bundled SNLI sample (2,949 pairs)", "load_start": os.getloadavg()[0], "backends": {}}
    X: dict[str, np.ndarray] = {}
    rows = None
    for backend in ("torch", "onnx", "onnx-int8"):
        t0 = time.perf_counter()
        f = featurize(ds.texts_a, ds.texts_b, "warmup", "pair", args.cache, y=ds.labels, show_progress=False,
                      backend=backend)
        secs = time.perf_counter() - t0
        X[backend], rows = np.asarray(f.X, dtype=np.float64), f.rows
        out["backends"][backend] = {"seconds_incl_fine_tuning_if_first": round(secs, 1), "rows": int(len(f.rows))}
    assert rows is not None
    y = np.asarray(ds.labels)[rows]
    kept = {}
    for backend, x in X.items():
        af = AFLite(**scaled_defaults(len(y)), random_state=0)  # type: ignore[arg-type]
        af.fit(x.astype(np.float32), y, groups=None if ds.groups is None else np.asarray(ds.groups)[rows])
        kept[backend] = set(np.flatnonzero(af.get_kept_mask()).tolist())
    ref = X["torch"] / np.linalg.norm(X["torch"], axis=1, keepdims=True)
    for backend in ("onnx", "onnx-int8"):
        xb = X[backend] / np.linalg.norm(X[backend], axis=1, keepdims=True)
        cos = (ref * xb).sum(1)
        a, b = kept["torch"], kept[backend]
        out["backends"][backend].update({"mean_cosine": round(float(cos.mean()), 5),
                                         "min_cosine": round(float(cos.min()), 5),
                                         "kept_jaccard": round(len(a & b) / len(a | b), 4)})
    out["kept"] = {k: len(v) for k, v in kept.items()}
    out["load_end"] = os.getloadavg()[0]
    with open(args.json, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
