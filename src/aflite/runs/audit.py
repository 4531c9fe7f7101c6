"""Auditing a dataset file into a folder (what ``aflite audit`` does): text pairs or images, D and optionally D(Φ).

Loads the file (:mod:`aflite.data`), featurizes once (:mod:`aflite.features`), audits each set with
:mod:`aflite.audit` and writes ``metrics.json``, ``report.html`` (and t-SNE maps for images) into ``out``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aflite.device import torch_device
from aflite.errors import InputError, ParameterError
from aflite.results import recording_warnings
from aflite.threads import limited


@dataclass
class AuditRun:
    """What :func:`audit_file` wrote: the folder, one :class:`aflite.audit.AuditResult` per audited set (D, and
    D(Φ) with ``compare``), the JSON it saved as ``results.json`` and the notes shown in the report."""

    out: Path
    results: list[Any]
    metrics: dict[str, Any]
    notes: list[str]


def check_audit_config(cfg: Any) -> None:
    """Sizes of an :class:`aflite.audit.AuditConfig` that no audit can use; refused before any work."""
    flags = {"n_folds": "--n-folds", "n_components": "--n-components", "n_clusters": "--n-clusters",
             "tra_steps": "--tra-steps",
             "tra_sample": "--tra-sample", "tra_eval": "--tra-eval", "peco_shuffles": "--peco-shuffles"}
    least = {"n_folds": 2, "peco_shuffles": 2}
    for name, flag in flags.items():
        if getattr(cfg, name) < least.get(name, 1):
            raise ParameterError(f"{name} ({flag}) must be >= {least.get(name, 1)}, got {getattr(cfg, name)}")


def check_audit_options(data_path: str | os.PathLike[str], *, featurizer: str | None = None,
                        model_path: str | None = None, path_column: str | None = None,
                        text_options: list[str] | tuple[str, ...] = (),
                        image_options: list[str] | tuple[str, ...] = ()) -> bool:
    """Whether ``data_path`` is audited as images; refused before any work: options of the other modality
    (``text_options``/``image_options``: the names of the options the caller set, as the caller spells them)
    and a featurizer that does not read the data's modality."""
    from aflite.audit.images import resolve_audit_featurizer
    from aflite.data import images

    is_images = images.is_image_input(data_path, featurizer, path_column)
    if text_options and is_images:
        raise ParameterError(f"{', '.join(text_options)}: text-only option(s); {data_path} holds images, whose audit "
                             "has no TRA, views, tokens, paper reference or groups (drop them)")
    if image_options and not is_images:
        raise ParameterError(f"{', '.join(image_options)}: image option(s), but {data_path} is read as text (name the "
                             "image column with --path-column, or use an image featurizer)")
    if is_images:
        resolve_audit_featurizer(featurizer, model_path)
    elif featurizer not in (None, "minilm", "ngram"):
        raise ParameterError(f"--featurizer {featurizer} is for images; {data_path} is read as text (minilm "
                             "or ngram)")
    return is_images


