"""Ensembles of linear classifiers, one per random partition: the model family M of Algorithm 1.

Two interchangeable implementations of the same contract (:class:`LinearEnsemble`):

* :class:`FastLogisticEnsemble` — multinomial L2 logistic regression for *all* partitions at once, in blocks
  of models optimised in lockstep by batched L-BFGS; each step reads the rows once for all the block's
  models (by default each model's own training rows, gathered chunk by chunk; see :mod:`aflite.core.solver`,
  which holds the solver shared with the PyTorch backend). It solves exactly scikit-learn's problem
  (``C/2``-scaled L2 penalty, unpenalised intercept) but in a whitened coordinate system: with
  ``x' = (x - μ) V diag(1/σ)`` the penalty ``‖W‖²`` becomes the diagonal ``Σ_j ‖W'_j‖² / σ_j²`` — a change
  of variables, not an approximation — and the problem is well conditioned, so batched L-BFGS converges in
  tens of steps where L-BFGS on raw sentence embeddings needs hundreds.
* :class:`SklearnEnsemble` — the reference: any scikit-learn classifier (``LogisticRegression`` by default)
  fitted in a plain loop over the same partitions. Slow, obviously right, and the yardstick for the fast path.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.core import kernels
from aflite.core.backends.onepass import fit_block_onepass
from aflite.core.backends.torch import TorchFeatureStore, block_counts, fit_block_torch, host_predictions
from aflite.core.blocks import BlockResult, BlockTask, default_block_size, use_chunked_rows, use_own_rows
from aflite.core.solver import SOLVERS, fit_block_local
from aflite.core.store import FeatureStore, fit_whitening, pred_dtype
from aflite.device import ensemble_device
from aflite.errors import ParameterError
from aflite.threads import budget, fit_workers

__all__ = [
    "LinearEnsemble",
    "FastLogisticEnsemble",
    "SklearnEnsemble",
    "FitStats",
    "make_ensemble",
]


@dataclass
class FitStats:
    """What the last ``fit_predict`` call did (for logs, summaries and benchmarks)."""

    seconds: float = 0.0
    n_models: int = 0
    iterations: list[int] = field(default_factory=list)
    converged: int = 0
    passes: int = 0
    # thread-seconds per part of the fit, summed over blocks (blocks run in parallel, so the sum can exceed
    # ``seconds``): whitening is timed in prepare; see :func:`aflite.core.solver.run_block` for the parts
    parts: dict[str, float] = field(default_factory=dict)


class LinearEnsemble(ABC):
    """Contract: ``prepare`` once on the whole dataset D, then ``fit_predict`` for each filtering phase.

    ``fit_predict(rows, train_mask)`` trains one classifier per column of ``train_mask`` (shape
    ``(len(rows), m)``, True = that row is in the partition's training set) on ``X[rows]`` and returns
    the predicted class codes for every row and partition, shape ``(len(rows), m)``. Entries for training
    rows are unspecified (the caller only reads held-out ones). With ``models`` only those columns are
    (re)trained and returned, each starting from its own previous solution where the implementation keeps
    one (the incremental greedy strategy refits only the partitions a removal touched).
    """

    last_stats: FitStats

    @abstractmethod
    def prepare(self, X: NDArray[Any], y: NDArray[np.int64], n_classes: int) -> None: ...

    @abstractmethod
    def fit_predict(
        self, rows: NDArray[np.intp], train_mask: NDArray[np.bool_], models: NDArray[np.intp] | None = None
    ) -> NDArray[np.integer[Any]]: ...

    def predict_proba(self, X: Any, rows: NDArray[np.intp]) -> NDArray[np.float32]:
        """Class probabilities of ``X[rows]`` (the raw features given to ``prepare``) under each model of the
        last full ``fit_predict`` call, shape ``(len(rows), m, n_classes)``; the data map of
        :mod:`aflite.core.heldout` reads them. Ensembles that cannot say raise NotImplementedError."""
        raise NotImplementedError(f"{type(self).__name__} does not give class probabilities")

    def raw_coefficients(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Each model's weights on the raw features given to ``prepare``, shape ``(n_features, m, n_classes)``, and
        intercepts ``(m, n_classes)``, from the last full ``fit_predict`` call (NotImplementedError if unknown)."""
        raise NotImplementedError(f"{type(self).__name__} does not expose its coefficients")

    def get_state(self) -> dict[str, NDArray[Any]]:
        """Arrays that, restored with :meth:`set_state`, make a resumed run continue exactly."""
        return {}

    def set_state(self, state: dict[str, NDArray[Any]]) -> None:
        del state


class SklearnEnsemble(LinearEnsemble):
    """Reference path: a scikit-learn classifier cloned and fitted in a loop, one per partition."""

    def __init__(self, estimator: Any = None, partitions: list[int] | None = None) -> None:
        self.estimator = estimator  # None: LogisticRegression(C=1.0), max_iter raised so that it converges
        self.partitions = partitions  # optional subset of partition indices to actually fit (benchmarks)
        self.last_stats = FitStats()

    def prepare(self, X: NDArray[Any], y: NDArray[np.int64], n_classes: int) -> None:
        self._X, self._y, self._k = X, y, n_classes

    def fit_predict(
        self, rows: NDArray[np.intp], train_mask: NDArray[np.bool_], models: NDArray[np.intp] | None = None
    ) -> NDArray[np.integer[Any]]:
        from sklearn.base import clone
        from sklearn.linear_model import LogisticRegression

        start = time.perf_counter()
        estimator = self.estimator if self.estimator is not None else LogisticRegression(C=1.0, max_iter=10_000)
        X = _rows(self._X, rows)
        y = self._y[rows]
        if models is not None:
            train_mask = train_mask[:, models]
        m = train_mask.shape[1]
        preds = np.full((len(rows), m), -1, dtype=pred_dtype(self._k))
        todo = range(m) if self.partitions is None else self.partitions
        iters: list[int] = []
        # the models of a full call, kept for predict_proba (m small models); a partial call (benchmarks, or the
        # greedy strategy's refits) leaves none, since its columns are not the partitions of a phase
        self._fitted: list[Any] = []
        for b in todo:
            tr = train_mask[:, b]
            clf = clone(estimator).fit(X[tr], y[tr])
            if models is None and self.partitions is None:
                self._fitted.append(clf)
            preds[~tr, b] = clf.predict(X[~tr])
            n_iter = getattr(clf, "n_iter_", None)
            if n_iter is not None:
                iters.append(int(np.max(n_iter)))
        self.last_stats = FitStats(time.perf_counter() - start, len(todo), iters, len(todo), len(todo))
        return preds


    def predict_proba(self, X: Any, rows: NDArray[np.intp]) -> NDArray[np.float32]:
        fitted = getattr(self, "_fitted", [])
        if not fitted or not all(hasattr(c, "predict_proba") for c in fitted):
            raise NotImplementedError("the scikit-learn models give no predict_proba")
        Xr = _rows(X, rows)
        out = np.zeros((len(rows), len(fitted), self._k), dtype=np.float32)
        for b, clf in enumerate(fitted):  # a model whose training rows missed a class gives it probability 0
            out[:, b, np.asarray(clf.classes_, dtype=np.int64)] = clf.predict_proba(Xr)
        return out


def _rows(X: Any, rows: NDArray[np.intp]) -> Any:
    """``X[rows]`` as an array, a scipy sparse X kept sparse (scikit-learn's models take CSR as it is)."""
    return X.tocsr()[rows] if hasattr(X, "tocsr") else np.asarray(X[rows])


class FastLogisticEnsemble(LinearEnsemble):
    """Multinomial L2 logistic regression for m partitions, in blocks (batched, preconditioned L-BFGS).

    Parameters mirror scikit-learn's ``LogisticRegression``: ``C`` is the inverse regularisation strength
    (the objective is ``½‖W‖² + C Σ_i loss_i``, intercept unpenalised; for two classes the binary model,
    as scikit-learn fits it). ``tol`` bounds the largest gradient entry of the per-sample-averaged objective
    in whitened coordinates (default 1e-3: held-out predictions agree with a fit to 1e-5 on ≥ 99.8 % of rows on
    SNLI-shaped features, Pearson p̃ ≥ 0.9999, in ~30 % fewer steps than 3e-4 after the first phase; scikit-learn's
    own fit at its tol=1e-4 agrees on ~98.7 %: ``python benchmarks/lbfgs_tolerance.py 300000 3 3e-4,1e-3``);
    ``max_iter`` caps L-BFGS steps per model. ``warm_start`` starts each phase from the mean solution of the
    previous one (same optimum — the problem is convex — in fewer steps; measured: starting each model from its
    own previous solution took slightly more steps, the partitions being redrawn).

    Scale: the partitions are fitted in blocks of ``block_size`` (default :func:`default_block_size`; one block
    of all m models for the compiled own-row kernel, whose threads share each pass's chunks instead), each
    with one BLAS thread, ``n_jobs`` blocks at a time, or on the workers of ``executor`` (see
    :mod:`aflite.core.backends.dask`); the result is the same whichever runs them. ``device`` ``"cuda"`` (or ``"auto"``
    with a GPU present) runs the same algorithm in PyTorch on the GPU (:mod:`aflite.core.backends.torch`), with
    features stored as ``storage`` (float32, bfloat16 or float16; products accumulate in float32). Features
    larger than ``max_copy_gb`` of whitened float32 are streamed from X (e.g. a memory-mapped .npy) instead
    of copied.

    ``solver`` ``"fast"`` (default) trains each model on its own rows of S, read chunk by chunk, and starts
    L-BFGS with the previous phase's curvature pairs; ``"previous"`` is the solver before that (every step a
    pass over all of S), kept so that ``python benchmarks/bench.py --solvers both`` can time both on the same
    partitions.
    Both solve the same problem to the same tolerance (see :mod:`aflite.core.solver`).

    ``copy_X`` ``False`` (scikit-learn's convention) lets ``prepare`` whiten a float32, C-contiguous X in its own
    memory instead of a copy: the caller gives X up (its values are overwritten) and the peak memory drops by
    the size of X. The benchmark's complete filter, which generates X for the run alone, uses it.

    On a PyTorch device, opt-in and **not yet measured on a GPU** (:mod:`aflite.core.backends.torch`):
    ``device_resident`` keeps a phase on the device (on ``torch-cpu``: the classic path's results bit for bit;
    :meth:`fit_score` returns its counts), ``device_lbfgs`` also runs the L-BFGS there (agreement within the
    optimiser's tolerance), ``device_onepass`` runs it with one pass per evaluation serving every model of a
    block (:mod:`aflite.core.backends.onepass`), ``device_pass_mb`` sets the MiB of features per chunk of a pass
    (default ``chunk_mb``).
    """

    def __init__(
        self,
        C: float = 1.0,
        tol: float = 1e-3,
        max_iter: int = 300,
        memory: int = 10,
        warm_start: bool = True,
        chunk_mb: int = 64,
        block_size: int | None = None,
        n_jobs: int | None = None,
        max_copy_gb: float = 4.0,
        device: str = "cpu",
        storage: str = "float32",
        executor: Any = None,
        solver: str = "fast",
        copy_X: bool = True,
        device_resident: bool = False,
        device_lbfgs: bool = False,
        device_pass_mb: int | None = None,
        device_onepass: bool = False,
    ) -> None:
        # stored as given (scikit-learn style); checked in prepare(), where the data comes in
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.memory = memory
        self.warm_start = warm_start
        self.chunk_mb = chunk_mb
        self.block_size = block_size
        self.n_jobs = n_jobs
        self.max_copy_gb = max_copy_gb
        self.device = device
        self.storage = storage
        self.executor = executor
        self.solver = solver
        self.copy_X = copy_X
        self.device_resident = device_resident
        self.device_lbfgs = device_lbfgs
        self.device_pass_mb = device_pass_mb
        self.device_onepass = device_onepass
        self.last_stats = FitStats()
        self._coef0: NDArray[np.float64] | None = None
        self._coefs: NDArray[np.float64] | None = None  # per-model solutions of the last call
        self._pairs: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None  # carried to the next phase
        self._store: Any = None

    def _check_params(self) -> None:
        """The scikit-learn convention: parameters are checked when fitting starts, with one error family."""
        def number(name: str, low: float, integer: bool = False, strict: bool = True) -> None:
            v = getattr(self, name)
            ok = isinstance(v, (int, np.integer)) if integer else isinstance(v, (int, float, np.number))
            if isinstance(v, bool) or not ok or not (v > low if strict else v >= low):
                kind = "an integer" if integer else "a number"
                raise ParameterError(f"{name} must be {kind} {'>' if strict else '>='} {low:g}, got {v!r}")

        number("C", 0)
        number("tol", 0, strict=False)
        number("max_iter", 1, integer=True, strict=False)
        number("memory", 1, integer=True, strict=False)
        number("chunk_mb", 1, integer=True, strict=False)
        number("max_copy_gb", 0, strict=False)
        if self.block_size is not None:
            number("block_size", 1, integer=True, strict=False)
        if self.n_jobs is not None:
            number("n_jobs", 1, integer=True, strict=False)
        if self.solver not in SOLVERS:
            raise ParameterError(f"solver must be one of {', '.join(SOLVERS)}, got {self.solver!r}")
        if self.device_pass_mb is not None:
            number("device_pass_mb", 1, integer=True, strict=False)
        for flag in ("device_resident", "device_lbfgs", "device_onepass"):
            if not isinstance(getattr(self, flag), bool | np.bool_):
                raise ParameterError(f"{flag} must be True or False, got {getattr(self, flag)!r}")

    # ------------------------------------------------------------------ preparation (once per dataset)
    def prepare(self, X: NDArray[Any], y: NDArray[np.int64], n_classes: int) -> None:
        """Whiten X once (centre, rotate onto the covariance eigenbasis, unit variance) and set up the store."""
        self._check_params()
        t0 = time.perf_counter()
        self._y = np.asarray(y, dtype=np.int64)
        self._k = int(n_classes)
        self._whitening = fit_whitening(X, self.chunk_mb, self.n_jobs)
        self._dim = self._whitening.dim
        self._penalty = self._whitening.penalty

        self.device_ = ensemble_device(self.device, self.executor)
        copy = X.shape[0] * self._dim * 4 <= self.max_copy_gb * (1 << 30)
        if self.device_ != "cpu":
            self._store = TorchFeatureStore(X, self._whitening, self.device_, self.storage, self.chunk_mb,
                                            self.device_pass_mb)
        elif self.executor is not None:
            self._store = None
            self.executor.prepare(X, self._whitening, copy, self.chunk_mb)
        else:
            self._store = FeatureStore(X, self._whitening, copy, self.chunk_mb, n_jobs=self.n_jobs,
                                       overwrite=not self.copy_X)
        self._coef0 = None
        self._coefs = None
        self._pairs = None
        self.prepare_seconds_ = time.perf_counter() - t0

    def get_state(self) -> dict[str, NDArray[Any]]:
        state = {} if self._coef0 is None else {"coef0": self._coef0}
        if self._coefs is not None:
            state["coefs"] = self._coefs
        if self._pairs is not None:
            state["pairs_s"], state["pairs_y"] = self._pairs
        return state

    def predict_proba(self, X: Any, rows: NDArray[np.intp]) -> NDArray[np.float32]:
        """Softmax of each model's logits at its last solution, on the raw rows: the whitening is folded into the
        weights (``(x - μ) T W = x (T W) - μ T W``), so a row costs one product with m·K columns."""
        cached: Any = getattr(self, "_proba_weights", None)
        if cached is None or cached[0] is not self._coefs:  # the data map calls this per chunk: fold once per fit
            W3, b3 = self.raw_coefficients()
            cached = (self._coefs, W3.reshape(W3.shape[0], -1).astype(np.float32), b3.astype(np.float32))
            self._proba_weights = cached
        W32: NDArray[np.float32] = cached[1]
        b32: NDArray[np.float32] = cached[2]
        m, K = b32.shape
        z: NDArray[np.float32] = (np.asarray(X[rows], dtype=np.float32) @ W32
                                  + b32.reshape(m * K)).reshape(len(rows), m, K)
        # max and sum over the short last axis one class at a time: numpy's reductions over an axis of 2-3
        # elements are several times slower than the same elementwise ops on strided views
        top = z[:, :, 0].copy()
        for k in range(1, K):
            np.maximum(top, z[:, :, k], out=top)
        z -= top[:, :, None]
        np.exp(z, out=z)
        total = z[:, :, 0].copy()
        for k in range(1, K):
            total += z[:, :, k]
        z /= total[:, :, None]
        return z

    def raw_coefficients(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        if self._coefs is None:
            raise NotImplementedError("no fitted models yet")
        theta = self._coefs  # (m, d+1, K) in whitened coordinates
        m, d, K = theta.shape[0], self._dim, self._k
        T = self._whitening.transform.astype(np.float64)
        W = T @ theta[:, :d, :].transpose(1, 0, 2).reshape(d, m * K)  # (raw features, m·K)
        b = theta[:, d, :].reshape(m * K) - self._whitening.mean @ W
        return W.reshape(-1, m, K), b.reshape(m, K)

    def set_state(self, state: dict[str, NDArray[Any]]) -> None:
        self._coef0 = np.asarray(state["coef0"], dtype=np.float64) if "coef0" in state else None
        self._coefs = np.asarray(state["coefs"], dtype=np.float64) if "coefs" in state else None
        self._pairs = None
        if "pairs_s" in state and "pairs_y" in state:
            self._pairs = (np.asarray(state["pairs_s"], dtype=np.float64),
                           np.asarray(state["pairs_y"], dtype=np.float64))

    # ------------------------------------------------------------------ one phase
    def fit_predict(
        self, rows: NDArray[np.intp], train_mask: NDArray[np.bool_], models: NDArray[np.intp] | None = None
    ) -> NDArray[np.integer[Any]]:
        results = self._fit(rows, train_mask, models)
        if not self._on_device_preds():
            return np.concatenate([r.preds for r in results], axis=1)

        return np.concatenate([host_predictions(r.preds, self._k) for r in results], axis=1)

    def _on_device_preds(self) -> bool:  # the blocks leave their predictions on the device (resident modes)
        return self.device_ != "cpu" and bool(self.device_resident or self.device_lbfgs
                                                      or self.device_onepass)

    @property
    def host_waits(self) -> bool:
        """A phase's fit leaves the host waiting on a device (resident modes): the filter draws ahead meanwhile."""
        return getattr(self, "device_", "cpu") != "cpu" and self._on_device_preds()

    def fit_score(self, rows: NDArray[np.intp], train_mask: NDArray[np.bool_]) -> tuple[Any, Any] | None:
        """A phase's counts per row (models holding it out that predicted its label; models holding it out) from
        where the predictions are, a device in the resident modes; None elsewhere (count :meth:`fit_predict`'s)."""
        if not self._on_device_preds():
            return None

        return block_counts(self._fit(rows, train_mask, None))

    def _fit(
        self, rows: NDArray[np.intp], train_mask: NDArray[np.bool_], models: NDArray[np.intp] | None
    ) -> list[BlockResult]:
        """Fit the partitions' models (all, or the columns ``models``) in blocks; keeps the solutions and the
        statistics, returns the blocks' results (their predictions on the host, or on the device)."""
        start = time.perf_counter()
        rows = np.asarray(rows)
        m_all = train_mask.shape[1]
        cols = np.arange(m_all) if models is None else np.asarray(models)
        mask = train_mask if models is None else train_mask[:, cols]  # no copy of all m columns
        n, m = mask.shape
        K, d = self._k, self._dim
        t_b = mask.sum(0).astype(np.float64)
        if np.any(t_b == 0):
            raise ParameterError("every partition needs at least one training row")
        # For two classes scikit-learn fits one binary weight vector with penalty ½‖w‖²; the symmetric
        # two-column softmax reaches the same model with twice the penalty on each column.
        pen_scale = 2.0 if K == 2 else 1.0
        lam = np.concatenate([self._penalty, [0.0]])  # intercept row unpenalised
        reg = pen_scale * lam[None, :] / (self.C * t_b[:, None])  # (m, d+1): per-model penalty weights

        theta0 = np.zeros((m, d + 1, K))
        own = self._coefs is not None and self._coefs.shape == (m_all, d + 1, K)
        if models is not None and own:
            assert self._coefs is not None
            theta0[:] = self._coefs[cols]  # a refit of partitions that changed a little: start where they were
        elif self.warm_start and self._coef0 is not None and self._coef0.shape == (d + 1, K):
            theta0[:] = self._coef0
        y = self._y[rows]
        own_rows = use_own_rows(n, int(t_b.max()), K)
        fast = self.solver == "fast"
        # the fast solver's chunked own-row passes (numpy path; the GPU path keeps its passes over S)
        chunked = fast and not own_rows and self.device_ == "cpu" and use_chunked_rows(n, int(t_b.max()))
        pairs = self._pairs if fast else None
        gpu = self.device_ != "cpu"
        # The compiled own-row passes read each chunk of S once for every model of a block, so one block of all
        # m models reads S once per pass; its threads share the chunks of each pass instead of sharing blocks.
        compiled = chunked and self.executor is None and kernels.available()
        if self.block_size:
            b = self.block_size
        elif compiled:
            b = m
        elif gpu:  # one block, unless the L-BFGS history (2·memory float64 copies per model) passes ~4 GiB
            b = max(1, min(m, (4 << 30) // (16 * self.memory * (d + 1) * K)))
        else:
            b = default_block_size(m_all, K, n, d)
        n_blocks = -(-m // b)
        inner = max(1, (self.n_jobs or budget()) // n_blocks) if compiled else 1
        tasks = [
            BlockTask(rows, y, mask[:, s : s + b], theta0[s : s + b], reg[s : s + b], K, own_rows,
                      self.tol, self.max_iter, self.memory, chunked, pairs, inner)
            for s in range(0, m, b)
        ]
        results = self._run_tasks(tasks, n)
        theta = np.concatenate([r.theta for r in results])
        if models is None:
            self._coefs = theta
            self._coef0 = theta.mean(0)
            self._pairs = results[0].pairs if fast else None
        elif own:
            assert self._coefs is not None
            self._coefs[cols] = theta
        iters = np.concatenate([r.iterations for r in results])
        parts: dict[str, float] = {}
        for r in results:
            for key, v in r.seconds.items():
                parts[key] = parts.get(key, 0.0) + v
        self.last_stats = FitStats(
            time.perf_counter() - start, m, iters.tolist(), sum(r.converged for r in results),
            sum(r.passes for r in results), parts,
        )
        return results

    def _run_tasks(self, tasks: list[BlockTask], n: int) -> list[BlockResult]:
        if self.device_ != "cpu" and self.device_onepass:
            return [fit_block_onepass(self._store, t) for t in tasks]
        if self.device_ != "cpu":
            return [fit_block_torch(self._store, t, resident=bool(self.device_resident),
                                    lbfgs_on_device=bool(self.device_lbfgs)) for t in tasks]
        if self.executor is not None:
            return list(self.executor.map_blocks(tasks))
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return self._run_local(tasks, n)

    def _run_local(self, tasks: list[BlockTask], n: int) -> list[BlockResult]:
        store = self._store

        jobs = self.n_jobs or fit_workers(len(tasks))
        # Tiny problems (the synthetic experiment) are dominated by thread start-up: run them in order.
        work = n * (self._dim + 1) * self._k * sum(t.mask.shape[1] for t in tasks)
        if jobs <= 1 or len(tasks) == 1 or work < 20_000_000:
            return [fit_block_local(store, t) for t in tasks]

        store.select(tasks[0].rows)  # compact once, before the threads share the store
        with ThreadPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
            return list(pool.map(lambda t: fit_block_local(store, t), tasks))


def make_ensemble(
    model: Any = "logistic", C: float = 1.0, device: str = "cpu", storage: str = "float32", executor: Any = None
) -> LinearEnsemble:
    """Resolve the user's choice of model family into an ensemble implementation.

    ``"logistic"`` → the fast batched path (on ``device``, or on ``executor``'s workers); ``"sklearn"`` →
    scikit-learn LogisticRegression in a loop;
    a scikit-learn classifier instance → that estimator in a loop; a :class:`LinearEnsemble` → itself.
    """
    if isinstance(model, LinearEnsemble):
        return model
    if model == "logistic":
        return FastLogisticEnsemble(C=C, device=device, storage=storage, executor=executor)
    if model == "sklearn":
        from sklearn.linear_model import LogisticRegression

        return SklearnEnsemble(LogisticRegression(C=C, max_iter=10_000))
    if hasattr(model, "fit") and hasattr(model, "predict"):
        return SklearnEnsemble(model)
    raise ParameterError(f"unknown model {model!r}: use 'logistic', 'sklearn' or a scikit-learn classifier")
