"""The YAML front matter of a dataset card, written without a YAML library.

A card's metadata is a small tree of mappings, lists and scalars; PyYAML is no dependency of aflite's base
install, so :func:`dump` writes that subset itself, in block style, with every string double-quoted (no plain
scalar can turn into a boolean, a number or a date under YAML 1.1 or 1.2: ``"no"``, ``"1e3"``, ``"2024-01-01"``
stay strings) and every character that is not printable escaped. Keys are written plain only when they are
lowercase words that no YAML version reads as anything but a string. The output is the same bytes for the same
tree (insertion order kept), and tests read it back with PyYAML.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["dump", "quote"]

_PLAIN_KEY = re.compile(r"[a-z][a-z0-9_]*\Z")
# words YAML 1.1 (PyYAML) reads as booleans or null even in a key
_RESERVED = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}


def quote(text: str) -> str:
    """``text`` as a YAML double-quoted scalar: backslash, quote and control characters escaped, and every other
    character that is not printable (line and paragraph separators, BOM, lone surrogates) as ``\\uXXXX`` or
    ``\\UXXXXXXXX``."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable() and ch != "\ufeff" and not 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(f"\\U{ord(ch):08X}")
    return '"' + "".join(out) + '"'


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"front matter keys are strings, not {type(key).__name__}: {key!r}")
    return key if _PLAIN_KEY.match(key) and key not in _RESERVED else quote(key)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"front matter numbers are finite, not {value!r}")
        mantissa, e, exponent = repr(value).partition("e")  # 1e-05 -> 1.0e-05: YAML 1.1 wants the dot
        return (mantissa if "." in mantissa else mantissa + ".0") + e + exponent
    if isinstance(value, str):
        return quote(value)
    raise TypeError(f"no YAML form for {type(value).__name__}: {value!r}")


def _lines(value: Any, indent: int) -> list[str]:
    """The block lines of a mapping or a list (non-empty), ``indent`` spaces deep."""
    pad = " " * indent
    out: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, dict | list) and v:
                out.append(f"{pad}{_key(k)}:")
                out.extend(_lines(v, indent + 2))
            else:
                out.append(f"{pad}{_key(k)}: {_flow(v)}")
        return out
    for item in value:
        if isinstance(item, dict | list) and item:
            inner = _lines(item, indent + 2)
            out.append(f"{pad}- {inner[0][indent + 2:]}")  # the item's first line after the dash
            out.extend(inner[1:])
        else:
            out.append(f"{pad}- {_flow(item)}")
    return out


def _flow(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"  # only empty ones get here
    if isinstance(value, list):
        return "[]"
    return _scalar(value)


def dump(tree: dict[str, Any]) -> str:
    """``tree`` (a mapping of strings to mappings, lists, strings, numbers, booleans and None) as YAML block
    lines ending in a newline, without the ``---`` fences."""
    if not isinstance(tree, dict):
        raise TypeError("the front matter is a mapping")
    return "".join(line + "\n" for line in _lines(tree, 0)) if tree else "{}\n"
