"""The synthetic experiment of Le Bras et al. (2020), §3 / Figure 2 / appendix Table 7.

Two concentric rings (the label says which ring a point came from) at four class separations, plus
class-specific Gaussian *bias* features on 75% of each class and label-independent *noise* features on the
rest. The bias makes the task linearly solvable; AFLite (Table 8: m=128, t=100, k=1, τ=0.75) should remove
the biased instances preferentially, so that logistic regression falls to near chance on D(Φ) while an
RBF-kernel SVM, which can still use the rings, stays well above it.

Design (the paper does not give its generator; these are our choices, all parameters of the functions):

* **Separation.** The gap between the ring radii (outer 1, inner ``1 - separation``); isotropic Gaussian noise of
  std ``ring_noise`` (0.25) on both coordinates, angles uniform; balanced classes (``n_samples // 2`` inner).
* **Bias features.** ``bias_dim`` (2) extra columns. For a biased instance with label y they are drawn from
  N(±μ, I) (+ for label 1, − for label 0) with ‖2μ‖ = ``bias_shift`` (2.5) along the diagonal, so the bias
  alone predicts the label with Bayes accuracy Φ(1.25) ≈ 89%: logistic regression on D gets ≈ 0.75·0.89 +
  0.25·0.5 ≈ 79%, almost all of it through the bias (on the rings alone it is at chance).
* **Noise features.** For the other 25% of each class the same columns are N(0, I): label-independent, in
  the same place and of the same scale, so nothing but their relation to the label tells them apart.
* **Flips** (only for separation ≥ 0.8, as in the paper's leftmost panel): ``flip_fraction`` (5%) of the
  biased instances, chosen uniformly, get the *other* label. A flipped point keeps its ring position but
  carries the label — and therefore the bias features — of the opposite class: its geometry contradicts its
  label (adversarial to the RBF model), while its bias features "explain" it, which is why AFLite can find
  and remove most of them, as the paper reports.
* **Split.** AFLite runs on all of D (it uses only features and labels). One stratified train (80%) / dev (20%)
  split of D per seed: the "D" column trains and scores on its parts, the "D(Φ)" column on their kept rows, so
  it reports dev accuracy on the filtered distribution, as Table 7 does (§2), the two columns paired.
* **Models.** scikit-learn defaults (the paper's footnote 6): ``SVC(kernel="rbf")`` and
  ``LogisticRegression`` (max_iter raised so that it converges), on the raw features.
* **Target size.** Table 8 does not control n for the synthetic data; we use n = 2t = 200 and let τ stop
  the filter (with N = 1,000 it stops near |S| ≈ 500, far above n).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypedDict, cast

import numpy as np
from numpy.typing import NDArray

from aflite.core.filter import AFLite
from aflite.core.phase import Strategy
from aflite.data.keywords import option_label
from aflite.errors import ParameterError
from aflite.experiments.circles import (  # the data of the experiment (aflite.experiments.circles)
    DEFAULT_DEV_FRACTION,
    DEFAULT_N_SAMPLES,
    CirclesOptions,
    CirclesParams,
    DataParams,
    evaluate_models,
    make_circles_dataset,
    train_dev_split,
)
from aflite.experiments.circles import check_fraction as _check_fraction
from aflite.features.base import JsonValue
from aflite.progress import tqdm  # Jupyter: a widget bar, or none without ipywidgets

__all__ = [
    "PAPER_SEPARATIONS",
    "PAPER_TABLE7",
    "SYNTHETIC_AFLITE",
    "RunRecord",
    "Figure2Panel",
    "SyntheticExperiment",
    "run_one",
    "run_synthetic",
    "format_table",
]

PAPER_SEPARATIONS: tuple[float, ...] = (0.8, 0.7, 0.6, 0.4)

# Appendix Table 7: mean dev accuracy (%) and std over 10 seeds, (D mean, D std, D(Φ) mean, D(Φ) std).
# The paper prints the std as two-digit subscripts (97.0 ₀₂ means 97.0 ± 0.2).
PAPER_TABLE7: dict[float, dict[str, tuple[float, float, float, float]]] = {
    0.8: {"svm": (97.0, 0.2, 90.7, 0.6), "lr": (83.5, 0.5, 50.7, 1.2)},
    0.7: {"svm": (89.9, 0.4, 82.5, 0.9), "lr": (74.3, 1.1, 52.4, 1.3)},
    0.6: {"svm": (87.6, 0.4, 77.8, 0.9), "lr": (74.3, 1.0, 53.1, 1.2)},
    0.4: {"svm": (83.8, 0.5, 70.7, 1.0), "lr": (75.4, 0.9, 53.4, 1.2)},
}

# Table 8, "Synthetic" column; n is not controlled there (τ stops the filter): we use n = 2t.
class AFLiteParams(TypedDict, total=False):
    """:class:`aflite.core.filter.AFLite`'s keywords this experiment sets (the last three only when asked)."""

    n_partitions: int
    train_size: int | float
    slice_size: int | float
    threshold: float
    target_size: int | float
    strategy: Strategy
    model: Any
    C: float


