"""The AFLite paper's §5 claim on real images, in a controlled form: coloured MNIST with a known spurious cue.

From ``../shared/data/images/mnist_5k/`` (5,000 real MNIST digits, 500 per class) this script builds

- ``train/<label>/<id>.png`` — D: 400 digits per class (``--per-class-train``); a share ``--cue`` (default
  90 %) of each class is drawn in its class's colour (the spurious cue), the rest in the colour of a random
  other class;
- ``test_id/`` — 100 other digits per class (``--per-class-test``), coloured by the same rule (in distribution);
- ``test_flipped/`` — the same 1,000 digits, each in the colour of a random *other* class (the cue points the
  wrong way: the analogue of ImageNet-A);
- ``test_gray/`` — the same digits in grey (the cue absent);

then runs ``aflite run train --featurizer efficientnet-lite0`` (frozen ImageNet EfficientNet-Lite0, Φ) with the
paper's ImageNet parameters scaled to |D| (Table 8: m = 64, t and k ≈ 2.6 % of |D|, τ = 0; stop at 40 % of D as
in §5), and reports:

- the share of cued images among removed vs kept;
- accuracy of models trained on D, D(Φ) and random subsets of D of the same size (seeds), on test_id,
  test_flipped and test_gray: a linear probe and an MLP on the frozen Φ features, and a small CNN trained from
  scratch on the 28 × 28 colour pixels (a model that never saw Φ).

Usage (from the repository root; the embedding is cached under OUT/run/cache and OUT/cache)::

    OMP_NUM_THREADS=1 python benchmarks/images_coloured_mnist.py --out /tmp/cmnist [--warmup]

Writes OUT/results.json, OUT/table.md and OUT/kept_vs_removed.png; copy them to docs/measured/.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT.parent / "shared" / "data" / "images" / "mnist_5k"
COLOURS = np.array([(230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48),
                    (145, 30, 180), (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212)], dtype=np.float32)


def colour(gray: np.ndarray, c: int | None) -> np.ndarray:
    """A 28 × 28 grey digit drawn in colour ``c`` on black (``None``: left grey, as RGB)."""
    g = gray.astype(np.float32)[..., None] / 255.0
    rgb = g * (COLOURS[c] if c is not None else np.array([255.0, 255.0, 255.0], dtype=np.float32))
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


def build(out: Path, cue: float, seed: int, n_train: int = 400, n_test: int = 100) -> dict[str, Any]:
    """Write the four image folders and OUT/manifest.csv (split, id, label, colour, cued); idempotent."""
    from PIL import Image

    manifest = out / "manifest.csv"
    if manifest.is_file():
        return {"manifest": str(manifest), "built": False}
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, str, int, int, int]] = []
    for label in range(10):
        files = sorted((MNIST / str(label)).glob("*.png"))
        if len(files) != 500:
            raise SystemExit(f"{MNIST / str(label)}: expected 500 digits, found {len(files)}")
        perm = rng.permutation(len(files))
        train, test = perm[:n_train], perm[n_train : n_train + n_test]
        for split, idx in (("train", train), ("test_id", test)):
            n_cued = int(round(cue * len(idx)))
            cued = np.zeros(len(idx), dtype=bool)
            cued[rng.permutation(len(idx))[:n_cued]] = True
            for j, k in enumerate(idx):
                other = int((label + rng.integers(1, 10)) % 10)
                c = label if cued[j] else other
                rows.append((split, f"{label}/{files[k].stem}", label, c, int(cued[j])))
        for k in test:
            rows.append(("test_flipped", f"{label}/{files[k].stem}", label, int((label + rng.integers(1, 10)) % 10),
                         0))
            rows.append(("test_gray", f"{label}/{files[k].stem}", label, -1, 0))
    for split, ident, _label, c, _ in rows:
        gray = np.asarray(Image.open(MNIST / f"{ident}.png").convert("L"))
        dest = out / split / f"{ident}.png"
        dest.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(colour(gray, None if c < 0 else c)).save(dest)
    with open(manifest, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["split", "id", "label", "colour", "cued"])
        w.writerows((s, f"{ident}.png", lab, c, q) for s, ident, lab, c, q in rows)
    return {"manifest": str(manifest), "built": True}


def read_manifest(out: Path) -> dict[str, dict[str, np.ndarray]]:
    with open(out / "manifest.csv", newline="") as fh:
        recs = list(csv.DictReader(fh))
    res: dict[str, dict[str, np.ndarray]] = {}
    for split in ("train", "test_id", "test_flipped", "test_gray"):
        sel = [r for r in recs if r["split"] == split]
        if split == "train":  # the order `aflite run` reads the folder in, so that its cached Φ is reused
            sel.sort(key=lambda r: r["id"])
        res[split] = {"id": np.array([r["id"] for r in sel]), "label": np.array([int(r["label"]) for r in sel]),
                      "colour": np.array([int(r["colour"]) for r in sel]),
                      "cued": np.array([int(r["cued"]) for r in sel], dtype=bool)}
    return res


def aflite_run(out: Path, name: str, featurizer: str, extra: list[str], log: Path) -> Path:
    """``aflite run OUT/train --featurizer ...`` (resumable: an existing finished run is reused)."""
    run_dir = out / name
    if (run_dir / "results.json").is_file():
        return run_dir
    cmd = [sys.executable, "-m", "aflite", "run", str(out / "train"), "--out", str(run_dir), "--featurizer",
           featurizer, "--cache-dir", str(out / "cache"), "--device", "cpu", *extra]
    t0 = time.perf_counter()
    with open(log, "a") as fh:
        fh.write(" ".join(cmd) + "\n")
        fh.flush()
        rc = subprocess.call(cmd, stdout=fh, stderr=subprocess.STDOUT)
    if rc != 0:
        raise SystemExit(f"aflite run failed (exit {rc}); see {log}")
    (run_dir / "bench_seconds.txt").write_text(f"{time.perf_counter() - t0:.1f}\n")
    return run_dir


def embed(out: Path, split: str, ids: np.ndarray, image_size: int) -> np.ndarray:
    from aflite.features import featurize

    refs = [str((out / split / i).resolve()) for i in ids]
    opts = {} if image_size == 224 else {"image_size": image_size}
    return np.asarray(featurize(refs, None, "efficientnet-lite0", cache_dir=out / "cache", show_progress=False,
                                device="cpu", **opts).X)


def pixels(out: Path, split: str, ids: np.ndarray) -> np.ndarray:
    from PIL import Image

    return np.stack([np.asarray(Image.open(out / split / i).convert("RGB")) for i in ids]).astype(np.float32) / 255


def train_probe(kind: str, X: np.ndarray, y: np.ndarray, seed: int) -> Any:
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "probe":
        return make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=3000)).fit(X, y)
    return make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(256,), alpha=1e-3, early_stopping=True,
                                                         max_iter=200, random_state=seed)).fit(X, y)


def train_cnn(P: np.ndarray, y: np.ndarray, seed: int, epochs: int = 8) -> Any:
    """A small CNN (2 conv layers) from scratch on 28 × 28 RGB pixels; Adam 1e-3, batch 64."""
    import torch

    torch.manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    x = torch.from_numpy(P).permute(0, 3, 1, 2).contiguous()
    t = torch.from_numpy(y.astype(np.int64))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(seed)
    net.train()
    for _ in range(epochs):
        perm = rng.permutation(len(y))
        for s in range(0, len(y), 64):
            idx = torch.from_numpy(perm[s : s + 64])
            loss = torch.nn.functional.cross_entropy(net(x[idx]), t[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    return net


def cnn_accuracy(net: Any, P: np.ndarray, y: np.ndarray) -> float:
    import torch

    with torch.inference_mode():
        pred = net(torch.from_numpy(P).permute(0, 3, 1, 2).contiguous()).argmax(1).numpy()
    return float((pred == y).mean())


def evaluate_sets(out: Path, man: dict[str, dict[str, np.ndarray]], keep: np.ndarray, pool: np.ndarray,
                  seeds: list[int], image_size: int, models: list[str]) -> dict[str, Any]:
    """Accuracy of each model trained on D (the rows in ``pool``: D minus a warm-up slice), D(Φ) and random
    subsets of D of D(Φ)'s size, on the three test sets."""
    tr = man["train"]
    y = tr["label"]
    n_keep = int(keep.sum())
    sets: dict[str, list[np.ndarray]] = {
        "D": [pool],
        "D(Φ)": [np.flatnonzero(keep)],
        "random": [np.sort(np.random.default_rng([s, 7]).choice(pool, size=n_keep, replace=False)) for s in seeds],
    }
    tests = ("test_id", "test_flipped", "test_gray")
    feats = {s: embed(out, s, man[s]["id"], image_size) for s in ("train", *tests)} if (
        {"probe", "mlp"} & set(models)) else {}
    pix = {s: pixels(out, s, man[s]["id"]) for s in ("train", *tests)} if "cnn" in models else {}
    res: dict[str, Any] = {}
    for model in models:
        res[model] = {}
        for name, row_sets in sets.items():
            accs: dict[str, list[float]] = {t: [] for t in tests}
            for k, rows in enumerate(row_sets):
                for seed in (seeds if model in ("mlp", "cnn") and name != "random" else [seeds[k]]
                             if name == "random" else [seeds[0]]):
                    if model == "cnn":
                        net = train_cnn(pix["train"][rows], y[rows], seed)
                        for t in tests:
                            accs[t].append(cnn_accuracy(net, pix[t], man[t]["label"]))
                    else:
                        clf = train_probe(model, feats["train"][rows], y[rows], seed)
                        for t in tests:
                            accs[t].append(float((clf.predict(feats[t]) == man[t]["label"]).mean()))
            res[model][name] = {"n_train": int(len(row_sets[0])),
                                **{t: {"mean": float(np.mean(v)), "std": float(np.std(v)), "runs": v}
                                   for t, v in accs.items()}}
            print(f"  {model:5s} {name:6s} " + "  ".join(f"{t} {100 * np.mean(v):.1f}±{100 * np.std(v):.1f}"
                                                          for t, v in accs.items()), flush=True)
    return res


