"""Every command-line flag is named as a keyword of the library call the command makes (issue #21).

For each command, the test reads its argparse parser and the signatures (``inspect.signature``) of the library
functions it calls, and fails when a flag has a name that is no keyword there. There are no second spellings: one
flag per keyword.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from aflite.cli import COMMANDS, build_parser, command_modules


def _keywords(*functions: Callable[..., Any]) -> set[str]:
    return {name for f in functions for name, p in inspect.signature(f).parameters.items()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}


def library_keywords(module: ModuleType) -> set[str]:
    """The keywords a command's flags may name: those of the calls its module's LIBRARY lists (``"module:attribute"``
    or the object; a dict or tuple of names, such as the featurizer options of features.registry, gives them)."""
    names: set[str] = set()
    for entry in module.LIBRARY:
        if isinstance(entry, str):
            where, _, attr = entry.partition(":")
            entry = getattr(importlib.import_module(where), attr)
        names |= set(entry) if isinstance(entry, dict | tuple) else _keywords(entry)
    return names


def _library() -> dict[str, set[str]]:
    return {name: library_keywords(module) for name, module in command_modules().items()}


# Flags that are not a library keyword on purpose in every command (keep this short; each says why); a flag of
# one command only is in its module's CLI_ONLY, with why.
CLI_ONLY = {
    "quiet",      # the negation of every library function's show_progress=
    "threads",    # the process's thread budget (aflite.threads, as AFLITE_NUM_THREADS), set around the call
    "overwrite",  # the CLI claims --out before the call (RunFolder.claim); a keyword where one exists
    "json",       # how the CLI prints the result
    "open",       # report: open the page in a browser afterwards
}


def wrong_flags(parser: argparse.ArgumentParser, module: ModuleType) -> list[str]:
    """The flags of one command whose name is not their keyword, or no keyword of its LIBRARY (nor allowed)."""
    keywords = library_keywords(module)
    allowed = CLI_ONLY | set(getattr(module, "CLI_ONLY", {}))
    wrong = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        long = [o for o in action.option_strings if o.startswith("--") and not o.startswith("--no-")]
        if [f"--{action.dest.replace('_', '-')}"] != (long or [f"-{o}" for o in action.option_strings]):  # or -C
            wrong.append(f"{'/'.join(action.option_strings)}: its name is not its keyword {action.dest!r}")
        if action.dest not in keywords and action.dest not in allowed:
            wrong.append(f"{'/'.join(action.option_strings)}: {action.dest!r} is no keyword of the library call")
    return wrong


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_command_is_covered() -> None:
    assert set(_library()) == set(COMMANDS) == set(_commands())


@pytest.mark.parametrize("command", COMMANDS)
def test_flags_are_library_keywords(command: str) -> None:
    wrong = wrong_flags(_commands()[command], command_modules()[command])
    assert not wrong, f"aflite {command}: " + "; ".join(wrong)


@pytest.mark.parametrize("command", COMMANDS)
def test_no_hidden_flags(command: str) -> None:
    """Every flag is in --help (and so in the generated guide)."""
    hidden = [a.option_strings for a in _commands()[command]._actions if a.help == argparse.SUPPRESS]
    assert not hidden, f"aflite {command}: hidden flags {hidden}"


@pytest.mark.parametrize("command", COMMANDS)
def test_one_spelling_per_keyword(command: str) -> None:
    """No keyword has two flags, and no flag two long names (``--no-X`` of a boolean flag aside)."""
    actions = [a for a in _commands()[command]._actions
               if a.option_strings and not isinstance(a, argparse._HelpAction)]
    dests = [a.dest for a in actions]
    assert sorted({d for d in dests if dests.count(d) > 1}) == [], f"aflite {command}: keywords with two flags"
    longs = {a.dest: [o for o in a.option_strings if o.startswith("--") and not o.startswith("--no-")]
             for a in actions}
    assert {d: o for d, o in longs.items() if len(o) > 1} == {}, f"aflite {command}: flags with two long names"


def test_allow_lists_are_not_stale() -> None:
    """An allow-listed name that became a keyword (or lost its flag) must leave the list."""
    library, commands = _library(), _commands()
    for command, module in command_modules().items():
        names = set(getattr(module, "CLI_ONLY", {}))
        dests = {a.dest for a in commands[command]._actions if a.option_strings}
        assert names <= dests and not names & library[command], command
    every = {a.dest for p in commands.values() for a in p._actions if a.option_strings}
    assert CLI_ONLY <= every


def test_command_line_messages_name_flags_and_python_messages_keywords(tmp_path, capsys):
    """#50: messages that named a Python keyword to a command-line user (``n_samples=``, ``peco_encoder=``,
    ``embedding_ids=``) name the flag there, and the keyword in Python (aflite.data.option_names decides)."""
    import re

    import numpy as np

    from aflite.cli import main
    from aflite.data import demo_dataset_path
    from aflite.errors import ParameterError
    from aflite.experiments.synthetic import run_synthetic
    from aflite.features.precomputed import load_embeddings

    vectors = tmp_path / "v.npy"
    np.save(vectors, np.zeros((3, 2), dtype=np.float32))
    for argv, line in (
        (["synthetic", "--n-samples", "100", "--seeds", "1"], "--n-samples 100 must exceed AFLite's target size"),
        (["audit", str(demo_dataset_path()), "--out", str(tmp_path / "a"), "--peco-encoder", "finetuned",
          "--no-tra"], "--peco-encoder finetuned needs the fine-tuned models (--tra)"),
        (["run", str(demo_dataset_path()), "--out", str(tmp_path / "r"), "-f", "precomputed", "--embeddings",
          str(vectors)], "needs its ids file (--embedding-ids: one id per row)"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and line in err[0] and not re.search(r"[a-z]+_[a-z_]+=", err[0]), err
    with pytest.raises(ParameterError, match="n_samples=100 must exceed"):
        run_synthetic(n_samples=100, seeds=[0])
    with pytest.raises(ParameterError, match=r"\(embedding_ids=: one id per row\)"):
        load_embeddings(vectors)
