"""Tests of aflite.data: feature/label/id loading, text datasets in every format, write-back, errors, demo."""

from __future__ import annotations

import gzip
import json
import re
import sys
import types
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aflite.data import (
    Dataset,
    check_aligned,
    demo_dataset_path,
    encode_labels,
    load_dataset,
    load_features,
    load_ids,
    load_labels,
    write_filtered,
)
from aflite.errors import InputError, ParameterError

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def needs_shared(fn):
    """Tests that read the real data in ../shared/data: marked, and skipped where the folder is absent."""
    fn = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is absent")(fn)
    return pytest.mark.shared_data(fn)


def gz(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data))
    return path


def raw_lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


# ============================================================================================ features
def test_features_npy_float32_and_mmap(tmp_path):
    X = np.arange(12, dtype=np.float64).reshape(4, 3)
    np.save(tmp_path / "x.npy", X)
    got = load_features(tmp_path / "x.npy")
    assert got.dtype == np.float32 and np.array_equal(got, X)
    np.save(tmp_path / "x32.npy", X.astype(np.float32))
    mm = load_features(tmp_path / "x32.npy", mmap=True)
    assert isinstance(mm, np.memmap) and np.array_equal(mm, X)
    got64 = load_features(tmp_path / "x.npy", mmap=True)
    assert got64.dtype == np.float32 and np.array_equal(got64, X)


def test_features_csv_numeric_columns_skip_id_and_label(tmp_path):
    p = tmp_path / "f.csv"
    p.write_text('id,a,label,b,name\n7,1.5,0,2,"x, y"\n8,-3,1,4e2,z\n')
    X = load_features(p)
    assert X.dtype == np.float32
    assert np.array_equal(X, np.array([[1.5, 2], [-3, 400]], np.float32))
    assert np.array_equal(load_features(p, columns=["b", "id"]), np.array([[2, 7], [400, 8]], np.float32))


def test_features_tsv(tmp_path):
    p = tmp_path / "f.tsv"
    p.write_text("a\tb\n1\t2\n3\t4\n")
    assert np.array_equal(load_features(p), [[1, 2], [3, 4]])


def test_features_csv_gz(tmp_path):
    p = gz(tmp_path / "f.csv.gz", b"a,b\n1,2\n")
    assert np.array_equal(load_features(p), [[1, 2]])


def test_features_parquet_scalar_and_list_columns(tmp_path):
    t = pa.table({"id": ["a", "b"], "x": [1.0, 2.0], "y": pa.array([3, 4], pa.int32())})
    pq.write_table(t, tmp_path / "s.parquet")
    assert np.array_equal(load_features(tmp_path / "s.parquet"), [[1, 3], [2, 4]])
    emb = pa.table({"id": [1, 2], "embedding": [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]})
    pq.write_table(emb, tmp_path / "e.parquet")
    X = load_features(tmp_path / "e.parquet")
    assert X.shape == (2, 3) and np.allclose(X, [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    fixed = pa.table({"embedding": pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32(), 2))})
    pq.write_table(fixed, tmp_path / "f.parquet")
    assert np.array_equal(load_features(tmp_path / "f.parquet", columns=["embedding"]), [[1, 2], [3, 4]])


def test_features_parquet_ragged_list_names_row(tmp_path):
    pq.write_table(pa.table({"embedding": [[1.0, 2.0], [3.0]]}), tmp_path / "r.parquet")
    with pytest.raises(InputError, match=r"r\.parquet: row 1, column 'embedding': list of length 1"):
        load_features(tmp_path / "r.parquet")


def test_features_missing_file(tmp_path):
    with pytest.raises(InputError, match=r"nope\.npy: no such file"):
        load_features(tmp_path / "nope.npy")


def test_features_truncated_npy(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((50, 8), np.float32))
    data = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"t\.npy: unreadable or truncated \.npy"):
        load_features(tmp_path / "t.npy")
    with pytest.raises(InputError, match=r"t\.npy: unreadable or truncated \.npy"):
        load_features(tmp_path / "t.npy", mmap=True)
    (tmp_path / "h.npy").write_bytes(data[:5])
    with pytest.raises(InputError, match=r"h\.npy"):
        load_features(tmp_path / "h.npy")


