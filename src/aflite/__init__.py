"""aflite: find, measure and remove dataset artifacts.

The core is :class:`AFLite` (Algorithm 1 of Le Bras et al., 2020, "Adversarial Filters of Dataset Biases"), a
scikit-learn estimator that filters a dataset given frozen features Φ(x) and labels::

    from aflite import AFLite
    kept = AFLite(random_state=0).fit(X, y).get_kept_mask()

The main names are importable from the package itself; each is imported on first use, so ``import aflite``
stays cheap (no scikit-learn, no PyTorch):

* filtering: :class:`AFLite`, :func:`predictability` (one phase: the single-iteration ranking), ``SNLI_DEFAULTS``;
* files end to end: :func:`run` (a dataset file → featurize → filter → the filtered file, as ``aflite run``; or a
  pandas DataFrame, pyarrow Table or ``datasets.Dataset`` → the kept rows in its own type, ``out=None`` writing
  nothing),
  :func:`filter_files` (precomputed features, as ``aflite filter``), :func:`load_dataset`, :func:`featurize`;
* a dataset file to a folder, as the commands write it: :func:`embed` (``aflite embed``), :func:`audit_file`
  (``aflite audit``), :func:`run` and :func:`filter_files`;
* auditing, evaluation and explanation: :func:`audit_dataset` with :class:`AuditConfig`, :func:`evaluate_runs`
  and :func:`explain_run` (``aflite explain``, :func:`aflite.commands.explain.explain`; the analyses are the
  :mod:`aflite.audit`, :mod:`aflite.evaluate` and :mod:`aflite.explain` packages; a package attribute cannot share
  a name with its sub-module, so they carry a longer name here);
* a dataset card for the filtered release: :func:`write_card` (``aflite card``);
* errors: :class:`ParameterError`, :class:`InputError` and :class:`OutputError` (all ``ValueError``), under
  :class:`AfliteError`.
"""

from __future__ import annotations

import importlib
from typing import Any

from aflite.errors import AfliteError, InputError, OutputError, ParameterError

__version__ = "0.3.0"  # the one place: pyproject.toml reads it

# public name -> (module, attribute); imported lazily by __getattr__
_LAZY: dict[str, tuple[str, str]] = {
    "AFLite": ("aflite.core.filter", "AFLite"),
    "predictability": ("aflite.core.phase", "predictability"),
    "PhaseScores": ("aflite.core.phase", "PhaseScores"),
    "SNLI_DEFAULTS": ("aflite.defaults", "SNLI_DEFAULTS"),
    "run": ("aflite.commands.run", "run"),
    "filter_files": ("aflite.commands.filter", "filter_files"),
    "RunResult": ("aflite.commands.run", "RunResult"),
    "load_dataset": ("aflite.data", "load_dataset"),
    "Dataset": ("aflite.data", "Dataset"),
    "Columns": ("aflite.data", "Columns"),
    "write_filtered": ("aflite.data", "write_filtered"),
    "demo_dataset_path": ("aflite.data", "demo_dataset_path"),
    "featurize": ("aflite.features", "featurize"),
    "audit_dataset": ("aflite.audit", "audit"),
    "AuditConfig": ("aflite.audit", "AuditConfig"),
    "DatasetAudit": ("aflite.audit", "DatasetAudit"),
    "evaluate_runs": ("aflite.commands.evaluate", "evaluate"),
    "explain_run": ("aflite.commands.explain", "explain"),
    "embed": ("aflite.commands.embed", "embed"),
    "audit_file": ("aflite.commands.audit", "audit_file"),
    "AuditResult": ("aflite.commands.audit", "AuditResult"),
    "write_card": ("aflite.card", "write_card"),
    "CardResult": ("aflite.card", "CardResult"),
    "run_synthetic": ("aflite.experiments.synthetic", "run_synthetic"),
    "resolve_device": ("aflite.device", "resolve_device"),
}

__all__ = ["__version__", "AfliteError", "InputError", "OutputError", "ParameterError", *_LAZY]


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'aflite' has no attribute {name!r}")
    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
