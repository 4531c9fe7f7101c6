"""One filtering phase of AFLite and what the estimator shares with it: the inputs check, the partitions'
scores (predictability p̃), the slice selection (slicing, greedy, Gumbel), the run's state and Table 8's defaults.

:func:`predictability` is one phase on its own (the single-iteration ranking); :class:`aflite.core.filter.AFLite`
loops over phases. Everything random comes from the ``rng`` the caller passes (one seed, see aflite.core.filter).
"""

from __future__ import annotations

import copy
import inspect
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from aflite.core.ensemble import LinearEnsemble, make_ensemble
from aflite.core.sparse import SparseLogisticEnsemble, check_columns, is_sparse
from aflite.errors import InputError, ParameterError
from aflite.splits import draw_partitions

Strategy = Literal["slicing", "greedy", "gumbel"]

# Table 8 (appendix A.5), SNLI column, with the paper's final size; used as defaults expressed as
# fractions of |D| so that they scale with the dataset: t = 50K, k = 10K, n ≈ 92K of |D| = 550,152.
from aflite.defaults import SNLI_DEFAULTS  # noqa: E402  (one copy, importable without scikit-learn)


def snli_fraction(key: str) -> float:
    return float(SNLI_DEFAULTS[key]) / SNLI_DEFAULTS["dataset_size"]


@dataclass
class PhaseScores:
    """Scores of one filtering phase over the rows of S (in the order of ``rows``).

    Parameters
    ----------
    rows : numpy.ndarray
        The rows of S scored, in order.
    predictability : numpy.ndarray
        p̃ of each row: the share of the held-out models that predicted its label (NaN: never held out).
    n_heldout : numpy.ndarray
        How many models held each row out.
    n_correct : numpy.ndarray
        How many of those predicted its label.
    seconds : float, default 0.0
        The phase's wall time.
    train_sizes : numpy.ndarray, optional
        Each model's training set size.
    train_mask : numpy.ndarray, optional
        Shape (rows, m): True where the row is in that model's training set.
    """

    rows: NDArray[np.intp]  # indices into D
    predictability: NDArray[np.float64]  # p̃, NaN where no partition held the row out
    n_heldout: NDArray[np.int32]  # how many partitions held the row out (coverage)
    n_correct: NDArray[np.int32]
    seconds: float = 0.0
    train_sizes: NDArray[np.int64] | None = None
    train_mask: NDArray[np.bool_] | None = None  # (rows, m), True = in that model's training set


@dataclass(frozen=True)
class RunParameters:
    """A filter's parameters as counts for its dataset (:meth:`aflite.core.filter.AFLite.resolved_params`): what
    the phases read, the checkpoint checks, results.json records and explain and evaluate rebuild the filter from."""

    dataset_size: int
    target_size: int
    n_partitions: int
    train_size: int
    slice_size: int
    threshold: float
    strategy: str
    model: str
    C: float
    random_state: int | None = None  # the seed as given (None: drawn, recorded as the envelope's seed)
    groups: bool = False  # the partitions kept each group on one side

    def to_json(self) -> dict[str, int | float | str | bool | None]:
        """As results.json and the checkpoint hold it: ``groups`` only when the partitions kept groups."""
        return {k: v for k, v in asdict(self).items() if k != "groups" or v}


@dataclass
class IterationRecord:
    """One line of the filter's history."""

    iteration: int
    size_before: int
    n_removed: int
    size_after: int
    n_eligible: int  # scored and p̃ ≥ τ
    n_unscored: int  # never held out in this phase
    coverage_mean: float  # mean number of partitions holding a row out
    p_mean: float
    p_quantiles: dict[str, float]  # min, q25, median, q75, max of p̃ over scored rows
    seconds: float
    fit_seconds: float
    model_iterations: float  # mean optimiser steps per model (fast path), for diagnostics

    def to_dict(self) -> dict[str, int | float | dict[str, float]]:
        return asdict(self)


@dataclass
class FilterState:
    """Everything needed to continue a run after a completed phase (checkpoints are arrays + JSON)."""

    iteration: int  # number of completed phases
    keep: NDArray[np.bool_]
    predictability: NDArray[np.float64]
    removed_at: NDArray[np.int32]
    history: list[IterationRecord] = field(default_factory=list)
    stop_reason: str | None = None
    ensemble_state: dict[str, NDArray[Any]] = field(default_factory=dict)
    strategy_state: dict[str, NDArray[Any]] = field(default_factory=dict)  # incremental greedy's arrays


