"""A check's summary in one shape: :class:`CheckSummary`'s common fields (``score``, ``flagged``, ``verdict``) and,
in a dataclass subclass declared next to the check, the check's own typed fields.

``to_json`` writes the common keys, then the subclass's own fields in their order (nested dataclasses as objects);
``from_json`` builds the typed object back from that JSON (:func:`aflite.rundir.typed_json.typed`: each key checked
against its field's type, nested dataclasses rebuilt). Keys a summary class does not declare are ignored, as a
results.json body ignores them, so that a reader of a built-in check's entry still reads a folder whose summary
carries more keys; a missing field without a default, or a key of the wrong type, is refused in one line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Self

from aflite.atomic import JsonObject
from aflite.rundir.typed_json import typed

__all__ = ["COMMON", "CheckSummary", "optional"]

COMMON = ("score", "flagged", "verdict")  # the keys every summary writes first
_OMIT = "aflite.check.omit_when_none"


def optional() -> Any:
    """A summary field written only when set: None leaves its key out of the JSON (a disabled check's summary
    without the keys only a run of it has)."""
    return field(default=None, metadata={_OMIT: True})


@dataclass(kw_only=True)
class CheckSummary:
    """What a check found, in the one shape every check returns (:attr:`aflite.check.CheckResult.summary`):

    - ``score``: the check's one headline figure (each summary class says which), None where it has none;
    - ``flagged``: how many rows it flags; :func:`aflite.check.run_checks` sets it from the check's ``flags``
      (None: the check has no flags);
    - ``verdict``: the check's verdict sentences (a command puts them into its own verdict), their one home.

    A check's own fields are those of its subclass (a ``@dataclass``); :meth:`to_json` writes them after the
    common keys."""

    score: float | None = None
    flagged: int | None = None
    verdict: list[str] = field(default_factory=list)

    def to_json(self, common: bool = True) -> JsonObject:
        """The summary as JSON: the common keys (``common=False``: left out, the audit's flat view entry), then
        the check's own fields in their order, nested dataclasses as objects; an :func:`optional` field that is
        None is left out."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)
                if (common or f.name not in COMMON) and not (f.metadata.get(_OMIT) and getattr(self, f.name) is None)}

    @classmethod
    def from_json(cls, obj: Any, where: str = "a check's summary") -> Self:
        """The typed summary back from :meth:`to_json`'s JSON (``where`` names it in the one-line refusal)."""
        return typed(cls, obj, where)


def _plain(value: Any) -> Any:
    """``value`` with every dataclass in it (at any depth) as a dict of its fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