def test_features_object_npy_refused(tmp_path):
    np.save(tmp_path / "o.npy", np.array([[1, "a"]], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match=r"o\.npy: .*dtype=object.*refused"):
        load_features(tmp_path / "o.npy")


def test_features_corrupt_parquet(tmp_path):
    pq.write_table(pa.table({"x": [1.0, 2.0]}), tmp_path / "ok.parquet")
    data = (tmp_path / "ok.parquet").read_bytes()
    (tmp_path / "bad.parquet").write_bytes(data[: len(data) - 20])
    with pytest.raises(InputError, match=r"bad\.parquet: unreadable or corrupt Parquet"):
        load_features(tmp_path / "bad.parquet")


def test_features_non_numeric_names_line_and_column(tmp_path):
    p = tmp_path / "f.csv"
    p.write_text("a,b\n1,2\n3,oops\n")
    with pytest.raises(InputError, match=r"f\.csv: line 3, column 'b': non-numeric value 'oops'"):
        load_features(p)
    p.write_text("a,b\n1,2\n3,\n")
    with pytest.raises(InputError, match=r"line 3, column 'b': non-numeric value ''"):
        load_features(p)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_features_nan_inf_name_row_and_column(tmp_path, bad):
    X = np.zeros((5, 4), np.float32)
    X[3, 2] = bad
    np.save(tmp_path / "x.npy", X)
    with pytest.raises(InputError, match=r"x\.npy: row 3, column 2: .*finite"):
        load_features(tmp_path / "x.npy")
    with pytest.raises(InputError, match=r"row 3, column 2"):
        load_features(tmp_path / "x.npy", mmap=True)


def test_features_nan_in_csv_names_column(tmp_path):
    p = tmp_path / "f.csv"
    p.write_text("a,b\n1,2\nnan,3\n")
    with pytest.raises(InputError, match=r"f\.csv: row 1, column 'a'"):
        load_features(p)


def test_features_not_2d_and_zero_rows(tmp_path):
    np.save(tmp_path / "v.npy", np.ones(4))
    with pytest.raises(InputError, match=r"v\.npy: .*2-D.*\(4,\)"):
        load_features(tmp_path / "v.npy")
    np.save(tmp_path / "z.npy", np.ones((0, 3)))
    with pytest.raises(InputError, match=r"z\.npy: no rows"):
        load_features(tmp_path / "z.npy")
    (tmp_path / "h.csv").write_text("a,b\n")
    with pytest.raises(InputError, match=r"h\.csv: no rows"):
        load_features(tmp_path / "h.csv")


def test_features_named_column_missing_lists_columns(tmp_path):
    p = tmp_path / "f.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match=r"f\.csv: missing column 'c'; the file has: 'a', 'b'"):
        load_features(p, columns=["c"])


def test_features_wrong_field_count(tmp_path):
    p = tmp_path / "f.csv"
    p.write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(InputError, match=r"f\.csv: line 3: 3 fields, but the header has 2"):
        load_features(p)


# ====================================================================================== labels and ids
def test_labels_from_every_format(tmp_path):
    np.save(tmp_path / "y.npy", np.array([2, 0, 1]))
    (tmp_path / "y.csv").write_text("id,label\na,cat\nb,dog\nc,cat\n")
    (tmp_path / "y.tsv").write_text("label\tx\n1\tq\n0\tr\n")
    (tmp_path / "y.txt").write_text("pos\nneg\n")
    (tmp_path / "y.jsonl").write_text('{"label": "a"}\n{"label": "b"}\n')
    (tmp_path / "yi.jsonl").write_text('{"label": 3}\n{"label": 4}\n')
    pq.write_table(pa.table({"label": ["u", "v"], "y2": [5, 6]}), tmp_path / "y.parquet")
    assert load_labels(tmp_path / "y.npy").tolist() == [2, 0, 1]
    assert load_labels(tmp_path / "y.csv").tolist() == ["cat", "dog", "cat"]
    tsv = load_labels(tmp_path / "y.tsv")
    assert tsv.dtype.kind == "i" and tsv.tolist() == [1, 0]
    assert load_labels(tmp_path / "y.txt").tolist() == ["pos", "neg"]
    assert load_labels(tmp_path / "y.jsonl").tolist() == ["a", "b"]
    assert load_labels(tmp_path / "yi.jsonl").dtype.kind == "i"
    assert load_labels(tmp_path / "y.parquet").tolist() == ["u", "v"]
    assert load_labels(tmp_path / "y.parquet", column="y2").tolist() == [5, 6]


def test_labels_object_npy_refused(tmp_path):
    np.save(tmp_path / "o.npy", np.array(["a", 1], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match=r"o\.npy: .*dtype=object.*refused"):
        load_labels(tmp_path / "o.npy")


def test_labels_errors_name_file_line_column(tmp_path):
    (tmp_path / "y.csv").write_text("id,label\na,cat\nb,\n")
    with pytest.raises(InputError, match=r"y\.csv: line 3, column 'label': empty label"):
        load_labels(tmp_path / "y.csv")
    (tmp_path / "n.csv").write_text("id,y\na,1\n")
    with pytest.raises(InputError, match=r"n\.csv: missing column 'label'; the file has: 'id', 'y'"):
        load_labels(tmp_path / "n.csv")
    (tmp_path / "y.txt").write_text("a\n\nb\n")
    with pytest.raises(InputError, match=r"y\.txt: line 2: empty label"):
        load_labels(tmp_path / "y.txt")
    np.save(tmp_path / "m.npy", np.ones((2, 2)))
    with pytest.raises(InputError, match=r"m\.npy: labels must be 1-D"):
        load_labels(tmp_path / "m.npy")
    (tmp_path / "j.jsonl").write_text('{"label": "a"}\n{"lab": "b"}\n')
    with pytest.raises(InputError, match=r"j\.jsonl: line 2: no key 'label'"):
        load_labels(tmp_path / "j.jsonl")


def test_ids_default_column_and_duplicates(tmp_path):
    (tmp_path / "i.csv").write_text("id,label\nx1,a\nx2,b\n")
    assert load_ids(tmp_path / "i.csv").tolist() == ["x1", "x2"]
    (tmp_path / "d.csv").write_text("id,label\nx1,a\nx2,b\nx1,c\n")
    with pytest.raises(InputError, match=r"d\.csv: duplicate id 'x1' \(rows 0 and 2\)"):
        load_ids(tmp_path / "d.csv")


def test_encode_labels_like_label_encoder():
    codes, classes = encode_labels(np.array(["n", "e", "c", "e"]))
    assert classes.tolist() == ["c", "e", "n"]
    assert codes.dtype == np.int64 and codes.tolist() == [2, 1, 0, 1]
    codes, classes = encode_labels([3, 1, 3])
    assert classes.tolist() == [1, 3] and codes.tolist() == [1, 0, 1]


def test_check_aligned():
    check_aligned(3, 3)
    check_aligned(3, 3, 3)
    with pytest.raises(InputError, match="features have 3 rows but labels have 4"):
        check_aligned(3, 4)
    with pytest.raises(InputError, match="features have 3 rows but ids have 2"):
        check_aligned(3, 3, 2)


# ======================================================================================= text datasets
SNLI_JSONL = [
    {
        "annotator_labels": ["neutral"],
        "captionID": "c1",
        "gold_label": "neutral",
        "pairID": "p1n",
        "sentence1": 'A "man" sits.',
        "sentence2": "He waits.",
        "sentence1_parse": "(ROOT)",
    },
    {
        "annotator_labels": ["entailment"],
        "captionID": "c1",
        "gold_label": "entailment",
        "pairID": "p1e",
        "sentence1": 'A "man" sits.',
        "sentence2": "A person sits.",
        "sentence1_parse": "(ROOT)",
    },
    {
        "annotator_labels": ["neutral", "entailment"],
        "captionID": "c1",
        "gold_label": "-",
        "pairID": "p1c",
        "sentence1": 'A "man" sits.',
        "sentence2": "Nobody sits.",
        "sentence1_parse": "(ROOT)",
    },
    {
        "annotator_labels": ["contradiction"],
        "captionID": "c2",
        "gold_label": "contradiction",
        "pairID": "p2c",
        "sentence1": "Dogs run.",
        "sentence2": "Cats sleep.",
        "sentence1_parse": "(ROOT)",
    },
    {
        "annotator_labels": ["neutral"],
        "captionID": "c2",
        "gold_label": "-",
        "pairID": "p2n",
        "sentence1": "Dogs run.",
        "sentence2": "Dogs run fast.",
        "sentence1_parse": "(ROOT)",
    },
]


def write_snli_jsonl(path: Path) -> bytes:
    # Irregular spacing on purpose: written-back lines must be the original bytes, not re-serialised JSON.
    lines = [json.dumps(r, separators=(", ", ": ")) + "\n" for r in SNLI_JSONL]
    lines[0] = lines[0].replace('{"annotator_labels"', '{ "annotator_labels"')
    data = "".join(lines).encode()
    path.write_bytes(data)
    return data


def test_snli_jsonl_drops_and_counts_no_gold(tmp_path):
    p = tmp_path / "snli_1.0_dev.jsonl"
    write_snli_jsonl(p)
    ds = load_dataset(p)
    assert ds.source.schema == "snli-jsonl" and ds.source.format == "jsonl"
    assert len(ds) == 3
    assert ds.n_dropped == 2 and ds.dropped == {"no_gold_label": 2}
    assert ds.ids.tolist() == ["p1n", "p1e", "p2c"]
    assert ds.labels.tolist() == ["neutral", "entailment", "contradiction"]
    assert ds.texts_a[0] == 'A "man" sits.' and ds.texts_b == ["He waits.", "A person sits.", "Cats sleep."]
    assert ds.groups is not None and ds.groups.tolist() == [0, 0, 1]
    assert ds.other_columns["captionID"] == ["c1", "c1", "c2"]
    assert ds.other_columns["annotator_labels"][0] == '["neutral"]'


def test_snli_jsonl_round_trip_bytes(tmp_path):
    p = tmp_path / "d.jsonl"
    data = write_snli_jsonl(p)
    ds = load_dataset(p)
    out = write_filtered(ds, ["p1n", "p2c"], tmp_path / "out" / "kept.jsonl")
    lines = raw_lines(data)
    assert out.read_bytes() == lines[0] + lines[3]
    again = load_dataset(out)
    assert again.ids.tolist() == ["p1n", "p2c"] and again.n_dropped == 0


def test_jsonl_gz_round_trip_keeps_gzip(tmp_path):
    data = write_snli_jsonl(tmp_path / "plain.jsonl")
    p = gz(tmp_path / "d.jsonl.gz", data)
    ds = load_dataset(p)
    out = write_filtered(ds, np.array([False, True, True]), tmp_path / "k.jsonl.gz")
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    lines = raw_lines(data)
    assert gzip.decompress(out.read_bytes()) == lines[1] + lines[3]


SHARED_TSV = (
    "premise\thypothesis\tlabel\n"
    'Two "women" embrace.\tThe sisters hug.\tneutral\n'
    'Two "women" embrace.\tTwo people hug.\tentailment\n'
    'Two "women" embrace.\tThe men fight.\tcontradiction\n'
    "A dog's toy.\tA toy.\tentailment\n"
)


def test_shared_tsv_no_quoting_gzip_round_trip(tmp_path):
    p = gz(tmp_path / "dev.tsv.gz", SHARED_TSV.encode())
    ds = load_dataset(p)
    assert ds.source.format == "tsv" and ds.source.gzip and ds.source.schema == "nli-tsv"
    assert ds.ids.tolist() == ["row-0", "row-1", "row-2", "row-3"]
    assert ds.texts_a[0] == 'Two "women" embrace.'  # literal quotes kept
    assert ds.groups is not None and ds.groups.tolist() == [0, 0, 0, 1]
    mask = np.array([True, False, True, True])
    out = write_filtered(ds, mask, tmp_path / "kept.tsv.gz")
    lines = raw_lines(SHARED_TSV.encode())
    assert gzip.decompress(out.read_bytes()) == lines[0] + lines[1] + lines[3] + lines[4]
    again = load_dataset(out)
    assert again.texts_b == [ds.texts_b[i] for i in (0, 2, 3)]  # type: ignore[index]
    assert again.labels.tolist() == ds.labels[mask].tolist()


def test_a_tsv_written_with_csv_quoting_is_read_as_written(tmp_path):
    """Issue #59, 6: pandas' to_csv(sep="\\t") puts a field with a quote, a tab or a line break in quotes; the TSV
    reader kept those quotes as text (and split a quoted line break into two broken rows)."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"premise": ['He said "hi".', "A tab\there.", "Two\nlines.", "Plain."],
                          "hypothesis": ['"Quoted" whole.', "x", "y", 'z "q"'],
                          "label": ["entailment", "neutral", "contradiction", "neutral"]})
    p = tmp_path / "pandas.tsv"
    frame.to_csv(p, sep="\t", index=False)
    assert '"He said ""hi""."' in p.read_text(encoding="utf-8")  # the file does hold CSV quoting
    ds = load_dataset(p)
    assert list(ds.texts_a) == frame["premise"].tolist() and list(ds.texts_b) == frame["hypothesis"].tolist()
    assert ds.ids.tolist() == ["row-0", "row-1", "row-2", "row-3"]
    out = write_filtered(ds, np.array([True, False, True, False]), tmp_path / "kept.tsv")
    back = pd.read_csv(out, sep="\t", keep_default_na=False)
    pd.testing.assert_frame_equal(back, frame.iloc[[0, 2]].reset_index(drop=True))  # written back as it was


def test_quotes_that_are_text_in_a_tsv_stay_text(tmp_path):
    """GLUE's and SNLI's TSVs hold quotes as text; one field that is no CSV-quoted field keeps the whole file read
    one row per line, even a field that alone would look quoted."""
    p = tmp_path / "mnli.tsv"
    p.write_text('premise\thypothesis\tlabel\n"An egg has got to hatch," he said.\tAn egg.\tentailment\n'
                 '"Stop"\tHe spoke.\tneutral\n', encoding="utf-8")
    ds = load_dataset(p)
    assert list(ds.texts_a) == ['"An egg has got to hatch," he said.', '"Stop"']


def test_shared_tsv_with_ids_and_extra_columns(tmp_path):
    p = tmp_path / "h.tsv"
    p.write_text("id\tpremise\thypothesis\tlabel\theuristic\nex0\tA b.\tB a.\tnon-entailment\tlexical_overlap\n")
    ds = load_dataset(p)
    assert ds.ids.tolist() == ["ex0"] and ds.other_columns == {"heuristic": ["lexical_overlap"]}


def test_groups_can_be_turned_off(tmp_path):
    p = gz(tmp_path / "dev.tsv.gz", SHARED_TSV.encode())
    assert load_dataset(p, group_by_premise=False).groups is None


def test_crlf_tsv_round_trip(tmp_path):
    data = SHARED_TSV.replace("\n", "\r\n").encode()
    p = tmp_path / "d.tsv"
    p.write_bytes(data)
    ds = load_dataset(p)
    assert ds.labels.tolist()[0] == "neutral" and ds.texts_b[0] == "The sisters hug."  # type: ignore[index]
    out = write_filtered(ds, ["row-3"], tmp_path / "o.tsv")
    lines = raw_lines(data)
    assert out.read_bytes() == lines[0] + lines[4]


def test_last_line_without_newline(tmp_path):
    data = SHARED_TSV.rstrip("\n").encode()
    p = tmp_path / "d.tsv"
    p.write_bytes(data)
    ds = load_dataset(p)
    assert len(ds) == 4
    out = write_filtered(ds, ["row-3", "row-0"], tmp_path / "o.tsv")
    assert load_dataset(out).ids.tolist() == ["row-0", "row-1"]  # renumbered: written file has no id column
    assert out.read_bytes().split(b"\n")[-1] == b"A dog's toy.\tA toy.\tentailment"


GLUE_MNLI = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
    "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
    "0\t31193\t31193n\tgovernment\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tConceptually cream skimming.\t"
    "Product and geography.\tneutral\tneutral\n"
    "1\t101457\t101457e\ttelephone\t( c )\t( d )\t(ROOT c)\t(ROOT d)\tyou know during the season\t"
    "You lose the things.\tentailment\tentailment\n"
)
GLUE_QNLI = (
    "index\tquestion\tsentence\tlabel\n0\tWhat came?\tThe thing came.\tentailment\n1\tWho?\tNobody.\tnot_entailment\n"
)
GLUE_RTE = "index\tsentence1\tsentence2\tlabel\n0\tA b c.\tA b.\tentailment\n1\tX y.\tZ.\tnot_entailment\n"


@pytest.mark.parametrize(
    ("text", "schema", "ids", "a0", "b0", "labels"),
    [
        (
            GLUE_MNLI,
            "glue-mnli",
            ["31193n", "101457e"],
            "Conceptually cream skimming.",
            "Product and geography.",
            ["neutral", "entailment"],
        ),
        (GLUE_QNLI, "glue-qnli", ["0", "1"], "What came?", "The thing came.", ["entailment", "not_entailment"]),
        (GLUE_RTE, "glue-rte", ["0", "1"], "A b c.", "A b.", ["entailment", "not_entailment"]),
    ],
)
def test_glue_tsv_detected_by_header(tmp_path, text, schema, ids, a0, b0, labels):
    p = tmp_path / "dev.tsv"
    p.write_text(text)
    ds = load_dataset(p)
    assert ds.source.schema == schema
    assert ds.ids.tolist() == ids and ds.labels.tolist() == labels
    assert ds.texts_a[0] == a0 and ds.texts_b is not None and ds.texts_b[0] == b0
    out = write_filtered(ds, [ids[1]], tmp_path / "out.tsv")
    lines = raw_lines(text.encode())
    assert out.read_bytes() == lines[0] + lines[2]


def test_generic_csv_named_columns_with_quoting(tmp_path):
    text = 'uid,q,a,y\r\nu1,"Hello, ""world""","multi\nline",yes\r\nu2,plain,text,no\r\n'
    p = tmp_path / "g.csv"
    p.write_bytes(text.encode())
    ds = load_dataset(p, text_a="q", text_b="a", label="y", id_column="uid")
    assert ds.texts_a == ['Hello, "world"', "plain"] and ds.texts_b == ["multi\nline", "text"]
    assert ds.ids.tolist() == ["u1", "u2"] and ds.labels.tolist() == ["yes", "no"]
    out = write_filtered(ds, ["u1"], tmp_path / "o.csv")
    assert out.read_bytes() == b'uid,q,a,y\r\nu1,"Hello, ""world""","multi\nline",yes\r\n'
    assert load_dataset(out, text_a="q", text_b="a", label="y", id_column="uid").texts_b == ["multi\nline"]


def test_single_text_classification(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"text": "great film", "label": 1}\n\n{"text": "dull", "label": 0}\n')
    ds = load_dataset(p)
    assert ds.texts_b is None and ds.groups is None and not ds.is_pair
    assert ds.labels.tolist() == ["1", "0"] and ds.ids.tolist() == ["row-0", "row-1"]
    mapped = load_dataset(p, label_map={0: "neg", 1: "pos"})
    assert mapped.labels.tolist() == ["pos", "neg"]
    # a named text_a only means single text even when the file has a pair header
    tsv = gz(tmp_path / "d.tsv.gz", SHARED_TSV.encode())
    assert load_dataset(tsv, text_a="hypothesis").texts_b is None


def test_label_map_on_text_ints_and_unknown_label(tmp_path):
    p = tmp_path / "t.tsv"
    p.write_text("premise\thypothesis\tlabel\nA.\tB.\t0\nC.\tD.\t2\nE.\tF.\t7\n")
    with pytest.raises(InputError, match=r"t\.tsv: line 4, column 'label': label '7' is not in the label map"):
        load_dataset(p, label_map={0: "entailment", 1: "neutral", 2: "contradiction"})
    p.write_text("premise\thypothesis\tlabel\nA.\tB.\t0\nC.\tD.\t2\n")
    ds = load_dataset(p, label_map={0: "entailment", 1: "neutral", 2: "contradiction"})
    assert ds.labels.tolist() == ["entailment", "contradiction"]


def test_parquet_round_trip_keeps_schema(tmp_path):
    schema = pa.schema(
        [("pid", pa.string()), ("p", pa.string()), ("h", pa.string()), ("lab", pa.int8()), ("w", pa.float32())],
        metadata={b"origin": b"test"},
    )
    t = pa.table(
        {
            "pid": ["a", "b", "c"],
            "p": ["P1", "P1", "P2"],
            "h": ["H1", "H2", "H3"],
            "lab": [0, 1, 2],
            "w": [0.5, 1.5, 2.5],
        },
        schema=schema,
    )
    pq.write_table(t, tmp_path / "d.parquet")
    ds = load_dataset(tmp_path / "d.parquet", text_a="p", text_b="h", label="lab", id_column="pid")
    assert ds.labels.tolist() == ["0", "1", "2"] and ds.groups.tolist() == [0, 0, 1]  # type: ignore[union-attr]
    assert ds.other_columns == {"w": ["0.5", "1.5", "2.5"]}
    out = write_filtered(ds, ["a", "c"], tmp_path / "o.parquet")
    back = pq.read_table(out)
    assert back.schema.equals(t.schema, check_metadata=True)
    assert back.equals(t.take([0, 2]))


def test_parquet_default_nli_columns(tmp_path):
    pq.write_table(pa.table({"premise": ["x"], "hypothesis": ["y"], "label": ["neutral"]}), tmp_path / "n.pq")
    ds = load_dataset(tmp_path / "n.pq")
    assert ds.texts_b == ["y"] and ds.ids.tolist() == ["row-0"]


# ============================================================================================= errors
def test_missing_columns_listed(tmp_path):
    p = tmp_path / "d.tsv"
    p.write_text("premise\thypothesis\tlabel\nA.\tB.\tneutral\n")
    msg = r"d\.tsv: missing column 'lbl' \(given by label=\); the file has: 'premise', 'hypothesis'"
    with pytest.raises(InputError, match=msg):
        load_dataset(p, label="lbl")
    p.write_text("foo\tbar\nA\tB\n")
    with pytest.raises(InputError, match=r"d\.tsv: cannot tell which column holds the text.*'foo', 'bar'"):
        load_dataset(p)
    p.write_text("text\tbar\nA\tB\n")
    with pytest.raises(InputError, match=r"d\.tsv: no label column found.*'text', 'bar'"):
        load_dataset(p)


def test_empty_files(tmp_path):
    for name in ("e.tsv", "e.csv", "e.jsonl"):
        (tmp_path / name).write_bytes(b"")
        with pytest.raises(InputError, match=rf"{re.escape(name)}: empty file"):
            load_dataset(tmp_path / name)
    gz(tmp_path / "e.tsv.gz", b"")
    with pytest.raises(InputError, match=r"e\.tsv\.gz: empty file"):
        load_dataset(tmp_path / "e.tsv.gz")
    (tmp_path / "h.tsv").write_text("premise\thypothesis\tlabel\n")
    with pytest.raises(InputError, match=r"h\.tsv: no data rows"):
        load_dataset(tmp_path / "h.tsv")


def test_bad_encoding_names_line(tmp_path):
    data = SHARED_TSV.encode().replace(b"The men fight.", b"The m\xe9n fight.")
    p = gz(tmp_path / "d.tsv.gz", data)
    with pytest.raises(InputError, match=r"d\.tsv\.gz: line 4: not valid UTF-8 \(byte 0xe9"):
        load_dataset(p)


def test_malformed_json_line(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"text": "a", "label": "x"}\n{"text": "b", "label": }\n')
    with pytest.raises(InputError, match=r"d\.jsonl: line 2: malformed JSON"):
        load_dataset(p)
    p.write_text('{"text": "a", "label": "x"}\n["b", "y"]\n')
    with pytest.raises(InputError, match=r"d\.jsonl: line 2: expected a JSON object"):
        load_dataset(p)


def test_wrong_field_count(tmp_path):
    p = tmp_path / "d.tsv"
    p.write_text('premise\thypothesis\tlabel\nA.\tB.\tneutral\nA "q".\tB\tC.\tneutral\n')
    with pytest.raises(InputError, match=r"d\.tsv: line 3: 4 fields, but the header has 3"):
        load_dataset(p)
    c = tmp_path / "d.csv"
    c.write_text("text,label\na,x\nb\n")
    with pytest.raises(InputError, match=r"d\.csv: line 3: 1 fields, but the header has 2"):
        load_dataset(c)


def test_missing_label_value_and_key(tmp_path):
    p = tmp_path / "d.tsv"
    p.write_text("premise\thypothesis\tlabel\nA.\tB.\tneutral\nA.\tC.\t\n")
    with pytest.raises(InputError, match=r"d\.tsv: line 3, column 'label': missing label"):
        load_dataset(p)
    j = tmp_path / "d.jsonl"
    j.write_text('{"text": "a", "label": "x"}\n{"text": "b"}\n')
    with pytest.raises(InputError, match=r"d\.jsonl: line 2, column 'label': missing label"):
        load_dataset(j)
    j.write_text('{"text": "a", "label": "x"}\n{"label": "y"}\n')
    with pytest.raises(InputError, match=r"d\.jsonl: line 2, column 'text': missing text"):
        load_dataset(j)


def test_duplicate_ids_refused(tmp_path):
    p = tmp_path / "d.tsv"
    p.write_text("id\tpremise\thypothesis\tlabel\nx\tA.\tB.\tneutral\nx\tA.\tC.\tneutral\n")
    with pytest.raises(InputError, match=r"d\.tsv: duplicate id 'x' \(line 2 and line 3\)"):
        load_dataset(p)


def test_all_rows_without_gold_label(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text(json.dumps(SNLI_JSONL[2]) + "\n")
    with pytest.raises(InputError, match=r"d\.jsonl: no usable rows \(1 dropped"):
        load_dataset(p)


def test_missing_file_unknown_format_and_truncated_gzip(tmp_path):
    with pytest.raises(InputError, match=r"none\.tsv: no such file"):
        load_dataset(tmp_path / "none.tsv")
    (tmp_path / "d.xyz").write_text("a")
    with pytest.raises(InputError, match=r"d\.xyz: cannot tell the format"):
        load_dataset(tmp_path / "d.xyz")
    with pytest.raises(ParameterError, match="unknown dataset format"):
        load_dataset(tmp_path / "d.xyz", file_format="xml")
    full = gzip.compress(SHARED_TSV.encode() * 50)
    (tmp_path / "t.tsv.gz").write_bytes(full[: len(full) // 2])
    with pytest.raises(InputError, match=r"t\.tsv\.gz: unreadable or truncated gzip"):
        load_dataset(tmp_path / "t.tsv.gz")


def test_explicit_format_overrides_extension(tmp_path):
    p = tmp_path / "data.txt"
    p.write_text("premise\thypothesis\tlabel\nA.\tB.\tneutral\n")
    assert load_dataset(p).texts_b == ["B."]
    q = tmp_path / "data.dat"
    q.write_text("premise\thypothesis\tlabel\nA.\tB.\tneutral\n")
    assert load_dataset(q, file_format="tsv").labels.tolist() == ["neutral"]


def test_write_filtered_rejects_unknown_ids_and_bad_mask(tmp_path):
    p = gz(tmp_path / "d.tsv.gz", SHARED_TSV.encode())
    ds = load_dataset(p)
    with pytest.raises(InputError, match=r"1 id\(s\) to keep are not in .*d\.tsv\.gz, e\.g\. 'nope'"):
        write_filtered(ds, ["row-0", "nope"], tmp_path / "o.tsv.gz")
    with pytest.raises(ParameterError, match="shape"):
        write_filtered(ds, np.ones(3, bool), tmp_path / "o.tsv.gz")
    assert not (tmp_path / "o.tsv.gz").exists()


def test_write_filtered_keep_none_writes_header_only(tmp_path):
    p = gz(tmp_path / "d.tsv.gz", SHARED_TSV.encode())
    out = write_filtered(load_dataset(p), [], tmp_path / "o.tsv.gz")
    assert gzip.decompress(out.read_bytes()) == b"premise\thypothesis\tlabel\n"


# ====================================================================================== HF datasets
def test_hf_folder_without_datasets_installed(tmp_path, monkeypatch):
    d = tmp_path / "hf"
    d.mkdir()
    (d / "dataset_info.json").write_text("{}")
    (d / "state.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(InputError, match=r"hf: .*needs the optional package 'datasets'"):
        load_dataset(d)


class _FakeClassLabel:
    names = ["entailment", "neutral", "contradiction"]


class _FakeDataset:
    """The small part of datasets.Dataset that aflite.data uses."""

    def __init__(self, rows: dict[str, list]):
        self.rows = rows
        self.column_names = list(rows)
        self.features = {"label": _FakeClassLabel()}

    def to_list(self):
        n = len(next(iter(self.rows.values())))
        return [{k: v[i] for k, v in self.rows.items()} for i in range(n)]

    def select(self, idx):
        return _FakeDataset({k: [v[i] for i in idx] for k, v in self.rows.items()})

    def save_to_disk(self, path):
        Path(path, "data.json").write_text(json.dumps(self.rows))


def test_hf_dataset_with_fake_module(tmp_path, monkeypatch):
    d = tmp_path / "hf"
    d.mkdir()
    rows = {"premise": ["P", "P", "Q"], "hypothesis": ["a", "b", "c"], "label": [0, -1, 2]}
    (d / "state.json").write_text("{}")
    (d / "data.json").write_text(json.dumps(rows))
    fake = types.ModuleType("datasets")
    fake.DatasetDict = dict  # type: ignore[attr-defined]
    fake.load_from_disk = lambda p: _FakeDataset(json.loads(Path(p, "data.json").read_text()))  # type: ignore
    monkeypatch.setitem(sys.modules, "datasets", fake)
    ds = load_dataset(d)
    assert ds.source.format == "hf" and ds.dropped == {"no_gold_label": 1}
    assert ds.labels.tolist() == ["entailment", "contradiction"] and ds.ids.tolist() == ["row-0", "row-2"]
    (tmp_path / "out").mkdir()  # an existing output folder is replaced
    out = write_filtered(ds, ["row-2"], tmp_path / "out")
    assert json.loads((out / "data.json").read_text()) == {"premise": ["Q"], "hypothesis": ["c"], "label": [2]}


# ============================================================================================== demo
def test_demo_sample_loads():
    path = demo_dataset_path()
    assert path.name == "snli_sample.tsv.gz" and path.stat().st_size < 1_000_000
    ds = load_dataset(path)
    assert isinstance(ds, Dataset)
    assert len(ds) >= 2500 and ds.n_dropped == 0
    assert set(ds.labels.tolist()) == {"entailment", "neutral", "contradiction"}
    assert ds.ids[0] == "snli-dev-0" and len(set(ds.ids.tolist())) == len(ds)
    assert ds.groups is not None and ds.groups.max() + 1 == 1000
    # whole premise groups: each group's rows are contiguous
    assert (np.diff(ds.groups) >= 0).all()
    lic = path.parent / "SNLI_SAMPLE_LICENSE.md"
    assert "CC BY-SA 4.0" in lic.read_text() and "Bowman" in lic.read_text()


# ======================================================================================= shared data
@needs_shared
@pytest.mark.parametrize(
    ("rel", "n", "n_labels", "extra"),
    [
        ("snli/dev.tsv.gz", 9842, 3, []),
        ("snli/test.tsv.gz", 9824, 3, []),
        ("mnli/dev_matched.tsv.gz", 9815, 3, []),
        ("hans/evaluation_regenerated.tsv.gz", 30000, 2, ["heuristic", "subcase", "template"]),
    ],
)
def test_shared_data_row_counts(rel, n, n_labels, extra):
    ds = load_dataset(SHARED / rel)
    assert len(ds) == n and ds.n_dropped == 0
    assert len(set(ds.labels.tolist())) == n_labels
    assert list(ds.other_columns) == extra
    assert ds.groups is not None and len(np.unique(ds.groups)) < n


@needs_shared
def test_shared_snli_dev_class_counts_and_round_trip(tmp_path):
    src = SHARED / "snli" / "dev.tsv.gz"
    ds = load_dataset(src)
    assert Counter(ds.labels.tolist()) == {"entailment": 3329, "neutral": 3235, "contradiction": 3278}
    mask = np.zeros(len(ds), bool)
    mask[::7] = True
    out = write_filtered(ds, mask, tmp_path / "dev_kept.tsv.gz")
    lines = raw_lines(gzip.decompress(src.read_bytes()))
    expected = lines[0] + b"".join(lines[1 + i] for i in np.flatnonzero(mask))
    assert gzip.decompress(out.read_bytes()) == expected
    assert load_dataset(out).texts_b == [t for t, k in zip(ds.texts_b or [], mask, strict=True) if k]


@needs_shared
def test_demo_sample_is_first_1000_premise_groups_of_snli_dev():
    lines = gzip.decompress((SHARED / "snli" / "dev.tsv.gz").read_bytes()).decode("utf-8").split("\n")
    assert lines[0] == "premise\thypothesis\tlabel"
    out = ["id\tpremise\thypothesis\tlabel"]
    groups, prev = 0, None
    for i, line in enumerate(x for x in lines[1:] if x):
        premise = line.split("\t")[0]
        if premise != prev:
            groups, prev = groups + 1, premise
            if groups > 1000:
                break
        out.append(f"snli-dev-{i}\t{line}")
    expected = ("\n".join(out) + "\n").encode()
    assert gzip.decompress(demo_dataset_path().read_bytes()) == expected


def test_snli_native_txt_tsv(tmp_path):
    text = (
        "gold_label\tsentence1_binary_parse\tsentence1\tsentence2\tcaptionID\tpairID\tlabel1\n"
        'neutral\t( a )\tA "b" c.\tD.\tc1\tp1n\tneutral\n'
        '-\t( a )\tA "b" c.\tE.\tc1\tp1e\tneutral\n'
    )
    p = tmp_path / "snli_1.0_dev.txt"
    p.write_text(text)
    ds = load_dataset(p)
    assert ds.source.schema == "snli-tsv" and ds.dropped == {"no_gold_label": 1}
    assert ds.ids.tolist() == ["p1n"] and ds.texts_a == ['A "b" c.']
    assert ds.other_columns["captionID"] == ["c1"]
    out = write_filtered(ds, ["p1n"], tmp_path / "o.txt")
    assert out.read_bytes() == b"".join(raw_lines(text.encode())[:2])


def test_real_hugging_face_dataset_round_trip(tmp_path):
    datasets = pytest.importorskip("datasets")
    feats = datasets.Features({
        "premise": datasets.Value("string"),
        "hypothesis": datasets.Value("string"),
        "label": datasets.ClassLabel(names=["entailment", "neutral", "contradiction"]),
    })
    d = datasets.Dataset.from_dict(
        {"premise": ["a b", "a b", "c d", "e f"], "hypothesis": ["x", "y", "z", "w"], "label": [0, 1, 2, -1]},
        features=feats,
    )
    d.save_to_disk(str(tmp_path / "hf"))
    ds = load_dataset(tmp_path / "hf")
    assert ds.labels.tolist() == ["entailment", "neutral", "contradiction"]  # ClassLabel names, -1 dropped
    assert ds.dropped == {"no_gold_label": 1}
    assert ds.groups is not None and ds.groups[0] == ds.groups[1] != ds.groups[2]
    out = write_filtered(ds, np.array([True, False, True]), tmp_path / "out")
    back = datasets.load_from_disk(str(out))
    assert back["hypothesis"] == ["x", "z"] and back["label"] == [0, 2]


# ------------------------------------------------------------------ ids that break one-id-per-line files (issue 25)
@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\r\nb"])
def test_ids_with_line_breaks_are_refused_at_load(tmp_path, bad):
    rows = [{"id": f"r{i}", "premise": f"p {i}", "hypothesis": f"h {i}", "label": "ab"[i % 2]} for i in range(6)]
    rows[3]["id"] = bad
    jl = tmp_path / "d.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"d\.jsonl: line 4, column 'id': id .* contains a line break"):
        load_dataset(jl, id_column="id")
    import csv

    cs = tmp_path / "d.csv"
    with open(cs, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(InputError, match=r"d\.csv: line 5, column 'id': id .* contains a line break"):
        load_dataset(cs, id_column="id")
    with pytest.raises(InputError, match=r"d\.csv: row 4, column 'id': id .* contains a line break"):
        load_ids(cs)


def test_run_refuses_a_newline_id_in_one_line(tmp_path, capsys):
    from aflite.cli import main

    rows = [{"id": f"r{i}", "premise": f"p {i % 7}", "hypothesis": f"h {i}", "label": "ab"[i % 2]} for i in range(60)]
    rows[10]["id"] = "x\ny"
    jl = tmp_path / "d.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["run", str(jl), "--out", str(tmp_path / "out"), "--id-column", "id", "--featurizer", "ngram",
                 "--quiet"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and "line 11, column 'id'" in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_long_field_is_read_from_csv_as_from_jsonl(tmp_path):
    long = "word " * 220_000  # 1.1 MB, beyond Python's default csv field limit (131,072)
    rows = [{"premise": long if i == 2 else f"p {i}", "hypothesis": f"h {i}", "label": "ab"[i % 2]} for i in range(4)]
    jl = tmp_path / "d.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    import csv

    cs = tmp_path / "d.csv"
    with open(cs, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert load_dataset(cs).texts_a[2] == load_dataset(jl).texts_a[2] == long


def test_malformed_jsonl_names_the_key_not_a_column_number(tmp_path):
    jl = tmp_path / "d.jsonl"
    jl.write_text('{"premise": "a", "hypothesis": "b", "label": "x"}\n{"premise": "a", "hypothesis": "b", "label": }\n')
    with pytest.raises(InputError, match=r"d\.jsonl: line 2: malformed JSON after key 'label' \(character 46 of the "
                                         r"line\): Expecting value"):
        load_dataset(jl)


def test_a_row_count_mismatch_names_both_files(tmp_path):
    np.save(tmp_path / "X.npy", np.zeros((5, 2), np.float32))
    (tmp_path / "y.txt").write_text("a\nb\na\n")
    with pytest.raises(InputError, match=r"features .*X\.npy have 5 rows but labels .*y\.txt have 3"):
        check_aligned(5, 3, files=(tmp_path / "X.npy", tmp_path / "y.txt"))


def test_twin_families_join_rows_through_a_shared_premise_or_hypothesis():
    from aflite.data import twin_families

    a = ["p1", "p1", "p2", "p3", "p4", "p5"]
    b = ["h1", "h2", "h2", "h3", "h4", "h4"]
    f = twin_families(a, b)
    assert f[0] == f[1] == f[2] and f[4] == f[5]
    assert len({f[0], f[3], f[4]}) == 3
    assert twin_families(["x", "y", "x"]).tolist()[0] == twin_families(["x", "y", "x"]).tolist()[2]
    assert len(twin_families([])) == 0


# ------------------------------------------------------------------ empty texts (issue 34, 4)
def _pairs_with_empty(tmp_path: Path, empty_every: int | None, n: int = 240) -> Path:
    """n real SNLI pairs; the hypothesis is emptied on every ``empty_every``-th row (None: on every row)."""
    with gzip.open(demo_dataset_path(), "rt", encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    out = [lines[0]]
    for i, line in enumerate(lines[1 : n + 1]):
        rid, prem, hyp, lab = line.split("\t")
        if empty_every is None or i % empty_every == 0:
            hyp = "" if i % 4 else "   "  # blank counts as empty
        out.append("\t".join((rid, prem, hyp, lab)))
    p = tmp_path / ("all_empty.tsv" if empty_every is None else "some_empty.tsv")
    p.write_text("\n".join(out) + "\n", encoding="utf-8")
    return p


def test_empty_texts_are_counted_at_load_per_column(tmp_path):
    ds = load_dataset(_pairs_with_empty(tmp_path, 2))
    assert ds.empty_texts == {"hypothesis": 120}
    assert load_dataset(_pairs_with_empty(tmp_path, None)).empty_texts == {"hypothesis": 240}
    assert load_dataset(demo_dataset_path()).empty_texts == {}


def test_some_empty_texts_warn_with_the_count(tmp_path, capsys):
    from aflite.cli import main

    data = _pairs_with_empty(tmp_path, 2)
    code = main(["run", str(data), "--out", str(tmp_path / "out"), "--featurizer", "ngram", "-m", "4", "--quiet",
                 "--no-probe"])
    err = capsys.readouterr().err
    assert code == 0
    warn = [line for line in err.splitlines() if "rows have an empty" in line]
    assert warn == [f"warning: {data}: 120 of 240 rows have an empty 'hypothesis' text (featurized as empty: "
                    f"nothing for Φ to read there)"], err
    summary = json.loads((tmp_path / "out" / "results.json").read_text())
    assert summary["empty_texts_at_load"] == {"hypothesis": 120}
    md = (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
    assert "- **empty texts:** 120 of 240 rows have an empty 'hypothesis' text" in md  # the warning scrolls away
    assert "empty texts" not in main_summary(tmp_path, demo_dataset_path())


def main_summary(tmp_path, data):
    """summary.md of a small ngram run of ``data``."""
    from aflite.cli import main

    out = tmp_path / "clean"
    assert main(["run", str(data), "--out", str(out), "--featurizer", "ngram", "-m", "4", "--quiet", "--no-probe",
                 "-n", "0.9"]) == 0
    return (out / "summary.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("command", ["run", "embed", "audit", "evaluate"])
@pytest.mark.parametrize("existing", [False, True])
def test_a_view_with_nothing_to_featurize_is_refused_and_leaves_nothing(tmp_path, capsys, command, existing):
    """Every hypothesis empty: a view that reads the hypothesis has nothing for Φ. One line, exit 2, and --out as
    it was found (no lock, owner file or empty cache), whether the call made it or it was an empty folder."""
    from aflite.cli import main

    data = _pairs_with_empty(tmp_path, None)
    out = tmp_path / "out"
    if existing:
        out.mkdir()
    argv = {"run": ["run", data, "--featurizer", "ngram"],
            "embed": ["embed", data, "--view", "hypothesis"],
            "audit": ["audit", data, "--featurizer", "ngram", "--no-tra"],
            "evaluate": ["evaluate", data, tmp_path / "run", "--models", "ppmi:hypothesis"]}[command]
    if command == "evaluate":  # a run on the premises only, which is possible, then a hypothesis-only model
        assert main(["run", str(data), "--out", str(tmp_path / "run"), "--featurizer", "ngram", "--view",
                     "premise", "-m", "4", "--quiet"]) == 0
        capsys.readouterr()
    code = main([str(a) for a in [*argv, "--out", out, "--quiet"]])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"aflite {command}: error: {data}: column 'hypothesis' is empty in all 240 rows, so ")
    assert lines[0].split(", so ")[1].split(" has nothing to featurize")[0] == {
        "run": "--view pair", "embed": "--view hypothesis", "audit": "the audit's pair view",
        "evaluate": "model ppmi:hypothesis"}[command]
    assert (list(out.iterdir()) == []) if existing else not out.exists()


def test_the_probe_is_skipped_with_a_reason_when_its_text_is_empty(tmp_path, capsys):
    from aflite.cli import main

    data = _pairs_with_empty(tmp_path, None)
    code = main(["run", str(data), "--out", str(tmp_path / "out"), "--featurizer", "ngram", "--view", "premise",
                 "-m", "4", "--quiet"])
    assert code == 0
    assert "note: the hypothesis-only probe is skipped: column 'hypothesis' is empty in every row: the probe has " \
           "no text to read" in capsys.readouterr().err
    summary = json.loads((tmp_path / "out" / "results.json").read_text())
    assert "is empty in every row" in summary["partial_input_probe"]["skipped"]


@pytest.mark.parametrize("bad", [" r3", "r3 ", "  r3  ", "r3\u00a0"])
def test_ids_with_surrounding_white_space_are_refused_at_load(tmp_path, bad, capsys):
    """#50: ' r3 ' was accepted by run and written to kept_ids.txt, whose readers strip each line, so evaluate (and
    explain) refused the run as made from another file. Refused at load instead, naming the file, line and column;
    the run's output folder is never created."""
    from aflite.cli import main

    rows = [{"id": f"r{i}", "premise": f"p {i % 7}", "hypothesis": f"h {i}", "label": "ab"[i % 2]} for i in range(60)]
    rows[3]["id"] = bad
    tsv = tmp_path / "d.tsv"
    tsv.write_text("id\tpremise\thypothesis\tlabel\n" + "".join("\t".join(r.values()) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"d\.tsv: line 5, column 'id': id .* begins or ends with white space"):
        load_dataset(tsv)
    with pytest.raises(InputError, match=r"d\.tsv: row 4, column 'id': id .* begins or ends with white space"):
        load_ids(tsv)
    code = main(["run", str(tsv), "--out", str(tmp_path / "out"), "--featurizer", "ngram", "--quiet"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and "line 5, column 'id'" in err[0], err
    assert not (tmp_path / "out").exists()
    import pandas as pd

    from aflite.data.memory import load_memory

    with pytest.raises(InputError, match=r"row 3, column 'id': id .* begins or ends with white space"):
        load_memory(pd.DataFrame(rows))


def test_messages_name_the_flag_on_the_command_line_and_the_keyword_in_python(tmp_path, capsys):
    """#50: "pass file_format=" and "map them with label_map" reached command-line users, who cannot pass either.
    Each message names what its reader can give: --file-format (a new flag, the keyword's name) on the command
    line, file_format= in Python; a label map is a Python keyword only, so the command line is told to edit the
    file. The file then loads with the flag."""
    from aflite.cli import main

    rows = [f"r{i}\tthe premise number{i % 7}\ta hypothesis word{i}\t{'ab'[i % 2]}\n" for i in range(60)]
    dat = tmp_path / "d.dat"
    dat.write_text("id\tpremise\thypothesis\tlabel\n" + "".join(rows))
    with pytest.raises(InputError, match=r"extension '\.dat'; pass file_format= \(tsv, csv"):
        load_dataset(dat)
    assert len(load_dataset(dat, file_format="tsv")) == 60
    code = main(["run", str(dat), "--out", str(tmp_path / "o1"), "--featurizer", "ngram", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "pass --file-format (tsv, csv" in err[0] and "=" not in err[0], err
    assert not (tmp_path / "o1").exists()
    from aflite.cli import build_parser
    from aflite.cli.flags import dataset_options

    for command in ("run", "explain", "evaluate", "audit", "embed"):  # the flag reaches the loader's keyword
        extra = [str(tmp_path / "run")] if command in ("explain", "evaluate") else []
        args = build_parser().parse_args([command, str(dat), *extra, "--out", "o", "--file-format", "tsv"])
        assert dataset_options(args)["file_format"] == "tsv"

    rows[5] = rows[5].replace("\tb\n", "\tB\n")  # 'B' beside 'b': two classes by a typo
    typo = tmp_path / "t.tsv"
    typo.write_text("id\tpremise\thypothesis\tlabel\n" + "".join(rows))
    with pytest.raises(InputError, match=r"only by case or spaces.* write them alike, or map them with label_map="):
        load_dataset(typo)
    code = main(["run", str(typo), "--out", str(tmp_path / "o3"), "--featurizer", "ngram", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].endswith("write them alike in the file") and "label_map" not in \
        err[0], err


def test_a_huge_text_cell_is_refused_on_load_naming_line_and_column(tmp_path, capsys):
    """#50: a 200 MB text cell was killed for memory after 219 s of featurizing. A cell over the per-cell limit
    (8 MiB by default; max_cell_bytes= / --max-cell-bytes) is refused on load, naming the file, line and column,
    before --out exists; raising the limit reads it."""
    from aflite.cli import main
    from aflite.data.memory import load_memory
    from aflite.data.text import MAX_CELL_BYTES

    rows = [f"r{i}\tthe premise number{i % 7}\ta hypothesis word{i}\t{'ab'[i % 2]}" for i in range(60)]
    rows[4] = f"r4\tthe premise\t{'wörd ' * 400_000}\tb"  # 2.4 MB (ö: two bytes)
    tsv = tmp_path / "d.tsv"
    tsv.write_text("id\tpremise\thypothesis\tlabel\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    assert main(["run", str(tsv), "--out", str(out), "-f", "ngram", "--quiet", "--max-cell-bytes", "1000000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "d.tsv: line 6, column 'hypothesis': a text of 2,400,000 bytes, over the limit of " \
        "1,000,000 bytes per cell (--max-cell-bytes raises it)" in err[0], err
    assert not out.exists()
    with pytest.raises(InputError, match=r"line 6, column 'hypothesis': .* \(max_cell_bytes= raises it\)"):
        load_dataset(tsv, max_cell_bytes=1_000_000)
    assert len(load_dataset(tsv)) == 60  # under the default limit
    assert len(load_dataset(tsv, max_cell_bytes=None)) == 60
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ParameterError, match="max_cell_bytes must be a positive number of bytes"):
            load_dataset(tsv, max_cell_bytes=bad)
    # the default applies, to files and to in-memory data alike
    assert MAX_CELL_BYTES == 8 << 20
    huge = "x" * (MAX_CELL_BYTES + 1)
    jl = tmp_path / "d.jsonl"
    jl.write_text(json.dumps({"premise": "p", "hypothesis": huge, "label": "a"}) + "\n" +
                  json.dumps({"premise": "q", "hypothesis": "h", "label": "b"}) + "\n")
    with pytest.raises(InputError, match=r"d\.jsonl: line 1, column 'hypothesis': a text of 8,388,609 bytes"):
        load_dataset(jl)
    pd = pytest.importorskip("pandas")
    with pytest.raises(InputError, match=r"row 0, column 'hypothesis': a text of 8,388,609 bytes"):
        load_memory(pd.DataFrame({"premise": ["p", "q"], "hypothesis": [huge, "h"], "label": ["a", "b"]}))
