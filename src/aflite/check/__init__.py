"""Checks: measurements of a dataset's rows, in one shape, registered once (in the spirit of cleanlab's Datalab
issue managers).

A :class:`Check` has a ``name``, a ``scope``, its ``options`` (declared once, as :class:`Option`: key, type,
default, help) and :meth:`Check.find`, which reads a :class:`CheckData` and returns a :class:`CheckResult`: per-row
``scores`` and ``flags`` (or its own per-row ``columns``), a ``summary`` (:class:`CheckSummary`: its score, the
count it flags, its verdict sentences and its own typed fields: a dataclass subclass declared beside the check), the
lines of its section of summary.md and, optionally, ``files`` for the command to write into its folder. The check
owns what it returns: the command writes it, under the check's name. The scope says what the rows are and
which command runs the check:

- ``"explain"`` (the default): the rows of a run of ``aflite run``, in its order, with what the run kept, its p̃
  and removal phases and its first phase recomputed (``keep``, ``predictability``, ``removed_at``, ``phase``).
  :func:`aflite.commands.explain.explain` runs every such check, each with its options (``checks={name: {...}}``,
  ``--check name:key=value``); each check's entry goes into results.json under ``checks[name]`` (its summary,
  options, per-row columns and files), its per-row values into instances.csv, its files into the folder.
- ``"audit"``: one single-sentence view of a dataset audited for label leakage (no run: those four fields are
  None). ``X`` is the view's features (the biased model's input), ``texts`` the view's sentences (None for
  images, ``refs`` then), ``options`` the audit's configuration and ``context`` (:class:`CheckContext`) what the
  audit shares between views (its ``config``, the normal model's out-of-fold predictions ``normal_pred``, the
  ``groups``, the ``dataset``, the fine-tuned models ``finetuned``, the ``set_name``). :func:`aflite.audit.audit`
  (and the image audit) runs every such check once per view, with the options of ``AuditConfig.checks``; their
  summaries' own fields go flat into that view's entry of results.json, their verdict sentences and sections into
  summary.md, their per-row values stay in Python (:attr:`aflite.audit.ViewAudit.checks`); the audit writes no file
  of a check.

A new check is a class with those members and one :func:`register` call where it is defined (a built-in check: the
``@register`` decorator, and its entry ``name -> "module:Class"`` in :data:`CHECKS`, imported when first run).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from aflite.check.format import cell
from aflite.check.params import FILE_NAME, NAME, resolve, validate_options
from aflite.check.summary import CheckSummary, optional
from aflite.check.tokens import token_matrix
from aflite.errors import ParameterError
from aflite.option import Option, OptionValue
from aflite.rundir.schema import RunBody

__all__ = ["CHECKS", "SCOPES", "Check", "CheckContext", "CheckData", "CheckResult", "CheckSummary", "Option",
           "check_files", "check_names", "check_options", "get_check", "optional", "register", "resolve_checks",
           "run_checks"]


CheckFile = bytes | str | Sequence[Sequence[Any]]  # a file a check returns: bytes, text, or rows (CSV, header first)


@dataclass
class CheckContext:
    """What a command shares with its checks besides the rows, typed (each field None where the command has none):
    explain's dataset and the run's rows in it; an audit's configuration, set name, dataset, the normal model's
    out-of-fold predictions, the fine-tuned models and (images) the embeddings PECO reads."""

    dataset: Any = None  # the Dataset the rows come from
    rows: np.ndarray | None = None  # explain: each of the run's rows' position in ``dataset``
    groups: np.ndarray | None = None  # the rows' groups (None: no groups)
    config: Any = None  # audit: its AuditConfig
    set_name: str | None = None  # audit: the audited set's name ("D", ...)
    normal_pred: np.ndarray | None = None  # audit: the normal model's out-of-fold predictions
    finetuned: Any = None  # audit: the fine-tuned pair and view models (None: TRA off)
    embeddings: Any = None  # image audit: the embeddings PECO clusters (None: the view's features)


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
    options: dict[str, Any] = field(default_factory=dict)  # the command's own options (a check's: Check.params)
    run: RunBody | None = None  # the run's results.json body, typed (None: no run, scope "audit")
    context: CheckContext = field(default_factory=CheckContext)  # what a command adds for its checks (the dataset, ...)
    found: dict[str, CheckResult] = field(default_factory=dict)  # the checks run before, by name
    _tokens: Any = None

    def __len__(self) -> int:
        return len(self.ids)

    def run_body(self) -> RunBody:
        """``run``, for a check that reads a run; refused on a dataset without one."""
        if self.run is None:
            raise ParameterError("this check reads a run of `aflite run` (scope 'explain'); these rows have none")
        return self.run

    def kept(self) -> np.ndarray:
        """``keep``, for a check that reads a run; refused on a dataset without one."""
        if self.keep is None:
            raise ParameterError("this check reads a run of `aflite run` (scope 'explain'); these rows have none")
        return self.keep

    def token_matrix(self) -> tuple[Any, np.ndarray]:
        """(rows × tokens binary CSR matrix, vocabulary) of ``texts`` (:func:`aflite.check.tokens.token_matrix`),
        computed once for every check that reads tokens."""
        if self.texts is None:
            raise ParameterError("this check reads tokens: it needs text")
        if self._tokens is None:
            self._tokens = token_matrix(self.texts)
        return self._tokens


@dataclass
class CheckResult:
    """What a check found: per-row ``scores`` (NaN: not scored) and ``flags`` (None when it has none), its
    ``summary`` (:class:`CheckSummary`, its verdict sentences among its common fields; results.json's
    ``checks[name]["summary"]`` in explain), the lines of its section of summary.md, per-row cells for a command's
    table (``columns``: column name → one cell per row; ``{}``: none, the scores stay in Python; None: the command
    writes ``<name>_score``/``<name>_flag``), the
    ``files`` the command writes for it into its folder (a plain file name → bytes, text, or rows written as CSV,
    the first row the header), in-memory ``detail`` for the files a command writes from it, the ``options``
    it ran with (set by :func:`run_checks`) and its ``headline``, the one line a command prints of it."""

    name: str
    scores: np.ndarray | None = None
    flags: np.ndarray | None = None
    summary: CheckSummary = field(default_factory=CheckSummary)
    markdown: list[str] = field(default_factory=list)
    columns: dict[str, list[Any]] | None = None  # None: a command writes scores and flags as they are
    detail: Any = None
    seconds: float | None = None  # None: the check did not run (disabled by its options or the data)
    files: dict[str, CheckFile] = field(default_factory=dict)  # name -> bytes, str or rows (CSV)
    options: dict[str, OptionValue] = field(default_factory=dict)  # the check's options as it ran (run_checks sets)
    headline: str | None = None  # one line for the terminal (a command prints it after its verdict), None: none

    def column_names(self) -> list[str]:
        """The names of :meth:`row_columns`, without formatting the cells."""
        if self.columns is not None:
            return list(self.columns)
        return [f"{self.name}_{what}" for what, v in (("score", self.scores), ("flag", self.flags)) if v is not None]

    def row_columns(self) -> dict[str, list[Any]]:
        """The per-row columns this check adds to a command's table: its own ``columns``, or (None)
        ``<name>_score`` and ``<name>_flag`` from its scores and flags."""
        if self.columns is not None:
            return dict(self.columns)
        cols: dict[str, list[Any]] = {}
        if self.scores is not None:
            cols[f"{self.name}_score"] = [cell(v) for v in self.scores]
        if self.flags is not None:
            cols[f"{self.name}_flag"] = [int(f) for f in self.flags]
        return cols


SCOPES = ("explain", "audit")


class Check:
    """The shape of a check: a ``name``, a ``scope`` (``"explain"``: it reads a run; ``"audit"``: a dataset's
    single-sentence view), its ``options`` (declared once: :class:`Option`) and :meth:`find`. An instance holds
    its options' values in ``params`` (the defaults, overridden by those given, each checked). :meth:`enabled` says
    whether it runs on this data with these options (a disabled check still returns its summary, of the same class,
    from :meth:`disabled`, so that results.json has the same keys)."""

    name: ClassVar[str] = ""
    scope: ClassVar[str] = "explain"
    options: ClassVar[tuple[Option, ...]] = ()

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        self.params: dict[str, Any] = resolve(self.name, tuple(self.options), params)

    def enabled(self, data: CheckData) -> bool:
        return True

    def find(self, data: CheckData) -> CheckResult:
        raise NotImplementedError

    def disabled(self, data: CheckData) -> CheckResult:
        return CheckResult(self.name)


# name -> the check class, or "module:Class" until it is imported (importing the module registers the class under
# the same name, in the same place: its @register); registry order is the order they run in (within a scope), and
# the order of their keys in results.json. A built-in check is one entry here and its class, decorated @register.
_AUDIT, _EXPLAIN = "aflite.audit.checks", "aflite.explain.checks"
CHECKS: dict[str, type[Check] | str] = {
    "biased_model": f"{_AUDIT}:BiasedModel",
    "leakage_metrics": f"{_AUDIT}:LeakageCheck",
    "peco": f"{_AUDIT}:Peco",
    "tsne": f"{_AUDIT}:TsneMap",
    "tra": f"{_AUDIT}:Tra",
    "token_artifacts": f"{_AUDIT}:TokenTable",
    "tokens": f"{_EXPLAIN}:TokenArtifacts",
    "stop_rule": f"{_EXPLAIN}:StopRule",
    "datamap": f"{_EXPLAIN}:DataMap",
    "label_issues": f"{_EXPLAIN}:LabelIssueCheck",
    "surrogate": f"{_EXPLAIN}:Surrogate",
    "neighbours": f"{_EXPLAIN}:Neighbours",
    "ngram_coefficients": f"{_EXPLAIN}:NgramCoefficients",
}


def register(cls: Any) -> Any:
    """Add a check class (or replace one of the same name), checked first (:func:`_validated`); usable as a class
    decorator (the built-in checks are registered so, where they are defined)."""
    CHECKS[_validated(cls).name] = cls
    return cls


def _validated(cls: Any) -> Any:
    """A check class as :func:`register` takes it: a subclass of :class:`Check` with a name of the form
    ``[A-Za-z_][A-Za-z0-9_]*``, a known scope, its own ``find`` and valid options (:func:`validate_options`)."""
    if not (isinstance(cls, type) and issubclass(cls, Check)):
        raise ParameterError(f"{cls!r}: a check is a subclass of aflite.check.Check")
    if not isinstance(cls.name, str) or not NAME.match(cls.name):
        raise ParameterError(f"{cls!r}: a check needs a name of the form [A-Za-z_][A-Za-z0-9_]*, got {cls.name!r}")
    if cls.scope not in SCOPES:
        raise ParameterError(f"check {cls.name!r}: scope must be one of {', '.join(SCOPES)}, got {cls.scope!r}")
    if cls.find is Check.find:
        raise ParameterError(f"check {cls.name!r}: it needs a find(data) method")
    validate_options(cls.name, cls.options)
    return cls


def _check_class(name: str) -> Any:
    entry = CHECKS.get(name)
    if entry is None:
        raise ParameterError(f"unknown check {name!r}; choose one of {', '.join(CHECKS)}")
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = getattr(importlib.import_module(module), attr)
    if entry not in _CHECKED:  # an entry put into CHECKS by hand is checked as register checks it, once
        _CHECKED.add(_validated(entry))
    return entry


_CHECKED: set[Any] = set()


def check_names(scope: str | None = None) -> tuple[str, ...]:
    """The registered checks' names in registry order (of one ``scope``, or all)."""
    if scope is not None and scope not in SCOPES:
        raise ParameterError(f"unknown check scope {scope!r}; choose one of {', '.join(SCOPES)}")
    return tuple(n for n in CHECKS if scope is None or getattr(_check_class(n), "scope", "explain") == scope)


