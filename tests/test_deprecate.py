"""The one-release shims for the old progress keywords (``quiet=``, ``progress=``) → ``show_progress``."""

from __future__ import annotations

import warnings

import pytest

from aflite._deprecate import progress_flag
from aflite.errors import ParameterError
from aflite.experiments.synthetic import run_synthetic


def test_progress_flag_maps_old_keywords_with_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new keyword alone warns about nothing
        assert progress_flag(True) is True and progress_flag(False) is False
    with pytest.warns(DeprecationWarning, match="quiet= is deprecated"):
        assert progress_flag(True, quiet=True) is False
    with pytest.warns(DeprecationWarning, match="quiet= is deprecated"):
        assert progress_flag(False, quiet=False) is True
    with pytest.warns(DeprecationWarning, match="progress= is deprecated"):
        assert progress_flag(True, progress=False) is False


def test_public_function_still_takes_the_old_keyword() -> None:
    with pytest.warns(DeprecationWarning, match="run_synthetic: progress="), pytest.raises(ParameterError):
        run_synthetic(seeds=[], progress=False)


@pytest.mark.parametrize("command, old, new", [
    ("filter", "--partitions", "--n-partitions"), ("filter", "--tau", "--threshold"),
    ("filter", "--label-column", "--label"), ("run", "--no-groups", "--groups none"),
    ("synthetic", "--partitions", "--n-partitions"), ("synthetic", "--tau", "--threshold"),
    ("audit", "--folds", "--n-folds"), ("audit", "--pca", "--n-components"), ("audit", "--clusters", "--n-clusters"),
    ("audit", "--peco-threshold", "--bias-threshold"), ("audit", "--top-tokens", "--top-k-tokens"),
])
def test_old_flag_spellings_parse_as_the_new_ones_and_say_so(command: str, old: str, new: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """An old spelling sets the same keyword as the new one, prints one deprecation line, and is listed as
    deprecated in --help (hence in the generated guide); see CHANGELOG.md."""
    from aflite.cli import build_parser

    parser = build_parser()
    required = {"filter": ["--features", "f", "--labels", "l", "--out", "o"], "run": ["d", "--out", "o"],
                "synthetic": [], "audit": ["d"]}[command]
    value = [] if old == "--no-groups" else ["gold"] if old == "--label-column" else ["0.5"] if old in (
        "--tau", "--peco-threshold") else ["3"]
    new_flag, *new_value = new.split()
    args_old = parser.parse_args([command, *required, old, *value])
    assert capsys.readouterr().err.strip() == f"aflite: {old} is deprecated and will be removed in the next release; " \
        f"use {new}"
    args_new = parser.parse_args([command, *required, new_flag, *(new_value or value)])
    assert capsys.readouterr().err == ""
    assert vars(args_old) == vars(args_new)
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    assert f"deprecated spelling of {new}" in " ".join(sub.format_help().split())


def test_load_dataset_old_keywords_format_and_id_still_work(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """format= and id= shadowed built-ins; they are file_format= and id_column= now (the old names warn)."""
    from aflite.data import load_dataset

    p = tmp_path / "d.txt"
    p.write_text("uid\tq\ty\nu1\thello\ta\nu2\tworld\tb\n", encoding="utf-8")
    new = load_dataset(p, file_format="tsv", text_a="q", label="y", id_column="uid")
    with pytest.warns(DeprecationWarning, match="load_dataset: format= is deprecated.*use file_format="):
        old = load_dataset(p, format="tsv", text_a="q", label="y", id_column="uid")
    with pytest.warns(DeprecationWarning, match="load_dataset: id= is deprecated.*use id_column="):
        old2 = load_dataset(p, file_format="tsv", text_a="q", label="y", id="uid")
    assert new.ids.tolist() == old.ids.tolist() == old2.ids.tolist() == ["u1", "u2"]
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        load_dataset(p, colour="red")
