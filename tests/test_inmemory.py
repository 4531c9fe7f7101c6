"""In-memory data (aflite.data.memory, its branch in aflite.data.open_dataset): a pandas DataFrame, a pyarrow Table
and a datasets.Dataset go through aflite.run (and embed, audit_file, explain, evaluate) as a file does, and come back
filtered in their own type, with the file route's kept ids."""

from __future__ import annotations

import csv
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from quick_checks import quick_checks

import aflite
from aflite import data
from aflite.errors import InputError, ParameterError

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
hf = pytest.importorskip("datasets")

# small and fast: a 64-dimension n-gram Φ, 8 models per phase, stop at 60 % of |D|; no probe (its own tests)
KW: dict[str, Any] = {"params": {"target_size": 0.6, "n_partitions": 8, "random_state": 0},
                      "featurizer_options": {"n_components": 64}, "show_progress": False, "probe": False}
FOLDER_FILES = {"filtered.parquet", "kept_ids.txt", "removed_ids.txt", "instances.csv",
                "results.json", "summary.md", "report.html", "checkpoint.npz"}


def read_demo() -> Any:
    """The bundled sample as a notebook user reads it: every column a string, nothing turned into NaN."""
    return pd.read_csv(data.demo_dataset_path(), sep="\t", quoting=csv.QUOTE_NONE, keep_default_na=False,
                       dtype=str)


def as_kind(frame: Any, kind: str) -> Any:
    if kind == "DataFrame":
        return frame
    table = pa.Table.from_pandas(frame, preserve_index=False)
    return table if kind == "Table" else hf.Dataset(table)


