"""One way to declare an option, for featurizers and checks alike: :class:`Option` (its name, its type — bool, int,
float, str or a path —, its default, help, the values it may take or a rule, and for a check's option the older
explain keyword/flag that also sets it). A check states each default on its option (its ``find`` has no signature
to read it from); a featurizer's option leaves it out and the default is read from the constructor that takes it
(the scikit-learn way: :func:`constructor_default`), so it is written once either way. :func:`check_params`
validates an estimator's constructor arguments against its declared options, the rule and the message in one
place. Imports nothing but the error family: ``aflite --help`` reads these declarations."""

from __future__ import annotations

import ast
import functools
import inspect
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aflite.errors import ParameterError

__all__ = ["DERIVED", "Option", "check_params", "constructor_default", "declared_aliases", "declared_flags",
           "signature_defaults"]

TYPES: dict[Any, str] = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
                         Path: "a path"}
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


def declared_aliases(paths: Iterable[Path]) -> dict[str, list[tuple[str, Option]]]:
    """The options declared with an ``alias=`` in the check classes of these source files, read as data (no import:
    ``aflite explain --help`` builds its alias flags from them without numpy): alias -> [(check name, the Option
    with its literal arguments)], in the order the classes and their options are written. An option given by a
    module-level name (``MIN_COUNT``) is followed to its assignment; arguments that are no literal (``valid=``)
    are left out."""
    found: dict[str, list[tuple[str, Option]]] = {}
    for path in paths:
        tree = _module(Path(path))
        named = _assigned(tree)
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            check, calls = None, []
            for node in cls.body:
                target = node.target if isinstance(node, ast.AnnAssign) else \
                    node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
                value = getattr(node, "value", None)
                if isinstance(target, ast.Name) and target.id == "name" and isinstance(value, ast.Constant):
                    check = value.value
                if isinstance(target, ast.Name) and target.id == "options" and isinstance(value, ast.Tuple):
                    calls = [named.get(e.id) if isinstance(e, ast.Name) else e for e in value.elts]
            for call in calls:
                option = _literal_option(call)
                if isinstance(check, str) and option is not None and option.alias:
                    found.setdefault(option.alias, []).append((check, option))
    return found


@functools.cache
def _module(path: Path) -> ast.Module:
    """A module's source parsed once per process: every command's parser reads the same featurizer and check
    modules (their flags, aliases and defaults), and ``aflite --help`` builds them all."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _assigned(tree: ast.Module) -> dict[str, ast.expr]:
    """A module's top-level names and the expression each is assigned (``MIN_COUNT = Option(...)``)."""
    return {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)}


_TYPE_NAMES = {"int": int, "float": float, "str": str, "bool": bool, "Path": Path}


def _literal_option(call: Any) -> Option | None:
    """``Option(...)`` with its literal arguments (its type named int, float, str, bool or
    Path), or None when ``call`` is no such call."""
    found = _literal_call(call)
    return None if found is None else found[0]


def _literal_call(call: Any) -> tuple[Option, frozenset[str]] | None:
    """The Option of a literal ``Option(...)`` call and the keywords it was given, or None."""
    if not isinstance(call, ast.Call) or getattr(call.func, "id", None) != "Option":
        return None
    args: list[Any] = []
    for i, a in enumerate(call.args):
        args.append(_TYPE_NAMES.get(getattr(a, "id", ""), object) if i == 1 else ast.literal_eval(a))
    kwargs = {}
    for k in call.keywords:
        try:
            kwargs[k.arg] = ast.literal_eval(k.value)
        except ValueError:  # a function (valid=): not needed to declare a flag
            continue
    return Option(*args, **{k: v for k, v in kwargs.items() if k}), frozenset(k.arg for k in call.keywords if k.arg)


def declared_flags(path: Path, class_name: str, attr: str = "param_options") -> tuple[Option, ...]:
    """The options a class declares (``param_options``) that are offered as command-line flags (given
    ``commands=``), read from its module's source (``aflite --help`` imports no featurizer to list them)."""
    tree = _module(Path(path))
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name):
        for node in cls.body:
            target = node.target if isinstance(node, ast.AnnAssign) else \
                node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            value = getattr(node, "value", None)
            if isinstance(target, ast.Name) and target.id == attr and isinstance(value, ast.Tuple):
                calls = [_literal_call(e) for e in value.elts]
                return tuple(c[0] for c in calls if c is not None and "commands" in c[1])
    return ()


def signature_defaults(path: Path, class_name: str) -> dict[str, Any]:
    """The literal defaults of a class's constructor keywords, read from its module's source (``aflite --help``
    shows a featurizer flag's default without importing the featurizer): keyword -> value, a default given by a
    module-level name (``DEFAULT_MAX_LENGTH``) followed to its literal assignment; a default that is no literal is
    left out."""
    tree = _module(Path(path))
    named = _assigned(tree)
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name):
        init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is None:
            return {}
        a = init.args
        pairs = [*zip(a.args[len(a.args) - len(a.defaults):], a.defaults, strict=True),
                 *zip(a.kwonlyargs, a.kw_defaults, strict=True)]
        found: dict[str, Any] = {}
        for arg, node in pairs:
            if node is None:  # a keyword-only argument without a default
                continue
            node = named.get(node.id, node) if isinstance(node, ast.Name) else node
            try:
                found[arg.arg] = ast.literal_eval(node)
            except ValueError:
                continue
        return found
    return {}
