"""One conformance suite over every registered check, featurizer and command (the way scikit-learn's
``parametrize_with_checks`` runs one list of checks over every estimator): a new entry of a registry is held to
the same rules as the built-in ones without any list of names to extend, and no test pins which names exist."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from aflite import check
from aflite.cli import build_parser, command_modules
from aflite.cli import explain as cli_explain
from aflite.features import registry
from aflite.option import DERIVED, Option, constructor_default
from aflite.rundir.commands import COMMANDS, load, result_class
from aflite.rundir.page import page_class
from aflite.rundir.schema import body_class

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ checks
@pytest.mark.parametrize("name", list(check.CHECKS))
def test_every_check_conforms(name: str) -> None:
    """Each registered check: its entry names its class, of a known scope, with a ``find`` of its own, options that
    are typed, documented and whose defaults pass their own rules, and an instance built from those defaults."""
    cls = check._check_class(name)
    assert cls.name == name and cls.scope in check.SCOPES and cls.find is not check.Check.find
    assert name in check.check_names(cls.scope)
    for option in cls.options:
        assert isinstance(option, Option) and option.help, (name, option.name)
        assert option.default is not DERIVED, (name, option.name)  # a check states its defaults on its options
        assert option.value(f"{name}:{option.name}", option.default) == option.default, (name, option.name)
    instance = check.get_check(name)
    assert set(instance.params) == {o.name for o in cls.options}


@pytest.mark.parametrize("alias", list(cli_explain.ALIAS_FLAGS))
def test_every_alias_flag_is_the_checks_own_option(alias: str) -> None:
    """explain's literal alias table (building its parser imports no check) says what the checks' own
    ``alias=`` declarations say: the same options set, in registry order, and the first one's type, default, help
    and choices as its flag shows them."""
    from aflite.commands.explain import check_aliases

    declared = check_aliases()
    assert set(declared) == set(cli_explain.ALIAS_FLAGS)
    targets, shown = cli_explain.ALIAS_FLAGS[alias]
    assert targets == tuple(f"{c}:{o}" for c, o in declared[alias])
    first_check, first_option = declared[alias][0]
    real = next(o for o in check.check_options(first_check) if o.name == first_option)
    assert (shown.name, shown.type, shown.default, shown.help, shown.choices) == \
        (real.name, real.type, real.default, real.help, real.choices)


# ------------------------------------------------------------------ featurizers
@pytest.mark.parametrize("name", list(registry.REGISTRY))
def test_every_featurizer_conforms(name: str) -> None:
    """Each registered featurizer: a known modality, commands that exist, options that are declared, a class that
    imports and takes them, and the defaults ``--help`` shows equal to the constructor's (a built-in states them
    on its spec, so that ``--help`` imports no featurizer)."""
    spec = registry.REGISTRY[name]
    assert spec.name == name and spec.modality in registry.MODALITIES and spec.help
    assert set(spec.commands) <= set(COMMANDS), name
    assert all(o in registry.OPTIONS or o in registry.COMMAND_OPTIONS for o in spec.options), name
    cls = spec.cls()
    params = inspect.signature(cls).parameters
    for option in (*spec.options, *(k for k, _ in spec.preset), *spec.context):
        assert option in params, (name, option)  # each option, preset and context keyword is the constructor's
    for option, value in spec.defaults:
        assert value == constructor_default(cls, option) and option in spec.options, (name, option)
    for option in spec.options:
        if option in registry.OPTIONS and option not in dict(spec.preset):
            assert spec.default(option) == constructor_default(cls, option), (name, option)
    for option in getattr(cls, "param_options", ()):  # its rules pass its own defaults
        option.value(option.name, constructor_default(cls, option.name))


@pytest.mark.parametrize("name", list(registry.OPTIONS))
def test_every_featurizer_option_conforms(name: str) -> None:
    """Each declared featurizer option: documented, offered by some command, and taken by some featurizer."""
    option = registry.OPTIONS[name]
    assert option.name == name and option.help
    assert registry.takers(name) and registry.option_commands(option), name


# ------------------------------------------------------------------ commands
@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_conforms(name: str, capsys: Any) -> None:
    """Each declared command: its CLI module (``COMMAND``, ``LIBRARY`` headed by its library call, ``register``),
    its library function, its Result (whose page ``aflite report`` rebuilds) and body, its guide, and a
    ``--help`` that prints."""
    command = COMMANDS[name]
    module = command_modules()[name]
    assert module.COMMAND is command and module.LIBRARY[0] == command.library and callable(module.register)
    assert callable(load(command.library))
    assert (ROOT / "docs" / "guide" / f"{name}.md").is_file(), name
    cls = result_class(name)
    if cls is not None and cls.has_page:
        assert page_class(name) is cls
    if command.body is not None:
        assert body_class(name) is load(command.body) and name in body_class(name).commands
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([name, "--help"])
    assert done.value.code == 0 and f"usage: aflite {name}" in capsys.readouterr().out
