"""What an audit does differently on text and on images, behind one interface for
:func:`aflite.commands.audit.audit_file`: its configuration, the loader's options, the checks of the loaded data, the
features, the audit of one set, the notes and figures of the report, and the page. :func:`audit_kind` picks one from
the data (decided once, as :func:`aflite.data.modality_of` decides for every command)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import JSON
from aflite.audit import announce, compute_features, estimate_seconds
from aflite.audit import audit as audit_text
from aflite.audit.images import (
    BIASED_VIEW_NAME,
    IMAGE_VIEW,
    audit_image_dataset,
    colour_histograms,
    resolve_audit_featurizer,
)
from aflite.audit.results import AuditMetrics
from aflite.data import check_view_texts, memory_kind, modality_of, option_label, warn_twins
from aflite.data.loader_options import LoaderOptions
from aflite.device import torch_device
from aflite.errors import InputError, ParameterError
from aflite.features import featurize_dataset
from aflite.features.registry import featurizer_names, featurizer_options, spec
from aflite.option import OptionValue
from aflite.report import paper_reference, png_bytes, render, render_images, tsne_figure

__all__ = ["ImageAudit", "TextAudit", "audit_kind"]


class TextAudit:
    """A sentence-pair audit: biased (one sentence) and normal (the pair) models, TRA, PECO, token artifacts."""

    modality = "text"
    unit = "pairs"
    rows_word = "rows"

    def __init__(self) -> None:
        self.reference = "none"

    def featurizer(self, featurizer: str | None, model_path: str | None, data_path: Any) -> str:
        allowed = featurizer_names("audit", "text", only=True)
        if featurizer is not None and featurizer not in allowed:
            raise ParameterError(_not_offered(featurizer, f"{data_path} is read as text", allowed))
        return featurizer or allowed[0]

    def configure(self, cfg: Any, data_path: Any, reference: str) -> Any:
        allowed = featurizer_names("audit", "text", only=True)
        if cfg.featurizer not in allowed:
            raise ParameterError(_not_offered(cfg.featurizer, "a sentence-pair audit", allowed))
        paper_reference(reference)  # an unknown name fails here, before any work
        self.reference = reference
        return cfg

    def loader_options(self, dataset_options: LoaderOptions | None, groups: str,
                       image_options: LoaderOptions | None) -> LoaderOptions:
        return {**(dataset_options or LoaderOptions()), "groups": groups}

    def check(self, ds: Any, cfg: Any, groups: str, data_path: Any) -> None:
        if not ds.is_pair:
            raise InputError(f"{data_path}: the audit needs sentence pairs (give the first and second text columns)")
        for view in ("pair", *cfg.views):  # a column empty in every row: nothing for the view's models
            check_view_texts(ds, view, f"the audit's {view} view")
        warn_twins(ds, ("pair", *cfg.views), groups)

    def resolve(self, cfg: Any, n: int, show_progress: bool) -> Any:
        """TRA only on a GPU unless asked (decided once, so that the time estimate and every audit agree)."""
        if cfg.tra is None:
            dev = torch_device(cfg.device)
            cfg = dataclasses.replace(cfg, tra=dev.startswith("cuda"))
            if not cfg.tra and show_progress:
                minutes = estimate_seconds(n, dataclasses.replace(cfg, tra=True))["fine-tuning (TRA)"] / 60
                print(f"TRA skipped: no GPU ({dev}); fine-tuning its {1 + len(cfg.views)} models on this CPU would "
                      f"take ~{minutes:.0f} min (--tra runs it anyway)", file=sys.stderr)
        if cfg.peco_encoder == "finetuned" and not cfg.tra:
            raise ParameterError(option_label("--peco-encoder finetuned needs the fine-tuned models (--tra)",
                                              "peco_encoder='finetuned' needs the fine-tuned models (tra=True)"))
        if show_progress:
            announce(estimate_seconds(n, cfg))
        return cfg

    def features(self, base: Any, cfg: Any, given: dict[str, OptionValue] | None, show_progress: bool) -> Any:
        return compute_features(base, cfg)  # cached

    def audit(self, sub: Any, name: str, rows: np.ndarray, feats: Any, cfg: Any) -> Any:
        return audit_text(sub, config=cfg, name=name, features={k: x[rows] for k, x in feats.items()})

    def notes(self, data_path: Any, ds: Any, cfg: Any, feats: Any) -> list[str]:
        return [f"Data: {data_path}"]

    def compare_notes(self, t_feat: float) -> list[str]:
        return [f"D's time includes the {t_feat:.0f} s featurization shared with D(Φ)."]

    def metrics(self, data_path: Any, compare: Any, ds: Any, results: list[Any], feats: Any, cfg: Any,
                notes: list[str]) -> tuple[AuditMetrics, dict[str, bytes]]:
        return {"data": str(data_path), "compare": None if compare is None else str(compare),
                "results": [r.to_dict() for r in results]}, {}

    def page(self, results: list[Any], *, title: str, notes: list[str], verdict: list[str]) -> str:
        return render(results, title=title, notes=notes, reference=self.reference, verdict=verdict)


def _not_offered(featurizer: str, what: str, allowed: tuple[str, ...]) -> str:
    """Why the text audit refuses ``featurizer``, in the words of what it is (the registry's spec): an image
    featurizer, one trained on the labels, a combination, or a name that is no featurizer at all."""
    found = spec(featurizer)  # an unknown name or a bad combination: its own precise reason
    opt = option_label(f"--featurizer {featurizer}", f"featurizer={featurizer!r}")
    takes = f"{what}, so the audit takes {' or '.join(allowed)}"
    if not found.reads("text") or found.modality == "image":
        return f"{opt} is for images; {takes}"
    if found.parts:
        return (f"{opt}: the audit does not take a combination (run and embed do); {takes}, one "
                f"featurizer")
    if found.needs_labels:
        return (f"{opt}: the audit does not offer it (its Φ is fine-tuned on the labels whose leakage "
                f"the audit measures; its TRA fine-tunes its own models); {takes}")
    return f"{opt}: the audit does not offer it; {takes}"


class ImageAudit:
    """An image audit: a colour-only biased model, the normal model on embeddings, PECO and t-SNE maps."""

    modality = "image"
    unit = "images"
    rows_word = "images"

    def featurizer(self, featurizer: str | None, model_path: str | None, data_path: Any) -> str:
        return resolve_audit_featurizer(featurizer, model_path)

    def configure(self, cfg: Any, data_path: Any, reference: str) -> Any:
        return dataclasses.replace(cfg, featurizer=resolve_audit_featurizer(cfg.featurizer, cfg.model_path),
                                   views=(IMAGE_VIEW,), tra=False)

    def loader_options(self, dataset_options: LoaderOptions | None, groups: str,
                       image_options: LoaderOptions | None) -> LoaderOptions:
        return {**(image_options or LoaderOptions())}

    def check(self, ds: Any, cfg: Any, groups: str, data_path: Any) -> None:
        """Nothing beyond the loader's own checks (every image is decoded with the features)."""

    def resolve(self, cfg: Any, n: int, show_progress: bool) -> Any:
        return cfg

    def features(self, base: Any, cfg: Any, given: dict[str, OptionValue] | None, show_progress: bool) -> Any:
        """(embeddings, colour histograms) of the union of the audited sets; the histograms decode every image, so
        a corrupt one stops the audit here, before any work."""
        options = _route(cfg, given)
        H = colour_histograms(base.texts_a)
        feats = featurize_dataset(base, cfg.featurizer, cache_dir=cfg.cache_dir, show_progress=show_progress,
                                  **options)
        X = np.asarray(feats.X.toarray() if hasattr(feats.X, "toarray") else feats.X, dtype=np.float32)
        return X, H

    def audit(self, sub: Any, name: str, rows: np.ndarray, feats: Any, cfg: Any) -> Any:
        X, H = feats
        return audit_image_dataset(sub.texts_a, sub.labels, X[rows], cfg, ids=sub.ids.astype(str).tolist(),
                                   name=name, colour=H[rows])

    def notes(self, data_path: Any, ds: Any, cfg: Any, feats: Any) -> list[str]:
        return [f"Data: {data_path} ({len(ds):,} images)", f"Embeddings: {cfg.featurizer}"
                + (f" ({cfg.model_path})" if cfg.model_path else "") + f", {feats[0].shape[1]} dimensions"]

    def compare_notes(self, t_feat: float) -> list[str]:
        return []

    def metrics(self, data_path: Any, compare: Any, ds: Any, results: list[Any], feats: Any, cfg: Any,
                notes: list[str]) -> tuple[AuditMetrics, dict[str, bytes]]:
        """The figures, and the files besides: bad_images.txt (noted) and a t-SNE map per set."""
        files: dict[str, bytes] = {}
        bad = list(getattr(ds, "bad_images", []))
        if bad:
            files["bad_images.txt"] = "".join(f"{b}\n" for b in bad).encode("utf-8")
            notes.append(f"{len(bad)} unreadable image(s) left out (bad_images.txt)")
        plots: dict[str, str] = {}
        for r, fname in zip(results, ("tsne.png", "tsne_kept.png"), strict=False):
            fig = tsne_figure(r, IMAGE_VIEW, cfg.bias_threshold, what="image embeddings")
            if fig is not None:
                files[fname] = png_bytes(fig)
                plots[r.name] = fname
        return {"data": str(data_path), "modality": "image", "compare": None if compare is None else str(compare),
                "biased_view": BIASED_VIEW_NAME, "featurizer": cfg.featurizer, "embedding_dim": int(feats[0].shape[1]),
                "bad_images": {"count": len(bad), "file": "bad_images.txt"} if bad else None,
                "tsne_plots": plots, "results": [r.to_dict() for r in results]}, files

    def page(self, results: list[Any], *, title: str, notes: list[str], verdict: list[str]) -> str:
        return render_images(results, title=title, notes=notes, verdict=verdict)


def _route(cfg: Any, given: dict[str, OptionValue] | None) -> JSON:
    """The featurizer options of an image audit: those the registry routes to its featurizer (a precomputed Φ
    needs its --embeddings), with the audit's device and model folder."""
    path = cfg.model_path if spec(cfg.featurizer).takes("model_path") else None  # also TRA's model folder
    return featurizer_options(cfg.featurizer, **{**(given or {}), "device": cfg.device, "model_path": path})


def audit_kind(data_path: Any, featurizer: str | None = None,
               path_column: str | None = None) -> TextAudit | ImageAudit:
    """The audit of ``data_path``'s modality (:func:`aflite.data.modality_of`; an image featurizer means images;
    in-memory data are text)."""
    reads = spec(featurizer).modality if featurizer is not None else "any"
    source = data_path if memory_kind(data_path) is not None else Path(data_path)
    return ImageAudit() if modality_of(source, reads=reads, path_column=path_column) == "image" else TextAudit()
