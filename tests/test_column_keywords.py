"""The command line's column options as keywords (aflite.data.keywords: ``Columns``, ``with_columns``) on every entry
point that reads a dataset, and run's AFLite sizes as keywords (issue #49 item 3): ``aflite.run(df, text_a="sent_a",
text_b="sent_b", label="gold")`` is what the loader's message tells the user to write, so it must work."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from quick_checks import quick_checks

import aflite
from aflite import data
from aflite.errors import InputError, ParameterError

pd = pytest.importorskip("pandas")

KW: dict[str, Any] = {"featurizer_options": {"n_components": 64}, "show_progress": False, "probe": False}
SIZES: dict[str, Any] = {"target_size": 0.6, "n_partitions": 8}
RENAMED = {"id": "pid", "premise": "sent_a", "hypothesis": "sent_b", "label": "gold"}
COLUMNS = {"text_a": "sent_a", "text_b": "sent_b", "label": "gold", "id_column": "pid"}


def demo(n: int = 400) -> Any:
    frame = pd.read_csv(data.demo_dataset_path(), sep="\t", quoting=csv.QUOTE_NONE, keep_default_na=False, dtype=str)
    return frame.head(n)


def renamed(n: int = 400) -> Any:
    """The sample with columns no detection knows: only the column keywords can read it."""
    return demo(n).rename(columns=RENAMED)


def test_the_message_names_keywords_that_run_takes() -> None:
    """On main the message said ``text_a=`` and ``aflite.run(df, text_a=...)`` was a TypeError."""
    with pytest.raises(InputError, match=r"name it with text_a= \(and text_b=, label=\)"):
        aflite.run(renamed(), **KW, **SIZES)
    by_keyword = aflite.run(renamed(), **COLUMNS, **KW, **SIZES)
    detected = aflite.run(demo(), **KW, **SIZES)
    assert by_keyword.summary["size_after"] == detected.summary["size_after"] < 400
    assert np.array_equal(by_keyword.keep, detected.keep)
    assert list(by_keyword.filtered.columns) == list(RENAMED.values())
    by_dict = aflite.run(renamed(), dataset_options=COLUMNS, **KW, **SIZES)
    assert np.array_equal(by_dict.keep, by_keyword.keep)


def test_run_takes_the_filters_sizes_as_the_cli_names_them() -> None:
    """``--train-size`` is ``train_size=`` (tests/test_cli_keywords.py's rule), as are the other sizes."""
    res = aflite.run(demo(), train_size=0.1, slice_size=7, **KW, **SIZES)
    p = res.summary["parameters"]
    assert (p["train_size"], p["slice_size"], p["n_partitions"]) == (40, 7, 8)
    assert res.summary["overrides"]["train_size"] == 0.1
    same = aflite.run(demo(), params={"train_size": 0.1, "slice_size": 7, **SIZES}, **KW)
    assert np.array_equal(same.keep, res.keep)
    with pytest.raises(ParameterError, match=r"train_size is given twice, train_size=0.1 and "
                                             r"params\['train_size'\]=0.2: give it once"):
        aflite.run(demo(), params={"train_size": 0.2}, train_size=0.1, **KW)
    # an AFLite as params: the keywords set its sizes (on a copy), the same run; a size it sets too is refused
    given = aflite.AFLite(slice_size=7, **SIZES)
    as_estimator = aflite.run(demo(), params=given, train_size=0.1, **KW)
    assert np.array_equal(as_estimator.keep, res.keep) and given.train_size != 0.1
    with pytest.raises(ParameterError, match=r"train_size is given twice, train_size=0.1 and "
                                             r"params.train_size=0.2: give it once"):
        aflite.run(demo(), params=aflite.AFLite(train_size=0.2), train_size=0.1, **KW)


def test_a_column_given_twice_differently_is_refused() -> None:
    with pytest.raises(ParameterError, match=r"text_a is given twice, text_a='sent_a' and "
                                             r"dataset_options\['text_a'\]='x': give it once"):
        aflite.run(renamed(), text_a="sent_a", dataset_options={"text_a": "x"}, **KW)


def _entry_points(tmp: Path) -> dict[str, Callable[..., Any]]:
    """Every public entry point that reads a dataset, called on the renamed sample with ``columns`` as keywords."""
    return {
        "run": lambda **c: aflite.run(renamed(), **KW, **SIZES, **c),
        "embed": lambda **c: aflite.embed(renamed(), tmp / "embed", featurizer="ngram", show_progress=False, **c),
        "audit_file": lambda **c: aflite.audit_file(renamed(), tmp / "audit", show_progress=False, **c),
        "audit_dataset": lambda **c: aflite.audit_dataset(renamed(), show_progress=False, **c),
        "explain_run": lambda **c: aflite.explain_run(renamed(), tmp / "no-run", tmp / "explain", **c),
        "evaluate_runs": lambda **c: aflite.evaluate_runs(renamed(), [], tmp / "evaluate", **c),
    }


ENTRY_POINTS = ("run", "embed", "audit_file", "audit_dataset", "explain_run", "evaluate_runs")


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_every_entry_point_refuses_an_unknown_keyword_as_python_does(name: str, tmp_path: Path) -> None:
    """``**columns`` must not swallow a typo: a TypeError naming it, and no folder left behind."""
    with pytest.raises(TypeError, match=r"got an unexpected keyword argument 'txt_a'"):
        _entry_points(tmp_path)[name](txt_a="sent_a")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", [n for n in ENTRY_POINTS if n != "explain_run"])  # explain reads the run first
def test_every_entry_point_hands_the_column_keywords_to_the_loader(name: str, tmp_path: Path) -> None:
    """A column keyword reaches the loader: a column that does not exist is named as the keyword that gave it."""
    with pytest.raises(InputError, match=r"missing column 'nope' \(given by text_a=\)"):
        _entry_points(tmp_path)[name](**{**COLUMNS, "text_a": "nope"})


@pytest.mark.slow  # four commands on 400 rows: about 8 s on 2 cores
def test_embed_audit_explain_and_evaluate_read_the_renamed_columns(tmp_path: Path) -> None:
    run = aflite.run(renamed(), tmp_path / "run", **COLUMNS, **KW, **SIZES)
    assert run.summary["dataset_options"] == COLUMNS  # the page and card read the rows back with them
    emb = aflite.embed(renamed(), tmp_path / "embed", featurizer="ngram", show_progress=False, **COLUMNS)
    assert emb.body.rows == 400
    assert (tmp_path / "embed" / "ids.txt").read_text().split() == demo()["id"].tolist()
    cfg = aflite.AuditConfig(views=("hypothesis",), n_folds=3, featurizer="ngram", n_clusters=6, n_components=5,
                             tsne_sample=0, show_progress=False, tra=False, peco_shuffles=5)
    audited = aflite.audit_dataset(renamed(), config=cfg, **COLUMNS)
    assert audited.n == 400
    with pytest.raises(ParameterError, match="this Dataset has been read already"):
        aflite.audit_dataset(data.open_dataset(demo()), config=cfg, text_a="premise")
    ex = aflite.explain_run(renamed(), tmp_path / "run", tmp_path / "ex", checks=quick_checks(10),
                            show_progress=False, **COLUMNS)
    assert ex.body.first_phase is not None and ex.body.first_phase.agreement_with_run == 1.0
    rep = aflite.evaluate_runs(renamed(), [tmp_path / "run"], None, cache_dir=tmp_path / "cache",
                               models=["ngram:hypothesis"], seeds=1, random_baseline=False, single_iteration=False,
                               show_progress=False, **COLUMNS)
    assert len(rep.training_sets) == 2


def test_messages_name_only_options_that_exist_where_they_are_read(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """label_map has no flag: the command line's message says so instead of naming a flag it does not have, and
    the library's names the keyword that run takes."""
    from aflite.cli import main

    rows = [("a cat sits", "a cat", "entailment"), ("a dog runs", "a dog", "Entailment "), ("x", "y", "neutral")] * 6
    path = tmp_path / "d.csv"
    path.write_text("premise,hypothesis,label\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows), encoding="utf-8")
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "write them alike in the file" in err and "label_map" not in err and "--label-map" not in err
    with pytest.raises(InputError, match=r"map them with label_map=$"):
        aflite.run(path, **KW)
    res = aflite.run(path, label_map={"entailment": "entailment", "Entailment ": "entailment", "neutral": "neutral"},
                     **KW, **SIZES)  # the keyword the message names exists
    assert set(res.labels) == {"entailment", "neutral"}
