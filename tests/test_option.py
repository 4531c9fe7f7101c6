"""One option class (aflite.option.Option) for featurizers and checks: typed, its default stated once (on a check's
option) or read from the constructor (a featurizer's), a check option's explain alias declared with it."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path

import pytest

from aflite import check
from aflite.cli import build_parser
from aflite.commands.explain import check_aliases, explain
from aflite.errors import ParameterError
from aflite.features import registry
from aflite.features.ngram import NgramFeaturizer
from aflite.option import DERIVED, Option, constructor_default


def test_featurizers_and_checks_declare_options_with_one_class() -> None:
    assert check.Option is Option  # a check is extended with the one option class, under one name
    assert all(type(o) is Option for o in registry.OPTIONS.values())
    assert all(type(o) is Option for name in check.check_names() for o in check.check_options(name))
    assert all(type(o) is Option for o in NgramFeaturizer.param_options)


def test_an_option_is_typed_with_bool_int_float_str_choices_and_path() -> None:
    assert Option("n", int, 1).value("n", 3) == 3
    assert Option("x", float, 1.0).value("x", 2) == 2.0 and isinstance(Option("x", float, 1.0).value("x", 2), float)
    assert Option("p", Path, None).value("p", Path("a") / "b") == str(Path("a") / "b")
    assert Option("p", Path).parse("some/dir") == "some/dir"  # a path stays the string given, as before
    assert Option("b", bool, False).from_text("b", "yes") is True
    with pytest.raises(ParameterError, match="'n' must be an integer, got True"):
        Option("n", int, 1).value("'n'", True)
    with pytest.raises(ParameterError, match="must be one of base, uniform, got 'x'"):
        Option("null", str, "base", choices=("base", "uniform")).value("null", "x")
    with pytest.raises(ParameterError, match="b must be true or false, got 'maybe'"):
        Option("b", bool, False).from_text("b", "maybe")


def test_a_check_option_states_its_default_and_is_refused_without_one() -> None:
    class NoDefault(check.Check):
        name = "no_default"
        options = (Option("k", int, help="x"),)

        def find(self, data: check.CheckData) -> check.CheckResult:
            return check.CheckResult(self.name)

    with pytest.raises(ParameterError, match="check 'no_default': option 'k': a check's option states its default"):
        check.register(NoDefault)
    assert "no_default" not in check.CHECKS


def test_a_featurizers_defaults_are_its_constructors_not_repeated() -> None:
    """The n-gram featurizer declares the rules of its constructor's arguments, not their defaults: each default is
    read from the signature (the scikit-learn way), and every keyword has a declaration."""
    keywords = [p for p in inspect.signature(NgramFeaturizer).parameters if p != "self"]
    assert [o.name for o in NgramFeaturizer.param_options] == keywords
    for option in NgramFeaturizer.param_options:
        assert option.default is DERIVED
        assert constructor_default(NgramFeaturizer, option.name) is not DERIVED
    NgramFeaturizer()._validate()  # the defaults pass their own rules
    for bad, match in (({"n_components": 0}, "n_components must be >= 1, got 0"),
                       ({"svd_fit_rows": 1}, "svd_fit_rows must be >= 2, got 1"),
                       ({"word_ngrams": (3, 1)}, "word_ngrams must be an n-gram range"),
                       ({"min_df": "2"}, "min_df must be an integer, got '2'")):
        with pytest.raises(ParameterError, match=match):
            NgramFeaturizer(**bad)._validate()  # type: ignore[arg-type]
    NgramFeaturizer(svd_fit_rows=None, word_ngrams=[1, 3])._validate()  # None and a list where they were taken


def test_featurizer_flags_show_the_constructors_defaults() -> None:
    """Each featurizer flag's help states its default, derived from the featurizers that take it; where they
    differ, each featurizer's (a featurizer registered in Python included, read from its signature)."""
    def help_of(flag: str) -> str:
        sub = next(a for a in build_parser()._actions if a.dest == "command")
        run = sub.choices["run"]  # type: ignore[attr-defined]
        return " ".join(next(a for a in run._actions if flag in a.option_strings).help.split())

    assert help_of("--max-steps").endswith("(featurizers: warmup; default unset)")
    assert help_of("--model-path").endswith("(featurizers: minilm, warmup, hf-image; default unset)")

    class Mine:
        def __init__(self, model_path: str = "here/model") -> None:
            self.model_path = model_path

    saved = dict(registry.REGISTRY)
    try:
        registry.register(registry.FeaturizerSpec("mine", "text", ("model_path",), ("run",), "mine", factory=Mine))
        assert registry.default_text("model_path") == "default: minilm unset, warmup unset, hf-image unset, " \
                                                        "mine here/model"
        assert help_of("--model-path").endswith("default: minilm unset, warmup unset, hf-image unset, mine here/model)")
    finally:
        registry.REGISTRY.clear()
        registry.REGISTRY.update(saved)


def test_check_aliases_are_declared_with_the_option_they_set() -> None:
    """explain's older flags are the options' ``alias=``: each sets the options that declare it, folded into
    ``explain(checks=...)`` (the keywords of the same names left ``explain()`` in #58)."""
    from aflite.cli import explain as cli_explain
    from aflite.commands.explain import explain_check_options

    aliases = check_aliases()
    assert aliases["min_count"] == (("tokens", "min_count"), ("surrogate", "min_count"),
                                    ("ngram_coefficients", "min_count"))
    assert aliases["random_seeds"] == (("tokens", "random_seeds"), ("label_issues", "permutations"))
    assert not set(aliases) & set(inspect.signature(explain).parameters)
    assert explain_check_options(None, {"min_count": 4, "random_seeds": 2, "alpha": None}) == {
        "tokens": {"min_count": 4, "random_seeds": 2}, "surrogate": {"min_count": 4},
        "ngram_coefficients": {"min_count": 4}, "label_issues": {"permutations": 2}}
    assert set(cli_explain.CLI_ONLY) == {"check", *aliases}  # the flags that are no keyword of explain()
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flags = {a.dest: a for a in sub.choices["explain"]._actions}
    assert set(aliases) <= set(flags)
    alpha = next(o for o in check.check_options("tokens") if o.name == "alpha")
    assert flags["alpha"].help == f"tokens:alpha: {alpha.help} (default {alpha.default})"  # from the declaration
    assert flags["stop_rule"].nargs == 0 and flags["null"].choices == ("base", "uniform")
    for keyword, targets in aliases.items():
        for name, key in targets:
            assert next(o for o in check.check_options(name) if o.name == key).alias == keyword