@pytest.fixture(scope="module")
def file_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The file route on the bundled sample: its run folder."""
    out = tmp_path_factory.mktemp("inmem") / "file_run"
    aflite.run(data.demo_dataset_path(), out, **KW)
    return out


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split()


@pytest.mark.parametrize("kind", ["DataFrame", "Table", "Dataset"])
def test_each_type_comes_back_filtered_in_its_own_type_with_the_file_routes_kept_ids(file_run: Path,
                                                                                       kind: str) -> None:
    frame = read_demo()
    given = as_kind(frame, kind)
    res = aflite.run(given, **KW)
    kept = res.filtered
    assert type(kept) is type(given)
    ids = list(kept["id"]) if kind != "Table" else kept.column("id").to_pylist()
    assert ids == lines(file_run / "kept_ids.txt")  # the same rows, in the same order
    file_results = json.loads((file_run / "results.json").read_text(encoding="utf-8"))
    assert res.verdict == file_results["verdict"] and res.verdict
    scores = res.scores
    assert list(scores.columns) == ["id", "label", "kept", "predictability", "removed_at"]
    inst = pd.read_csv(file_run / "instances.csv", dtype={"id": str, "label": str})
    assert scores["id"].tolist() == inst["id"].tolist() and scores["label"].tolist() == inst["label"].tolist()
    assert scores["kept"].astype(int).tolist() == inst["kept"].tolist()
    assert scores["removed_at"].tolist() == inst["removed_at"].tolist()
    assert np.allclose(scores["predictability"], inst["predictability"], atol=1e-6, equal_nan=True)
    if kind == "Table":
        assert kept.schema == given.schema
    elif kind == "Dataset":
        assert kept.features == given.features
    else:
        assert list(kept.columns) == list(frame.columns) and (kept.dtypes == frame.dtypes).all()
        assert kept.index.equals(frame.index[frame["id"].isin(ids)])


def typed_frame() -> Any:
    """The sample without its id column, a string index (the ids) and columns of other dtypes besides the texts."""
    frame = read_demo().head(600)
    frame.index = pd.Index([f"ex-{i}" for i in frame["id"]], name="pair")
    frame = frame.drop(columns="id")
    frame["n_words"] = frame["hypothesis"].str.split().str.len().astype("int32")
    frame["score"] = np.linspace(0, 1, len(frame))
    frame["genre"] = pd.Categorical(["a", "b", "c"] * (len(frame) // 3))
    return frame[["genre", "premise", "n_words", "hypothesis", "label", "score"]]


def test_a_dataframes_index_is_its_ids_and_index_order_and_dtypes_round_trip(tmp_path: Path) -> None:
    frame = typed_frame()
    res = aflite.run(frame, tmp_path / "run", **KW)
    kept = res.filtered
    assert kept.index.name == "pair" and kept.index.isin(frame.index).all()
    assert list(kept.index) == [i for i in frame.index if i in set(kept.index)]  # the frame's order
    assert list(kept.columns) == list(frame.columns) and (kept.dtypes == frame.dtypes).all()
    pd.testing.assert_frame_equal(kept, frame.loc[kept.index])
    assert res.scores.index.equals(frame.index) and res.scores["id"].tolist() == list(frame.index)
    assert lines(tmp_path / "run" / "kept_ids.txt") == list(kept.index)
    back = pd.read_parquet(tmp_path / "run" / "filtered.parquet")  # the folder's copy: index and dtypes too
    pd.testing.assert_frame_equal(back, kept)
    # id_column may name the index; an integer index numbers the rows (row-<n>), as a file's rows are numbered
    same = aflite.run(frame, dataset_options={"id_column": "pair"}, **KW)
    assert same.scores["id"].tolist() == list(frame.index)
    sliced = read_demo().drop(columns="id").iloc[100:700]
    assert aflite.run(sliced, **KW).scores["id"].tolist() == [f"row-{i}" for i in range(100, 700)]


def test_without_an_id_column_a_default_index_gives_the_file_routes_ids(tmp_path: Path) -> None:
    frame = read_demo().drop(columns="id").head(900)
    path = tmp_path / "noid.tsv"
    frame.to_csv(path, sep="\t", index=False, quoting=csv.QUOTE_NONE)
    aflite.run(path, tmp_path / "file", **KW)
    res = aflite.run(frame, **KW)
    assert res.scores["id"].tolist() == [f"row-{i}" for i in range(len(frame))]
    kept_ids = res.scores.loc[res.scores["kept"], "id"].tolist()
    assert kept_ids == lines(tmp_path / "file" / "kept_ids.txt") and kept_ids[0].startswith("row-")
    assert res.filtered.index.tolist() == [int(i.removeprefix("row-")) for i in kept_ids]


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_out_none_writes_nothing_and_cache_dir_only_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cwd, tmpdir = tmp_path / "cwd", tmp_path / "tmpdir"
    cwd.mkdir()
    tmpdir.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    assert tempfile.gettempdir() == str(tmpdir)
    frame = read_demo().head(900)
    res = aflite.run(frame, **KW)
    assert res.out is None and res.filtered_path is None and len(res.filtered) == int(res.keep.sum())
    assert res.summary["filtered_dataset"] is None and res.summary["dataset"] == "in-memory pandas DataFrame"
    assert listing(cwd) == [] and listing(tmpdir) == []
    cached = aflite.run(frame, cache_dir=tmp_path / "cache", **KW)
    assert listing(cwd) == [] and listing(tmpdir) == [] and listing(tmp_path / "cache")
    assert cached.filtered.equals(res.filtered)
    with pytest.raises(ParameterError, match="need a run folder"):
        aflite.run(frame, resume=True, **KW)
    from_file = aflite.run(data.demo_dataset_path(), **KW)  # a file without out: the same, and filtered is None
    assert from_file.filtered is None and from_file.filtered_path is None and len(from_file.scores) > len(frame)
    assert listing(cwd) == [] and listing(tmpdir) == []


def test_out_writes_the_usual_folder_with_a_rows_hash_and_a_card(tmp_path: Path) -> None:
    frame = read_demo().head(900)
    res = aflite.run(frame, tmp_path / "run", **KW)
    assert FOLDER_FILES <= set(os.listdir(tmp_path / "run"))
    assert res.filtered_path == tmp_path / "run" / "filtered.parquet"
    pd.testing.assert_frame_equal(pd.read_parquet(res.filtered_path), res.filtered)
    results = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    assert results["dataset"] == "in-memory pandas DataFrame" and results["dataset_sha256_of"] == "rows"
    assert "dataset_relative" not in results
    # the same rows hash alike in every type; another row changes the hash
    table = aflite.run(as_kind(frame, "Table"), tmp_path / "table", **KW)
    assert table.summary["dataset_sha256"] == results["dataset_sha256"]
    assert pa.parquet.read_table(table.filtered_path).equals(table.filtered)
    changed = frame.copy()
    changed.loc[3, "hypothesis"] = "A different sentence."
    other = data.memory.rows_sha256(data.open_dataset(changed))
    assert other != results["dataset_sha256"]
    card = aflite.write_card(tmp_path / "run", tmp_path / "card", license="mit")
    readme = (tmp_path / "card" / "README.md").read_text(encoding="utf-8")
    assert results["dataset_sha256"] in readme and "filtered.parquet" in readme
    assert card.manifest["input"]["sha256"] == results["dataset_sha256"]
    # issue #59, 6: the card was named "in-memory pandas DataFrame" and said "from given (--license)"
    assert "\n# Rows of a pandas DataFrame, AFLite-filtered (Φ ngram, pair)\n" in readme
    assert "**Source:** a pandas DataFrame given to `aflite.run` (no file):" in readme
    assert "in-memory pandas DataFrame" not in readme and "from given" not in readme
    assert "- **License:** `mit`, as given (`--license`; `license=` in Python)." in readme
    aflite.run(frame, tmp_path / "titled", title="My NLI rows", **KW)
    aflite.write_card(tmp_path / "titled", tmp_path / "titled_card")
    assert "\n# My NLI rows, AFLite-filtered (Φ ngram, pair)\n" in (tmp_path / "titled_card" / "README.md").read_text(
        encoding="utf-8")


def test_a_datasets_dataset_keeps_its_class_labels(tmp_path: Path) -> None:
    frame = read_demo().head(900)
    names = sorted(set(frame["label"]))
    features = hf.Features({"id": hf.Value("string"), "premise": hf.Value("string"),
                            "hypothesis": hf.Value("string"), "label": hf.ClassLabel(names=names)})
    given = hf.Dataset.from_dict({**{c: frame[c].tolist() for c in ("id", "premise", "hypothesis")},
                                  "label": [names.index(v) for v in frame["label"]]}, features=features)
    res = aflite.run(given, tmp_path / "run", **KW)
    assert set(res.scores["label"]) == set(names)  # ClassLabel ints read as their names
    assert res.filtered.features == features and len(res.filtered) == int(res.keep.sum())
    back = hf.Dataset.from_parquet(str(res.filtered_path))
    assert back.features == features and back["id"] == res.filtered["id"]


def test_rows_without_a_gold_label_are_dropped_and_the_kept_rows_still_line_up(tmp_path: Path) -> None:
    """SNLI's '-' (a DataFrame) and -1 (a datasets.Dataset) are dropped on load as in a file; the kept rows taken
    from the caller's object are still the rows the filter kept."""
    frame = read_demo().head(600)
    frame.loc[frame.index[::7], "label"] = "-"
    res = aflite.run(frame, **KW)
    assert res.dataset.n_dropped == len(frame.index[::7]) and "-" not in set(res.filtered["label"])
    assert res.filtered["id"].tolist() == res.scores.loc[res.scores["kept"], "id"].tolist()
    pd.testing.assert_frame_equal(res.filtered, frame.loc[res.scores.index[res.scores["kept"]]])
    names = sorted(set(frame["label"]) - {"-"})
    given = hf.Dataset.from_dict({**{c: frame[c].tolist() for c in ("id", "premise", "hypothesis")},
                                  "label": [names.index(v) if v != "-" else -1 for v in frame["label"]]})
    ds_res = aflite.run(given, **KW, dataset_options={"label_map": dict(enumerate(names))})
    assert ds_res.filtered["id"] == res.filtered["id"].tolist()