@recording_warnings()  # scikit-learn's warnings counted in results.json (aflite.results)
def audit_file(
    data_path: str | Path,
    out: str | Path,
    config: Any = None,
    *,
    compare: str | Path | None = None,
    sample: int | None = None,
    title: str | None = None,
    reference: str = "none",
    dataset_options: dict[str, Any] | None = None,
    groups: str = "premise",
    show_progress: bool = True,
    image_options: dict[str, Any] | None = None,
    featurizer_options: dict[str, Any] | None = None,
) -> AuditRun:
    """Audit a dataset file for single-sentence label leakage (what ``aflite audit`` does).

    Image data (an image folder, a table with a path column, a HF dataset with an Image column, or an image
    featurizer; :func:`aflite.data.images.is_image_input`) goes to :func:`audit_image_file`, with
    ``image_options`` (path_column, label, id_column, skip_bad_images) and ``featurizer_options``
    (image_size; embeddings/embedding_ids for ``precomputed``); there the default ``minilm`` means EfficientNet-Lite0
    (``hf-image`` when ``config.model_path`` is set), and ``reference``, ``groups`` and ``dataset_options`` do not
    apply.

    Loads ``data_path``, and with ``compare`` the kept rows of that AFLite run directory as D(Φ); with
    ``sample`` audits a seeded random sample of each; featurizes the union once (cached in ``config.cache_dir``,
    default ``out/cache``); audits each set with ``config`` (an :class:`aflite.audit.AuditConfig`); and writes
    ``out/report.html`` and ``out/metrics.json``. ``config.tra=None`` becomes "only on a GPU" here, once, so that
    the time estimate and both audits agree.
    """
    import dataclasses
    import sys

    from aflite import audit as A
    from aflite.atomic import write_json
    from aflite.data import load_dataset, warn_twins
    from aflite.report import paper_reference, write_report

    out = Path(out)
    cfg = config if config is not None else A.AuditConfig()
    from aflite.data import images

    if images.is_image_input(data_path, cfg.featurizer, (image_options or {}).get("path_column")):
        return audit_image_file(data_path, out, cfg, compare=compare, sample=sample, title=title,
                                image_options=image_options, featurizer_options=featurizer_options,
                                show_progress=show_progress)
    if cfg.featurizer not in ("minilm", "ngram"):
        raise ParameterError(f"--featurizer {cfg.featurizer} is for images; a sentence-pair audit takes minilm or "
                             "ngram")
    check_audit_config(cfg)
    paper_reference(reference)  # an unknown name fails here, before any work
    from aflite.rundir import check_outside_runs, read_kept_ids

    kept = read_kept_ids(Path(compare)) if compare is not None else None
    if compare is not None:  # the run compared with is read, never written
        check_outside_runs(out, [compare])
    t0 = time.perf_counter()
    ds = load_dataset(data_path, **{**(dataset_options or {}), "groups": groups})
    if not ds.is_pair:
        raise InputError(f"{data_path}: the audit needs sentence pairs (give the first and second text columns)")
    classes = np.unique(ds.labels)
    if len(classes) < 2:  # before featurizing (minutes), so nothing is computed or cached for nothing
        raise InputError(f"{data_path}: every one of the {len(ds):,} rows has the label {str(classes[0])!r}; an "
                         f"audit needs at least two classes")
    if compare is not None:
        from aflite.hashing import dataset_fingerprint
        from aflite.rundir import check_run_dataset

        check_run_dataset(compare, dataset_fingerprint(ds.ids, ds.labels, ds.texts_a, ds.texts_b), data_path)
    from aflite.data import check_view_texts

    for view in ("pair", *cfg.views):
        check_view_texts(ds, view, f"the audit's {view} view")
    warn_twins(ds, ("pair", *cfg.views), groups)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.cache_dir is None:
        cfg = dataclasses.replace(cfg, cache_dir=str(out / "cache"))
    full = ds
    filtered = A.subset(full, kept) if kept is not None else None
    if sample is not None:
        ds = A.sample_rows(ds, sample, cfg.seed)
        if filtered is not None:
            filtered = A.sample_rows(filtered, sample, cfg.seed)
        # featurize only the rows audited (the union of both samples)
        union = set(np.asarray(ds.ids).astype(str)) | (
            set() if filtered is None else set(np.asarray(filtered.ids).astype(str)))
        base = A.subset(full, sorted(union))
    else:
        base = full
    if cfg.tra is None:
        dev = torch_device(cfg.device)
        cfg = dataclasses.replace(cfg, tra=dev.startswith("cuda"))
        if not cfg.tra and show_progress:
            minutes = A.estimate_seconds(len(base), dataclasses.replace(cfg, tra=True))["fine-tuning (TRA)"] / 60
            print(f"TRA skipped: no GPU ({dev}); fine-tuning its {1 + len(cfg.views)} models on this CPU would take "
                  f"~{minutes:.0f} min (--tra runs it anyway)", file=sys.stderr)
    if cfg.peco_encoder == "finetuned" and not cfg.tra:
        raise ParameterError("peco_encoder 'finetuned' needs the fine-tuned models (--tra)")
    if show_progress:
        A.announce(A.estimate_seconds(len(base), cfg))
    t_feat = time.perf_counter()
    feats = A.compute_features(base, cfg)  # cached; D and D(Φ) take their rows from it
    t_feat = time.perf_counter() - t_feat
    row_of = {str(i): r for r, i in enumerate(np.asarray(base.ids).astype(str))}

    def rows_features(sub: Any) -> dict[str, Any]:
        rows = np.fromiter((row_of[str(i)] for i in sub.ids), dtype=np.int64, count=len(sub))
        return {k: x[rows] for k, x in feats.items()}

    results = [A.audit(ds, config=cfg, name="D", features=rows_features(ds))]
    # the featurization ran once for every audited set; D's time carries it (so the table's time is real)
    results[0].add_time("features", t_feat)
    notes = [f"Data: {data_path}"]
    if filtered is not None and kept is not None:
        results.append(A.audit(filtered, config=cfg, name="D(Φ)", features=rows_features(filtered)))
        notes.append(f"D's time includes the {t_feat:.0f} s featurization shared with D(Φ).")
        notes.append(f"D(Φ): the {len(kept):,} kept ids of the AFLite run {compare}"
                     + ("" if sample is None else f" (a random sample of {len(filtered):,})"))
    if sample is not None:
        notes.append(f"D: a random sample of {len(ds):,} of the {len(full):,} pairs (seed {cfg.seed})")
    metrics: dict[str, Any] = {
        "data": str(data_path),
        "compare": None if compare is None else str(compare),
        "results": [r.to_dict() for r in results],
        "seconds": round(time.perf_counter() - t0, 2),
    }
    from aflite.verdict import audit_verdict

    metrics["verdict"] = audit_verdict(metrics)
    write_json(out / "metrics.json", metrics)
    write_report(out / "report.html", results, title=title or f"Label-leakage audit of {Path(data_path).name}",
                 notes=notes, reference=reference)
    return _finish(AuditRun(out, results, metrics, notes), data_path, cfg.seed)


