"""The label-leakage audit on images: the parts of the audit that are not text-specific.

The colour histogram of each image plays the single-sentence (hypothesis-only) input and the image embedding the
full input (:func:`audit_image_dataset`); images have no second input and no groups, so there is no TRA and no
token table. Reading the images is :mod:`aflite.data.images`; auditing an image file into a run folder is
:func:`aflite.commands.audit.audit_file` (an image folder or file list).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from aflite.audit.checks import audit_view
from aflite.audit.linear import cv_predict
from aflite.audit.results import AuditConfig, DatasetAudit
from aflite.check import CheckContext, CheckData
from aflite.data.images import open_image
from aflite.errors import InputError, ParameterError
from aflite.features.registry import default_featurizer, featurizer_names, spec
from aflite.threads import limited


def colour_histograms(refs: Sequence[str], bins: int = 4) -> np.ndarray:
    """A colour-only view of each image: the normalised joint RGB histogram (``bins``³ cells) of its non-black
    pixels, shape and position thrown away. It plays the part of the hypothesis-only input in the audit: a
    model that does well from it alone has found a colour artifact."""
    if bins < 2:
        raise ParameterError(f"bins must be >= 2, got {bins}")
    out = np.zeros((len(refs), bins**3), dtype=np.float32)
    for r, ref in enumerate(refs):
        px = np.asarray(open_image(ref), dtype=np.int64).reshape(-1, 3)
        px = px[px.max(axis=1) > 32]  # ink, not background
        if len(px) == 0:
            continue
        q = px * bins // 256
        cells = np.bincount((q[:, 0] * bins + q[:, 1]) * bins + q[:, 2], minlength=bins**3)
        out[r] = cells / cells.sum()
    return out


IMAGE_VIEW = "colour"  # the biased condition of an image audit: the colour histogram alone
BIASED_VIEW_NAME = "colour histogram (4×4×4 RGB cells of the non-black pixels)"


@limited  # one thread policy (aflite.threads)
def audit_image_dataset(refs: Sequence[str], labels: Any, embeddings: np.ndarray, config: Any = None, *,
                        ids: Sequence[str] | None = None, name: str = "D",
                        colour: np.ndarray | None = None) -> Any:
    """The parts of the label-leakage audit that are not text-specific, for images, as an
    :class:`aflite.audit.DatasetAudit` with one condition, ``colour``:

    - a *biased* model (L2 logistic regression, ``config.n_folds``-fold out of fold) on the colour-only view
      (:func:`colour_histograms`, or ``colour`` when already computed), against the majority rate, and the
      *normal* model on the image embeddings; NBA/NBR between them (:class:`aflite.audit.LeakageMetrics`);
    - PECO on the embeddings (PCA → k-means → cluster label divergence) with its label-shuffle null;
    - 2-D t-SNE coordinates of a seeded sample (``config.tsne_sample``) and the most label-skewed clusters,
      listed by image id;
    - every other registered audit check (:mod:`aflite.check`, scope ``"audit"``) that reads no text.

    These are the audit's checks (:mod:`aflite.audit.checks`) run on the one view, the colour histogram.

    Images have no second input and no groups, so there is no TRA and no token table (both read text).
    """

    cfg = config if config is not None else AuditConfig()
    y = np.asarray(labels).astype(str)
    X = np.asarray(embeddings, dtype=np.float32)
    n = len(y)
    if len(X) != n or len(refs) != n or (ids is not None and len(ids) != n):
        raise InputError(f"{len(refs)} images, {n} labels and {len(X)} embedding rows: they must be equal")
    if n < 10:
        raise InputError(f"too few images to audit ({n}); need at least 10")
    classes, counts = np.unique(y, return_counts=True)
    if len(classes) < 2:
        raise InputError("the audit needs at least 2 label classes")
    timings: dict[str, float] = {}
    t = time.perf_counter()
    H = colour_histograms(refs) if colour is None else np.asarray(colour, dtype=np.float32)
    if len(H) != n:
        raise InputError(f"{len(H)} colour histograms for {n} images")
    timings["colour_histograms"] = time.perf_counter() - t
    t = time.perf_counter()
    pred_n = classes[cv_predict(X, y, None, cfg.n_folds, cfg.C, cfg.seed)]
    timings["normal_model"] = time.perf_counter() - t
    names = [str(i) for i in (ids if ids is not None else refs)]
    data = CheckData(np.asarray(names, dtype=str), y, classes, np.searchsorted(classes, y), H, cfg.seed,
                     text_view=IMAGE_VIEW, refs=[str(r) for r in refs], options=cfg.to_dict(), context=CheckContext(
                         config=cfg, set_name=name, normal_pred=pred_n, embeddings=X))
    va = audit_view(data, timings, pred_n)  # the biased model on the colour view, PECO on the embeddings, ...
    timings["total"] = sum(timings.values())
    return DatasetAudit(name, n, {str(c): int(k) for c, k in zip(classes, counts, strict=True)}, {IMAGE_VIEW: va},
                       cfg, timings, y, np.asarray(names, dtype=str), f"image embeddings ({cfg.featurizer})")


def resolve_audit_featurizer(featurizer: str | None, model_path: str | None = None) -> str:
    """The Φ of an image audit: the registry's frozen image encoder by default (``efficientnet-lite0``; ``hf-image``
    when a model folder is given), also for the text default (``minilm``); an image featurizer of the audit as
    asked; text and warm-up Φ refused."""
    if featurizer is None or featurizer == default_featurizer("text"):
        return default_featurizer("image", model_path)
    allowed = featurizer_names("audit", "image")
    if featurizer not in allowed:
        raise ParameterError(f"--featurizer {featurizer} on images: the audit takes "
                             f"{', '.join(allowed)} (frozen features; the warm-up Φ runs inside aflite run)")
    if model_path is not None and not spec(featurizer).takes("model_path"):
        raise ParameterError(f"--model-path names a Hugging Face vision model folder, which --featurizer "
                             f"{featurizer} does not use; give --featurizer "
                             f"{default_featurizer('image', model_path)} (or drop --model-path)")
    return featurizer
