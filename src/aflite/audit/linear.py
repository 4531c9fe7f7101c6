"""The audit's biased and normal models: cross-validated L2 logistic regressions (out-of-fold predictions)."""

from __future__ import annotations

from typing import Any

import numpy as np

from aflite.audit.metrics import _as_1d
from aflite.core.ensemble import FastLogisticEnsemble
from aflite.errors import InputError, ParameterError
from aflite.splits import fold_assignment


def cv_predict(
    X: Any, y: Any, groups: Any = None, n_folds: int = 5, C: float = 1.0, seed: int = 0, max_iter: int = 500
) -> np.ndarray:
    """Out-of-fold class-index predictions of an L2 logistic regression (every row predicted exactly once).

    All folds are fitted at once by the batched, whitened L-BFGS of :class:`aflite.core.ensemble.FastLogisticEnsemble`
    (scikit-learn's objective; sparse input falls back to scikit-learn). Rows sharing a group never straddle a
    fold boundary. Returns indices into ``np.unique(y)``.
    """
    from sklearn.linear_model import LogisticRegression

    yy = _as_1d(y, "labels")
    n = len(yy)
    classes, yi = np.unique(yy, return_inverse=True)
    if len(classes) < 2:
        raise InputError("the audit needs at least 2 label classes")
    folds = min(n_folds, n)
    if folds < 2:
        raise ParameterError(f"need at least 2 folds and 2 rows, got folds={n_folds}, rows={n}")
    fold = fold_assignment(yi, groups, folds, seed)
    n_f = int(fold.max()) + 1
    train_mask = fold[:, None] != np.arange(n_f)[None, :]
    pred = np.empty(n, dtype=np.int64)
    if hasattr(X, "tocsr"):  # sparse: scikit-learn, one fold at a time
        for f in range(n_f):
            tr, te = np.flatnonzero(train_mask[:, f]), np.flatnonzero(~train_mask[:, f])
            if len(np.unique(yi[tr])) < 2:
                pred[te] = yi[tr][0]
                continue
            model = LogisticRegression(C=C, max_iter=max_iter).fit(X[tr], yi[tr])
            pred[te] = np.asarray(model.predict(X[te]), dtype=np.int64)
        return pred

    ens = FastLogisticEnsemble(C=C, max_iter=max_iter)
    ens.prepare(np.asarray(X, dtype=np.float32), yi.astype(np.int64), len(classes))
    P = np.asarray(ens.fit_predict(np.arange(n), train_mask))
    pred[:] = P[np.arange(n), fold]
    return pred
