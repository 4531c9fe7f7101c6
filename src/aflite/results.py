"""``OUT/results.json``, the same envelope for every command whether it runs from the CLI or from Python.

The envelope (command, argv, seed, versions) comes first, the command's own results after it. A library
function writes it with ``argv=None`` (the process's arguments); the CLI re-stamps the file with the argv it
parsed (:func:`aflite.cli.options.write_results`), so the two give the same keys.

Warnings of scikit-learn, numpy and scipy met while a command's library function runs (convergence warnings of
thousands of small fits, say) are counted by :func:`recording_warnings` and listed in results.json under
``"warnings"`` (``[{"warning": "ConvergenceWarning: ...", "count": N}]``), so that a Python caller gets the same
file as the CLI and the report page sees them; other warnings pass through unchanged.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import sys
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["WarningsRecord", "recording_warnings", "results_envelope", "write_results_json"]

LIBRARIES = ("sklearn", "numpy", "scipy")  # whose warnings are counted in results.json instead of shown one by one


@dataclass
class WarningsRecord:
    """The warnings met inside :func:`recording_warnings`: those of :data:`LIBRARIES` are counted (:meth:`counts`);
    ``written`` lists the results.json files that carry them."""

    caught: list[warnings.WarningMessage] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)

    @staticmethod
    def is_library(w: warnings.WarningMessage) -> bool:
        origin = getattr(w.category, "__module__", "") or ""
        return origin.split(".")[0] in LIBRARIES or "/sklearn/" in (w.filename or "")

    def counts(self) -> dict[str, int]:
        """``{"Category: first line of the message": count}`` of the library warnings so far."""
        return dict(Counter(f"{w.category.__name__}: {str(w.message).splitlines()[0] if str(w.message) else ''}"
                            for w in list(self.caught) if self.is_library(w)))

    def entries(self) -> list[dict[str, Any]]:
        """What results.json lists under ``"warnings"``."""
        return [{"warning": k, "count": n} for k, n in self.counts().items()]


_RECORD: contextvars.ContextVar[WarningsRecord | None] = contextvars.ContextVar("aflite_warnings", default=None)


@contextlib.contextmanager
def recording_warnings(*, summarize: bool = True) -> Iterator[WarningsRecord]:
    """Count library warnings (see the module docstring) while the block runs; results.json written inside it
    lists them. Nested uses share the outermost record. When the outermost block ends, other warnings are passed on
    (once per place) and, with ``summarize``, the library warnings as one warning that names their count and the
    results.json listing them (the CLI prints its own line instead: ``summarize=False``)."""
    current = _RECORD.get()
    if current is not None:
        yield current
        return
    record = WarningsRecord()
    token = _RECORD.set(record)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            record.caught = caught  # filled as warnings are raised: write_results_json reads it live
            yield record
    finally:
        _RECORD.reset(token)
        shown = set()
        for w in record.caught:
            if not record.is_library(w) and (key := (w.category, str(w.message), w.filename, w.lineno)) not in shown:
                shown.add(key)
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        counts = record.counts()
        if summarize and counts:
            where = f"; listed in {record.written[-1]} under \"warnings\"" if record.written else ""
            warnings.warn(f"{sum(counts.values())} warning(s) from scikit-learn/numpy/scipy, e.g. "
                          f"{next(iter(counts))[:160]}{where}", UserWarning, stacklevel=3)


def results_envelope(command: str | None, argv: Sequence[str] | None = None, seed: Any = None) -> dict[str, Any]:
    """What every results.json starts with: the command, its arguments, the seed and the versions."""
    from aflite.rundir import versions

    return {
        "command": command,
        "argv": list(argv) if argv is not None else sys.argv[1:],
        "seed": seed,
        "versions": versions(),
    }


def write_results_json(out: str | Path, results: dict[str, Any] | None, *, command: str | None,
                       argv: Sequence[str] | None = None, seed: Any = None) -> Path:
    """Write ``OUT/results.json``: the envelope followed by ``results``.

    Without ``results`` the results.json already in ``out`` (written by the library) is stamped with the
    envelope instead. A ``seed`` key in the body is the default seed of the envelope. Inside
    :func:`recording_warnings`, the library warnings met so far are listed under ``"warnings"``.
    """
    from aflite.atomic import write_json

    path = Path(out) / "results.json"
    body: dict[str, Any]
    if results is None:
        body = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    else:
        body = dict(results)
    body_seed = body.pop("seed", None)
    for key in ("command", "argv", "versions"):
        body.pop(key, None)
    record = _RECORD.get()
    if record is not None and (entries := record.entries()):
        body["warnings"] = entries
        record.written.append(path)
    write_json(path, {**results_envelope(command, argv, seed if seed is not None else body_seed), **body})
    return path
