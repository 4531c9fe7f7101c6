"""Checks: measurements of a dataset's rows, in one shape, registered once (in the spirit of cleanlab's Datalab
issue managers).

A :class:`Check` has a ``name``, a ``scope`` and :meth:`Check.find`, which reads a :class:`CheckData` and returns
a :class:`CheckResult`: per-row ``scores`` and ``flags``, a ``summary`` (JSON keys: name them after the check),
``verdict`` sentences and the lines of its section of summary.md. It writes no file; the command that runs it does.
The scope says what the rows are and which command runs the check:

- ``"explain"`` (the default): the rows of a run of ``aflite run``, in its order, with what the run kept, its p̃
  and removal phases and its first phase recomputed (``keep``, ``predictability``, ``removed_at``, ``phase``).
  :func:`aflite.runs.explain.explain` runs every such check; their keys go into results.json at the top level,
  their per-row values into instances.csv.
- ``"audit"``: one single-sentence view of a dataset audited for label leakage (no run: those four fields are
  None). ``X`` is the view's features (the biased model's input), ``texts`` the view's sentences (None for
  images, ``refs`` then), ``options`` the audit's configuration and ``context`` what the audit shares between
  views (its ``config``, the normal model's out-of-fold predictions ``normal_pred``, the ``groups``, the
  ``dataset``, the fine-tuned models ``finetuned``, the ``set`` name). :func:`aflite.audit.audit` (and the image
  audit) runs every such check once per view; their keys go into that view's entry of results.json, their
  verdict sentences and sections into summary.md, their per-row values stay in Python
  (:attr:`aflite.audit.ViewAudit.checks`).

A new check is a class with those members and one :func:`register` call (or one entry in :data:`CHECKS`).
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from aflite.checks.tokens import token_matrix
from aflite.errors import ParameterError

__all__ = ["CHECKS", "SCOPES", "Check", "CheckData", "CheckResult", "check_names", "get_check", "register",
           "run_checks"]


@dataclass
class CheckData:
    """What a check reads: the rows (a run's, in its order, or an audited view's) and everything known about them.
    The run's fields are None for a dataset without a run (scope ``"audit"``)."""

    ids: np.ndarray  # str
    labels: np.ndarray  # str
    classes: Any  # the labels, sorted (an array)
    y: np.ndarray  # label codes into classes
    X: Any  # Φ of the rows (an audit: the view's features)
    seed: int
    keep: np.ndarray | None = None  # kept by the run (D(Φ))
    predictability: np.ndarray | None = None  # the run's last p̃ (NaN: never scored)
    removed_at: np.ndarray | None = None  # the run's removal phase (-1: kept)
    phase: Any = None  # the run's first phase recomputed: an AFLite fitted for one phase (confidence_, ...)
    texts: list[str] | None = None  # the texts the token checks read (None for images)
    text_view: str = ""  # which text they are ("hypothesis", ...; "image statistics" for images)
    refs: list[str] | None = None  # image references (None for text)
    options: dict[str, Any] = field(default_factory=dict)  # the command's options (alpha, min_count, ...)
    run: dict[str, Any] = field(default_factory=dict)  # the run's summary
    context: dict[str, Any] = field(default_factory=dict)  # what a command adds for its checks (the dataset, ...)
    found: dict[str, CheckResult] = field(default_factory=dict)  # the checks run before, by name
    _tokens: Any = None

    def __len__(self) -> int:
        return len(self.ids)

    def kept(self) -> np.ndarray:
        """``keep``, for a check that reads a run; refused on a dataset without one."""
        if self.keep is None:
            raise ParameterError("this check reads a run of `aflite run` (scope 'explain'); these rows have none")
        return self.keep

    def token_matrix(self) -> tuple[Any, np.ndarray]:
        """(rows × tokens binary CSR matrix, vocabulary) of ``texts`` (:func:`aflite.checks.tokens.token_matrix`),
        computed once for every check that reads tokens."""
        if self.texts is None:
            raise ParameterError("this check reads tokens: it needs text")
        if self._tokens is None:
            self._tokens = token_matrix(self.texts)
        return self._tokens


