"""Parsed JSON checked and built as a dataclass, through nested dataclasses, dicts, lists and unions: the one
reader behind every results.json body (:func:`aflite.rundir.schema.parse`) and the typed fields of checks'
summaries. An edited or damaged file gets one :class:`InputError` naming the innermost wrong key."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union

from aflite.errors import InputError

__all__ = ["build", "built", "typed"]

T = TypeVar("T")


def typed(cls: type[T], obj: Any, where: str) -> T:
    """``obj`` (parsed JSON) as the dataclass ``cls``, checked and built as :func:`parse` builds a body (nested
    dataclasses at any depth; keys ``cls`` does not name left out, as a body leaves them to :attr:`Document.raw`);
    one :class:`InputError` naming ``where`` and the first key missing or of a wrong type."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: {_shown(obj)} is not {_named(cls)}")
    missing = [f.name for f in dataclasses.fields(cls)  # type: ignore[arg-type]
               if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and f.name not in obj]
    if missing:
        raise InputError(f"{where}: no {missing[0]!r} (not {_named(cls)})")
    built: T = build(cls, obj, where, ())
    return built


def build(cls: type[Any], obj: dict[str, Any], path: Path | str, required: tuple[str, ...]) -> Any:
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in obj:
            if f.name in required:
                raise InputError(f"{path}: no {f.name!r}: not the results.json of a finished aflite command")
            continue
        value = obj[f.name]
        if not _is(value, hints[f.name]):
            key, value, hint = _first_wrong(repr(f.name), value, hints[f.name])
            raise InputError(f"{path}: {key} is {_shown(value)}, not {_named(hint)}; the file was edited or damaged: "
                             f"run the command again")
        values[f.name] = built(value, hints[f.name])
    return cls(**values)


def _first_wrong(key: str, value: Any, hint: Any) -> tuple[str, Any, Any]:
    """Where ``value`` (of the wrong type ``hint``, at ``key``) is wrong: the innermost key, its value and type
    (``'checks'['toy']['columns']``, ``'parameters'['n_partitions']``), through dataclasses, dicts and lists."""
    arms = [h for h in typing.get_args(hint) if h is not type(None)] if _is_union(hint) else [hint]
    if value is None or len(arms) != 1:
        return key, value, hint
    (arm,) = arms
    args = typing.get_args(arm)
    if dataclasses.is_dataclass(arm) and isinstance(value, dict):
        inner = typing.get_type_hints(arm)
        for f in dataclasses.fields(arm):
            if f.name in value and not _is(value[f.name], inner[f.name]):
                return _first_wrong(f"{key}[{f.name!r}]", value[f.name], inner[f.name])
    elif typing.get_origin(arm) is dict and isinstance(value, dict):
        for k, v in value.items():
            if not _is(v, args[1]):
                return _first_wrong(f"{key}[{k!r}]", v, args[1])
    elif typing.get_origin(arm) is list and isinstance(value, list):
        for i, v in enumerate(value):
            if not _is(v, args[0]):
                return _first_wrong(f"{key}[{i}]", v, args[0])
    return key, value, arm  # not an object, or a key it needs is missing


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (Union, types.UnionType)


def built(value: Any, hint: Any) -> Any:
    """The parsed JSON ``value`` (of type ``hint``) with the dataclasses its type names built, at any depth; keys a
    dataclass does not name are left out of it (they stay in :attr:`Document.raw`)."""
    if value is None:
        return None
    if _is_union(hint):
        arm = next(h for h in typing.get_args(hint) if h is not type(None) and _is(value, h))
        return built(value, arm)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        inner = typing.get_type_hints(hint)
        return hint(**{f.name: built(value[f.name], inner[f.name]) for f in dataclasses.fields(hint)
                       if f.name in value})
    args = typing.get_args(hint)
    if typing.get_origin(hint) is dict:
        return {k: built(v, args[1]) for k, v in value.items()}
    if typing.get_origin(hint) is list:
        return [built(v, args[0]) for v in value]
    return value


def _is(value: Any, hint: Any) -> bool:
    """Whether ``value`` (parsed JSON) has the type ``hint`` (int, float, str, bool, Any, list[...], dict[str, ...]
    and unions of them with None)."""
    if hint is Any:
        return True
    if typing.is_typeddict(hint):  # an object whose keys, where present, have their types
        inner = typing.get_type_hints(hint)
        return isinstance(value, dict) and all(_is(value[k], h) for k, h in inner.items() if k in value)
    if dataclasses.is_dataclass(hint):  # an object with the dataclass's fields (those without a default required)
        if not isinstance(value, dict):
            return False
        inner = typing.get_type_hints(hint)
        return all(_is(value[f.name], inner[f.name]) if f.name in value else
                   f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
                   for f in dataclasses.fields(hint))
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_is(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint in (str, bool):
        return isinstance(value, hint)
    args = typing.get_args(hint)
    if origin is list:
        return isinstance(value, list) and all(_is(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_is(v, args[1]) for v in value.values())
    return False  # pragma: no cover - a hint this checker does not know


def _named(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(_named(h) for h in typing.get_args(hint))
    if hint is type(None):
        return "null"
    if dataclasses.is_dataclass(hint) or typing.is_typeddict(hint):
        keys = [f.name for f in dataclasses.fields(hint)] if dataclasses.is_dataclass(hint) else list(
            typing.get_type_hints(hint))
        return "an object with " + ", ".join(keys)
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false", list: "a list",
             dict: "an object"}
    return names.get(origin or hint, str(hint))


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    text = "null" if value is None else text
    return text if len(text) <= 40 else text[:37] + "..."
