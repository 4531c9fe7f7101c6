"""The one-release shims for renamed flags and keywords (CHANGELOG.md): the old spelling still works, says so, and
means the same as the new one."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("command, old, new", [
    ("filter", "--partitions", "--n-partitions"), ("filter", "--tau", "--threshold"),
    ("filter", "--label-column", "--label"), ("run", "--no-groups", "--groups none"),
    ("synthetic", "--partitions", "--n-partitions"), ("synthetic", "--tau", "--threshold"),
    ("audit", "--folds", "--n-folds"), ("audit", "--pca", "--n-components"), ("audit", "--clusters", "--n-clusters"),
    ("audit", "--peco-threshold", "--bias-threshold"), ("audit", "--top-tokens", "--top-k-tokens"),
    ("run", "--cache", "--cache-dir"), ("audit", "--cache", "--cache-dir"), ("evaluate", "--cache", "--cache-dir"),
    ("run", "--id", "--id-column"), ("filter", "--id", "--id-column"), ("evaluate", "--split-seed", "--seed"),
    ("evaluate", "--no-random", "--no-random-baseline"), ("evaluate", "--no-single", "--no-single-iteration"),
    ("bench", "--solver", "--solvers"), ("bench", "--complete-solver", "--complete-solvers"),
    ("bench", "--classes", "--n-classes"), ("bench", "--embed-items", "--n-items"),
    ("bench", "--embed-rounds", "--rounds"),
])
def test_old_flag_spellings_parse_as_the_new_ones_and_say_so(command: str, old: str, new: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """An old spelling sets the same keyword as the new one, prints one deprecation line, and is listed as
    deprecated in --help (hence in the generated guide); see CHANGELOG.md."""
    from aflite.cli import build_parser

    parser = build_parser()
    required = {"filter": ["--features", "f", "--labels", "l", "--out", "o"], "run": ["d", "--out", "o"],
                "synthetic": [], "audit": ["d"], "evaluate": ["d", "r", "--out", "o"], "bench": []}[command]
    value = ([] if old in ("--no-groups", "--no-random", "--no-single")
             else ["gold"] if old in ("--label-column", "--id")
             else ["0.5"] if old in ("--tau", "--peco-threshold") else ["both"] if "solver" in old
             else ["c"] if old == "--cache" else ["3"])
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


def _old_keyword(call, match: str):  # type: ignore[no-untyped-def]
    with pytest.warns(DeprecationWarning, match=match):
        return call()


def test_renamed_library_keywords_still_work(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Keywords renamed so that they equal the flags: the old name works for one release, with a warning."""
    from aflite.data.images import load_image_dataset
    from aflite.features import PrecomputedFeaturizer
    from aflite.features.registry import current_options
    from aflite.runs.filter import filter_files

    rng = np.random.default_rng(0)
    np.save(tmp_path / "X.npy", rng.normal(size=(40, 3)).astype(np.float32))
    (tmp_path / "y.csv").write_text("gold\n" + "\n".join("ab"[i % 2] for i in range(40)) + "\n", encoding="utf-8")
    kw = {"aflite": None, "show_progress": False}
    new = filter_files(tmp_path / "X.npy", tmp_path / "y.csv", tmp_path / "new", label="gold", **kw)
    old = _old_keyword(lambda: filter_files(tmp_path / "X.npy", tmp_path / "y.csv", tmp_path / "old",
                                            label_column="gold", **kw), "filter_files: label_column=.*use label=")
    assert new.summary["size_after"] == old.summary["size_after"]
    assert (tmp_path / "new" / "kept_ids.txt").read_bytes() == (tmp_path / "old" / "kept_ids.txt").read_bytes()

    table = tmp_path / "imgs.csv"
    table.write_text("path,kind\na.png,x\nb.png,y\n", encoding="utf-8")
    from PIL import Image

    for name in ("a.png", "b.png"):
        Image.new("RGB", (4, 4)).save(tmp_path / name)
    ds_old = _old_keyword(lambda: load_image_dataset(table, label_column="kind"),
                          "load_image_dataset: label_column=.*use label=")
    assert load_image_dataset(table, label="kind").labels.tolist() == ds_old.labels.tolist() == ["x", "y"]

    f = _old_keyword(lambda: PrecomputedFeaturizer(path="e.npy", ids_path="i.txt"), "PrecomputedFeaturizer: path=")
    assert f.get_options() == PrecomputedFeaturizer(embeddings="e.npy", embedding_ids="i.txt").get_options() == {
        "embeddings": "e.npy", "embedding_ids": "i.txt"}
    assert _old_keyword(lambda: current_options({"path": "e.npy", "device": "cpu"}), "featurizer_options: path=") \
        == {"embeddings": "e.npy", "device": "cpu"}
    assert current_options({"ids_path": "i.txt"}, warn=False) == {"embedding_ids": "i.txt"}  # an old run folder
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        PrecomputedFeaturizer("e.npy", colour="red")


def test_renamed_keywords_of_commands_still_work(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """embed(cache=), evaluate(split_seed=) and run_benchmark(d=) reach the same checks as the new names."""
    from aflite.errors import InputError, ParameterError
    from aflite.experiments.bench import run_benchmark
    from aflite.runs.embed import embed
    from aflite.runs.evaluate import evaluate

    with pytest.warns(DeprecationWarning, match="run_benchmark: d=.*use dim="), \
            pytest.raises(ParameterError, match="reference-partitions"):
        run_benchmark(n=100, d=8, reference_partitions=-1)
    with pytest.warns(DeprecationWarning, match="evaluate: split_seed=.*use seed="), \
            pytest.raises(ParameterError, match="no models"):
        evaluate(tmp_path / "d.tsv", [], tmp_path / "o", models=[], split_seed=1)
    with pytest.warns(DeprecationWarning, match="embed: cache=.*use cache_dir="), pytest.raises(InputError):
        embed(tmp_path / "missing.tsv", tmp_path / "e", cache=tmp_path / "c", show_progress=False)
