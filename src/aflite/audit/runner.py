""":func:`audit`: featurize, run the normal model (and, on a GPU, fine-tune TRA's models) once, then every
registered audit check (:mod:`aflite.audit.checks`) per single-sentence view."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from aflite.audit.checks import audit_view
from aflite.audit.estimate import announce, estimate_seconds
from aflite.audit.finetuned import FineTuned, _model_path, finetune, predict
from aflite.audit.linear import cv_predict
from aflite.audit.metrics import AUDIT_VIEWS
from aflite.audit.results import AuditConfig, DatasetAudit, ViewAudit
from aflite.check import CheckContext, CheckData, resolve_checks
from aflite.data import COLUMNS, Columns, Dataset, open_dataset, with_columns
from aflite.data.keywords import option_label
from aflite.device import torch_device
from aflite.errors import InputError, ParameterError
from aflite.features import featurize
from aflite.features.registry import featurizer_names, featurizer_options, spec
from aflite.hashing import data_fingerprint
from aflite.splits import holdout_groups as _holdout_split
from aflite.threads import limited

log = logging.getLogger("aflite.audit")


def sample_rows(dataset: Any, n: int, seed: int = 0) -> Any:
    """A seeded random sample of ``n`` rows (file order kept); the dataset itself when it has at most n rows."""
    if n < 1:
        raise ParameterError(f"sample size must be >= 1, got {n}")
    if len(dataset) <= n:
        return dataset
    rows = np.sort(np.random.default_rng(seed).permutation(len(dataset))[:n])
    return subset(dataset, np.asarray(dataset.ids)[rows])


def subset(dataset: Any, keep_ids: Sequence[Any] | np.ndarray) -> Any:
    """The rows of ``dataset`` whose id is in ``keep_ids`` (file order kept)."""
    ids = np.asarray(dataset.ids).astype(str)
    want = {str(i) for i in keep_ids}
    mask = np.fromiter((i in want for i in ids), dtype=bool, count=len(ids))
    missing = len(want) - int(mask.sum())
    if missing > 0:
        raise InputError(f"{missing} of {len(want)} kept ids are not in the dataset (was the run made on it?)")
    rows = np.flatnonzero(mask)
    return dataclasses.replace(
        dataset,
        texts_a=[dataset.texts_a[i] for i in rows],
        texts_b=None if dataset.texts_b is None else [dataset.texts_b[i] for i in rows],
        labels=np.asarray(dataset.labels)[rows],
        ids=np.asarray(dataset.ids)[rows],
        groups=None if dataset.groups is None else np.asarray(dataset.groups)[rows],
    )


def _features(dataset: Any, view: str, cfg: AuditConfig) -> np.ndarray:
    # the audit's model folder is its fine-tuned models' too (TRA): routed to Φ only when the featurizer takes one
    path = cfg.model_path if spec(cfg.featurizer).takes("model_path") else None
    opts = featurizer_options(cfg.featurizer, model_path=path, device=cfg.device)
    feats = featurize(
        dataset.texts_a, dataset.texts_b, featurizer=cfg.featurizer, view=view, cache_dir=cfg.cache_dir,
        show_progress=cfg.show_progress, **opts,
    )
    X = feats.X
    return X.toarray() if hasattr(X, "toarray") else np.asarray(X)


@limited  # one thread policy (aflite.threads)
def compute_features(dataset: Any, cfg: AuditConfig) -> dict[str, np.ndarray]:
    """The frozen feature matrices the linear models use: ``pair`` and each single-sentence view in
    ``cfg.views`` (``--views hypothesis`` never embeds the premises on their own). ngram builds its pair matrix
    from both single-field matrices, so it always has both (n-grams are cheap)."""
    halves = spec(cfg.featurizer).halves
    need = AUDIT_VIEWS if halves else tuple(cfg.views)
    single: dict[str, np.ndarray] = {v: _features(dataset, v, cfg) for v in AUDIT_VIEWS if v in need}
    # ngram featurizes each field on its own, so its pair matrix is the two single-field matrices side by side
    pair = np.hstack([single["premise"], single["hypothesis"]]) if halves else _features(
        dataset, "pair", cfg)
    return {**single, "pair": pair}


def _normal_features(single: dict[str, np.ndarray], pair: np.ndarray) -> tuple[np.ndarray, str]:
    """Normal-condition input and its name: the pair encoding plus InferSent-style [u, v, |u − v|, u ⊙ v] of
    the two sides when both single-sentence matrices exist, else the pair encoding alone."""
    u, v = single.get("premise"), single.get("hypothesis")
    if u is None or v is None or u.shape != v.shape:
        return pair, "pair"
    return np.hstack([pair, u, v, np.abs(u - v), u * v]).astype(np.float32), "pair+infersent"


def _ft_cache(cfg: AuditConfig, a: Sequence[str], b: Sequence[str] | None, y: np.ndarray, tag: str) -> Path | None:
    if cfg.cache_dir is None:
        return None
    key = data_fingerprint(
        list(a), None if b is None else list(b),
        {"y": data_fingerprint([str(v) for v in y.tolist()], None), "steps": cfg.tra_steps, "lr": cfg.tra_lr,
         "bs": cfg.tra_batch_size, "seed": cfg.seed, "model": str(_model_path(cfg.model_path)), "tag": tag},
    )
    return Path(cfg.cache_dir) / f"audit-ft-{tag}-{key[:20]}.pt"


class _Clock:
    """Seconds per stage, accumulated (a stage may run once per view)."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self.t = time.perf_counter()

    def tick(self, key: str) -> None:
        now = time.perf_counter()
        self.timings[key] = self.timings.get(key, 0.0) + now - self.t
        self.t = now

    def restart(self) -> None:
        """Start the next stage now (the time since went into ``timings`` some other way: the checks' own)."""
        self.t = time.perf_counter()