@dataclass
class CheckResult:
    """What a check found: per-row ``scores`` (NaN: not scored) and ``flags`` (None when it has none), its
    ``summary`` (results.json keys), ``verdict`` sentences, the lines of its section of summary.md, per-row cells
    for a command's table (``columns``: column name → one cell per row; ``{}``: none, the scores stay in Python;
    None: the command writes ``<name>_score``/``<name>_flag``) and in-memory ``detail`` for the files a command
    writes from it."""

    name: str
    scores: np.ndarray | None = None
    flags: np.ndarray | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    verdict: list[str] = field(default_factory=list)
    markdown: list[str] = field(default_factory=list)
    columns: dict[str, list[Any]] | None = None  # None: a command writes scores and flags as they are
    detail: Any = None
    seconds: float | None = None  # None: the check did not run (disabled by the command's options)


SCOPES = ("explain", "audit")


class Check:
    """The shape of a check: a ``name``, a ``scope`` (``"explain"``: it reads a run; ``"audit"``: a dataset's
    single-sentence view) and :meth:`find`. :meth:`enabled` says whether it runs on this data with these options
    (a disabled check still returns its summary keys from :meth:`disabled`, so that results.json has the same
    keys)."""

    name: ClassVar[str] = ""
    scope: ClassVar[str] = "explain"

    def enabled(self, data: CheckData) -> bool:
        return True

    def find(self, data: CheckData) -> CheckResult:
        raise NotImplementedError

    def disabled(self, data: CheckData) -> CheckResult:
        return CheckResult(self.name)


# name -> the class, or "module:attribute" (imported when first run); registry order is the order they run in
# (within a scope), and the order of their keys in results.json
CHECKS: dict[str, Any] = {
    "tokens": "aflite.explain.checks:TokenArtifacts",
    "stop_rule": "aflite.explain.checks:StopRule",
    "datamap": "aflite.explain.checks:DataMap",
    "label_issues": "aflite.explain.checks:LabelIssueCheck",
    "surrogate": "aflite.explain.checks:Surrogate",
    "neighbours": "aflite.explain.checks:Neighbours",
    "ngram_coefficients": "aflite.explain.checks:NgramCoefficients",
    "biased_model": "aflite.audit.checks:BiasedModel",
    "leakage_metrics": "aflite.audit.checks:LeakageCheck",
    "peco": "aflite.audit.checks:Peco",
    "tsne": "aflite.audit.checks:TsneMap",
    "tra": "aflite.audit.checks:Tra",
    "token_artifacts": "aflite.audit.checks:TokenTable",
}


def register(cls: Any) -> Any:
    """Add a check class (or replace one of the same name); usable as a class decorator."""
    if not getattr(cls, "name", ""):
        raise ParameterError(f"{cls!r}: a check needs a name")
    if getattr(cls, "scope", "explain") not in SCOPES:
        raise ParameterError(f"{cls!r}: scope must be one of {', '.join(SCOPES)}, got {cls.scope!r}")
    CHECKS[cls.name] = cls
    return cls


def _check_class(name: str) -> Any:
    entry = CHECKS.get(name)
    if entry is None:
        raise ParameterError(f"unknown check {name!r}; choose one of {', '.join(CHECKS)}")
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = getattr(importlib.import_module(module), attr)
    return entry


def check_names(scope: str | None = None) -> tuple[str, ...]:
    """The registered checks' names in registry order (of one ``scope``, or all)."""
    if scope is not None and scope not in SCOPES:
        raise ParameterError(f"unknown check scope {scope!r}; choose one of {', '.join(SCOPES)}")
    return tuple(n for n in CHECKS if scope is None or getattr(_check_class(n), "scope", "explain") == scope)


def get_check(name: str) -> Check:
    """An instance of the registered check ``name``."""
    check: Check = _check_class(name)()
    return check


def run_checks(data: CheckData, names: tuple[str, ...] | None = None, scope: str = "explain") -> dict[str, CheckResult]:
    """Run the checks (default: every registered one of ``scope``, in registry order) on ``data``; each sees the
    results of those before it (``data.found``). A disabled check contributes its summary keys and takes no time."""
    for name in names if names is not None else check_names(scope):
        check = get_check(name)
        if check.enabled(data):
            t0 = time.perf_counter()
            res = check.find(data)
            res.seconds = time.perf_counter() - t0
        else:
            res = check.disabled(data)
        data.found[name] = res
    return data.found