SYNTHETIC_AFLITE: AFLiteParams = {
    "n_partitions": 128,
    "train_size": 100,
    "slice_size": 1,
    "threshold": 0.75,
    "target_size": 200,
}

MODEL_NAMES: dict[str, str] = {"svm": "SVM-RBF", "lr": "Logistic Reg."}

# ----------------------------------------------------------------------------------------------- runs
@dataclass
class RunRecord:
    """One (separation, seed) run: accuracies in %, fractions in [0, 1]."""

    separation: float
    seed: int
    n_samples: int
    n_kept: int
    n_iterations: int
    stop_reason: str
    accuracy_D: dict[str, float]
    accuracy_filtered: dict[str, float]
    accuracy_coords_only: dict[str, float]  # no-bias baseline: the same models on D's 2-D coordinates alone
    biased_fraction_before: float
    biased_fraction_after: float
    biased_removed: float  # fraction of the biased instances AFLite removed
    unbiased_removed: float  # fraction of the unbiased (noise-feature) instances AFLite removed
    n_flipped: int
    flipped_removed: float  # fraction of the flipped instances removed (NaN when none were flipped)
    n_train: int
    n_dev: int
    n_train_filtered: int
    n_dev_filtered: int
    aflite_seconds: float
    seconds: float


@dataclass
class Figure2Panel:
    """What one column of Figure 2 needs: the 2-D points, labels, AFLite's keep mask and the accuracies."""

    separation: float
    seed: int
    coords: NDArray[np.float64]
    y: NDArray[np.int64]
    keep: NDArray[np.bool_]
    flipped: NDArray[np.bool_]
    accuracy_D: dict[str, float]
    accuracy_filtered: dict[str, float]


def _aflite_params(overrides: Mapping[str, object] | None) -> AFLiteParams:
    for key in overrides or {}:
        if key not in AFLiteParams.__annotations__:
            raise ParameterError(f"unknown AFLite parameter {key!r}")
    return cast(AFLiteParams, {**SYNTHETIC_AFLITE, **(overrides or {})})  # its keys checked above


def run_one(
    separation: float,
    seed: int,
    n_samples: int = DEFAULT_N_SAMPLES,
    *,
    aflite_params: Mapping[str, object] | None = None,
    dev_fraction: float = DEFAULT_DEV_FRACTION,
    data_kwargs: CirclesOptions | None = None,
    callback: Callable[[Any, Any], None] | None = None,
) -> tuple[RunRecord, Figure2Panel]:
    """Build the data for (separation, seed), run AFLite on all of D, evaluate on D and on D(Φ)."""
    start = time.perf_counter()
    params = _aflite_params(aflite_params)
    data = make_circles_dataset(separation, n_samples, random_state=np.random.default_rng([seed, 0]),
                                **(data_kwargs or {}))
    dev = train_dev_split(data.y, dev_fraction, np.random.default_rng([seed, 1]))
    train = ~dev
    t0 = time.perf_counter()
    af = AFLite(**params, random_state=int(seed)).fit(data.X, data.y, callback=callback)
    aflite_seconds = time.perf_counter() - t0
    keep = np.asarray(af.keep_mask_, dtype=bool)

    acc_d = evaluate_models(data.X, data.y, train, dev)
    acc_f = evaluate_models(data.X, data.y, train & keep, dev & keep)
    acc_c = evaluate_models(data.coords, data.y, train, dev)
    b, f = data.is_biased, data.flipped
    record = RunRecord(
        separation=data.separation,
        seed=int(seed),
        n_samples=data.n_samples,
        n_kept=int(keep.sum()),
        n_iterations=int(af.n_iterations_),
        stop_reason=str(af.stop_reason_),
        accuracy_D=acc_d,
        accuracy_filtered=acc_f,
        accuracy_coords_only=acc_c,
        biased_fraction_before=float(b.mean()),
        biased_fraction_after=float(b[keep].mean()) if keep.any() else float("nan"),
        biased_removed=float((~keep[b]).mean()) if b.any() else float("nan"),
        unbiased_removed=float((~keep[~b]).mean()) if (~b).any() else float("nan"),
        n_flipped=int(f.sum()),
        flipped_removed=float((~keep[f]).mean()) if f.any() else float("nan"),
        n_train=int(train.sum()),
        n_dev=int(dev.sum()),
        n_train_filtered=int((train & keep).sum()),
        n_dev_filtered=int((dev & keep).sum()),
        aflite_seconds=aflite_seconds,
        seconds=time.perf_counter() - start,
    )
    panel = Figure2Panel(separation=data.separation, seed=int(seed), coords=data.coords, y=data.y, keep=keep,
                         flipped=f, accuracy_D=acc_d, accuracy_filtered=acc_f)
    return record, panel