def audit(out: Path, tr: dict[str, np.ndarray], keep: np.ndarray, removed: np.ndarray, image_size: int,
          seed: int) -> dict[str, Any]:
    """The image audit (:func:`aflite.audit.images.audit_image_dataset`) on D, D(Φ) and a random subset of D(Φ)'s
    size: how well a colour-only model predicts the digit (vs the majority rate), and PECO on the Φ embeddings."""

    X = embed(out, "train", tr["id"], image_size)
    refs = [str((out / "train" / i).resolve()) for i in tr["id"]]
    pool = np.flatnonzero(keep | removed)  # D without a warm-up slice
    rnd = np.sort(np.random.default_rng([seed, 5]).choice(pool, size=int(keep.sum()), replace=False))
    res = {}
    for name, rows in (("D", pool), ("D(Φ)", np.flatnonzero(keep)), ("random", rnd)):
        a = audit_images([refs[i] for i in rows], tr["label"][rows], X[rows], seed=seed, tsne_sample=0)
        res[name] = {k: a[k] for k in ("n", "biased_accuracy", "normal_accuracy", "majority_accuracy", "delta_maj",
                                       "nba", "nbr", "peco", "biased_clusters")}
        print(f"  audit {name:6s} n={a['n']} colour-only acc {100 * a['biased_accuracy']:.1f} (majority "
              f"{100 * a['majority_accuracy']:.1f}), Φ-probe {100 * a['normal_accuracy']:.1f}, PECO {a['peco']:.3f}",
              flush=True)
    return res


