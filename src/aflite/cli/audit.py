"""``aflite audit``: single-sentence label-leakage metrics, PECO, token artifacts and an HTML report."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from aflite.errors import InputError, ParameterError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "audit",
        help="measure single-sentence label leakage (biased accuracy, NBA/NBR, TRA, PECO) and write an HTML report",
        description="Audits a sentence-pair dataset for single-sentence label leakage (Saxon et al.): biased- and "
        "normal-condition accuracy, Δmaj, %R_R, NBA, NBR, TRA, PECO with its curve and a t-SNE map, and a token "
        "artifact table. Writes OUT/report.html (self-contained) and OUT/metrics.json. With --compare RUN_DIR, "
        "also audits the kept rows of an AFLite run and shows both side by side.",
    )
    p.add_argument("data", type=Path, help="dataset file or folder (SNLI/MNLI JSONL, GLUE TSV, CSV/TSV/JSONL/Parquet)")
    p.add_argument("--out", type=Path, default=Path("audit"), help="output folder (default ./audit)")
    p.add_argument("--compare", type=Path, default=None, metavar="RUN_DIR",
                   help="an AFLite run directory: audit its kept ids (kept_ids.txt) too, side by side")
    p.add_argument("--text-a", default=None, help="premise column (generic formats)")
    p.add_argument("--text-b", default=None, help="hypothesis column (generic formats)")
    p.add_argument("--label", default=None, help="label column (generic formats)")
    p.add_argument("--id", default=None, help="id column (generic formats)")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="audit a seeded random sample of N pairs (of D, and of D(Φ)) instead of all")
    p.add_argument("--views", nargs="+", default=["hypothesis", "premise"], choices=("hypothesis", "premise"),
                   help="single-sentence conditions to audit (default both)")
    p.add_argument("--featurizer", choices=("minilm", "ngram"), default="minilm",
                   help="frozen features of the linear biased/normal models (default minilm)")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    p.add_argument("-C", type=float, default=1.0, help="inverse L2 strength of the logistic regressions")
    p.add_argument("--pca", type=int, default=30, help="PECO: principal components (default 30)")
    p.add_argument("--clusters", type=int, default=50, help="PECO: k-means clusters (default 50)")
    p.add_argument("--threshold", type=float, default=0.2,
                   help="biased-region threshold on a cluster's L2 label-distribution distance (default 0.2)")
    p.add_argument("--tsne-sample", type=int, default=2000, help="points on the t-SNE map; 0: no map (default 2000)")
    p.add_argument("--top-tokens", type=int, default=10, help="token artifacts per label (default 10)")
    p.add_argument("--min-token-count", type=int, default=None,
                   help="skip tokens in fewer sentences (default max(5, 0.2%% of rows))")
    p.add_argument("--no-tra", action="store_true", help="skip fine-tuning and TRA")
    p.add_argument("--tra-steps", type=int, default=300, help="fine-tuning steps per condition model (default 300)")
    p.add_argument("--tra-batch-size", type=int, default=32, help="fine-tuning batch size (default 32)")
    p.add_argument("--tra-sample", type=int, default=200, help="held-out pairs for TRA relevance (default 200)")
    p.add_argument("--tra-eval", type=int, default=1000,
                   help="held-out pairs for the fine-tuned models' accuracies (default 1000)")
    p.add_argument("--peco-encoder", choices=("frozen", "finetuned"), default="frozen",
                   help="PECO embeddings: the frozen encoder, or the fine-tuned pair (normal) model (default frozen)")
    p.add_argument("--model-path", default=None, help="local Hugging Face model folder (default bundled MiniLM)")
    p.add_argument("--device", default=None, help="torch device (default cuda if available, else cpu)")
    p.add_argument("--cache", type=Path, default=None, help="embedding / model cache (default OUT/cache)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--title", default=None, help="report title")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(handler=run)


def _read_ids(path: Path) -> list[str]:
    if not path.is_file():
        raise InputError(f"{path}: not found (is it an AFLite run directory?)")
    ids = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not ids:
        raise InputError(f"{path}: no ids")
    return ids


def run(args: argparse.Namespace) -> int:
    from aflite import audit as A
    from aflite.atomic import write_json
    from aflite.data import load_dataset
    from aflite.report import write_report

    for name in ("folds", "pca", "clusters"):
        if getattr(args, name) < 1:
            raise ParameterError(f"--{name} must be >= 1")
    if args.folds < 2:
        raise ParameterError("--folds must be >= 2")
    if args.tra_steps < 1 or args.tra_sample < 1 or args.tra_eval < 1:
        raise ParameterError("--tra-steps, --tra-sample and --tra-eval must be >= 1")
    t0 = time.perf_counter()
    ds = load_dataset(args.data, text_a=args.text_a, text_b=args.text_b, label=args.label, id=args.id)
    if not ds.is_pair:
        raise InputError(f"{args.data}: the audit needs sentence pairs (give --text-a and --text-b)")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    cfg = A.AuditConfig(
        views=tuple(dict.fromkeys(args.views)), featurizer=args.featurizer, n_folds=args.folds, C=args.C,
        n_components=args.pca, n_clusters=args.clusters, bias_threshold=args.threshold,
        tsne_sample=args.tsne_sample, top_k_tokens=args.top_tokens, min_token_count=args.min_token_count,
        tra=not args.no_tra, peco_encoder=args.peco_encoder, tra_steps=args.tra_steps,
        tra_batch_size=args.tra_batch_size, tra_sample=args.tra_sample, tra_eval=args.tra_eval,
        model_path=args.model_path, device=args.device, seed=args.seed,
        cache_dir=str(args.cache if args.cache is not None else out / "cache"), show_progress=not args.quiet,
    )
    full = ds
    filtered = None
    if args.compare is not None:
        kept = _read_ids(args.compare / "kept_ids.txt")
        filtered = A.subset(full, kept)
    if args.sample is not None:
        ds = A.sample_rows(ds, args.sample, args.seed)
        if filtered is not None:
            filtered = A.sample_rows(filtered, args.sample, args.seed)
        # featurize only the rows audited (the union of both samples)
        union = set(np.asarray(ds.ids).astype(str)) | (set() if filtered is None else set(
            np.asarray(filtered.ids).astype(str)))
        base = A.subset(full, sorted(union))
    else:
        base = full
    feats = A.compute_features(base, cfg)  # cached; D and D(Φ) take their rows from it
    row_of = {str(i): r for r, i in enumerate(np.asarray(base.ids).astype(str))}

    def rows_features(sub: Any) -> dict[str, Any]:
        rows = np.fromiter((row_of[str(i)] for i in sub.ids), dtype=np.int64, count=len(sub))
        return {k: x[rows] for k, x in feats.items()}

    results = [A.audit(ds, cfg.views, cfg, name="D", features=rows_features(ds))]
    notes = [f"Data: {args.data}"]
    if args.compare is not None and filtered is not None:
        results.append(A.audit(filtered, cfg.views, cfg, name="D(Φ)", features=rows_features(filtered)))
        notes.append(f"D(Φ): the {len(kept):,} kept ids of the AFLite run {args.compare}"
                     + ("" if args.sample is None else f" (a random sample of {len(filtered):,})"))
    if args.sample is not None:
        notes.append(f"D: a random sample of {len(ds):,} of the {len(full):,} pairs (seed {args.seed})")
    write_json(out / "metrics.json", {
        "data": str(args.data),
        "compare": None if args.compare is None else str(args.compare),
        "results": [r.to_dict() for r in results],
        "seconds": round(time.perf_counter() - t0, 2),
    })
    title = args.title or f"Label-leakage audit of {args.data.name}"
    write_report(out / "report.html", results, title=title, notes=notes)
    for r in results:
        for v, va in r.views.items():
            m = va.metrics
            tra = "–" if va.tra is None else f"{100 * va.tra.score:.1f}"
            print(f"{r.name} {v}-only: biased {100 * m['biased_accuracy']:.1f}%"
                  f"  normal {100 * m['normal_accuracy']:.1f}%"
                  f"  Δmaj {100 * m['delta_maj']:+.1f}  %R_R {100 * m['pct_rr']:.1f}  NBA {100 * m['nba']:.1f}"
                  f"  NBR {100 * m['nbr']:.1f}  TRA {tra}  PECO {va.peco.score:.3f}"
                  f" (Table-4 scale {va.peco.score_fraction20:.3f})")
    print(f"wrote {out / 'report.html'} and {out / 'metrics.json'} ({time.perf_counter() - t0:.0f} s)")
    return 0
