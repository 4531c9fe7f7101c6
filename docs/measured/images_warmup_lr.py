"""Learning rate of the image warm-up Φ: EfficientNet-Lite0 + a new linear head fine-tuned by aflite's one trainer
(:func:`aflite.encoders.training.fit_classifier`) with the ``WARMUP`` preset's schedule (AdamW, weight decay 0.01 except
biases/norms, 10 % linear warm-up then linear decay, batch 32, 3 epochs, dropout 0.1, seed 0) at several learning
rates, on coloured MNIST built by the benchmark's helper (benchmarks/images_coloured_mnist.py: ``build``, cue 90 %).

For each lr: the training loss (first and last step), the accuracy of the fine-tuned classifier (encoder + head) on
held-out digits coloured by the same rule (``test_id``) and with the cue flipped (``test_flipped``), the accuracy of
a logistic-regression probe on the fine-tuned encoder's features (what AFLite reads from Φ), and wall time.

Usage (from a scratch folder; OUT relative, so that no absolute path lands in the JSON), one thread:
    OMP_NUM_THREADS=1 AFLITE_NUM_THREADS=1 python /path/to/aflite/docs/measured/images_warmup_lr.py warmlr
Writes OUT/data (the images) and OUT/results.json; ``--json`` also copies it (e.g. to docs/measured/).
docs/measured/images_warmup_lr.json: ``warmlr --frozen --lrs 5e-5 1e-4 3e-4 1e-3 3e-3 --seeds 0 1 2`` (112 px);
docs/measured/images_warmup_lr_224.json: ``warm224 --lrs 5e-5 1e-3 --seeds 0 --image-size 224``.
"""

import argparse
import importlib.util
import json
import platform
import shutil
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("cm", ROOT / "benchmarks" / "images_coloured_mnist.py")
assert spec is not None and spec.loader is not None
cm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cm)

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("out", type=Path)
ap.add_argument("--lrs", type=float, nargs="+", default=[5e-5, 3e-4, 1e-3])
ap.add_argument("--seeds", type=int, nargs="+", default=[0], help="training seeds (head, dropout, batch order)")
ap.add_argument("--image-size", type=int, default=112)
ap.add_argument("--per-class-train", type=int, default=40)
ap.add_argument("--per-class-test", type=int, default=50)
ap.add_argument("--frozen", action="store_true", help="also probe the frozen (not fine-tuned) features")
ap.add_argument("--resummarise", action="store_true", help="only recompute the summary of OUT/results.json")
ap.add_argument("--json", type=Path, default=None, help="copy OUT/results.json here")
args = ap.parse_args()

import torch  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from aflite.encoders import training  # noqa: E402
from aflite.encoders import embed_items  # noqa: E402
from aflite.encoders.images import ImageEncoder  # noqa: E402


def mean_std(vals: list[float]) -> str:
    return f"{np.mean(vals):.3f} ± {np.std(vals):.3f}" if len(vals) > 1 else f"{vals[0]:.3f}"


def summarise(runs: list[dict]) -> dict[str, dict[str, object]]:
    """Mean ± std over seeds per learning rate (one row per lr; lr 0 is the frozen network)."""
    out: dict[str, dict[str, object]] = {}
    for lr in sorted({r["lr"] for r in runs}):
        rs = [r for r in runs if r["lr"] == lr]
        row: dict[str, object] = {"seeds": len(rs)}
        if lr > 0:
            row["final_loss"] = mean_std([r["final_loss"] for r in rs])
            row["mean_loss_last_epoch"] = mean_std([r["mean_loss_last_epoch"] for r in rs])
            for s in ("test_id", "test_flipped"):
                row[f"classifier_{s}"] = mean_std([r["classifier_accuracy"][s] for r in rs])
        for s in ("test_id", "test_flipped"):
            row[f"probe_{s}"] = mean_std([r["probe_accuracy"][s] for r in rs])
        if lr > 0:
            row["fit_seconds"] = mean_std([r["fit_seconds"] for r in rs])
        out["frozen (no fine-tuning)" if lr == 0 else f"lr {lr:g}"] = row
    return out


