"""Checks: measurements of a dataset's rows, in one shape, registered once (in the spirit of cleanlab's Datalab
issue managers).

A :class:`Check` has a ``name`` and :meth:`Check.find`, which reads a :class:`CheckData` (the rows of a run of
``aflite run`` in its order: ids, labels, Φ, what the run kept and its p̃, the run's first phase recomputed, the
texts or images, the command's options, and the results of the checks found before it) and returns a
:class:`CheckResult`: per-row ``scores`` and ``flags``, a ``summary`` (JSON, merged into results.json at the top
level: name its keys after the check), ``verdict`` sentences and the lines of its section of summary.md. It writes
no file; the command that runs it does (``aflite explain``: :func:`aflite.runs.explain.explain` runs every
registered check, in registry order, and writes their per-row values to instances.csv).

A new check is a class with those two members and one :func:`register` call (or one entry in :data:`CHECKS`).
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from aflite.checks.tokens import token_matrix
from aflite.errors import ParameterError

__all__ = ["CHECKS", "Check", "CheckData", "CheckResult", "check_names", "get_check", "register", "run_checks"]


@dataclass
class CheckData:
    """What a check reads: the rows a run filtered (in the run's order) and everything known about them."""

    ids: np.ndarray  # str
    labels: np.ndarray  # str
    classes: Any  # the labels, sorted (an array)
    y: np.ndarray  # label codes into classes
    X: Any  # Φ of the rows
    keep: np.ndarray  # kept by the run (D(Φ))
    predictability: np.ndarray  # the run's last p̃ (NaN: never scored)
    removed_at: np.ndarray  # the run's removal phase (-1: kept)
    phase: Any  # the run's first phase recomputed: an AFLite fitted for one phase (confidence_, variability_, ...)
    seed: int
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


class Check:
    """The shape of a check: a ``name`` and :meth:`find`. :meth:`enabled` says whether it runs on this data with
    these options (a disabled check still returns its summary keys from :meth:`disabled`, so that results.json
    has the same keys)."""

    name: ClassVar[str] = ""

    def enabled(self, data: CheckData) -> bool:
        return True

    def find(self, data: CheckData) -> CheckResult:
        raise NotImplementedError

    def disabled(self, data: CheckData) -> CheckResult:
        return CheckResult(self.name)


# name -> the class, or "module:attribute" (imported when first run); registry order is the order they run in
CHECKS: dict[str, Any] = {
    "tokens": "aflite.explain.checks:TokenArtifacts",
    "stop_rule": "aflite.explain.checks:StopRule",
    "datamap": "aflite.explain.checks:DataMap",
    "label_issues": "aflite.explain.checks:LabelIssueCheck",
    "surrogate": "aflite.explain.checks:Surrogate",
    "neighbours": "aflite.explain.checks:Neighbours",
    "ngram_coefficients": "aflite.explain.checks:NgramCoefficients",
}


def register(cls: Any) -> Any:
    """Add a check class (or replace one of the same name); usable as a class decorator."""
    if not getattr(cls, "name", ""):
        raise ParameterError(f"{cls!r}: a check needs a name")
    CHECKS[cls.name] = cls
    return cls


def check_names() -> tuple[str, ...]:
    return tuple(CHECKS)


def get_check(name: str) -> Check:
    """An instance of the registered check ``name``."""
    entry = CHECKS.get(name)
    if entry is None:
        raise ParameterError(f"unknown check {name!r}; choose one of {', '.join(CHECKS)}")
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = getattr(importlib.import_module(module), attr)
    check: Check = entry()
    return check


def run_checks(data: CheckData, names: tuple[str, ...] | None = None) -> dict[str, CheckResult]:
    """Run the checks (default: every registered one, in registry order) on ``data``; each sees the results of
    those before it (``data.found``). A disabled check contributes its summary keys and takes no time."""
    for name in names if names is not None else check_names():
        check = get_check(name)
        if check.enabled(data):
            t0 = time.perf_counter()
            res = check.find(data)
            res.seconds = time.perf_counter() - t0
        else:
            res = check.disabled(data)
        data.found[name] = res
    return data.found
