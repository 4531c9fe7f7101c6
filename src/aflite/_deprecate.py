"""Shims that keep a renamed keyword working for one release, with a DeprecationWarning.

The library has one name for "show progress bars on stderr": ``show_progress: bool``. ``quiet`` (its
negation) and ``progress`` were older spellings of it in a few public functions; the CLI keeps ``--quiet``.
"""

from __future__ import annotations

import warnings
from typing import Any


def progress_flag(show_progress: bool, *, quiet: bool | None = None, progress: bool | None = None,
                  where: str = "") -> bool:
    """``show_progress``, or the value an old ``quiet=``/``progress=`` keyword asked for (with a warning)."""
    if quiet is None and progress is None:
        return bool(show_progress)
    old = "quiet" if quiet is not None else "progress"
    warnings.warn(f"{where}{old}= is deprecated and will be removed in the next release; use show_progress=",
                  DeprecationWarning, stacklevel=3)
    return not quiet if quiet is not None else bool(progress)


def flag_message(old: str, new: str) -> str:
    """The one line a deprecated command-line spelling prints (it still works for this release)."""
    return f"aflite: {old} is deprecated and will be removed in the next release; use {new}"


def renamed_keywords(given: dict[str, Any], renames: dict[str, str], where: str) -> dict[str, Any]:
    """The values of renamed keywords under their new names, with a DeprecationWarning for each old one used;
    any other unexpected keyword is a TypeError, as Python raises it."""
    out: dict[str, Any] = {}
    for old, value in given.items():
        if old not in renames:
            raise TypeError(f"{where}() got an unexpected keyword argument {old!r}")
        warnings.warn(f"{where}: {old}= is deprecated and will be removed in the next release; use {renames[old]}=",
                      DeprecationWarning, stacklevel=3)
        out[renames[old]] = value
    return out
