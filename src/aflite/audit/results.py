"""What an audit is configured with (:class:`AuditConfig`) and what it returns (:class:`DatasetAudit`)."""

from __future__ import annotations

import dataclasses
from typing import Any, NotRequired, TypedDict

import numpy as np

from aflite.audit.check_summaries import TokenTableSummary, TraSummary
from aflite.audit.clusters import PecoExample, PecoNull, PecoResult
from aflite.audit.finetuned import TraResult
from aflite.audit.metrics import AUDIT_VIEWS, BIAS_THRESHOLD, LeakageMetrics
from aflite.check import CheckResult
from aflite.check.tokens import TokenRow
from aflite.errors import ParameterError
from aflite.features.base import JsonValue
from aflite.verdict import number, points

# a view's entry: its name and condition, then each check's summary fields, flat (a registered check adds its own)
ViewRecord = dict[str, JsonValue]


class AuditSetRecord(TypedDict):
    """One audited set in results.json (:meth:`DatasetAudit.to_dict`); a view's entry is every check's summary
    fields, flat (:meth:`ViewAudit.to_dict`)."""

    name: str
    n: int
    label_counts: dict[str, int]
    normal_input: str
    views: dict[str, ViewRecord]
    timings_s: dict[str, float]
    config: dict[str, JsonValue]  # AuditConfig's fields (dataclasses.asdict), views as a list


class BadImages(TypedDict):
    count: int
    file: str


class AuditMetrics(TypedDict):
    """``aflite audit``'s results.json body as written (:meth:`aflite.audit.modalities.TextAudit.metrics`, its image
    twin): the data, the run compared, each set's record; an image audit's Φ, bad images and t-SNE maps; then the
    seconds and the verdict."""

    data: str
    modality: NotRequired[str]
    compare: str | None
    biased_view: NotRequired[str]
    featurizer: NotRequired[str]
    embedding_dim: NotRequired[int]
    bad_images: NotRequired[BadImages | None]
    tsne_plots: NotRequired[dict[str, str]]
    results: list[AuditSetRecord]
    seconds: NotRequired[float]
    verdict: NotRequired[list[str]]


@dataclasses.dataclass
class AuditConfig:
    """Models, sizes and stages of :func:`audit`.

    ``tra=None`` (default) fine-tunes the TRA models only when the device is a GPU: on a 2-core CPU the three
    300-step fine-tunings take about half an hour to hours, which no default should cost. ``peco_shuffles`` label
    shuffles give PECO's permutation null (:class:`PecoNull`).

    Parameters
    ----------
    views : tuple of str
        The single-sentence conditions audited.
    featurizer : str, default "minilm"
        The Φ of the probes.
    n_folds : int, default 5
        Cross-validation folds.
    C : float, default 1.0
        Inverse L2 strength of the logistic probes.
    n_components : int, default 30
        Dimensions kept for the clustering.
    n_clusters : int, default 50
        Clusters of the bias analysis.
    bias_threshold : float, default 0.2
        The share of one label above which a cluster counts as biased.
    tsne_sample : int, default 2000
        Rows in the t-SNE plot (0: no plot).
    top_k_tokens : int, default 10
        Tokens listed per label.
    min_token_count : int, optional
        The fewest occurrences of a listed token.
    tra : bool, optional
        Fine-tune the TRA models (None: only on a GPU).
    peco_shuffles : int, default 30
        Label shuffles of PECO's permutation null.
    peco_encoder : str, default "frozen"
        PECO's encoder: ``frozen`` or ``finetuned`` (needs ``tra``).
    tra_steps : int, default 300
        Fine-tuning steps of each TRA model.
    tra_batch_size : int, default 32
        Their batch size.
    tra_lr : float, default 5e-5
        Their learning rate.
    tra_sample : int, default 200
        Rows TRA scores.
    tra_eval : int, default 1000
        Rows TRA evaluates on.
    tra_holdout : float, default 0.2
        The share held out from fine-tuning.
    model_path : str, optional
        A local Hugging Face model folder.
    device : str, optional
        Where PyTorch runs (None: auto).
    seed : int, default 0
        The seed every random choice flows from.
    cache_dir : str, optional
        Where features are cached.
    show_progress : bool, default True
        Show progress bars.
    checks : dict
        Each audit check's options by name.
    """

    views: tuple[str, ...] = AUDIT_VIEWS
    featurizer: str = "minilm"
    n_folds: int = 5
    C: float = 1.0
    n_components: int = 30
    n_clusters: int = 50
    bias_threshold: float = BIAS_THRESHOLD
    tsne_sample: int = 2000
    top_k_tokens: int = 10
    min_token_count: int | None = None
    tra: bool | None = None
    peco_shuffles: int = 30
    peco_encoder: str = "frozen"  # or "finetuned" (needs tra)
    tra_steps: int = 300
    tra_batch_size: int = 32
    tra_lr: float = 5e-5
    tra_sample: int = 200
    tra_eval: int = 1000
    tra_holdout: float = 0.2
    model_path: str | None = None
    device: str | None = None
    seed: int = 0
    cache_dir: str | None = None
    show_progress: bool = True
    # each audit check's options by name (aflite.check: a check's declared options; --check NAME:KEY=VALUE)
    checks: dict[str, dict[str, bool | int | float | str | None]] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, JsonValue]:
        d = dataclasses.asdict(self)
        d["views"] = list(self.views)
        return d


