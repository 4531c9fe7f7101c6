"""``aflite audit``: single-sentence label-leakage metrics, PECO, token artifacts and an HTML report; on image
data, the parts that are not text-specific (a colour-only biased model against the majority rate, NBA/NBR, PECO
on the embeddings, a t-SNE map)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from aflite.cli.flags import (
    FEATURIZER_OPTIONS,
    LOADERS,
    add_cache,
    add_columns,
    add_device,
    add_featurizer_flags,
    add_groups_option,
    add_image_options,
    add_out,
    add_quiet,
    add_seed,
    claim_out_folder,
    dataset_options,
    featurizer_flag_values,
    image_options,
)
from aflite.features.registry import featurizer_names
from aflite.rundir.commands import COMMANDS
from aflite.rundir.names import PAGE, RESULTS, SUMMARY_MD

# options that read text: refused (one line, exit 2) on image data, where they have nothing to act on
TEXT_ONLY = (("views", "--views"), ("tra", "--tra/--no-tra"), ("tra_steps", "--tra-steps"),
             ("tra_batch_size", "--tra-batch-size"), ("tra_sample", "--tra-sample"), ("tra_eval", "--tra-eval"),
             ("peco_encoder", "--peco-encoder"), ("top_k_tokens", "--top-k-tokens"),
             ("min_token_count", "--min-token-count"), ("reference", "--reference"), ("text_a", "--text-a"),
             ("text_b", "--text-b"), ("groups", "--groups"))
# and the reverse: options for image data only
IMAGE_ONLY = (("image_size", "--image-size"), ("skip_bad_images", "--skip-bad-images"),
              ("embeddings", "--embeddings"), ("embedding_ids", "--embedding-ids"))


# this command's entry in the one table of commands (aflite.rundir.commands.COMMANDS)
COMMAND = COMMANDS["audit"]

# the library calls whose keywords this command's flags are (tests/test_cli_keywords.py reads them)
LIBRARY = (COMMAND.library, "aflite.audit:AuditConfig", *LOADERS, *FEATURIZER_OPTIONS)
# flags that are no keyword of LIBRARY, each with why
CLI_ONLY = {"check": "--check NAME:KEY=VALUE, repeatable: one entry of AuditConfig(checks={NAME: {KEY: VALUE}})"}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "audit",
        help="measure single-sentence label leakage (biased accuracy, NBA/NBR, TRA, PECO) and write an HTML report",
        description="Audits a sentence-pair dataset for single-sentence label leakage (Saxon et al.): biased- and "
        "normal-condition accuracy, Δmaj, %R_R, NBA, NBR, TRA, PECO with its curve and a t-SNE map, and a token "
        "artifact table. Writes OUT/report.html (self-contained) and OUT/results.json. With --compare RUN_DIR, "
        "also audits the kept rows of an AFLite run and shows both side by side. On image data (a folder with one "
        "sub-folder per class, a table with a path column, a HF dataset with an Image column) the biased model "
        "sees only each image's colour histogram and the normal model its embedding (--featurizer "
        "efficientnet-lite0, hf-image with --model-path, or precomputed); PECO runs on the embeddings and "
        "OUT/tsne.png maps them. Text-only options (TRA, --views, tokens, --reference, --groups, --text-a/-b) are "
        "refused on images.",
    )
    p.add_argument("data", type=Path, help="dataset file or folder (SNLI/MNLI JSONL, GLUE TSV, CSV/TSV/JSONL/Parquet; "
                   "or image data, see the images group)")
    add_out(p, default="audit")
    p.add_argument("--compare", type=Path, default=None, metavar="RUN_DIR",
                   help="an AFLite run directory: audit its kept ids (kept_ids.txt) too, side by side")
    add_columns(p)
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="audit a seeded random sample of N pairs (of D, and of D(Φ)) instead of all")
    p.add_argument("--views", nargs="+", default=["hypothesis", "premise"], choices=("hypothesis", "premise"),
                   help="single-sentence conditions to audit (default both)")

    p.add_argument("--featurizer", choices=featurizer_names("audit"), default=None,
                   help="frozen features of the linear biased/normal models: minilm or ngram for text "
                   "(default minilm); efficientnet-lite0, hf-image (--model-path) or precomputed (--embeddings) for "
                   "images (default efficientnet-lite0, or hf-image when --model-path is given)")
    p.add_argument("--n-folds", type=int, default=5, help="cross-validation folds (default 5)")
    p.add_argument("-C", type=float, default=1.0, help="inverse L2 strength of the logistic regressions")
    p.add_argument("--n-components", type=int, default=30, help="PECO: principal components (default 30)")
    p.add_argument("--n-clusters", type=int, default=50, help="PECO: k-means clusters (default 50)")
    p.add_argument("--bias-threshold", type=float, default=0.2,
                   help="biased-region threshold on a cluster's L2 label-distribution distance (default 0.2)")
    p.add_argument("--peco-shuffles", type=int, default=30,
                   help="label shuffles for PECO's permutation null (default 30, seeded by --seed)")
    p.add_argument("--reference", default="none", metavar="NAME",
                   help="show the paper's figures for this dataset beside ours: none (default), "
                   "snli, mnli-b, mnli-u, sick, xnli, fever, anli, ocnli, caugnli, snli-debiased, mnli-debiased")
    p.add_argument("--tsne-sample", type=int, default=2000, help="points on the t-SNE map; 0: no map (default 2000)")
    p.add_argument("--top-k-tokens", type=int, default=10, help="token artifacts per label (default 10)")
    p.add_argument("--min-token-count", type=int, default=None,
                   help="skip tokens in fewer sentences (default max(5, 0.2%% of rows))")
    p.add_argument("--tra", action=argparse.BooleanOptionalAction, default=None,
                   help="fine-tune the TRA models even without a GPU (hours on a 2-core CPU at the defaults); "
                   "--no-tra skips fine-tuning and TRA (default: on with a GPU, off without one)")
    p.add_argument("--tra-steps", type=int, default=300, help="fine-tuning steps per condition model (default 300)")
    p.add_argument("--tra-batch-size", type=int, default=32, help="fine-tuning batch size (default 32)")
    p.add_argument("--tra-sample", type=int, default=200, help="held-out pairs for TRA relevance (default 200)")
    p.add_argument("--tra-eval", type=int, default=1000,
                   help="held-out pairs for the fine-tuned models' accuracies (default 1000)")
    p.add_argument("--peco-encoder", choices=("frozen", "finetuned"), default="frozen",
                   help="PECO embeddings: the frozen encoder, or the fine-tuned pair (normal) model (default frozen)")
    p.add_argument("--model-path", default=None, help="local Hugging Face model folder (default bundled MiniLM; for "
                   "images a vision model folder, --featurizer hf-image)")
    add_device(p, what="where the encoder and fine-tuning run")
    add_cache(p)
    add_seed(p)
    p.add_argument("--title", default=None, help="report title")
    p.add_argument("--check", action="append", default=None, metavar="NAME:KEY=VALUE",
                   help="an option of one audit check registered with options of its own (repeatable; the built-in "
                   "ones take theirs from the flags above): AuditConfig(checks={NAME: {KEY: VALUE}})")
    add_quiet(p)

    add_groups_option(p)
    claim_out_folder(p)
    g = add_image_options(p)
    add_featurizer_flags(g, "audit")  # --embeddings, --embedding-ids (ids: paths relative to the folder, or a column)
    p.set_defaults(handler=run, validate=_validate,
                   option_defaults={dest: p.get_default(dest) for dest, _ in TEXT_ONLY + IMAGE_ONLY})


def _validate(args: argparse.Namespace) -> None:
    """What can be refused before --out is created: a --compare folder that is not a run (or that holds --out),
    and options that do not apply to the data's modality (text-only options on images, image options on text)."""
    from aflite.check import check_options, resolve_checks
    from aflite.check.params import parse_check_flag
    from aflite.commands.audit import check_audit_options

    args.checks = parse_check_flag(args.check or [], lambda name: check_options(name, "audit"))
    resolve_checks(args.checks, "audit")  # each value's rule, before --out is claimed
    text_given = [flag for dest, flag in TEXT_ONLY if getattr(args, dest) != args.option_defaults[dest]]
    image_given = [flag for dest, flag in IMAGE_ONLY if getattr(args, dest) != args.option_defaults[dest]]
    args.images = check_audit_options(args.data, featurizer=args.featurizer, model_path=args.model_path,
                                      path_column=args.path_column, text_options=text_given,
                                      image_options=image_given)
    if args.compare is not None:
        from aflite.rundir.lock import check_outside_runs
        from aflite.rundir.read import read_kept_ids

        read_kept_ids(args.compare)
        check_outside_runs(args.out, [args.compare])  # the run it compares with is read, never written
        if args.cache_dir is not None:
            check_outside_runs(args.cache_dir, [args.compare], flag="--cache-dir")


