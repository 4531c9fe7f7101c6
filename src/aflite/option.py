"""One way to declare an option, for featurizers and checks alike: :class:`Option` (its name, its type — bool, int,
float, str or a path —, its default, help, the values it may take or a rule, and for a check's option the older
explain keyword/flag that also sets it). A check states each default on its option (its ``find`` has no signature
to read it from); a featurizer's option leaves it out and the default is read from the constructor that takes it
(the scikit-learn way: :func:`constructor_default`), so it is written once either way. :func:`check_params`
validates an estimator's constructor arguments against its declared options, the rule and the message in one
place. Imports nothing but the error family: ``aflite --help`` reads these declarations."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from aflite.errors import ParameterError

__all__ = ["DERIVED", "Option", "OptionValue", "check_params", "constructor_default"]

TYPES: dict[Any, str] = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
                         Path: "a path"}
OptionValue: TypeAlias = bool | int | float | str | None  # what an Option holds (a path as the string given)
TRUE, FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


class _Derived:
    """The default of an option that its constructor states (read from the signature, not repeated)."""

    def __repr__(self) -> str:
        return "DERIVED"


DERIVED: Any = _Derived()


@dataclass(frozen=True)
class Option:
    """One option: ``name`` (a keyword), ``type`` (int, float, str, bool or :class:`pathlib.Path`; a path is kept as
    the string given), ``default`` (:data:`DERIVED`: the constructor's), ``help``, and optionally the values it may
    take (``choices``), a rule (``valid`` with the sentence ``rule`` a refusal prints, e.g. ``"must be >= 1"``),
    whether None is a value (``optional``; always where the default is None), the flag's ``metavar``, the commands
    that offer a featurizer's option as a flag (``commands``) and the older explain keyword and flag that set a
    check's option too (``alias``: ``--alpha`` sets ``tokens:alpha``)."""

    name: str
    type: Any = str
    default: Any = DERIVED
    help: str = ""
    choices: tuple[Any, ...] = ()
    valid: Callable[[Any], bool] | None = None
    rule: str = ""
    optional: bool = False
    metavar: str | None = None
    commands: tuple[str, ...] = ("run", "embed")
    alias: str | None = None

    @property
    def flag(self) -> str:
        """The option's flag on the command line (``--model-path``)."""
        return "--" + self.name.replace("_", "-")

    def parse(self, text: str) -> Any:
        """A command line's text as the option's type (argparse's ``type``; a path stays the string given, a bool
        is true/yes/1/on or false/no/0/off)."""
        if self.type is bool:
            if text.lower() not in TRUE + FALSE:
                raise ValueError(text)
            return text.lower() in TRUE
        return text if self.type is Path else self.type(text)

    def converter(self) -> Callable[[str], Any]:
        """:meth:`parse` as argparse's ``type``, named after the option's type (its usage errors say "invalid int
        value")."""
        def convert(text: str) -> Any:
            return self.parse(text)

        convert.__name__ = getattr(self.type, "__name__", "value")
        return convert

    def describe(self, default: Any = DERIVED) -> str:
        """The option's line in a listing: its value's form, help and default (``default``: when derived)."""
        form = "|".join(str(c) for c in self.choices) if self.choices else getattr(self.type, "__name__", "").upper()
        value = self.default if default is DERIVED else default
        shown = "unset" if value is None else str(value).lower() if self.type is bool else str(value)
        return f"{self.name}={form}: {self.help} (default {shown})"

    def value(self, where: str, value: Any) -> Any:
        """``value`` checked against the option (an int where a float is declared becomes a float, a path a
        string); one :class:`ParameterError` starting with ``where`` (``"check 'tokens': option 'alpha'"``)."""
        if value is None and (self.optional or self.default is None):
            return None
        kind = self.type
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)) if kind is float else \
            (isinstance(value, int) and not isinstance(value, bool)) if kind is int else \
            isinstance(value, (str, os.PathLike)) if kind is Path else isinstance(value, kind)
        if not ok:
            raise ParameterError(f"{where} must be {TYPES.get(kind, getattr(kind, '__name__', kind))}, got {value!r}")
        value = float(value) if kind is float else str(value) if kind is Path else value
        if self.choices and value not in self.choices:
            raise ParameterError(f"{where} must be one of {', '.join(map(str, self.choices))}, got {value!r}")
        if self.valid is not None and not self.valid(value):
            raise ParameterError(f"{where} {self.rule or 'is out of range'}, got {value!r}")
        return value

    def from_text(self, where: str, text: str) -> Any:
        """A value given on the command line (``--check name:key=VALUE``), read as the option's type."""
        if (self.optional or self.default is None) and text.lower() in ("none", ""):
            return None
        try:
            return self.parse(text)
        except ValueError:
            raise ParameterError(f"{where} must be {TYPES[self.type]}, got {text!r}") from None


def constructor_default(cls: Any, name: str) -> Any:
    """The default that ``cls``'s constructor states for the keyword ``name`` (:data:`DERIVED` when it states
    none, or names no such keyword)."""
    try:
        parameter = inspect.signature(cls).parameters.get(name)
    except (TypeError, ValueError):
        return DERIVED
    if parameter is None or parameter.default is inspect.Parameter.empty:
        return DERIVED
    return parameter.default


def check_params(estimator: Any, options: Iterable[Option]) -> None:
    """An estimator's constructor arguments (its attributes of the same names, as scikit-learn stores them)
    checked against its declared options, each refused in one line naming it (``n_components must be >= 1``)."""
    for option in options:
        option.value(option.name, getattr(estimator, option.name))
