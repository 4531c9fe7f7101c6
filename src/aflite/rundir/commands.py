"""Every built-in command declared once, in one literal table (:data:`COMMANDS`: name, the CLI module that builds
its parser, library function, the Result class that writes and rebuilds its folder, its body type; its place in
``aflite --help`` is its place in the table; its guide is ``docs/guide/<name>.md``). Everything else is derived from
that table: the CLI's command list (:data:`aflite.cli.COMMANDS`), ``aflite report``'s lookup of a folder's Result
class (:func:`result_class`) and the body a reader checks a folder's results.json against
(:func:`aflite.rundir.schema.body_class`). Each CLI module reads its own entry (``COMMAND = COMMANDS["run"]``).

The table names everything as ``"module:attribute"`` strings, so the library finds a command without importing the
command line (imports point down: docs/architecture.md), and ``aflite --help`` imports no library to list them.
A new command is its library module, its CLI module, its guide and one entry here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

__all__ = ["COMMANDS", "Command", "declarations", "load", "result_class"]


@dataclass(frozen=True)
class Command:
    """One command: ``cli``, the module under ``aflite/cli`` that builds its parser (``register``); ``library``,
    the function it calls (``"module:function"``); ``result``, the Result class whose folder it writes and whose
    page ``aflite report`` rebuilds (None: no page); ``body``, the results.json body class a reader checks the
    folder against (None: the envelope only). Its guide is ``docs/guide/<name>.md``, by its name."""

    name: str
    cli: str
    library: str
    result: str | None = None
    body: str | None = None


_BODIES = "aflite.rundir.schema"
# every built-in command, in ``aflite --help`` order
COMMANDS: dict[str, Command] = {c.name: c for c in (
    Command("demo", "aflite.cli.demo", "aflite.commands.run:run", "aflite.commands.run:RunResult",
            f"{_BODIES}:RunBody"),
    Command("run", "aflite.cli.run", "aflite.commands.run:run", "aflite.commands.run:RunResult",
            f"{_BODIES}:RunBody"),
    Command("embed", "aflite.cli.embed", "aflite.commands.embed:embed", "aflite.commands.embed:EmbedResult",
            f"{_BODIES}:EmbedBody"),
    Command("filter", "aflite.cli.filter", "aflite.commands.filter:filter_files", "aflite.commands.run:RunResult",
            f"{_BODIES}:RunBody"),
    Command("evaluate", "aflite.cli.evaluate", "aflite.commands.evaluate:evaluate_files",
            "aflite.evaluate.tables:EvaluateResult", f"{_BODIES}:EvaluateBody"),
    Command("audit", "aflite.cli.audit", "aflite.commands.audit:audit_file", "aflite.commands.audit:AuditResult",
            f"{_BODIES}:AuditBody"),
    Command("explain", "aflite.cli.explain", "aflite.commands.explain:explain", "aflite.explain.files:ExplainResult",
            f"{_BODIES}:ExplainBody"),
    Command("card", "aflite.cli.card", "aflite.card:write_card", "aflite.card.write:CardResult"),
    Command("report", "aflite.cli.report", "aflite.commands.report:write_page"),
    Command("verify", "aflite.cli.verify", "aflite.card.verify:verify_folder"),
    Command("synthetic", "aflite.cli.synthetic", "aflite.experiments.synthetic:run_synthetic",
            "aflite.experiments.outputs:SyntheticResult"),
)}


def declarations() -> dict[str, Command]:
    """Every built-in command, by name, in ``--help`` order (:data:`COMMANDS`)."""
    return COMMANDS


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