@dataclasses.dataclass
class ViewAudit:
    """One single-sentence condition's audit: what every registered audit check found on it (``checks``, by name,
    in registry order: :mod:`aflite.check`, scope ``"audit"``; the built-in ones in :mod:`aflite.audit.checks`),
    and the normal model's out-of-fold predictions it was measured against. Dataset-level figures are the checks'
    (``metrics``, :class:`LeakageMetrics`; ``peco``, ``peco_null``, ``tra``), per-row ones (like a cleanlab issue
    manager's scores) each check's ``scores``/``flags`` and :meth:`DatasetAudit.row_scores`."""

    view: str
    checks: dict[str, CheckResult]
    normal_pred: np.ndarray | None = dataclasses.field(default=None, repr=False)

    @property
    def metrics(self) -> LeakageMetrics:
        m = self.checks["leakage_metrics"].summary
        assert isinstance(m, LeakageMetrics)
        return m

    @property
    def peco(self) -> PecoResult:
        pr: PecoResult = self.checks["peco"].detail["peco"]
        return pr

    @property
    def peco_null(self) -> PecoNull | None:
        null: PecoNull | None = self.checks["peco"].detail["null"]
        return null

    @property
    def examples(self) -> list[PecoExample]:
        ex: list[PecoExample] = self.checks["peco"].detail["examples"]
        return ex

    @property
    def tsne(self) -> np.ndarray | None:
        xy: np.ndarray | None = self.checks["tsne"].detail[0]
        return xy

    @property
    def tsne_rows(self) -> np.ndarray | None:
        rows: np.ndarray | None = self.checks["tsne"].detail[1]
        return rows

    @property
    def tra(self) -> TraResult | None:
        res: TraResult | None = self.checks["tra"].detail
        return res

    @property
    def finetuned(self) -> dict[str, float]:
        summary = self.checks["tra"].summary
        return summary.finetuned if isinstance(summary, TraSummary) else {}

    @property
    def artifacts(self) -> dict[str, list[TokenRow]]:
        summary = self.checks["token_artifacts"].summary
        return summary.token_artifacts if isinstance(summary, TokenTableSummary) else {}

    @property
    def biased_pred(self) -> np.ndarray | None:
        pred: np.ndarray | None = self.checks["biased_model"].detail
        return pred

    def to_dict(self) -> ViewRecord:
        """The view's entry of results.json: its name and condition, then every check's own summary fields in
        registry order (flat; the common score, flagged count and verdict are not written here: the audit's
        verdict gathers the checks' sentences, :func:`check_verdicts`)."""
        out: ViewRecord = {
            "view": self.view,
            "condition": {"hypothesis": "s2", "premise": "s1"}.get(self.view, self.view),  # images: "colour"
        }
        for r in self.checks.values():
            out.update(r.summary.to_json(common=False))
        return out


