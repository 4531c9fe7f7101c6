"""The YAML front matter of a dataset card (Hugging Face dataset card metadata), written with PyYAML.

``yaml.safe_dump`` quotes every string that YAML 1.1 or 1.2 would read as something else (``"no"``, ``"1e3"``,
``"2024-01-01"``, a key ``"on"``); :func:`dump` keeps the tree's order, writes every printable character as
itself (a card is UTF-8), puts a string with any other character (a newline, a line separator, NEL) in double
quotes, where it is escaped (PyYAML 6 would otherwise write NEL raw in single quotes and read it back as a space),
and never folds a line, so the same tree gives the same bytes. It refuses first what the card could not carry
faithfully: a key that is not a string, a number that is not finite, a value of another type.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

__all__ = ["dump"]


class _CardDumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` with the string style above."""


def _string(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    escaped = any(not ch.isprintable() or ch in "\x85\u2028\u2029" for ch in text)
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style='"' if escaped else None)


_CardDumper.add_representer(str, _string)


def _check(value: Any, where: str) -> None:
    """Raise on what the front matter could not read back as given (TypeError, ValueError: a bug of the caller)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"front matter keys are strings, not {type(k).__name__}: {k!r} (in {where})")
            _check(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check(v, f"{where}[{i}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"front matter numbers are finite, not {value!r} (in {where})")
    elif value is not None and not isinstance(value, bool | int | float | str):
        raise TypeError(f"no YAML form for {type(value).__name__}: {value!r} (in {where})")


def dump(tree: dict[str, Any]) -> str:
    """``tree`` (a mapping of strings to mappings, lists, strings, numbers, booleans and None) as YAML block
    lines ending in a newline, without the ``---`` fences."""
    if not isinstance(tree, dict):
        raise TypeError("the front matter is a mapping")
    _check(tree, "front matter")
    return yaml.dump(tree, Dumper=_CardDumper, sort_keys=False, allow_unicode=True, default_flow_style=False,
                     width=2**31 - 1)