@limited  # one thread policy (aflite.threads)
def audit_image_file(data_path: str | os.PathLike[str], out: str | os.PathLike[str], config: Any = None, *,
                     compare: str | os.PathLike[str] | None = None, sample: int | None = None,
                     title: str | None = None, image_options: dict[str, Any] | None = None,
                     featurizer_options: dict[str, Any] | None = None, show_progress: bool = True) -> Any:
    """``aflite audit`` on an image dataset (any layout :func:`load_image_dataset` reads): featurize once
    (``config.featurizer``: efficientnet-lite0, hf-image with ``config.model_path``, or precomputed with
    ``featurizer_options['embeddings']``; cached in ``config.cache_dir``, default ``out/cache``), audit D — and with
    ``compare`` the kept ids of an AFLite run on the same data as D(Φ) — with :func:`audit_image_dataset`, and
    write ``out/metrics.json``, ``out/report.html`` and a t-SNE map per set (``tsne.png``, ``tsne_kept.png``).
    Returns an :class:`AuditRun`. Nothing is written before every image has been read."""
    import dataclasses
    import time

    from aflite import audit as A
    from aflite.atomic import atomic_open, write_json, write_text
    from aflite.audit.images import (
        BIASED_VIEW_NAME,
        IMAGE_VIEW,
        audit_image_dataset,
        colour_histograms,
        resolve_audit_featurizer,
    )
    from aflite.data.images import load_image_dataset
    from aflite.features import featurize
    from aflite.report import png_bytes, tsne_figure, write_image_report
    from aflite.rundir import read_kept_ids

    out = Path(out)
    cfg = config if config is not None else A.AuditConfig()
    cfg = dataclasses.replace(cfg, featurizer=resolve_audit_featurizer(cfg.featurizer, cfg.model_path),
                              views=(IMAGE_VIEW,), tra=False)
    check_audit_config(cfg)
    kept = read_kept_ids(Path(compare)) if compare is not None else None
    t0 = time.perf_counter()
    ds = load_image_dataset(data_path, **(image_options or {}))
    classes = np.unique(ds.labels)
    if len(classes) < 2:
        raise InputError(f"{data_path}: every one of the {len(ds):,} images has the label {str(classes[0])!r}; an "
                         "audit needs at least two classes")
    if compare is not None:
        from aflite.hashing import dataset_fingerprint
        from aflite.rundir import check_run_dataset

        check_run_dataset(compare, dataset_fingerprint(ds.ids, ds.labels, ds.texts_a, ds.texts_b), data_path)
    if cfg.cache_dir is None:
        cfg = dataclasses.replace(cfg, cache_dir=str(out / "cache"))
    full = ds
    filtered = A.subset(full, kept) if kept is not None else None
    base = full
    if sample is not None:
        ds = A.sample_rows(ds, sample, cfg.seed)
        filtered = None if filtered is None else A.sample_rows(filtered, sample, cfg.seed)
        union = set(ds.ids.astype(str)) | (set() if filtered is None else set(filtered.ids.astype(str)))
        base = A.subset(full, sorted(union))
    fopts = dict(featurizer_options or {})
    if cfg.featurizer == "precomputed":
        if not fopts.get("embeddings"):
            raise ParameterError("--featurizer precomputed needs --embeddings FILE")
        fopts = {k: v for k, v in fopts.items() if k in ("embeddings", "embedding_ids")}  # no encoder: no size
    else:
        fopts = {**fopts, "device": cfg.device}
        if cfg.featurizer == "hf-image":
            fopts["model_path"] = cfg.model_path
        fopts.pop("embeddings", None)
        fopts.pop("embedding_ids", None)
    t_feat = time.perf_counter()
    H = colour_histograms(base.texts_a)  # decodes every image: a corrupt one stops the audit here, before any work
    feats = featurize(base.texts_a, None, cfg.featurizer, cache_dir=cfg.cache_dir,
                      ids=base.ids.tolist() if cfg.featurizer == "precomputed" else None,
                      show_progress=show_progress, **fopts)
    X = np.asarray(feats.X.toarray() if hasattr(feats.X, "toarray") else feats.X, dtype=np.float32)
    t_feat = time.perf_counter() - t_feat
    row_of = {str(i): r for r, i in enumerate(base.ids.astype(str))}

    def audit_set(sub: Any, name: str) -> Any:
        rows = np.fromiter((row_of[str(i)] for i in sub.ids), dtype=np.int64, count=len(sub))
        return audit_image_dataset(sub.texts_a, sub.labels, X[rows], cfg, ids=sub.ids.astype(str).tolist(),
                                   name=name, colour=H[rows])

    results = [audit_set(ds, "D")]
    results[0].add_time("features", t_feat)
    notes = [f"Data: {data_path} ({len(full):,} images)", f"Embeddings: {cfg.featurizer}"
             + (f" ({cfg.model_path})" if cfg.model_path else "") + f", {X.shape[1]} dimensions"]
    if filtered is not None:
        results.append(audit_set(filtered, "D(Φ)"))
        notes.append(f"D(Φ): the {len(kept or []):,} kept ids of the AFLite run {compare}"
                     + ("" if sample is None else f" (a random sample of {len(filtered):,})"))
    if sample is not None:
        notes.append(f"D: a random sample of {len(ds):,} of the {len(full):,} images (seed {cfg.seed})")
    bad = list(getattr(full, "bad_images", []))
    out.mkdir(parents=True, exist_ok=True)
    if bad:
        write_text(out / "bad_images.txt", "".join(f"{b}\n" for b in bad))
        notes.append(f"{len(bad)} unreadable image(s) left out (bad_images.txt)")
    plots: dict[str, str] = {}
    for r, fname in zip(results, ("tsne.png", "tsne_kept.png"), strict=False):
        fig = tsne_figure(r, IMAGE_VIEW, cfg.bias_threshold, what="image embeddings")
        if fig is not None:
            with atomic_open(out / fname, "wb") as fh:
                fh.write(png_bytes(fig))
            plots[r.name] = fname
    metrics = {
        "data": str(data_path), "modality": "image", "compare": None if compare is None else str(compare),
        "biased_view": BIASED_VIEW_NAME, "featurizer": cfg.featurizer, "embedding_dim": int(X.shape[1]),
        "bad_images": {"count": len(bad), "file": "bad_images.txt"} if bad else None,
        "tsne_plots": plots, "results": [r.to_dict() for r in results],
        "seconds": round(time.perf_counter() - t0, 2),
    }
    from aflite.verdict import audit_verdict

    metrics["verdict"] = audit_verdict(metrics)
    write_json(out / "metrics.json", metrics)
    write_image_report(out / "report.html", results, title=title or f"Label-leakage audit of {Path(data_path).name}",
                       notes=notes)
    return _finish(AuditRun(out, results, metrics, notes), data_path, cfg.seed)


