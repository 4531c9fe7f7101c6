"""The run's first phase and its token view, recomputed from Φ, the run's parameters and seed (see
:mod:`aflite.commands.explain`, which reads the run folder and writes the results): arrays and dicts, no files."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from aflite.core.filter import AFLite
from aflite.errors import ParameterError
from aflite.explain.check_summaries import NgramTerm
from aflite.explain.reasons import ngram_token_scores, row_top_tokens, text_inputs
from aflite.features import apply_view, make_featurizer
from aflite.rundir.schema import FeaturizerRecord, RunParameters

__all__ = ["first_phase", "token_texts", "ngram_terms"]

def first_phase(X: Any, y: np.ndarray, groups: np.ndarray | None, params: RunParameters, seed: int) -> Any:
    """The run's first phase, recomputed: an AFLite with the run's parameters and seed, stopped after phase 0."""
    p = params
    af = AFLite(target_size=p.target_size, n_partitions=p.n_partitions, train_size=p.train_size,
                slice_size=p.slice_size, threshold=p.threshold, strategy=cast(Any, p.strategy), C=p.C,
                model=p.model if p.model in ("logistic", "sklearn") else "logistic", random_state=int(seed),
                max_iterations=1, device="cpu")
    return af.fit(X, y, groups)


def token_texts(ds: Any, view: str, token_view: str) -> tuple[list[str], str]:
    if token_view == "auto":
        token_view = ("premise" if view == "premise" else "hypothesis") if ds.is_pair else "text"
    if token_view in ("hypothesis", "premise", "pair") and not ds.is_pair:
        raise ParameterError(f"--token-view {token_view} needs a pair dataset; this one has single texts")
    if token_view == "hypothesis":
        return list(ds.texts_b), "hypothesis"
    if token_view == "pair":
        return [f"{a} {b}" for a, b in zip(ds.texts_a, ds.texts_b, strict=True)], "pair"
    if token_view in ("premise", "text"):
        return list(ds.texts_a), token_view
    raise ParameterError(f"token view must be auto, hypothesis, premise or pair, not {token_view!r}")


def ngram_terms(ds: Any, rows: np.ndarray, fz: FeaturizerRecord, X: Any, B: Any, vocab: np.ndarray, y: np.ndarray,
                 classes: np.ndarray, min_count: int, coef: np.ndarray,
                 tview: str) -> tuple[float, list[NgramTerm], list[str]]:
    """Refit the run's n-gram Φ (same options and seed, same texts), check it reproduces the run's Φ on a sample
    of rows, and score every tested token against every label with the ensemble's mean weights: the refit's largest
    difference from the run's Φ, the 25 strongest (token, label) pushes and each row's top tokens."""
    opts = {k: (tuple(v) if isinstance(v, list) else v) for k, v in fz.options.items()}
    feat = make_featurizer(fz.name, **opts)
    view = fz.view
    a, b = apply_view(ds.texts_a, ds.texts_b, view)
    feat.fit(a, b)
    idx = np.linspace(0, len(rows) - 1, num=min(256, len(rows))).astype(np.int64)  # X[j] is dataset row rows[j]
    probe = rows[idx]
    Xp = feat.transform([a[r] for r in probe], None if b is None else [b[r] for r in probe])
    diff = float(np.max(np.abs(np.asarray(Xp, dtype=np.float64) - np.asarray(X[idx], dtype=np.float64))))
    F, toks = text_inputs(B, vocab, min_count)
    names = [str(t) for t in toks]
    S = ngram_token_scores(feat, names, b is not None and tview != "premise", coef, pair=b is not None)
    order = np.argsort(-S, axis=None, kind="stable")[:25]
    top = [NgramTerm(names[i // len(classes)], str(classes[i % len(classes)]), float(S.flat[i])) for i in order]
    return diff, top, row_top_tokens(F.tocsr(), S, y, names)
