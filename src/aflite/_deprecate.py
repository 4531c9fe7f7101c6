"""Shims that keep a renamed keyword (or command-line flag) working for one release, with a DeprecationWarning
(a line on stderr for a flag). Every rename is listed in CHANGELOG.md."""

from __future__ import annotations

import warnings
from typing import Any


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