@dataclasses.dataclass
class DatasetAudit:
    """The audit of one dataset (what :func:`aflite.audit.audit` returns): its single-sentence views' figures, the
    configuration and timings. ``aflite audit`` returns an :class:`aflite.commands.audit.AuditResult` holding one per
    audited set.

    Parameters
    ----------
    name : str
        What the audit calls the data.
    n : int
        Rows audited.
    label_counts : dict
        Rows per label.
    views : dict
        Each single-sentence view's figures.
    config : AuditConfig
        The configuration used (``tra`` resolved).
    timings : dict
        Seconds per stage.
    labels : numpy.ndarray
        The labels audited.
    ids : numpy.ndarray
        Their ids.
    normal_input : str, default "pair"
        The input of the normal condition the views are compared with.
    """

    name: str
    n: int
    label_counts: dict[str, int]
    views: dict[str, ViewAudit]
    config: AuditConfig
    timings: dict[str, float]
    labels: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, dtype=str), repr=False)
    ids: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, dtype=str), repr=False)
    normal_input: str = "pair"

    def add_time(self, key: str, seconds: float) -> None:
        """Charge work done outside :func:`audit` (e.g. featurization shared by several audits) to this result."""
        self.timings[key] = self.timings.get(key, 0.0) + float(seconds)
        self.timings["total"] = sum(t for k, t in self.timings.items() if k != "total")

    def row_scores(self, view: str) -> dict[str, np.ndarray]:
        """Per-row scores of one view, row-aligned with the dataset: out-of-fold predictions of the biased and
        normal models and whether each is right, the row's PECO cluster, that cluster's s_i and L2 distance, and
        whether the cluster is a biased region (L2 > ``config.bias_threshold``)."""
        va = self.views[view]
        if va.biased_pred is None or va.normal_pred is None:
            raise ParameterError(f"view {view!r} has no per-row predictions (made by an older version?)")
        cid = va.peco.cluster_ids
        return {
            "id": np.asarray(self.ids).astype(str) if len(self.ids) else np.arange(self.n).astype(str),
            "label": np.asarray(self.labels).astype(str),
            "biased_pred": va.biased_pred,
            "biased_correct": va.biased_pred == self.labels,
            "normal_pred": va.normal_pred,
            "normal_correct": va.normal_pred == self.labels,
            "cluster": cid,
            "cluster_divergence": va.peco.divergences[cid],
            "cluster_l2": va.peco.l2[cid],
            "biased_region": va.peco.l2[cid] > self.config.bias_threshold,
        }

    def to_dict(self) -> AuditSetRecord:
        return {
            "name": self.name,
            "n": self.n,
            "label_counts": self.label_counts,
            "normal_input": self.normal_input,
            "views": {v: a.to_dict() for v, a in self.views.items()},
            "timings_s": {k: round(t, 2) for k, t in self.timings.items()},
            "config": self.config.to_dict(),
        }


STRONG_Z = 5.0  # a token whose label rate is this many standard errors above the base rate
PECO_P = 0.05