def _dataset(dataset: Any, columns: Columns) -> Dataset:
    """``dataset`` as a :class:`~aflite.data.Dataset`: a path or in-memory data read as text with the column keywords
    ``columns``; a Dataset as it is (its columns have been read)."""
    if isinstance(dataset, Dataset):
        if any(v is not None for v in columns.values()):
            raise ParameterError(f"{', '.join(f'{k}=' for k in columns)}: column keywords name the columns of a file "
                                 f"or a DataFrame; this Dataset has been read already")
        return dataset
    return open_dataset(dataset, modality="text", **with_columns(None, columns, "audit_dataset"))


def _config(views: Sequence[str] | None, config: AuditConfig | None, overrides: dict[str, Any]) -> AuditConfig:
    """The audit's configuration, every choice checked; ``tra=None`` resolved to whether the device is a GPU."""
    base = config or AuditConfig()
    if views is not None:
        want = tuple(views)
        if config is not None and tuple(config.views) != want:
            raise ParameterError(f"views={list(want)} disagrees with config.views={list(config.views)}; give one")
        base = dataclasses.replace(base, views=want)
    cfg = dataclasses.replace(base, **overrides)
    if len(set(cfg.views)) != len(cfg.views):
        raise ParameterError(f"a view is listed twice: {list(cfg.views)}")
    for v in cfg.views:
        if v not in AUDIT_VIEWS:
            raise ParameterError(f"unknown audit view {v!r}; choose from {', '.join(AUDIT_VIEWS)}")
    if not cfg.views:
        raise ParameterError("no views to audit")
    allowed = featurizer_names("audit", "text", only=True)
    if cfg.featurizer not in allowed:
        raise ParameterError(f"featurizer must be {' or '.join(repr(a) for a in allowed)}, got {cfg.featurizer!r}")
    if cfg.peco_encoder not in ("frozen", "finetuned"):
        raise ParameterError("peco_encoder must be 'frozen' or 'finetuned'")
    if cfg.peco_shuffles < 2:
        raise ParameterError(f"peco_shuffles must be >= 2, got {cfg.peco_shuffles}")
    if cfg.tra is None:
        cfg = dataclasses.replace(cfg, tra=torch_device(cfg.device).startswith("cuda"))
    if cfg.peco_encoder == "finetuned" and not cfg.tra:
        raise ParameterError(option_label("--peco-encoder finetuned needs the fine-tuned models (--tra)",
                                          "peco_encoder='finetuned' needs the fine-tuned models (tra=True)"))
    resolve_checks(cfg.checks, "audit")  # each check's options: an unknown check, key or bad value refused
    return cfg


@dataclasses.dataclass
class _FineTuned:
    """TRA's fine-tuned models (pair and each view), their training and evaluation rows and predictions."""

    models: dict[str, FineTuned]
    train: np.ndarray
    eval_rows: np.ndarray
    pred: dict[str, np.ndarray]


def _finetune(dataset: Any, y: np.ndarray, groups: np.ndarray | None, cfg: AuditConfig) -> _FineTuned:
    """Fine-tune MiniLM on the pair and on each view (a held-out split by group), and predict its evaluation rows."""
    n = len(y)
    train, test = _holdout_split(n, groups, cfg.tra_holdout, cfg.seed)
    rng = np.random.default_rng(cfg.seed + 1)
    eval_rows = np.sort(rng.permutation(test)[: min(cfg.tra_eval, len(test))])
    a, b = dataset.texts_a, dataset.texts_b
    models: dict[str, FineTuned] = {}
    pred: dict[str, np.ndarray] = {}
    for tag in ("pair", *cfg.views):
        ta = [b[i] if tag == "hypothesis" else a[i] for i in train]
        tb = [b[i] for i in train] if tag == "pair" else None
        models[tag] = finetune(
            ta, tb, y[train], model_path=cfg.model_path, steps=cfg.tra_steps, batch_size=cfg.tra_batch_size,
            lr=cfg.tra_lr, seed=cfg.seed, device=cfg.device, cache_file=_ft_cache(cfg, ta, tb, y[train], tag),
            show_progress=cfg.show_progress, desc=f"fine-tuning MiniLM ({tag})",
        )
        ea = [b[i] if tag == "hypothesis" else a[i] for i in eval_rows]
        eb = [b[i] for i in eval_rows] if tag == "pair" else None
        pred[tag] = predict(models[tag], ea, eb)
    return _FineTuned(models, train, eval_rows, pred)