def _finish(run: AuditRun, data_path: str | os.PathLike[str], seed: int) -> AuditRun:
    """results.json (the envelope and every figure) and summary.md (one line per set and condition), the same
    whether the audit runs from Python or from ``aflite audit``."""
    from aflite.atomic import write_text
    from aflite.results import write_results_json

    write_results_json(run.out, run.metrics, command="audit", seed=seed)
    from aflite.report import write_page

    write_page(run.out)  # report.html again, on the explorer's frame with results.json's verdict
    plots = list(run.metrics.get("tsne_plots", {}).values())
    more = "" if not plots else f"; the t-SNE map{'s' if len(plots) > 1 else ''}: {', '.join(plots)}"
    from aflite.verdict import markdown

    write_text(run.out / "summary.md", f"# aflite audit: {data_path}\n\n" + markdown(run.metrics.get("verdict") or [])
               + "".join(f"- {line}\n" for line in summary_lines(run.results))
               + f"\nThe full report with its explanations: report.html{more}; every figure: results.json.\n")
    return run


def summary_lines(results: list[Any]) -> list[str]:
    """One line per audited set and condition, every accuracy next to chance (the majority-class rate)."""
    lines: list[str] = []
    for r in results:
        for v, va in r.views.items():
            m = va.metrics
            null = va.peco_null
            peco_null = "" if null is None else (f" vs shuffled labels {null.mean:.3f} (p95 {null.p95:.3f}),"
                                                 f" excess {null.excess:+.3f}, p={null.p_value:.2f}")
            image = v == "colour"
            tra = "" if image else "  TRA " + ("–" if va.tra is None else f"{100 * va.tra.score:.1f}")
            lines.append(f"{r.name} {v}-only (chance = majority class {100 * m.majority_accuracy:.1f}%):"
                         f" biased {100 * m.biased_accuracy:.1f}% (Δmaj {100 * m.delta_maj:+.1f})"
                         f"  normal{' (image embeddings)' if image else ''} {100 * m.normal_accuracy:.1f}%"
                         f" ({100 * m.normal_delta_maj:+.1f})  %R_R {100 * m.pct_rr:.1f}  NBA {100 * m.nba:.1f}"
                         f"  NBR {100 * m.nbr:.1f}{tra}  PECO{' (image embeddings)' if image else ''}"
                         f" {va.peco.score:.3f}{peco_null} (Table-4 scale {va.peco.score_fraction20:.3f})")
    return lines