def run(args: argparse.Namespace) -> int:
    from aflite.audit import AuditConfig
    from aflite.commands.audit import audit_file, summary_lines

    t0 = time.perf_counter()
    is_images = getattr(args, "images", False)
    if is_images:
        from aflite.audit.images import resolve_audit_featurizer

        featurizer = resolve_audit_featurizer(args.featurizer, args.model_path)
    else:
        featurizer = args.featurizer or "minilm"
    cfg = AuditConfig(
        views=tuple(dict.fromkeys(args.views)), n_folds=args.n_folds, C=args.C,
        n_components=args.n_components, n_clusters=args.n_clusters, bias_threshold=args.bias_threshold,
        tsne_sample=args.tsne_sample, top_k_tokens=args.top_k_tokens, min_token_count=args.min_token_count,
        tra=args.tra, peco_shuffles=args.peco_shuffles, peco_encoder=args.peco_encoder, tra_steps=args.tra_steps,
        tra_batch_size=args.tra_batch_size, tra_sample=args.tra_sample, tra_eval=args.tra_eval,
        model_path=args.model_path, device=args.device, seed=args.seed,
        cache_dir=None if args.cache_dir is None else str(args.cache_dir), show_progress=not args.quiet,
        checks=args.checks,
    )
    res = audit_file(args.data, args.out_folder, cfg, compare=args.compare, sample=args.sample, title=args.title,
                     reference=args.reference, dataset_options=dict(dataset_options(args)), groups=args.groups,
                     show_progress=not args.quiet, image_options=dict(image_options(args)) if is_images else None,
                     featurizer=featurizer,
                     featurizer_options={"image_size": args.image_size, **featurizer_flag_values(args)}
                     if is_images else None)
    out: Path = args.out
    print("\n".join(summary_lines(res.results)))
    plots = list(res.metrics.get("tsne_plots", {}).values())
    bad = res.metrics.get("bad_images")
    if bad:
        print(f"{bad['count']} unreadable image(s) left out, listed in {out / bad['file']}", file=sys.stderr)
    print(f"wrote {out / PAGE}, {out / SUMMARY_MD}, {out / RESULTS}"
          + "".join(f", {out / p}" for p in plots) + f" ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0
