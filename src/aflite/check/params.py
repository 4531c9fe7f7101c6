"""A check's options, declared once on its class (:class:`aflite.option.Option`, the one option class, with its default
and, for a built-in check, the older explain flag that aliases it) and resolved here: from Python
(``explain(checks={"tokens": {"alpha": 0.05}})``) and from the command line (``--check tokens:alpha=0.05``) through
the same validation, so that an unknown check, an unknown key or a bad value is refused in one line naming the check
and the key, before any work. The files a check returns are checked here too (a plain name, one writer each)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from aflite.errors import ParameterError
from aflite.option import DERIVED, TYPES, Option, OptionValue

__all__ = ["FILE_NAME", "NAME", "option_value", "parse_check_flag", "resolve", "validate_options"]

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")  # a check's and an option's name: ``name:key=value`` stays parseable
FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")  # a file a check writes: a plain name in the folder's top


def _where(check: str, key: str) -> str:
    return f"check {check!r}: option {key!r}"


def option_value(check: str, option: Option, value: Any) -> Any:
    """``value`` checked against ``option`` (an int where a float is declared becomes a float); one
    :class:`ParameterError` naming the check and the key otherwise."""
    return option.value(_where(check, option.name), value)


def validate_options(check: str, options: Any) -> tuple[Option, ...]:
    """A check's declared options, checked when it is registered: Options with unique names of the form
    ``[A-Za-z_][A-Za-z0-9_]*``, a known type, and a default that passes their own rule."""
    if not isinstance(options, (tuple, list)):
        raise ParameterError(f"check {check!r}: options must be a tuple of Option, got {options!r}")
    seen: set[str] = set()
    for o in options:
        if not isinstance(o, Option):
            raise ParameterError(f"check {check!r}: options must be Option objects, got {o!r}")
        if not NAME.match(o.name) or o.name in seen:
            raise ParameterError(f"check {check!r}: option name {o.name!r} is "
                                 + ("given twice" if o.name in seen else "not a name ([A-Za-z_][A-Za-z0-9_]*)"))
        if o.type not in TYPES:
            raise ParameterError(f"{_where(check, o.name)}: type must be int, float, str or bool (or a Path), got "
                                 f"{o.type!r}")
        if o.default is DERIVED:
            raise ParameterError(f"{_where(check, o.name)}: a check's option states its default")
        option_value(check, o, o.default)  # a default that its own rule refuses is the check's bug
        seen.add(o.name)
    return tuple(options)


def resolve(check: str, declared: tuple[Option, ...], given: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every declared option of ``check`` with its value: the default, or the one ``given`` (checked)."""
    if given is not None and not isinstance(given, Mapping):
        raise ParameterError(f"check {check!r}: its options must be a dict, got {given!r}")
    given = dict(given or {})
    by_name = {o.name: o for o in declared}
    for key in given:
        if key not in by_name:
            raise ParameterError(f"check {check!r} has no option {key!r}; {_takes(by_name)}")
    return {o.name: option_value(check, o, given[o.name]) if o.name in given else o.default for o in declared}


def _takes(options: Mapping[str, Option]) -> str:
    return f"its options: {', '.join(options)}" if options else "it takes no options"


def _from_text(check: str, option: Option, text: str) -> OptionValue:
    """A value given on the command line, read as the option's type."""
    return option.from_text(_where(check, option.name), text)


def parse_check_flag(flags: list[str], declared: Callable[[str], tuple[Option, ...]]
                     ) -> dict[str, dict[str, OptionValue]]:
    """``--check NAME:KEY=VALUE`` (repeatable) as ``checks=``'s dict, each value read as its option's type;
    ``declared(name)`` gives a check's options (and refuses an unknown check). One option given twice is refused
    (as a dict cannot hold it twice)."""
    out: dict[str, dict[str, OptionValue]] = {}
    for flag in flags:
        name, colon, rest = flag.partition(":")
        key, eq, text = rest.partition("=")
        if not colon or not eq or not name or not key:
            raise ParameterError(f"--check {flag!r}: write it NAME:KEY=VALUE (e.g. --check tokens:alpha=0.05)")
        options = {o.name: o for o in declared(name)}
        if key not in options:
            raise ParameterError(f"--check {flag!r}: check {name!r} has no option {key!r}; {_takes(options)}")
        given = out.setdefault(name, {})
        if key in given:  # one value per option: the later one would silently win
            raise ParameterError(f"--check {flag!r}: option {key!r} of check {name!r} is given twice; give it once")
        given[key] = _from_text(name, options[key], text)
    return out