def check_options(name: str, scope: str | None = None) -> tuple[Option, ...]:
    """The options the registered check ``name`` declares; an unknown name, or one of another ``scope`` than the
    one given, refused in one line."""
    if scope is not None and name not in check_names(scope):
        other = f"an {_check_class(name).scope!r} check" if name in CHECKS else "no such check"
        raise ParameterError(f"check {name!r} is not a check of {scope!r} ({other}); choose one of "
                             f"{', '.join(check_names(scope))}")
    return tuple(_check_class(name).options)


def get_check(name: str, params: Mapping[str, Any] | None = None) -> Check:
    """An instance of the registered check ``name`` with these options (checked; the rest their defaults)."""
    check: Check = _check_class(name)(params)
    return check


def resolve_checks(checks: Mapping[str, Any] | None, scope: str = "explain") -> dict[str, dict[str, OptionValue]]:
    """``checks`` (check name → its options) checked before any work: every name a registered check of ``scope``,
    every key one of its options, every value of its type and rule; returns every check of the scope with its
    options' values (defaults filled in)."""
    if checks is not None and not isinstance(checks, Mapping):
        raise ParameterError(f"checks must be a dict of check name -> options, got {checks!r}")
    for name in checks or {}:
        check_options(name, scope)  # a name of this scope's checks
    return {name: get_check(name, (checks or {}).get(name)).params for name in check_names(scope)}