if args.resummarise:  # recompute the summary of an existing OUT/results.json (no training)
    result = json.loads((args.out / "results.json").read_text(encoding="utf-8"))
    result["summary"] = summarise(result["runs"])
    result["runs"] = result.pop("runs")  # keep the runs last
    (args.out / "results.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    if args.json:
        shutil.copy(args.out / "results.json", args.json)
    raise SystemExit(0)


torch.set_num_threads(1)
data = args.out / "data"
cm.build(data, cue=0.9, seed=0, n_train=args.per_class_train, n_test=args.per_class_test)
man = cm.read_manifest(data)
paths = {s: [str(data / s / i) for i in man[s]["id"]] for s in ("train", "test_id", "test_flipped")}
labels = {s: man[s]["label"] for s in paths}


def probe(F_train: np.ndarray, F_test: dict[str, np.ndarray]) -> dict[str, float]:
    """Held-out accuracy of a standardised logistic-regression probe on (fine-tuned or frozen) features."""
    mu, sd = F_train.mean(0), F_train.std(0) + 1e-6
    clf = LogisticRegression(max_iter=2000, C=0.1).fit((F_train - mu) / sd, labels["train"])
    return {s: float(np.mean(clf.predict((F - mu) / sd) == labels[s])) for s, F in F_test.items()}


runs = []
if args.frozen:
    training.seeded(0)
    enc = ImageEncoder("efficientnet-lite0", device="cpu", image_size=args.image_size)
    t0 = time.perf_counter()
    F = {s: embed_items(enc, enc.prepare(p)) for s, p in paths.items()}
    runs.append(
        {
            "lr": 0.0,
            "what": "frozen ImageNet features (no fine-tuning)",
            "probe_accuracy": probe(F["train"], {s: F[s] for s in ("test_id", "test_flipped")}),
            "embed_seconds": round(time.perf_counter() - t0, 1),
        }
    )
    print(json.dumps(runs[-1]), flush=True)
for lr, seed in ((lr, seed) for seed in args.seeds for lr in args.lrs):
    training.seeded(seed)  # per seed: the same head initialisation, dropout masks and batch order for every lr
    enc = ImageEncoder("efficientnet-lite0", device="cpu", image_size=args.image_size)
    cfg = training.WARMUP.replace(lr=lr, device="cpu", seed=seed, shuffle_seed=(seed,))
    t0 = time.perf_counter()
    head, res = training.fit_classifier(enc, enc.prepare(paths["train"]), labels["train"], 10, cfg, show_progress=False)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    F = {s: embed_items(enc, enc.prepare(p)) for s, p in paths.items()}
    with torch.inference_mode():
        head_acc = {
            s: float(np.mean(head(torch.from_numpy(F[s])).argmax(-1).numpy() == labels[s]))
            for s in ("train", "test_id", "test_flipped")
        }
    runs.append(
        {
            "lr": lr,
            "seed": seed,
            "steps": res.steps,
            "first_loss": round(res.losses[0], 4),
            "final_loss": round(res.losses[-1], 4),
            "mean_loss_last_epoch": round(float(np.mean(res.losses[-(res.steps // cfg.epochs) :])), 4),
            "classifier_accuracy": head_acc,
            "probe_accuracy": probe(F["train"], {s: F[s] for s in ("test_id", "test_flipped")}),
            "fit_seconds": round(fit_s, 1),
            "embed_seconds": round(time.perf_counter() - t0, 1),
            "losses": [round(v, 4) for v in res.losses],
        }
    )
    print(json.dumps({k: v for k, v in runs[-1].items() if k != "losses"}), flush=True)

result = {
    "what": "image warm-up Φ learning rate: EfficientNet-Lite0 fine-tuned with the WARMUP schedule at several lrs",
    "data": {
        "source": "../shared/data/images/mnist_5k",
        "builder": "benchmarks/images_coloured_mnist.py:build",
        "cue": 0.9,
        "seed": 0,
        "train": len(paths["train"]),
        "test_id": len(paths["test_id"]),
        "test_flipped": len(paths["test_flipped"]),
        "image_size": args.image_size,
    },
    "config": {k: v for k, v in vars(training.WARMUP).items() if k not in ("lr", "device", "seed", "shuffle_seed")},
    "threads": 1,
    "device": "cpu",
    "machine": platform.processor() or platform.machine(),
    "torch": torch.__version__,
    "command": "OMP_NUM_THREADS=1 AFLITE_NUM_THREADS=1 python docs/measured/images_warmup_lr.py "
    f"{args.out.name} --lrs {' '.join(map(str, args.lrs))} --seeds {' '.join(map(str, args.seeds))} "
    f"--image-size {args.image_size} --per-class-train {args.per_class_train} "
    f"--per-class-test {args.per_class_test}" + (" --frozen" if args.frozen else ""),
    "summary": summarise(runs),
    "runs": runs,
}
(args.out / "results.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
if args.json:
    shutil.copy(args.out / "results.json", args.json)