def audit_images(refs: list[str], labels: Any, embeddings: np.ndarray, *, seed: int = 0,
                 tsne_sample: int = 2000) -> dict[str, Any]:
    """:func:`aflite.audit.images.audit_image_dataset` with the figures this benchmark records as a flat dict."""
    from aflite.audit import AuditConfig
    from aflite.audit.images import IMAGE_VIEW, audit_image_dataset

    cfg = AuditConfig(featurizer="precomputed", seed=seed, tsne_sample=tsne_sample, show_progress=False)
    va = audit_image_dataset(refs, labels, embeddings, cfg).views[IMAGE_VIEW]
    return {"n": int(len(refs)), **va.metrics.to_dict(), "peco": va.peco.score,
            "biased_clusters": int(len(va.peco.biased_clusters()))}


def figure(out: Path, man: dict[str, dict[str, np.ndarray]], run_dir: Path, dest: Path,
           labels: tuple[int, ...] = (3, 7), per: int = 8) -> None:
    """Figure 1 in the manner of the paper: per class, kept images (least predictable) beside removed ones
    (most predictable), with p̃ from the run's instances.csv."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    with open(run_dir / "instances.csv", newline="") as fh:
        inst = {r["id"]: r for r in csv.DictReader(fh)}
    fig, axes = plt.subplots(len(labels), 2 * per, figsize=(2 * per * 0.62, len(labels) * 0.95 + 0.4))
    for r, lab in enumerate(labels):
        ids = [i for i in man["train"]["id"] if i.startswith(f"{lab}/")]
        rows = [inst[i] for i in ids if i in inst]
        kept = [x for x in rows if x.get("kept") in ("1", "True", "true") and x.get("predictability") not in ("", None)]
        removed = [x for x in rows if x.get("kept") in ("0", "False", "false")]
        kept.sort(key=lambda x: float(x["predictability"]))
        removed.sort(key=lambda x: -float(x["predictability"]) if x.get("predictability") else 0.0)
        for c, rec in enumerate(kept[:per] + removed[:per]):
            ax = axes[r, c]
            ax.imshow(Image.open(out / "train" / rec["id"]))
            ax.set_xticks([])
            ax.set_yticks([])
            p = rec.get("predictability")
            ax.set_title(f"{float(p):.2f}" if p else "", fontsize=6, pad=1)
        axes[r, 0].set_ylabel(f"digit {lab}", fontsize=7)
    fig.text(0.27, 0.98, "retained by AFLite (lowest p̃)", ha="center", va="top", fontsize=8)
    fig.text(0.75, 0.98, "removed by AFLite (highest p̃)", ha="center", va="top", fontsize=8)
    fig.subplots_adjust(left=0.03, right=0.99, top=0.8, bottom=0.02, wspace=0.08, hspace=0.45)
    fig.savefig(dest, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cue", type=float, default=0.9, help="share of each class drawn in its class's colour")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--per-class-train", type=int, default=400, help="training digits per class (of 500)")
    ap.add_argument("--per-class-test", type=int, default=100, help="test digits per class (500 minus training)")
    ap.add_argument("--models", nargs="+", default=["probe", "mlp", "cnn"])
    ap.add_argument("--warmup", action="store_true", help="also run the warm-up Φ (EfficientNet-Lite0 fine-tuned)")
    ap.add_argument("--only-warmup", action="store_true",
                    help="evaluate only the warm-up Φ and add it to an existing OUT/results.json")
    ap.add_argument("--warmup-size", type=float, default=0.2, help="warm-up slice: the paper's 20 %% of D")
    ap.add_argument("--warmup-steps", type=int, default=60)
    ap.add_argument("--stage", choices=("build", "run", "all"), default="all")
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "log.txt"
    if args.per_class_train + args.per_class_test > 500:
        raise SystemExit("--per-class-train + --per-class-test must be at most 500 (digits per class)")
    info = build(out, args.cue, args.seed, args.per_class_train, args.per_class_test)
    if args.stage == "build":
        print(json.dumps(info))
        return 0
    man = read_manifest(out)
    n = len(man["train"]["id"])
    # Table 8's ImageNet column scaled to |D| (t 32.7K, k 33.6K of 1.28M; τ 0), stopping at 40 % of D (§5)
    t = max(10, round(32_700 / 1_281_167 * n))
    k = max(1, round(33_600 / 1_281_167 * n))
    params = ["--train-size", str(t), "--slice-size", str(k), "--target-size", "0.4", "--threshold", "0", "--no-probe",
              "--quiet"]
    size = [] if args.image_size == 224 else ["--image-size", str(args.image_size)]
    runs = {} if args.only_warmup else {"efficientnet-lite0": aflite_run(out, "run", "efficientnet-lite0",
                                                                           params + size, log)}
    if args.warmup or args.only_warmup:
        wt = str(round(args.warmup_size * n))
        wparams = ["--train-size", wt, "--slice-size", str(k), "--target-size", "0.4", "--threshold", "0", "--no-probe",
                   "--quiet", "--max-steps", str(args.warmup_steps)]
        runs["warmup"] = aflite_run(out, "run_warmup", "warmup", wparams + size, log)
    if args.stage == "run":
        return 0
    results: dict[str, Any] = {"cue": args.cue, "seed": args.seed, "seeds": args.seeds, "n_train": n,
                               "image_size": args.image_size, "filter_params": {"m": 64, "t": t, "k": k, "n": "40%",
                                                                                "tau": 0}, "phi": {}}
    if args.only_warmup and (out / "results.json").is_file():
        results = json.loads((out / "results.json").read_text())
    tr = man["train"]
    for phi, run_dir in runs.items():
        summary = json.loads((run_dir / "results.json").read_text())
        kept_ids = set((run_dir / "kept_ids.txt").read_text().split())
        warm_ids = set((run_dir / "warmup_ids.txt").read_text().split()) if (run_dir / "warmup_ids.txt").is_file() \
            else set()
        keep = np.array([i in kept_ids for i in tr["id"]])
        removed = np.array([(i not in kept_ids) and (i not in warm_ids) for i in tr["id"]])
        r: dict[str, Any] = {
            "run_dir": run_dir.name, "size_after": int(keep.sum()), "removed": int(removed.sum()),
            "warmup_rows": len(warm_ids), "stop_reason": summary.get("stop_reason"),
            "cued_share_D": float(tr["cued"].mean()),
            "cued_share_kept": float(tr["cued"][keep].mean()),
            "cued_share_removed": float(tr["cued"][removed].mean()) if removed.any() else None,
            "featurize_seconds": summary.get("timings", {}).get("featurize_seconds"),
            "filter_seconds": summary.get("timings", {}).get("filter_seconds"),
        }
        print(f"{phi}: |D(Φ)| = {r['size_after']}; cued share D {r['cued_share_D']:.3f}, kept "
              f"{r['cued_share_kept']:.3f}, removed {r['cued_share_removed']:.3f}", flush=True)
        # the warm-up slice is discarded: D and the random subsets are drawn from the same remainder
        pool = np.flatnonzero(np.array([i not in warm_ids for i in tr["id"]]))
        r["accuracy"] = evaluate_sets(out, man, keep, pool, args.seeds, args.image_size, args.models)
        r["audit"] = audit(out, tr, keep, removed, args.image_size, args.seeds[0])
        results["phi"][phi] = r
        figure(out, man, run_dir, out / f"kept_vs_removed_{phi}.png")
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "table.md").write_text(table(results))
    print(table(results))
    return 0


def table(results: dict[str, Any]) -> str:
    lines = []
    for phi, r in results["phi"].items():
        lines += [f"Φ = {phi}: |D| = {results['n_train'] - r['warmup_rows']}, |D(Φ)| = {r['size_after']}; cued "
                  f"share D {100 * r['cued_share_D']:.1f} %, kept {100 * r['cued_share_kept']:.1f} %, removed "
                  f"{100 * (r['cued_share_removed'] or 0):.1f} %", "",
                  "| model | training set | n | in-distribution | cue flipped | cue absent (grey) |",
                  "|---|---|---|---|---|---|"]
        for model, by_set in r["accuracy"].items():
            for name, v in by_set.items():
                cells = [f"{100 * v[t]['mean']:.1f} ± {100 * v[t]['std']:.1f}" for t in
                         ("test_id", "test_flipped", "test_gray")]
                lines.append(f"| {model} | {name} | {v['n_train']} | " + " | ".join(cells) + " |")
        lines += ["", "| audit (5-fold CV) | n | colour-only model | Φ linear model | majority | PECO (Φ) |",
                  "|---|---|---|---|---|---|"]
        for name, a in r.get("audit", {}).items():
            lines.append(f"| {name} | {a['n']} | {100 * a['biased_accuracy']:.1f} | {100 * a['normal_accuracy']:.1f} | "
                         f"{100 * a['majority_accuracy']:.1f} | {a['peco']:.3f} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