def run_checks(data: CheckData, names: tuple[str, ...] | None = None, scope: str = "explain",
               options: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, CheckResult]:
    """Run the checks (default: every registered one of ``scope``, in registry order) on ``data``, each with its
    ``options`` (check name → its options; the rest their defaults); each sees the results of those before it
    (``data.found``). A disabled check contributes its summary and takes no time. Each summary must be a
    :class:`CheckSummary` (a plain dict is refused in one line naming the check); its ``flagged`` is set here, from
    the check's ``flags``, when it has them."""
    for name in names if names is not None else check_names(scope):
        check = get_check(name, (options or {}).get(name))
        if check.enabled(data):
            t0 = time.perf_counter()
            res = check.find(data)
            res.seconds = time.perf_counter() - t0
        else:
            res = check.disabled(data)
        if not isinstance(res.summary, CheckSummary):
            raise ParameterError(f"check {name!r} returns its summary as {type(res.summary).__name__}: a summary is "
                                 f"a dataclass subclass of aflite.check.CheckSummary")
        if res.flags is not None:
            res.summary.flagged = int(np.count_nonzero(res.flags))
        res.options = dict(check.params)
        data.found[name] = res
    return data.found


def check_files(found: Mapping[str, CheckResult], reserved: set[str] | frozenset[str]) -> dict[str, str]:
    """The files the checks return (file name → the check writing it), refused in one line when a name is not a
    plain file name, is one the command writes itself (``reserved``) or is returned by two checks."""
    owner: dict[str, str] = {}
    for name, r in found.items():
        for file in r.files:
            if not isinstance(file, str) or not FILE_NAME.match(file) or file.startswith(".aflite"):
                raise ParameterError(f"check {name!r} returns a file named {file!r}: a file name is a plain name "
                                     f"([A-Za-z0-9][A-Za-z0-9._-]*, no folder)")
            if file in reserved or file.lower() in {f.lower() for f in reserved}:
                raise ParameterError(f"check {name!r} returns a file named {file!r}, which the command writes "
                                     f"itself")
            content = r.files[file]
            if not isinstance(content, (bytes, str, list, tuple)) or (
                    isinstance(content, (list, tuple)) and not all(isinstance(row, (list, tuple)) for row in content)):
                raise ParameterError(f"check {name!r} returns {file!r} as {type(content).__name__}: a file is bytes, "
                                     f"text or rows (a list of lists, the header first)")
            if file.lower() in {f.lower() for f in owner}:
                raise ParameterError(f"checks {owner[file]!r} and {name!r} both return a file named {file!r}")
            owner[file] = name
    return owner