def test_bad_input_is_refused_in_one_line_naming_the_column(tmp_path: Path) -> None:
    frame = read_demo().head(300)
    with pytest.raises(InputError, match="missing column 'nope'.*given by"):
        aflite.run(frame, dataset_options={"text_a": "nope"}, **KW)
    with pytest.raises(ParameterError, match="pandas DataFrame, a pyarrow Table or a datasets.Dataset, not list"):
        aflite.run([1, 2, 3], **KW)
    numbers = frame.assign(premise=range(len(frame)))
    with pytest.raises(InputError, match=r"in-memory pandas DataFrame: row 0, column 'premise': text must be a "
                                         r"string, got int"):
        aflite.run(numbers, **KW)
    nan = frame.assign(label=[np.nan] + frame["label"].tolist()[1:])
    with pytest.raises(InputError, match=r"row 0, column 'label': missing label \(NaN\)"):
        aflite.run(nan, **KW)
    missing_text = frame.assign(hypothesis=[None] + frame["hypothesis"].tolist()[1:])
    with pytest.raises(InputError, match=r"row 0, column 'hypothesis': missing text"):
        aflite.run(missing_text, **KW)
    with pytest.raises(InputError, match=r"cannot tell which column holds the text; the pandas DataFrame has "
                                         r"columns 'id', 'a', 'b'"):  # not "the file" (issue #59, 6)
        aflite.run(frame.rename(columns={"premise": "a", "hypothesis": "b"}), **KW)
    with pytest.raises(InputError, match=r"missing column 'gold' \(given by label=\); the pandas DataFrame has: "):
        aflite.run(frame, label="gold", **KW)
    dup = frame.set_index(pd.Index(["x"] * len(frame))).drop(columns="id")
    with pytest.raises(InputError, match="duplicate id 'x'"):
        aflite.run(dup, **KW)
    mixed = frame.assign(extra=[1, "a"] * (len(frame) // 2))  # Parquet cannot hold it: refused before any work
    with pytest.raises(InputError, match="column 'extra' cannot be written to filtered.parquet"):
        aflite.run(mixed, tmp_path / "mixed", **KW)
    assert not (tmp_path / "mixed").exists()
    assert len(aflite.run(mixed, **KW).filtered) > 0  # without a folder nothing is written: it runs
    with pytest.raises(ParameterError, match="read as text"):
        data.open_dataset(frame, reads="image")


def test_embed_takes_a_dataframe(tmp_path: Path) -> None:
    frame = read_demo().head(300)
    res = aflite.embed(frame, tmp_path / "emb", featurizer="ngram", show_progress=False)
    assert np.load(tmp_path / "emb" / "features.npy").shape[0] == len(frame)
    assert lines(tmp_path / "emb" / "ids.txt") == frame["id"].tolist()
    assert res.body.data == "in-memory pandas DataFrame"


def test_audit_takes_a_dataframe(tmp_path: Path) -> None:
    frame = read_demo().head(600)
    cfg = aflite.AuditConfig(views=("hypothesis",), n_folds=3, featurizer="ngram", n_clusters=6, n_components=5,
                             tsne_sample=0, show_progress=False, tra=False, peco_shuffles=5)
    res = aflite.audit_file(frame, tmp_path / "audit", cfg, show_progress=False)
    assert res.metrics["data"] == "in-memory pandas DataFrame" and res.results[0].n == len(frame)
    assert (tmp_path / "audit" / "report.html").is_file()


def test_explain_and_evaluate_take_the_dataframe_of_a_file_run(file_run: Path, tmp_path: Path) -> None:
    """The DataFrame of the file a run read is that run's data (the same ids, labels and texts: fingerprint)."""
    frame = read_demo()
    ex = aflite.explain_run(frame, file_run, tmp_path / "ex", checks=quick_checks(10),
                            show_progress=False)
    assert ex.body.dataset == "in-memory pandas DataFrame" and ex.body.first_phase is not None
    assert ex.body.first_phase.agreement_with_run == 1.0
    rep = aflite.evaluate_runs(frame, [file_run], None, cache_dir=tmp_path / "cache", models=["ngram:hypothesis"],
                               seeds=1, random_baseline=False, single_iteration=False, show_progress=False)
    assert rep.config["dataset"] == "in-memory pandas DataFrame" and len(rep.training_sets) == 2
    other = frame.assign(label=frame["label"].iloc[::-1].to_numpy())
    with pytest.raises(InputError, match=r"in-memory pandas DataFrame is not the data this run read: 2,020 row\(s\) "
                                         r"carry another label"):
        aflite.evaluate_runs(other, [file_run], None, cache_dir=tmp_path / "cache", models=["ngram:hypothesis"],
                             seeds=1, show_progress=False)