def audit_verdict(metrics: AuditMetrics) -> list[str]:
    """``aflite audit``: per audited set, the single-sentence (biased) model against the majority rate, reconciled
    with the strongest token association and with PECO against its shuffled-label null."""
    out: list[str] = []
    results = metrics.get("results") or []
    for r in results[:2]:
        views = r.get("views") or {}
        view = "hypothesis" if "hypothesis" in views else next(iter(views), None)
        if view is None:
            continue
        v = views[view]
        acc, maj, dm = number(v.get("biased_accuracy")), number(v.get("majority_accuracy")), number(v.get("delta_maj"))
        if acc is None or maj is None or dm is None:
            continue
        side = {"hypothesis": "hypothesis-only", "premise": "premise-only"}.get(view, f"{view}-only")
        s = (f"On {r.get('name', 'D')}, the {side} model scores {100 * acc:.1f}% against a majority rate of "
             f"{100 * maj:.1f}% (Δ {points(dm)} points)")
        tok = _strongest_token(v.get("token_artifacts") or {})
        null_mean, p = number(v.get("peco_null_mean")), number(v.get("peco_p_value"))
        peco = number(v.get("peco"))
        parts = []
        if tok is not None:
            word, label, z, count = tok
            if dm < 0.02:
                parts.append(f"strong single tokens exist ('{word}' → {label}, z = {z:.0f}, {count} rows) but "
                             f"cover too few rows to beat the majority guess overall")
            else:
                parts.append(f"the strongest single token is '{word}' → {label} (z = {z:.0f}, {count} rows)")
        if peco is not None and null_mean is not None and p is not None:
            ratio = f"{peco / null_mean:.1f}× " if null_mean > 0 else ""
            if p <= PECO_P:
                parts.append(f"PECO {peco:.3f} is {ratio}its shuffled-label null ({null_mean:.3f}, p = {p:.2f}): "
                             f"label-skewed regions exist in embedding space even where a linear model finds "
                             f"little")
            else:
                parts.append(f"PECO {peco:.3f} is within its shuffled-label null ({null_mean:.3f}, p = {p:.2f})")
        out.append(s + ("; " + "; ".join(parts) if parts else "") + ".")
    if len(results) >= 2:
        views0, views1 = results[0].get("views") or {}, results[1].get("views") or {}
        view = "hypothesis" if "hypothesis" in views0 else next(iter(views0), None)
        if view and view in views1:
            d0, d1 = number(views0[view].get("delta_maj")), number(views1[view].get("delta_maj"))
            if d0 is not None and d1 is not None:
                change = "fell" if d1 < d0 else "did not fall"
                out.append(f"From {results[0].get('name')} to {results[1].get('name')} the {view}-only Δ over the "
                           f"majority {change} ({points(d0)} → {points(d1)} points; a single audit has no seed spread, "
                           f"so treat changes under ~2 points as noise).")
    return out[:3]


def check_verdicts(results: list[Any]) -> list[str]:
    """The verdict sentences of the audit checks, each named by its set and view (the built-in checks have none:
    :func:`audit_verdict` reconciles their figures)."""
    return [f"{r.name}, {view}-only: {s}" for r in results for view, va in r.views.items()
            for c in va.checks.values() for s in c.summary.verdict]


def check_sections(results: list[Any]) -> list[str]:
    """The lines of summary.md that the audit checks add: per set and view, each check's section."""
    lines: list[str] = []
    for r in results:
        for view, va in r.views.items():
            found = [line for c in va.checks.values() for line in c.markdown]
            if found:
                lines += ["", f"**{r.name}, {view}-only**", "", *found]
    return lines



def _strongest_token(artifacts: JsonValue) -> tuple[str, str, float, int] | None:
    """The token of highest z at or above STRONG_Z in a view's ``token_artifacts`` entry (label → its TokenRows, as
    results.json holds them): (token, label, z, count)."""
    best = None
    for label, rows in (artifacts.items() if isinstance(artifacts, dict) else ()):
        for t in rows if isinstance(rows, list) else ():
            z = number(t.get("z")) if isinstance(t, dict) else None
            if isinstance(t, dict) and z is not None and z >= STRONG_Z and (best is None or z > best[2]):
                best = (str(t.get("token")), str(label), z, int(number(t.get("count")) or 0))
    return best
