"""AFLite: Algorithm 1 of Le Bras et al. (2020), "Adversarial Filters of Dataset Biases".

Starting from S = D, each *filtering phase* trains m linear classifiers, each on a random subset of S of
size t, and predicts the rest of S. An instance's predictability p̃(i) is the fraction of the partitions
that held it out which predicted its label correctly. Up to k of the most predictable instances with
p̃ ≥ τ are removed; the loop ends when |S| ≤ n or when fewer than k instances qualified (that last, short
slice is still removed, as in the paper's pseudo-code).

Everything random flows from one integer seed (``random_state``, recorded as ``seed_``): phase j draws its
partitions, tie-breaking keys and Gumbel noise from ``np.random.default_rng([seed, j])``, so a run resumed after
phase j continues exactly.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator

from aflite.core.ensemble import FitStats, LinearEnsemble
from aflite.core.heldout import first_phase_attributes
from aflite.core.phase import (  # one phase, the state and the size rules live in aflite.core.phase
    FilterState,
    IterationRecord,
    PhaseScores,
    RunParameters,
    Strategy,
    check_model,
    encode_classes,
    ensemble_for,
    fresh_model,
    resolve_size,
    score_phase,
    scores_from_predictions,
    seed_from,
    select_slice,
    snli_fraction,
    validate_inputs,
)
from aflite.defaults import SNLI_DEFAULTS
from aflite.errors import InputError, ParameterError
from aflite.splits import draw_partitions
from aflite.threads import limited

__all__ = ["AFLite"]


class AFLite(BaseEstimator):
    """Adversarial filtering of dataset biases (Algorithm 1), a scikit-learn estimator.

    ``AFLite(...).fit(X, y)`` filters the rows of (X, y); ``get_kept_mask()`` is then the kept mask (D(Φ)).
    ``get_params``/``set_params``/``sklearn.base.clone`` work as for any scikit-learn estimator; arguments are
    keyword-only and are checked in ``fit`` (a :class:`aflite.errors.ParameterError`), never in ``__init__``.

    Sizes are counts, or fractions of |D| when given as floats in (0, 1).

    Parameters
    ----------
    target_size : int or float, default 92K/550K of |D|
        n: stop once |S| ≤ n (the paper's filtered SNLI size).
    n_partitions : int, default 64
        m: classifiers per phase (Table 8).
    train_size : int or float, default 50K/550K of |D|
        t: training set size of each classifier (Table 8, SNLI).
    slice_size : int or float, default 10K/550K of |D|
        k: most instances removed per phase (Table 8, SNLI).
    threshold : float, default 0.75
        τ: only instances with p̃ ≥ τ are removed; a phase where fewer than k qualify is the last.
    strategy : {"slicing", "greedy", "gumbel"}, default "slicing"
        ``slicing`` (the paper's default: top k), ``greedy`` (one instance per step, appendix A.1 (A)) or
        ``gumbel`` (k sampled ∝ p̃ with the Gumbel trick, appendix A.1 (C)/A.2).
    model : str or estimator, default "logistic"
        ``"logistic"`` (fast batched L2 logistic regression), ``"sklearn"`` (scikit-learn's
        LogisticRegression in a loop), any scikit-learn classifier, or a :class:`LinearEnsemble`. A given
        object is copied by ``fit`` (never fitted in place).
    C : float, default 1.0
        Inverse L2 strength of the logistic models, as in scikit-learn (> 0).
    random_state : int, None or numpy.random.Generator, default 0
        The single seed all randomness flows from: an int (default 0, so that runs repeat), ``None`` (fresh
        entropy) or a ``numpy.random.Generator`` (one draw). The seed actually used is ``seed_``; pass it back
        as an int to repeat a run.
    max_iterations : int, optional
        Stop after this many phases (None: no cap).
    device, storage, executor : str, str, DaskExecutor; default "auto", "float32", None
        Where the fast ensemble runs (``"logistic"`` only): ``device`` ``auto`` (a CUDA GPU when PyTorch sees
        one, else the CPU), ``cpu`` or ``cuda[:N]``; ``storage`` the GPU copy's dtype (float32, bfloat16,
        float16); ``executor`` an :class:`aflite.core.backends.dask.DaskExecutor` to fit the partitions on a cluster
        (same result as in one process).

    Notes
    -----
    Fitted attributes: ``keep_mask_``, ``predictability_`` (last p̃ before removal, or at the end; NaN if
    never scored), ``removed_at_`` (phase index, -1 if kept), ``history_``, ``stop_reason_``, ``classes_``,
    ``n_features_in_``, ``n_iterations_``, ``seed_`` (the int seed used) and ``params_`` (the resolved counts).

    From the first phase (one ensemble over all of D; see :mod:`aflite.core.heldout`; None after a ``resume`` past
    phase 0, or for a model without probabilities): ``first_phase_proba_`` (mean held-out class probabilities,
    (n, K)), ``confidence_``, ``variability_`` and ``correctness_`` (the data map), ``first_phase_predictability_``
    (p̃ of phase 0 for every row) and ``weights_`` (soft weights, :data:`aflite.core.heldout.WEIGHT_RULE`).
    """

    def __init__(
        self,
        *,
        target_size: float | int = snli_fraction("target_size"),
        n_partitions: int = SNLI_DEFAULTS["n_partitions"],
        train_size: float | int = snli_fraction("train_size"),
        slice_size: float | int = snli_fraction("slice_size"),
        threshold: float = SNLI_DEFAULTS["threshold"],
        strategy: Strategy = "slicing",
        model: Any = "logistic",
        C: float = 1.0,
        random_state: Any = 0,
        max_iterations: int | None = None,
        device: str = "auto",
        storage: str = "float32",
        executor: Any = None,
    ) -> None:
        self.target_size = target_size
        self.n_partitions = n_partitions
        self.train_size = train_size
        self.slice_size = slice_size
        self.threshold = threshold
        self.strategy = strategy
        self.model = model
        self.C = C
        self.random_state = random_state
        self.max_iterations = max_iterations
        self.device = device
        self.storage = storage
        self.executor = executor

    # groups go to fit_resample whenever a caller routes them (scikit-learn's metadata routing, as its
    # GroupsConsumerMixin does for a splitter): an imblearn Pipeline passes a sampler no fit parameter otherwise
    __metadata_request__fit_resample = {"groups": True}  # noqa: RUF012 (scikit-learn reads this class attribute)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True  # labels are what the filter predicts
        tags.input_tags.sparse = True  # scipy CSR/CSC: aflite.core.sparse
        tags.input_tags.allow_nan = False
        return tags

    def resolved_params(self, n: int) -> RunParameters:
        """The parameters as counts for a dataset of n instances, validated (raises ParameterError)."""
        if self.strategy not in ("slicing", "greedy", "gumbel"):
            raise ParameterError(f"strategy must be slicing, greedy or gumbel, not {self.strategy!r}")
        try:
            tau = float(self.threshold)
            c_value = float(self.C)
        except (TypeError, ValueError):
            raise ParameterError(f"threshold and C must be numbers, not {self.threshold!r} / {self.C!r}") from None
        if not 0.0 <= tau <= 1.0:
            raise ParameterError(f"threshold τ={self.threshold} must lie in [0, 1]")
        if not (np.isfinite(c_value) and c_value > 0):
            raise ParameterError(f"C={self.C} must be a positive number (the inverse L2 strength)")
        if isinstance(self.n_partitions, bool) or not isinstance(self.n_partitions, int | np.integer):
            raise ParameterError(f"n_partitions m={self.n_partitions!r} must be an int")
        if int(self.n_partitions) < 1:
            raise ParameterError(f"n_partitions m={self.n_partitions} must be at least 1")
        if self.max_iterations is not None and (
            isinstance(self.max_iterations, bool)
            or not isinstance(self.max_iterations, int | np.integer)
            or self.max_iterations < 0
        ):
            raise ParameterError(f"max_iterations must be None or an int >= 0, not {self.max_iterations!r}")
        check_model(self.model)
        target = resolve_size(self.target_size, n, "target_size")
        t = resolve_size(self.train_size, n, "train_size")
        k = resolve_size(self.slice_size, n, "slice_size")
        if self.strategy == "greedy":
            k = 1
        if target >= n:
            raise ParameterError(f"target_size n={target} must be smaller than |D|={n}")
        if t >= target:
            raise ParameterError(
                f"train_size t={t} must be smaller than target_size n={target} (Algorithm 1 needs t < n)"
            )
        seed = self.random_state
        return RunParameters(
            dataset_size=n,
            target_size=target,
            n_partitions=int(self.n_partitions),
            train_size=t,
            slice_size=k,
            threshold=tau,
            strategy=self.strategy,
            model=self.model if isinstance(self.model, str) else type(self.model).__name__,
            C=c_value,
            # the seed as given when it is one; fit records the seed it drew for None / a Generator
            random_state=int(seed) if isinstance(seed, int | np.integer) and not isinstance(seed, bool) else None,
        )

    def get_kept_mask(self, indices: bool = False) -> NDArray[Any]:
        """The kept instances of the last fit: a boolean mask over the rows of D, or (``indices=True``)
        their row numbers (the fitted attribute ``keep_mask_``, copied)."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "keep_mask_")
        return np.flatnonzero(self.keep_mask_) if indices else self.keep_mask_.copy()

    @limited  # one thread policy (aflite.threads)
    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        groups: ArrayLike | None = None,
        *,
        resume: FilterState | None = None,
        callback: Callable[[IterationRecord, FilterState], None] | None = None,
    ) -> AFLite:
        """Filter (X, y). ``callback`` runs after every phase (progress bars, checkpoints); ``resume``
        continues from a state such a callback saved, giving exactly the uninterrupted result."""
        Xa, ya, ga = validate_inputs(X, y, groups)
        n = len(ya)
        seed = seed_from(self.random_state)
        params = replace(self.resolved_params(n), random_state=seed)
        self.classes_, codes = encode_classes(ya)
        self.n_features_in_ = int(Xa.shape[1])
        self.seed_ = seed
        self.params_ = params
        ens = ensemble_for(  # a sparse X: the sparse solver (aflite.core.sparse), never densified
            Xa, fresh_model(self.model), C=float(self.C), device=self.device, storage=self.storage,
            executor=self.executor)
        ens.prepare(Xa, codes, len(self.classes_))
        state = _start_state(n, resume, ens)
        incremental = self.strategy == "greedy" and ga is None
        self._keep_first_phase(None, Xa, codes, np.arange(n), None, state)  # None until phase 0 runs in this call
        ahead = None
        if getattr(ens, "host_waits", False) and ga is None and not incremental:
            ahead = _NextPartitions(seed, params.n_partitions, params.train_size)
        try:
            self._phases(ens, Xa, codes, ga, state, params, incremental, ahead, callback)
        finally:
            if ahead is not None:
                ahead.close()
        self.state_ = state
        self.keep_mask_ = state.keep
        self.predictability_ = state.predictability
        self.removed_at_ = state.removed_at
        self.history_ = state.history
        self.stop_reason_ = state.stop_reason
        self.n_iterations_ = state.iteration
        return self

    def _phases(
        self, ens: LinearEnsemble, Xa: Any, codes: NDArray[np.int64], ga: NDArray[np.int64] | None,
        state: FilterState, params: RunParameters, incremental: bool, ahead: _NextPartitions | None,
        callback: Callable[[IterationRecord, FilterState], None] | None,
    ) -> None:
        """The phases of Algorithm 1 until a stopping rule holds (``state`` is updated in place)."""
        target = params.target_size
        while state.stop_reason is None:
            size = int(state.keep.sum())
            if size <= target:
                state.stop_reason = f"target size reached (|S| = {size} <= n = {target})"
                break
            if self.max_iterations is not None and state.iteration >= self.max_iterations:
                state.stop_reason = f"max_iterations={self.max_iterations} reached"
                break
            record = self._phase(ens, Xa, codes, ga, state, params, size, incremental, ahead)
            state.ensemble_state = ens.get_state()
            if callback is not None:
                callback(record, state)

    def _phase(self, ens: Any, Xa: Any, codes: np.ndarray, ga: np.ndarray | None, state: FilterState,
               params: RunParameters, size: int, incremental: bool,
               ahead: _NextPartitions | None) -> IterationRecord:
        """One filtering phase on the rows still kept: p̃ from the ensemble, the slice removed, the record kept and
        the stop decided (the k-rule, or n reached). ``ahead`` draws the next phase's partitions while a device fits
        this phase's."""
        m, t, k = params.n_partitions, params.train_size, params.slice_size
        target, tau = params.target_size, params.threshold
        j = state.iteration
        rows = np.flatnonzero(state.keep)
        seed = params.random_state
        assert seed is not None, "fit draws the seed before the first phase"
        rng, mask = ahead.take(j, len(rows)) if ahead is not None else (np.random.default_rng([seed, j]), None)
        if ahead is not None and size - min(k, size - target) > target:  # the next phase if all k go
            ahead.start(j + 1, size - min(k, size - target))
        if incremental:
            scores = self._greedy_scores(ens, codes, rows, state, m, t, rng)
        else:
            scores = score_phase(ens, codes, rows, m, t, rng, ga, mask=mask)
        p = scores.predictability
        state.predictability[rows] = p
        if j == 0:
            self._keep_first_phase(ens, Xa, codes, rows, scores, state)
        cap = min(k, size - target)  # never go below n
        picked, n_eligible = select_slice(p, cap, tau, rng, self.strategy)
        removed = rows[picked]
        state.keep[removed] = False
        state.removed_at[removed] = j
        record = _phase_record(j, size, len(removed), n_eligible, scores, ens.last_stats)
        state.history.append(record)
        state.iteration = j + 1
        if n_eligible < k and size - len(removed) > target:
            state.stop_reason = f"fewer than k={k} instances had p̃ >= τ={tau} ({n_eligible} qualified) in phase {j}"
        elif size - len(removed) <= target:
            state.stop_reason = f"target size reached (|S| = {size - len(removed)} <= n = {target})"
        return record

    def _keep_first_phase(
        self, ens: LinearEnsemble | None, X: Any, codes: NDArray[np.int64], rows: NDArray[np.intp],
        scores: PhaseScores | None, state: FilterState,
    ) -> None:
        """The first phase's data map and soft weights as fitted attributes (aflite.core.heldout); None when unknown."""
        mask = None if scores is None else scores.train_mask
        if scores is not None and mask is None and "greedy_mask" in state.strategy_state:
            mask = state.strategy_state["greedy_mask"][rows]
        attrs = first_phase_attributes(ens, X, codes, rows, scores, mask, len(self.classes_))
        for name, value in attrs.items():
            setattr(self, name, value)

    @staticmethod
    def _greedy_scores(
        ens: LinearEnsemble,
        codes: NDArray[np.int64],
        rows: NDArray[np.intp],
        state: FilterState,
        m: int,
        t: int,
        rng: np.random.Generator,
    ) -> PhaseScores:
        """Scores for the greedy strategy, refitting only the partitions the last removal touched.

        Greedy removes one instance per step, so a full phase per step would train m models to change
        one row of S. Instead the m partitions persist: a partition that held the removed instance out is
        unchanged (its model never saw it) and keeps its predictions; one that trained on it swaps it for a
        uniformly random row it held out and is refitted from its previous solution. Each partition stays
        a uniformly random t-subset of the current S (the swap preserves uniformity), so p̃ keeps the
        paper's meaning while a step costs about m·t/|S| refits instead of m.
        """
        start = time.perf_counter()
        n_all = len(state.keep)
        mask_all = state.strategy_state.get("greedy_mask")
        preds_all = state.strategy_state.get("greedy_preds")
        if mask_all is None or preds_all is None:
            mask = draw_partitions(len(rows), m, t, rng)
            preds = ens.fit_predict(rows, mask)
            mask_all = np.zeros((n_all, m), dtype=bool)
            preds_all = np.zeros((n_all, m), dtype=preds.dtype)
            mask_all[rows], preds_all[rows] = mask, preds
        else:
            gone = np.flatnonzero(mask_all.any(1) & ~state.keep)  # removed last step yet still in a train set
            touched = np.flatnonzero(mask_all[gone].any(0)) if len(gone) else np.empty(0, dtype=np.intp)
            for b in touched:
                for i in np.flatnonzero(mask_all[gone, b]):
                    mask_all[gone[i], b] = False
                    held = rows[~mask_all[rows, b]]
                    mask_all[rng.choice(held), b] = True
            mask = mask_all[rows]
            if len(touched):
                preds_all[rows[:, None], touched[None, :]] = ens.fit_predict(rows, mask, models=touched)
            else:  # every partition had held the removed instance out: nothing to refit
                ens.last_stats = FitStats()
        state.strategy_state["greedy_mask"], state.strategy_state["greedy_preds"] = mask_all, preds_all
        p, n_heldout, n_correct = scores_from_predictions(preds_all[rows], codes[rows], mask_all[rows])
        return PhaseScores(rows, p, n_heldout, n_correct, time.perf_counter() - start, mask_all[rows].sum(0))

    def fit_resample(self, X: Any, y: Any, **fit_params: Any) -> tuple[Any, Any]:
        """Fit and return the kept rows of X and y (D(Φ)), in their own types (a DataFrame or Series keeps its
        index): imbalanced-learn's sampler contract, so that AFLite is a step of an ``imblearn.pipeline.Pipeline``,
        where it filters the training rows at ``fit`` and is skipped at ``predict``. ``groups`` is the one fit
        parameter: in a pipeline it arrives through scikit-learn's metadata routing
        (``sklearn.set_config(enable_metadata_routing=True)``, then ``pipe.fit(X, y, groups=g)``; without routing
        imbalanced-learn passes a sampler no fit parameter). AFLite has no ``transform``/``fit_transform``: a
        pipeline would take it for a transformer of every row."""
        unknown = sorted(set(fit_params) - {"groups"})
        if unknown:
            raise ParameterError(f"AFLite.fit_resample takes groups as its only fit parameter, not {unknown}")
        keep = self.fit(X, y, fit_params.get("groups")).keep_mask_
        return _rows_of(X, keep), _rows_of(y, keep)