def _view_audit(dataset: Any, view: str, y: np.ndarray, classes: np.ndarray, groups: np.ndarray | None,
                Xb: np.ndarray, pred_n: np.ndarray, ft: _FineTuned | None, cfg: AuditConfig, name: str,
                clock: _Clock) -> ViewAudit:
    """One single-sentence condition: every registered audit check (:mod:`aflite.audit.checks`: the biased model,
    the leakage metrics, PECO and its null, the t-SNE map, TRA with the fine-tuned models, token artifacts) on the
    view's texts and features, against the normal model's predictions."""
    texts = dataset.texts_b if view == "hypothesis" else dataset.texts_a
    data = CheckData(
        np.asarray(dataset.ids).astype(str), y, classes, np.searchsorted(classes, y), Xb, cfg.seed, texts=list(texts),
        text_view=view, options=cfg.to_dict(), context=CheckContext(
            config=cfg, set_name=name, dataset=dataset, groups=groups, normal_pred=pred_n, finetuned=ft))
    va = audit_view(data, clock.timings, pred_n)  # each check's seconds, under its timings_s name
    clock.restart()
    return va


@limited  # one thread policy (aflite.threads)
def audit(
    dataset: Any,
    views: Sequence[str] | None = None,
    config: AuditConfig | None = None,
    name: str = "D",
    features: dict[str, np.ndarray] | None = None,
    **overrides: Any,
) -> DatasetAudit:
    """Audit a sentence-pair dataset (``aflite.data.Dataset``) for single-sentence label leakage.

    ``config`` (or keyword overrides of :class:`AuditConfig` fields) sets the models and sizes; ``views`` picks
    the single-sentence conditions (default ``config.views``; giving both with different views is an error, not
    a silent override). ``features`` (``pair`` and each view's matrix, row-aligned with the dataset, e.g. rows
    sliced from :func:`compute_features` of a superset) skips featurization. A single-text dataset has no normal
    condition, so it is refused here. ``config.tra=None`` resolves to whether the device is a GPU; the result's
    config records the choice. ``dataset`` may also be what :func:`aflite.run` reads (a file, a DataFrame, ...),
    its columns named by the keywords of :class:`aflite.data.Columns` (``text_a=``, ``text_b=``, ``label=``, ...).

    Parameters
    ----------
    dataset : Dataset, path or data frame
        The pairs to audit.
    views : sequence of str, optional
        The single-sentence conditions (default ``config.views``).
    config : AuditConfig, optional
        Models, sizes and stages (default: :class:`AuditConfig`'s).
    name : str, optional
        What the audit calls the data.
    features : dict, optional
        ``pair`` and each view's matrix, row-aligned with the dataset (skips featurization).
    **overrides
        Fields of :class:`AuditConfig`, or the column keywords of :class:`aflite.data.Columns`.

    Returns
    -------
    DatasetAudit
        Each view's figures, the configuration and timings.
    """
    # the dataset's column keywords (Columns' own names); the rest are AuditConfig's
    columns = cast(Columns, {k: overrides.pop(k) for k in COLUMNS if k in overrides})
    cfg = _config(views, config, overrides)
    dataset = _dataset(dataset, columns)
    if dataset.texts_b is None:
        raise InputError("the audit needs sentence pairs (premise and hypothesis columns)")
    y = np.asarray(dataset.labels).astype(str)
    n = len(y)
    if n < 10:
        raise InputError(f"too few rows to audit ({n}); need at least 10")
    classes, counts = np.unique(y, return_counts=True)
    if len(classes) < 2:
        raise InputError("the audit needs at least 2 label classes")
    groups = None if dataset.groups is None else np.asarray(dataset.groups)
    clock = _Clock()
    if features is None and cfg.show_progress:
        announce(estimate_seconds(n, cfg))
    feats = compute_features(dataset, cfg) if features is None else features
    for key in ("pair", *cfg.views):
        if key not in feats or len(feats[key]) != n:
            raise InputError(f"features[{key!r}] is missing or not row-aligned with the dataset ({n} rows)")
    single: dict[str, np.ndarray] = {v: feats[v] for v in AUDIT_VIEWS if v in feats}
    clock.tick("features")
    Xn, normal_input = _normal_features(single, feats["pair"])
    pred_n = classes[cv_predict(Xn, y, groups, cfg.n_folds, cfg.C, cfg.seed)]
    clock.tick("normal_model")
    ft = None
    if cfg.tra:
        ft = _finetune(dataset, y, groups, cfg)
        clock.tick("finetune")
    out = {view: _view_audit(dataset, view, y, classes, groups, single[view], pred_n, ft, cfg, name, clock)
           for view in cfg.views}
    timings = clock.timings
    timings["total"] = sum(timings.values())
    label_counts = {str(c): int(k) for c, k in zip(classes, counts, strict=True)}
    return DatasetAudit(name, n, label_counts, out, cfg, timings, y, np.asarray(dataset.ids).astype(str), normal_input)