class Spread(TypedDict):
    """A quantity over seeds: mean and sample std (ddof=1) of the n finite values (NaN and n 0: none)."""

    mean: float
    std: float
    n: int


class SeparationSummary(TypedDict):
    """One separation's runs over seeds (results.json's ``summary[sep]``): the models' accuracies by model name."""

    n_runs: int
    accuracy_D: dict[str, Spread]
    accuracy_filtered: dict[str, Spread]
    accuracy_coords_only: dict[str, Spread]
    n_kept: Spread
    n_iterations: Spread
    biased_fraction_before: Spread
    biased_fraction_after: Spread
    biased_removed: Spread
    unbiased_removed: Spread
    flipped_removed: Spread
    n_dev_filtered: Spread
    aflite_seconds: Spread
    seconds: Spread


def _mean_std(values: Iterable[float]) -> Spread:
    a = np.array([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if len(a) == 0:
        return {"mean": float("nan"), "std": float("nan"), "n": 0}
    return {"mean": float(a.mean()), "std": float(a.std(ddof=1)) if len(a) > 1 else 0.0, "n": int(len(a))}


def _summarise(rs: list[RunRecord]) -> SeparationSummary:
    def over(key: str) -> Spread:
        return _mean_std(float(getattr(r, key)) for r in rs)

    def models(key: str) -> dict[str, Spread]:
        return {m: _mean_std(getattr(r, key)[m] for r in rs) for m in MODEL_NAMES}

    return SeparationSummary(
        n_runs=len(rs), accuracy_D=models("accuracy_D"), accuracy_filtered=models("accuracy_filtered"),
        accuracy_coords_only=models("accuracy_coords_only"), n_kept=over("n_kept"), n_iterations=over("n_iterations"),
        biased_fraction_before=over("biased_fraction_before"), biased_fraction_after=over("biased_fraction_after"),
        biased_removed=over("biased_removed"), unbiased_removed=over("unbiased_removed"),
        flipped_removed=over("flipped_removed"), n_dev_filtered=over("n_dev_filtered"),
        aflite_seconds=over("aflite_seconds"), seconds=over("seconds"))


@dataclass
class SyntheticExperiment:
    """All runs of :func:`run_synthetic`, their aggregates, and one Figure-2 panel per separation."""

    runs: list[RunRecord]
    separations: tuple[float, ...]
    seeds: tuple[int, ...]
    n_samples: int
    dev_fraction: float
    aflite_params: AFLiteParams
    data_params: DataParams  # as results.json records them
    panels: list[Figure2Panel]
    seconds: float = 0.0
    blas_threads: int | None = None

    def runs_for(self, separation: float) -> list[RunRecord]:
        return [r for r in self.runs if math.isclose(r.separation, separation)]

    def summary(self) -> dict[float, SeparationSummary]:
        """Per separation: mean/std (sample std, ddof=1) over seeds of every reported quantity."""
        return {sep: _summarise(self.runs_for(sep)) for sep in self.separations}

    def to_json(self) -> dict[str, JsonValue]:
        """Plain JSON-ready dict (NaN → None): parameters, the paper's table, the aggregates and every run."""
        summary = self.summary()
        obj = {
            "experiment": "synthetic concentric circles (Le Bras et al. 2020, §3, Fig. 2, Table 7)",
            "separations": list(self.separations),
            "seeds": list(self.seeds),
            "n_samples": self.n_samples,
            "dev_fraction": self.dev_fraction,
            "aflite": dict(self.aflite_params),
            "data": dict(self.data_params),
            "blas_threads": self.blas_threads,
            "seconds": self.seconds,
            "paper_table7": {
                str(sep): {m: {"D": {"mean": v[0], "std": v[1]}, "D_filtered": {"mean": v[2], "std": v[3]}}
                           for m, v in row.items()}
                for sep, row in PAPER_TABLE7.items()
            },
            "summary": {str(sep): s for sep, s in summary.items()},
            "runs": [asdict(r) for r in self.runs],
        }
        return {k: _clean(v) for k, v in obj.items()}


def _clean(obj: object) -> JsonValue:
    """``obj`` as JSON values: numpy numbers as Python ones, NaN and infinities as None, keys as strings."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        return None if not math.isfinite(float(obj)) else float(obj)
    if obj is None or isinstance(obj, str | int):
        return obj
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def run_synthetic(
    seeds: Iterable[int] = range(10),
    separations: Sequence[float] = PAPER_SEPARATIONS,
    n_samples: int = DEFAULT_N_SAMPLES,
    *,
    aflite_params: Mapping[str, object] | None = None,
    dev_fraction: float = DEFAULT_DEV_FRACTION,
    data_kwargs: CirclesOptions | None = None,
    show_progress: bool = True,
    blas_threads: int | None = 1,
) -> SyntheticExperiment:
    """Every (separation, seed) run of the synthetic experiment, with AFLite at Table 8's setting. BLAS runs on one
    thread by default: the models are tiny (t=100 rows, 4 features), so threading only adds overhead.

    Parameters
    ----------
    seeds : iterable of int, default range(10)
        The seeds, one run each per separation.
    separations : sequence of float, default (0.8, 0.7, 0.6, 0.4)
        The class separations of the synthetic data.
    n_samples : int, default 1000
        Rows per data set.
    aflite_params : dict, optional
        Entries of :data:`SYNTHETIC_AFLITE` overridden (also strategy / model / C).
    dev_fraction : float, default 0.2
        The share held out as a dev set.
    data_kwargs : dict, optional
        Keywords of the data generator.
    show_progress : bool, default True
        Show a progress bar.
    blas_threads : int or None, default 1
        BLAS threads during the runs (None: left alone).

    Returns
    -------
    SyntheticExperiment
        Every run's numbers.
    """
    seeds = tuple(int(s) for s in seeds)
    separations = tuple(_check_fraction("separation", s) for s in separations)
    if not seeds:
        raise ParameterError("need at least one seed")
    if not separations:
        raise ParameterError("need at least one separation")
    if len(set(seeds)) != len(seeds):
        raise ParameterError("seeds must be distinct")
    if len(set(separations)) != len(separations):
        raise ParameterError("separations has duplicates")
    params = _aflite_params(aflite_params)
    target = params["target_size"]
    if isinstance(target, int) and target >= n_samples:
        raise ParameterError(f"{option_label('--n-samples ', 'n_samples=')}{n_samples} must exceed AFLite's target "
                             f"size n={target}")
    dev_fraction = _check_fraction("dev_fraction", dev_fraction)

    AFLite(**params).resolved_params(n_samples)  # τ, m, k and t < n < |D| refused before the first run

    start = time.perf_counter()
    runs: list[RunRecord] = []
    panels: list[Figure2Panel] = []
    limiter: Any = contextlib.nullcontext()
    if blas_threads is not None:
        from threadpoolctl import threadpool_limits

        limiter = threadpool_limits(limits=int(blas_threads))
    total = len(seeds) * len(separations)
    with limiter, tqdm(total=total, desc="synthetic", unit="run", disable=not show_progress, dynamic_ncols=True) as bar:
        for sep in separations:
            for i, seed in enumerate(seeds):
                bar.set_postfix_str(f"sep={sep} seed={seed}")

                def cb(record: Any, state: Any, _bar: Any = bar, _sep: float = sep, _seed: int = seed) -> None:
                    if record.iteration % 50 == 0:
                        _bar.set_postfix_str(f"sep={_sep} seed={_seed} |S|={record.size_after}")

                rec, panel = run_one(sep, seed, n_samples, aflite_params=params, dev_fraction=dev_fraction,
                                     data_kwargs=data_kwargs, callback=cb if show_progress else None)
                runs.append(rec)
                if i == 0:
                    panels.append(panel)
                bar.update(1)
    first: CirclesParams = make_circles_dataset(separations[0], n_samples, 0, **(data_kwargs or {})).params
    data_params = DataParams(
        n_samples=first["n_samples"], outer_radius=first["outer_radius"], ring_noise=first["ring_noise"],
        bias_fraction=first["bias_fraction"], bias_dim=first["bias_dim"], bias_shift=first["bias_shift"],
        flip_fraction={str(s): make_circles_dataset(s, n_samples, 0, **(data_kwargs or {})).params["flip_fraction"]
                       for s in separations})
    return SyntheticExperiment(runs=runs, separations=separations, seeds=seeds, n_samples=n_samples,
                           dev_fraction=dev_fraction, aflite_params=params, data_params=data_params, panels=panels,
                           seconds=time.perf_counter() - start, blas_threads=blas_threads)


# ------------------------------------------------------------------------------------------ reporting
def _pm(stat: Spread, digits: int = 1, scale: float = 1.0) -> str:
    if stat["n"] == 0 or math.isnan(stat["mean"]):
        return "—"
    return f"{stat['mean'] * scale:.{digits}f} ± {stat['std'] * scale:.{digits}f}"


def format_table(result: SyntheticExperiment) -> str:
    """Our Table 7 (mean ± std over seeds) next to the paper's, then what AFLite removed."""
    summary = result.summary()
    p = result.aflite_params
    lines = [
        "Synthetic concentric circles (Le Bras et al. 2020, §3 / Fig. 2; appendix Table 7): dev accuracy (%),",
        f"mean ± std over {len(result.seeds)} seed(s) {_seed_text(result.seeds)}. "
        f"N = {result.n_samples} per dataset, {result.data_params['bias_fraction']:.0%} "
        f"of each class biased; dev = {result.dev_fraction:.0%} stratified split of D, D(Φ) = its kept rows.",
        f"AFLite: m={p['n_partitions']}, t={p['train_size']}, k={p['slice_size']}, τ={p['threshold']}, "
        f"n={p['target_size']}. Paper std is its subscript (97.0 ₀₂ = 97.0 ± 0.2).",
        "",
    ]
    header = ("Class sep.", "Model", "D (ours)", "D(Φ) (ours)", "D (paper)", "D(Φ) (paper)", "2-D only (ours)")
    rows: list[tuple[str, ...]] = []
    for sep in result.separations:
        s = summary[sep]
        ps = next((p for p in PAPER_TABLE7 if math.isclose(p, sep)), None)
        for j, m in enumerate(MODEL_NAMES):
            paper = PAPER_TABLE7[ps][m] if ps is not None else None
            rows.append((
                f"{sep:g}" if j == 0 else "",
                MODEL_NAMES[m],
                _pm(s["accuracy_D"][m]),
                _pm(s["accuracy_filtered"][m]),
                f"{paper[0]:.1f} ± {paper[1]:.1f}" if paper else "—",
                f"{paper[2]:.1f} ± {paper[3]:.1f}" if paper else "—",
                _pm(s["accuracy_coords_only"][m]),
            ))
    lines += _grid(header, rows)
    lines += ["", "What AFLite removed (mean ± std over seeds):", ""]
    header2 = ("Class sep.", "|D(Φ)|", "biased in D", "biased in D(Φ)", "biased removed", "unbiased removed",
               "flipped removed", "phases", "seconds")
    rows2: list[tuple[str, ...]] = []
    for sep in result.separations:
        s = summary[sep]
        rows2.append((
            f"{sep:g}",
            _pm(s["n_kept"], 0),
            _pm(s["biased_fraction_before"], 1, 100) + "%",
            _pm(s["biased_fraction_after"], 1, 100) + "%",
            _pm(s["biased_removed"], 1, 100) + "%",
            _pm(s["unbiased_removed"], 1, 100) + "%",
            (_pm(s["flipped_removed"], 1, 100) + "%") if s["flipped_removed"]["n"] else "—",
            _pm(s["n_iterations"], 0),
            _pm(s["seconds"], 1),
        ))
    lines += _grid(header2, rows2)
    lines += ["", f"Total wall time: {result.seconds:.1f} s."]
    return "\n".join(lines) + "\n"


def _seed_text(seeds: Sequence[int]) -> str:
    if len(seeds) > 1 and list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"({seeds[0]}–{seeds[-1]})"
    return "(" + ", ".join(map(str, seeds)) + ")"


def _grid(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) if rows else len(header[i]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" if i < 2 else f"{{:>{w}}}" for i, w in enumerate(widths))
    out = [fmt.format(*header).rstrip(), "  ".join("-" * w for w in widths)]
    out += [fmt.format(*r).rstrip() for r in rows]
    return out


def _acc(d: dict[str, float], m: str) -> str:
    v = d.get(m, float("nan"))
    return "—" if math.isnan(v) else f"{v:.1f}"
