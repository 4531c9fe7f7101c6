"""Every built-in command declared once: its CLI module states ``COMMAND = Command(...)`` (name, library function,
the Result class that writes and rebuilds its folder, its body type, its place in ``--help``; its guide is
``docs/guide/<name>.md``), and everything else is derived from those declarations: the CLI's command table
(:data:`aflite.cli.COMMANDS`), ``aflite report``'s lookup of a folder's Result class (:func:`result_class`) and the
body a reader checks a folder's results.json against (:func:`aflite.rundir.bodies.body_class`).

The declarations are read as data from the source of the modules under ``aflite/cli`` (:func:`declarations`: the
literal arguments of each module's ``COMMAND = Command(...)``), so the library finds them without importing the
command line (imports point down: docs/architecture.md), and ``aflite --help`` imports no library to list them.
A new command is its library module, its CLI module (with its ``COMMAND``) and its guide: no table to edit.
This module declares the commands; what each one does (its library function) lives in :mod:`aflite.commands`.
"""

from __future__ import annotations

import ast
import functools
import importlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from aflite.errors import ParameterError

__all__ = ["Command", "declarations", "load", "result_class"]

CLI = Path(__file__).resolve().parents[1] / "cli"  # the package whose modules declare the commands


@dataclass(frozen=True)
class Command:
    """One command, declared in its CLI module as ``COMMAND = Command(...)`` with literal arguments only.

    ``library``: the function it calls (``"module:function"``); ``result``: the Result class whose folder it
    writes and whose page ``aflite report`` rebuilds (None: no page); ``body``: the results.json body class a reader
    checks the folder against (None: the envelope only); ``order``: its place in ``aflite --help``; ``cli``: the
    module that declares it (filled in when read). Its guide is ``docs/guide/<name>.md``, by its name."""

    name: str
    library: str
    result: str | None = None
    body: str | None = None
    order: int = 1000
    cli: str = ""


@functools.cache
def declarations() -> dict[str, Command]:
    """Every command declared under ``aflite/cli``, by name, in ``--help`` order (then by name); two modules
    declaring one name are refused."""
    found: dict[str, Command] = {}
    for path in sorted(CLI.glob("*.py")):
        command = _declared(path)
        if command is None:
            continue
        if command.name in found:
            raise ParameterError(f"{path}: declares the command {command.name!r}, as {found[command.name].cli} does")
        found[command.name] = command
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


def _declared(path: Path) -> Command | None:
    """The ``COMMAND = Command(...)`` of one CLI module, read from its source (literal arguments only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["COMMAND"]
                and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", None) == "Command"):
            try:
                args = [ast.literal_eval(a) for a in node.value.args]
                kwargs = {k.arg: ast.literal_eval(k.value) for k in node.value.keywords if k.arg}
                command = Command(*args, **kwargs)
            except (ValueError, TypeError) as exc:
                raise ParameterError(f"{path}:{node.lineno}: COMMAND = Command(...) takes literal arguments only "
                                     f"({exc})") from None
            return replace(command, cli=f"aflite.cli.{path.stem}")
    return None


def load(ref: str) -> Any:
    """The object a declaration names as ``"module:attribute"``, imported."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def result_class(command: str) -> type[Any] | None:
    """The Result class a command declares (imported: defining it registers its page), None when it declares none
    or is not a built-in command."""
    declared = declarations().get(command)
    if declared is None or declared.result is None:
        return None
    cls: type[Any] = load(declared.result)
    return cls


def declared_body(command: str) -> type[Any] | None:
    """The body class a command declares (imported: defining it registers it), None when it declares none."""
    declared = declarations().get(command)
    if declared is None or declared.body is None:
        return None
    cls: type[Any] = load(declared.body)
    return cls
