"""Every command-line flag is named as a keyword of the library call the command makes (issue #21).

For each command, the test reads its argparse parser and the signatures (``inspect.signature``) of the library
functions it calls, and fails when a flag has a name that is no keyword there. There are no second spellings: one
flag per keyword.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from aflite.cli import COMMANDS, build_parser


def _keywords(*functions: Callable[..., Any]) -> set[str]:
    return {name for f in functions for name, p in inspect.signature(f).parameters.items()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}


def _library() -> dict[str, set[str]]:
    """The keywords each command's flags may name: the functions it calls and the objects it passes them
    (AFLite for the filter's parameters, AuditConfig, FinetuneOptions, the column keywords of the loaders, and
    the featurizer options the registry routes)."""
    from aflite.audit import AuditConfig
    from aflite.card import write_card
    from aflite.core.filter import AFLite
    from aflite.data import load_dataset
    from aflite.data.images import load_image_dataset
    from aflite.evaluate import FinetuneOptions, compare_runs
    from aflite.experiments.bench import run_benchmark
    from aflite.experiments.bench_device import device_benchmark
    from aflite.experiments.bench_embed import embed_benchmark
    from aflite.experiments.outputs import save_bench, save_synthetic
    from aflite.experiments.scale import scale_benchmark
    from aflite.experiments.synthetic import run_synthetic
    from aflite.features.registry import REGISTRY
    from aflite.report import write_page
    from aflite.runs.audit import audit_file
    from aflite.runs.embed import embed
    from aflite.runs.evaluate import evaluate, evaluate_files
    from aflite.runs.explain import explain
    from aflite.runs.filter import filter_files
    from aflite.runs.run import run

    featurizer = {o for spec in REGISTRY.values() for o in spec.options}
    loaders = _keywords(load_dataset, load_image_dataset)
    run_kw = _keywords(run, AFLite) | loaders | featurizer
    return {
        "run": run_kw,
        "demo": run_kw,
        "filter": _keywords(filter_files, AFLite),
        "embed": _keywords(embed) | loaders | featurizer,
        "audit": _keywords(audit_file, AuditConfig) | loaders | featurizer,
        "evaluate": _keywords(evaluate_files, evaluate, compare_runs, FinetuneOptions) | loaders,
        "explain": _keywords(explain) | loaders | featurizer,
        "card": _keywords(write_card),
        "report": _keywords(write_page),
        "synthetic": _keywords(run_synthetic, save_synthetic, AFLite),
        "bench": _keywords(run_benchmark, scale_benchmark, embed_benchmark, save_bench, device_benchmark),
    }


# Flags that are not a library keyword on purpose (keep this short; each says why).
CLI_ONLY = {
    "quiet",      # the negation of every library function's show_progress=
    "threads",    # the process's thread budget (aflite.threads, as AFLITE_NUM_THREADS), set around the call
    "overwrite",  # the CLI claims --out before the call (RunFolder.claim); a keyword where one exists
    "json",       # how the CLI prints the result
    "open",       # report: open the page in a browser afterwards
}
PER_COMMAND = {
    "filter": {
        "seed",             # AFLite's random_state (scikit-learn's name); --seed is the one seed of every command
    },
    "bench": {
        "embed",       # --embed MODEL selects the encoder benchmark: embed_benchmark(model=MODEL)
        "embed_data",  # its dataset: embed_benchmark(data=)
    },
}


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_command_is_covered() -> None:
    assert set(_library()) == set(COMMANDS) == set(_commands())


@pytest.mark.parametrize("command", COMMANDS)
def test_flags_are_library_keywords(command: str) -> None:
    keywords = _library()[command]
    allowed = CLI_ONLY | PER_COMMAND.get(command, set())
    wrong = []
    for action in _commands()[command]._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        long = [o for o in action.option_strings if o.startswith("--") and not o.startswith("--no-")]
        if [f"--{action.dest.replace('_', '-')}"] != (long or [f"-{o}" for o in action.option_strings]):  # or -C
            wrong.append(f"{'/'.join(action.option_strings)}: its name is not its keyword {action.dest!r}")
        if action.dest not in keywords and action.dest not in allowed:
            wrong.append(f"{'/'.join(action.option_strings)}: {action.dest!r} is no keyword of the library call")
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
    for command, names in PER_COMMAND.items():
        dests = {a.dest for a in commands[command]._actions if a.option_strings}
        assert names <= dests and not names & library[command], command
    every = {a.dest for p in commands.values() for a in p._actions if a.option_strings}
    assert CLI_ONLY <= every
