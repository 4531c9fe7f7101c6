"""The dataset card's YAML front matter (aflite.card.frontmatter, on PyYAML): whatever tree of strings, numbers,
booleans, None, lists and mappings it is given, PyYAML reads back the same tree (YAML 1.1 traps included: "no",
"1e3", "2024-01-01", keys like "on"), on one line per scalar, and it refuses what it cannot write faithfully."""

from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from aflite.card.frontmatter import dump

scalars = (st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.text()
           | st.floats(allow_nan=False, allow_infinity=False))
trees = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner,
                                                                                           max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(), trees, max_size=6))
@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_any_tree_reads_back_the_same(tree: dict) -> None:
    assert yaml.safe_load(dump(tree)) == (tree or {})


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_string_reads_back_the_same(text: str) -> None:
    assert yaml.safe_load(dump({"s": text})) == {"s": text}
    assert yaml.safe_load(dump({"s": text * 40})) == {"s": text * 40}  # long: never folded into a wrong value


def test_yaml_11_traps_stay_strings() -> None:
    tree = {"on": "no", "yes": ["off", "1e3", "0x1F", "2024-01-01", "~", "null", "", " lead", "a: b", "#c", "- d"],
            "1": 1.0, "n": 1e300, "f": -0.0, "Key With Space": {"nested": [[], {}, [1, [2]]]}}
    text = dump(tree)
    assert yaml.safe_load(text) == tree
    assert "\non:" not in "\n" + text and "'on': 'no'" in text  # a key YAML 1.1 reads as a boolean is quoted
    assert isinstance(yaml.safe_load(dump({"x": 2.0}))["x"], float)


def test_the_hub_metadata_shape() -> None:
    text = dump({"license": "cc-by-sa-4.0", "configs": [{"config_name": "default",
                                                         "data_files": [{"split": "train", "path": "f.tsv.gz"}]}]})
    assert text == ("license: cc-by-sa-4.0\nconfigs:\n- config_name: default\n  data_files:\n"
                    "  - split: train\n    path: f.tsv.gz\n")
    long = " ".join(["SNLI sample, AFLite-filtered (Φ minilm, pair)"] * 10)  # one line, Φ as itself (UTF-8)
    assert dump({"pretty_name": long}) == f"pretty_name: {long}\n"


def test_line_breaks_are_escaped_in_double_quotes() -> None:
    text = dump({"n": "a\x85b\u2028c\nd", "k\x85": 1})
    assert text == 'n: "a\\Nb\\Lc\\nd"\n? "k\\N"\n: 1\n'
    assert yaml.safe_load(text) == {"n": "a\x85b\u2028c\nd", "k\x85": 1}


def test_what_it_cannot_write_is_refused() -> None:
    with pytest.raises(ValueError):
        dump({"x": math.nan})
    with pytest.raises(TypeError):
        dump({"x": object()})
    with pytest.raises(TypeError):
        dump({1: "x"})  # type: ignore[dict-item]
