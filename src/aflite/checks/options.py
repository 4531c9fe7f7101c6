"""A check's options, declared once on its class (:class:`CheckOption`) and resolved here: from Python
(``explain(checks={"tokens": {"alpha": 0.05}})``) and from the command line (``--check tokens:alpha=0.05``) through
the same validation, so that an unknown check, an unknown key or a bad value is refused in one line naming the check
and the key, before any work. The files a check returns are checked here too (a plain name, one writer each)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aflite.errors import ParameterError

__all__ = ["CheckOption", "FILE_NAME", "NAME", "option_value", "parse_check_flag", "resolve", "validate_options"]

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")  # a check's and an option's name: ``name:key=value`` stays parseable
FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")  # a file a check writes: a plain name in the folder's top
TYPES: dict[type, str] = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
TRUE, FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


@dataclass(frozen=True)
class CheckOption:
    """One option of a check: its key, value type (int, float, str or bool), default (None: unset, allowed as a
    value), help, and optionally the values it may take (``choices``) or a rule (``valid`` with the sentence
    ``rule`` that the refusal prints, e.g. ``"must lie in (0, 1)"``)."""

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[Any, ...] = ()
    valid: Callable[[Any], bool] | None = None
    rule: str = ""

    def describe(self) -> str:
        """The option's line in a listing: its value's form, help and default."""
        form = "|".join(str(c) for c in self.choices) if self.choices else self.type.__name__.upper()
        default = "unset" if self.default is None else str(self.default).lower() if self.type is bool \
            else str(self.default)
        return f"{self.name}={form}: {self.help} (default {default})"


def _where(check: str, key: str) -> str:
    return f"check {check!r}: option {key!r}"


def option_value(check: str, option: CheckOption, value: Any) -> Any:
    """``value`` checked against ``option`` (an int where a float is declared becomes a float); one
    :class:`ParameterError` naming the check and the key otherwise."""
    if value is None and option.default is None:
        return None
    kind = option.type
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool)) if kind is float else \
        (isinstance(value, int) and not isinstance(value, bool)) if kind is int else isinstance(value, kind)
    if not ok:
        raise ParameterError(f"{_where(check, option.name)} must be {TYPES[kind]}, got {value!r}")
    value = float(value) if kind is float else value
    if option.choices and value not in option.choices:
        raise ParameterError(f"{_where(check, option.name)} must be one of "
                             f"{', '.join(map(str, option.choices))}, got {value!r}")
    if option.valid is not None and not option.valid(value):
        raise ParameterError(f"{_where(check, option.name)} {option.rule or 'is out of range'}, got {value!r}")
    return value


def validate_options(check: str, options: Any) -> tuple[CheckOption, ...]:
    """A check's declared options, checked when it is registered: CheckOptions with unique names of the form
    ``[A-Za-z_][A-Za-z0-9_]*``, a known type, and a default that passes their own rule."""
    if not isinstance(options, (tuple, list)):
        raise ParameterError(f"check {check!r}: options must be a tuple of CheckOption, got {options!r}")
    seen: set[str] = set()
    for o in options:
        if not isinstance(o, CheckOption):
            raise ParameterError(f"check {check!r}: options must be CheckOption objects, got {o!r}")
        if not NAME.match(o.name) or o.name in seen:
            raise ParameterError(f"check {check!r}: option name {o.name!r} is "
                                 + ("given twice" if o.name in seen else "not a name ([A-Za-z_][A-Za-z0-9_]*)"))
        if o.type not in TYPES:
            raise ParameterError(f"{_where(check, o.name)}: type must be int, float, str or bool, got {o.type!r}")
        option_value(check, o, o.default)  # a default that its own rule refuses is the check's bug
        seen.add(o.name)
    return tuple(options)


def resolve(check: str, declared: tuple[CheckOption, ...], given: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every declared option of ``check`` with its value: the default, or the one ``given`` (checked)."""
    if given is not None and not isinstance(given, Mapping):
        raise ParameterError(f"check {check!r}: its options must be a dict, got {given!r}")
    given = dict(given or {})
    by_name = {o.name: o for o in declared}
    for key in given:
        if key not in by_name:
            takes = f"its options: {', '.join(by_name)}" if by_name else "it takes no options"
            raise ParameterError(f"check {check!r} has no option {key!r}; {takes}")
    return {o.name: option_value(check, o, given[o.name]) if o.name in given else o.default for o in declared}


def _from_text(check: str, option: CheckOption, text: str) -> Any:
    """A value given on the command line, read as the option's type."""
    if option.default is None and text.lower() in ("none", ""):
        return None
    try:
        if option.type is bool:
            if text.lower() not in TRUE + FALSE:
                raise ValueError(text)
            return text.lower() in TRUE
        return option.type(text)
    except ValueError:
        raise ParameterError(f"{_where(check, option.name)} must be {TYPES[option.type]}, got {text!r}") from None


def parse_check_flag(flags: list[str], declared: Callable[[str], tuple[CheckOption, ...]]) -> dict[str, dict[str, Any]]:
    """``--check NAME:KEY=VALUE`` (repeatable) as ``checks=``'s dict, each value read as its option's type;
    ``declared(name)`` gives a check's options (and refuses an unknown check). One option given twice is refused
    (as a dict cannot hold it twice)."""
    out: dict[str, dict[str, Any]] = {}
    for flag in flags:
        name, colon, rest = flag.partition(":")
        key, eq, text = rest.partition("=")
        if not colon or not eq or not name or not key:
            raise ParameterError(f"--check {flag!r}: write it NAME:KEY=VALUE (e.g. --check tokens:alpha=0.05)")
        options = {o.name: o for o in declared(name)}
        if key not in options:
            takes = f"its options: {', '.join(options)}" if options else "it takes no options"
            raise ParameterError(f"--check {flag!r}: check {name!r} has no option {key!r}; {takes}")
        given = out.setdefault(name, {})
        if key in given:  # one value per option: the later one would silently win
            raise ParameterError(f"--check {flag!r}: option {key!r} of check {name!r} is given twice; give it once")
        given[key] = _from_text(name, options[key], text)
    return out