def resolve_size(value: float | int, total: int, name: str) -> int:
    """Counts are ints (or integral floats ≥ 1); a float in (0, 1) is a fraction of ``total``."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ParameterError(f"{name} must be a count or a fraction, not {value!r}")
    if isinstance(value, float | np.floating):
        v = float(value)
        if 0.0 < v < 1.0:
            return max(1, int(round(v * total)))
        if not (v.is_integer() and v >= 1):
            raise ParameterError(f"{name}={value} must be a count >= 1 or a fraction in (0, 1)")
    count = int(value)
    if count < 1:
        raise ParameterError(f"{name} must be at least 1 (got {value})")
    return count


def scores_from_predictions(
    preds: NDArray[Any], y: NDArray[np.int64], train_mask: NDArray[np.bool_]
) -> tuple[NDArray[np.float64], NDArray[np.int32], NDArray[np.int32]]:
    """p̃ = correct / held-out predictions per row (NaN where no partition held it out), and both counts."""
    held = ~train_mask
    n_heldout = held.sum(1, dtype=np.int32)
    n_correct = ((preds == y[:, None]) & held).sum(1, dtype=np.int32)
    return predictability_from_counts(n_correct, n_heldout), n_heldout, n_correct


def predictability_from_counts(n_correct: NDArray[np.int32], n_heldout: NDArray[np.int32]) -> NDArray[np.float64]:
    """p̃ = correct / held out, NaN where no partition held the row out."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_heldout > 0, n_correct / np.maximum(n_heldout, 1), np.nan)


def score_phase(
    ensemble: LinearEnsemble,
    y: NDArray[np.int64],
    rows: NDArray[np.intp],
    n_partitions: int,
    train_size: int,
    rng: np.random.Generator,
    groups: NDArray[np.int64] | None = None,
    mask: NDArray[np.bool_] | None = None,
) -> PhaseScores:
    """One filtering phase on the rows ``rows`` of a prepared ensemble (see :func:`predictability`); ``mask``: the
    partitions, when they were drawn from ``rng`` already (:class:`aflite.core.filter.AFLite` draws the next phase's
    while a device fits this one)."""
    start = time.perf_counter()
    if mask is None:
        mask = draw_partitions(len(rows), n_partitions, train_size, rng, None if groups is None else groups[rows])
    counts = ensemble.fit_score(rows, mask) if hasattr(ensemble, "fit_score") else None
    if counts is None:
        preds = ensemble.fit_predict(rows, mask)
        p, n_heldout, n_correct = scores_from_predictions(preds, y[rows], mask)
    else:  # counted where the predictions are (a GPU), the same integers
        n_correct, n_heldout = counts
        p = predictability_from_counts(n_correct, n_heldout)
    return PhaseScores(rows, p, n_heldout, n_correct, time.perf_counter() - start, mask.sum(0), mask)


def _check_labels(ya: NDArray[Any]) -> None:
    """Refuse a missing label (None, NaN, pandas' NA, an empty string) or labels of types that cannot be ordered
    together (``"a"`` and ``1``) in one line naming the row: otherwise a traceback from deep inside numpy, or a
    class made of missing values."""
    if ya.dtype.kind == "f" and np.isnan(ya).any():
        raise InputError(f"labels hold a missing value (NaN) at row {int(np.flatnonzero(np.isnan(ya))[0])}; give "
                         f"every row a label or leave the row out")
    if ya.dtype.kind not in "OUS":
        return
    for r, v in enumerate(ya.tolist()):  # None, NaN, pandas' NA, or a string of nothing (as the loaders read it)
        if v is None or isinstance(v, float) and v != v or type(v).__name__ == "NAType" or \
                isinstance(v, str | bytes) and not v.strip():
            raise InputError(f"labels hold a missing value ({v!r}) at row {r}; give every row a label or leave the "
                             f"row out")
    if ya.dtype != object:
        return
    try:
        np.unique(ya)
    except TypeError:
        kinds: dict[str, int] = {}
        for r, v in enumerate(ya.tolist()):
            kinds.setdefault(type(v).__name__, r)
        (t0, r0), (t1, r1) = list(kinds.items())[:2]
        raise InputError(f"labels mix types that cannot be compared: {ya[r0]!r} ({t0}) at row {r0} and {ya[r1]!r} "
                         f"({t1}) at row {r1}; give the labels one type") from None