def _rows_of(a: Any, keep: NDArray[np.bool_]) -> Any:
    """The rows of ``a`` where ``keep`` holds, in ``a``'s own type (pandas by position; a list as an array)."""
    if hasattr(a, "iloc"):
        return a.iloc[np.flatnonzero(keep)]
    if hasattr(a, "tocsr"):  # scipy sparse: rows by position (a boolean mask indexes no COO matrix)
        return a.tocsr()[np.flatnonzero(keep)]
    return np.asarray(a)[keep] if isinstance(a, list | tuple) else a[keep]


def _start_state(n: int, resume: FilterState | None, ens: Any) -> FilterState:
    """A fresh state (every row kept, none scored), or a copy of ``resume`` with the ensemble's saved state."""
    if resume is None:
        return FilterState(iteration=0, keep=np.ones(n, dtype=bool), predictability=np.full(n, np.nan),
                           removed_at=np.full(n, -1, dtype=np.int32))
    state = copy.deepcopy(resume)  # the caller's state stays as it was (it may resume twice)
    if len(state.keep) != n:
        raise InputError(f"checkpoint is for {len(state.keep)} instances, the data has {n}")
    ens.set_state(state.ensemble_state)
    return state


def _phase_record(j: int, size: int, n_removed: int, n_eligible: int, scores: Any, stats: Any) -> IterationRecord:
    """What one phase did: sizes, eligible and unscored rows, coverage, the p̃ distribution and the timings."""
    p = scores.predictability
    scored = p[~np.isnan(p)]
    qs = np.quantile(scored, [0, 0.25, 0.5, 0.75, 1.0]) if len(scored) else np.full(5, np.nan)
    return IterationRecord(
        iteration=j,
        size_before=size,
        n_removed=n_removed,
        size_after=size - n_removed,
        n_eligible=n_eligible,
        n_unscored=int(np.isnan(p).sum()),
        coverage_mean=float(scores.n_heldout.mean()),
        p_mean=float(scored.mean()) if len(scored) else float("nan"),
        p_quantiles=dict(zip(("min", "q25", "median", "q75", "max"), map(float, qs), strict=True)),
        seconds=scores.seconds,
        fit_seconds=stats.seconds,
        model_iterations=float(np.mean(stats.iterations)) if stats.iterations else float("nan"),
    )


class _NextPartitions:
    """The next phase's partitions, drawn in a worker thread while a device fits this phase's (its host would only
    wait). Phase j draws from its own generator ``default_rng([seed, j])`` and, without groups, its partitions depend
    on |S| alone: they are drawn for |S| minus a full slice and used when the phase did remove a full slice, else
    drawn again in line. Either way a phase gets the partitions, and the generator state after them, that the
    loop would have drawn itself (the same run, bit for bit)."""

    def __init__(self, seed: int, n_partitions: int, train_size: int) -> None:

        self.seed, self.m, self.t = seed, n_partitions, train_size
        self.pool = ThreadPoolExecutor(1)
        self.pending: tuple[int, int, Any] | None = None
        self.used = 0  # phases that took a draw made ahead (for tests and diagnostics)

    def start(self, j: int, n_rows: int) -> None:
        def draw() -> tuple[np.random.Generator, NDArray[np.bool_]]:
            rng = np.random.default_rng([self.seed, j])
            return rng, draw_partitions(n_rows, self.m, self.t, rng)

        if self.t < n_rows:
            self.pending = (j, n_rows, self.pool.submit(draw))

    def take(self, j: int, n_rows: int) -> tuple[np.random.Generator, NDArray[np.bool_] | None]:
        pending, self.pending = self.pending, None
        if pending is not None and pending[:2] == (j, n_rows):
            self.used += 1
            rng, mask = pending[2].result()
            return rng, mask
        return np.random.default_rng([self.seed, j]), None

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