def validate_inputs(X: ArrayLike, y: ArrayLike, groups: ArrayLike | None) -> tuple[Any, NDArray[Any], Any]:
    """Check shapes, lengths, finiteness (chunked, so memory-mapped features stay on disk) and that there are at
    least two classes; groups → codes."""
    if y is None:
        raise InputError("AFLite requires y to be passed, but the target y is None")
    Xs = _sparse_features(X) if is_sparse(X) else None  # scipy.sparse: its own path (aflite.core.sparse)
    # the dense checks see a sparse X's row count only (its values were checked without densifying it)
    Xd = np.zeros((Xs.shape[0], 1), np.float32) if Xs is not None else X if isinstance(X, np.ndarray) else np.asarray(X)
    if _is_text(Xd):
        raise InputError("features must be numbers, got text: AFLite filters a matrix Φ(x) of features, one row per "
                         "instance; make one from the texts with aflite.featurize(texts_a, texts_b).X, or give the "
                         "data to aflite.run(...), which featurizes and filters it")
    if Xd.ndim != 2:
        raise InputError(f"features must be a 2-D matrix, got shape {Xd.shape}")
    if Xd.dtype == object:  # numbers held as Python objects (pandas, lists of mixed types)
        try:
            Xd = Xd.astype(np.float64)
        except (TypeError, ValueError):
            raise InputError("features must be numeric, got non-numeric values (dtype object)") from None
    if np.issubdtype(Xd.dtype, np.complexfloating):
        raise InputError(f"features must be real numbers: Complex data not supported (dtype {Xd.dtype})")
    if Xd.dtype.kind not in "biuf":
        raise InputError(f"features must be numeric, got dtype {Xd.dtype}")
    if Xd.shape[1] == 0:
        raise InputError(f"features have 0 feature(s) (shape={Xd.shape}) while a minimum of 1 is required.")
    ya = np.asarray(y)
    if ya.ndim != 1:
        raise InputError(f"labels must be 1-D, got shape {ya.shape}")
    if len(ya) != Xd.shape[0]:
        raise InputError(f"features have {Xd.shape[0]} rows but there are {len(ya)} labels")
    if Xd.shape[0] == 0:
        raise InputError("the dataset is empty")
    _check_labels(ya)
    step = max(1, (64 << 20) // max(1, 4 * Xd.shape[1]))
    for r0 in range(0, Xd.shape[0], step):  # chunked so that memory-mapped matrices are never loaded whole
        block = Xd[r0 : r0 + step]
        if not np.isfinite(block).all():
            r, c = np.argwhere(~np.isfinite(block))[0]
            what = "NaN" if np.isnan(block[r, c]) else ("inf" if block[r, c] > 0 else "-inf")
            raise InputError(f"features contain {what} at row {r0 + r}, column {c}")
    classes = np.unique(ya)
    if len(classes) < 2:
        raise InputError(f"need at least two classes to filter, found one class: {classes.tolist()!r}")
    ga = None
    if groups is not None:
        ga = np.asarray(groups)
        if ga.shape != ya.shape:
            raise InputError(f"groups have {len(ga)} entries but there are {len(ya)} labels")
        ga = np.unique(ga, return_inverse=True)[1].astype(np.int64)
    return (Xs if Xs is not None else Xd), ya, ga


def _is_text(X: np.ndarray) -> bool:
    """Whether ``X`` holds strings (a list of sentences, a DataFrame of text columns) rather than features."""
    if X.dtype.kind in "US":
        return True
    return X.dtype == object and X.size > 0 and isinstance(X.flat[0], str | bytes)


def _sparse_features(X: Any) -> Any:
    """A scipy sparse X as CSR float64, checked as a dense one is (numbers, finite, 2-D) on its stored values."""
    if X.ndim != 2:
        raise InputError(f"features must be a 2-D matrix, got shape {X.shape}")
    if X.dtype.kind not in "biuf":
        raise InputError(f"features must be real numbers, got sparse dtype {X.dtype}")
    if X.shape[1] == 0:
        raise InputError(f"features have 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
    check_columns(X.shape)  # before any copy: a MemoryError is no answer
    Xa = X.tocsr().astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(Xa.data))
    if len(bad):
        r = int(np.searchsorted(Xa.indptr, bad[0], side="right") - 1)
        v = Xa.data[bad[0]]
        what = "NaN" if np.isnan(v) else ("inf" if v > 0 else "-inf")
        raise InputError(f"features contain {what} at row {r}, column {int(Xa.indices[bad[0]])}")
    return Xa


def ensemble_for(X: Any, model: Any, **options: Any) -> LinearEnsemble:
    """The ensemble of ``model`` for features ``X``: the sparse solver (:mod:`aflite.core.sparse`) for a sparse X
    and the default model (on the CPU, in this process), else :func:`aflite.core.ensemble.make_ensemble`."""
    if is_sparse(X) and isinstance(model, str) and model == "logistic":
        if options.get("executor") is not None or options.get("device") not in (None, "cpu", "auto"):
            raise ParameterError("sparse features are fitted on the CPU in this process: give device='cpu' and no "
                                 "executor, or densify X")
        return SparseLogisticEnsemble(C=options.get("C", 1.0))
    return make_ensemble(model, **options)


def check_model(model: Any) -> None:
    if isinstance(model, str) and model in ("logistic", "sklearn"):
        return
    if isinstance(model, LinearEnsemble) or (hasattr(model, "fit") and hasattr(model, "predict")):
        return
    raise ParameterError(
        f"model must be 'logistic', 'sklearn', a scikit-learn classifier or a LinearEnsemble, not {model!r}"
    )


def encode_classes(y: NDArray[Any]) -> tuple[NDArray[Any], NDArray[np.int64]]:
    """Classes (sorted) and int codes; labels were checked by :func:`validate_inputs`."""
    classes, codes = np.unique(y, return_inverse=True)
    return classes, codes.astype(np.int64)


def predictability(
    X: ArrayLike,
    y: ArrayLike,
    *,
    n_partitions: int = 64,
    train_size: float | int = snli_fraction("train_size"),
    model: Any = "logistic",
    groups: ArrayLike | None = None,
    random_state: Any = 0,
) -> PhaseScores:
    """A single filtering phase over all of D: how predictable each instance is to the linear ensemble.

    With ``n_partitions=1`` it scores the paper's "single iteration" baseline (one model, rank once, cut once;
    :func:`aflite.evaluate.single_iteration_rows`); with the run's m it is a useful ranking on its own.

    Parameters
    ----------
    X : array-like or sparse matrix, shape (n, d)
        The frozen features Φ(x) of D.
    y : array-like, shape (n,)
        The labels.
    n_partitions : int, default 64
        m: the classifiers of the phase (1: the single-iteration baseline).
    train_size : int or float, default 50K/550K of |D|
        t: each classifier's training rows, a count or a fraction of |D| (default AFLite's).
    model : str or estimator, default "logistic"
        As for :class:`AFLite`.
    groups : array-like, shape (n,), optional
        Group ids kept on one side of every partition.
    random_state : int, None or numpy.random.Generator, default 0
        The seed the partitions are drawn from.

    Returns
    -------
    PhaseScores
        Each row's p̃ and how often it was held out and predicted right.
    """
    Xa, ya, ga = validate_inputs(X, y, groups)
    _, codes = encode_classes(ya)
    n = len(codes)
    t = resolve_size(train_size, n, "train_size")
    if t >= n:
        raise ParameterError(f"train_size t={t} must be smaller than |D|={n}")
    if isinstance(n_partitions, bool) or not isinstance(n_partitions, int | np.integer) or n_partitions < 1:
        raise ParameterError(f"n_partitions m={n_partitions!r} must be an int >= 1")
    check_model(model)
    ens = ensemble_for(Xa, fresh_model(model))
    ens.prepare(Xa, codes, int(codes.max()) + 1)
    rng = np.random.default_rng([seed_from(random_state), 0])
    return score_phase(ens, codes, np.arange(n), n_partitions, t, rng, ga)


def select_slice(
    p: NDArray[np.float64],
    k: int,
    threshold: float,
    rng: np.random.Generator,
    strategy: Strategy = "slicing",
) -> tuple[NDArray[np.intp], int]:
    """Positions (into ``p``) to remove: up to k of the highest p̃ with p̃ ≥ τ; and how many qualified.

    Ties (many instances sit at p̃ = 1) are broken by a seeded random key, never by row order — files are
    ordered by premise or source, and a stable sort would remove one end of the file first.
    ``gumbel`` instead takes the top k of ``log p̃ + Gumbel noise`` among the qualifying instances, which is
    sampling k without replacement with probability proportional to p̃ (appendix A.2).
    """
    eligible = np.flatnonzero(~np.isnan(p) & (p >= threshold))
    n_eligible = len(eligible)
    take = min(k, n_eligible)
    if take == 0:
        return np.empty(0, dtype=np.intp), n_eligible
    tie = rng.random(len(p))
    if strategy == "gumbel":
        with np.errstate(divide="ignore"):
            key = np.log(p[eligible]) + rng.gumbel(size=n_eligible)
    else:
        key = p[eligible]
    return eligible[lexsort_top(key, tie[eligible], take)], n_eligible


def lexsort_top(key: NDArray[np.float64], tie: NDArray[np.float64], take: int) -> NDArray[np.intp]:
    """``np.lexsort((tie, -key))[:take]`` — positions by ``key`` descending, then ``tie`` ascending, then position —
    without sorting them all: the ``take``-th largest key is found by partition, only the rows at or above it are
    ordered. Measured 0.42 s for lexsort on 536,610 eligible rows (SNLI-sized phase, a loaded 2-core host), once
    per phase; the same positions in the same order (tests)."""
    n = len(key)
    if take * 8 >= n:  # most of them: sorting all is as cheap
        return np.lexsort((tie, -key))[:take]
    v = np.partition(key, n - take)[n - take]  # the take-th largest key
    above = np.flatnonzero(key > v)
    at = np.flatnonzero(key == v)  # in position order
    r = take - len(above)  # how many of the rows at v are taken: the smallest (tie, position)
    if r < len(at):
        tv = np.partition(tie[at], r - 1)[r - 1]
        below = at[tie[at] < tv]
        at = np.concatenate([below, at[tie[at] == tv][: r - len(below)]])
    sel = np.concatenate([above, at])
    return sel[np.lexsort((sel, tie[sel], -key[sel]))]


def seed_from(random_state: Any) -> int:
    """The integer seed that all of a fit's randomness flows from (recorded as ``seed_``).

    ``None`` draws fresh OS entropy; an int is used as is; a ``numpy.random.Generator`` (or a legacy
    ``RandomState``) gives one draw, so that a caller's generator advances as scikit-learn users expect.
    """
    if random_state is None:
        return int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]
    if isinstance(random_state, bool):
        raise ParameterError(f"random_state must be None, an int or a numpy Generator, not {random_state!r}")
    if isinstance(random_state, int | np.integer):
        if int(random_state) < 0:
            raise ParameterError(f"random_state must be a non-negative int (got {random_state})")
        return int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    raise ParameterError(f"random_state must be None, an int or a numpy Generator, not {random_state!r}")


def fresh_model(model: Any) -> Any:
    """An unfitted copy of a user-given model or ensemble, so that ``fit`` never mutates the caller's object.

    scikit-learn estimators go through :func:`sklearn.base.clone`; other objects (the ensembles) are rebuilt
    from their constructor arguments read back from attributes of the same name (the scikit-learn
    convention), sharing heavy handles such as an executor; objects that do not follow it are copied.
    """
    if isinstance(model, str) or model is None:
        return model
    if hasattr(model, "get_params"):
        from sklearn.base import clone

        return clone(model)

    try:
        sig = inspect.signature(type(model).__init__)
    except (TypeError, ValueError):  # pragma: no cover - builtins
        return copy.copy(model)
    kwargs: dict[str, Any] = {}
    for name, par in list(sig.parameters.items())[1:]:
        if par.kind in (par.VAR_POSITIONAL, par.VAR_KEYWORD):
            continue
        if not hasattr(model, name):
            return copy.copy(model)
        value = getattr(model, name)
        kwargs[name] = fresh_model(value) if hasattr(value, "get_params") else value
    return type(model)(**kwargs)
