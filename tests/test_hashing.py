"""Tests of aflite.hashing: the digests are those the modules computed before the hashers moved here (so existing
caches keep their keys), and each hash changes when what it identifies changes."""

from __future__ import annotations

import os

import numpy as np

from aflite.hashing import (
    data_fingerprint,
    dataset_fingerprint,
    file_sha256,
    files_fingerprint,
    hash_parts,
    inputs_fingerprint,
    json_digest,
)

# Computed with the helpers' previous homes (aflite.features.data_fingerprint, aflite.evaluate._hash,
# aflite.rundir's fingerprint) before the move; a change here invalidates every user's feature and prediction cache.
PINNED = {
    "data": "4d50aa150efa63b7e740da7c034e5058d5c9c94c40ab178e927a5fcfed3d6e10",
    "data_single": "f0a1a09b1d9cd3814b56b927e7aa4cbe87520ce4ca0dd552ec2ab816bea991e7",
    "parts": "7181f34377c179f87a69fb5bf98636c98379264c587b11c9899a92f883a4b23a",
}


def test_digests_are_unchanged_by_the_move() -> None:
    assert data_fingerprint(["ab", "c", "é"], ["x", "y", "z"], {"k": [1, 2]}) == PINNED["data"]
    assert data_fingerprint(["ab"], None) == PINNED["data_single"]
    parts = ({"a": 1}, "fp", [1, 2], np.arange(5, dtype=np.int64), np.array(["a", "b"]))
    assert hash_parts(*parts) == PINNED["parts"]


def test_data_fingerprint_has_no_separator_collisions() -> None:
    assert data_fingerprint(["ab", "c"], None) != data_fingerprint(["a", "bc"], None)
    assert data_fingerprint(["a"], ["b"]) != data_fingerprint(["a", "b"], None)
    assert data_fingerprint(["a"], None) != data_fingerprint(["a"], None, {"seed": 1})


def test_hash_parts_sees_dtype_and_order() -> None:
    a = np.arange(3, dtype=np.int64)
    assert hash_parts(a) != hash_parts(a.astype(np.int32))
    assert hash_parts("x", "y") != hash_parts("y", "x")


def test_json_digest_ignores_key_order() -> None:
    assert json_digest({"a": 1, "b": [2]}) == json_digest({"b": [2], "a": 1}) != json_digest({"a": 2, "b": [2]})


def test_files_fingerprint_follows_size_mtime_and_folders(tmp_path) -> None:
    f = tmp_path / "a.png"
    f.write_bytes(b"x")
    os.utime(f, ns=(10**18, 10**18))
    refs = [str(f), str(tmp_path / "missing.png")]
    before = files_fingerprint(refs)
    assert files_fingerprint(refs) == before
    os.utime(f, ns=(10**18, 10**18 + 1))
    assert files_fingerprint(refs) != before
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "data.arrow").write_bytes(b"1")
    refs = ["hf:0", "hf:1"]
    by_folder = files_fingerprint(refs, lambda r: str(folder))
    (folder / "data.arrow").write_bytes(b"12")
    assert files_fingerprint(refs, lambda r: str(folder)) != by_folder


def test_inputs_fingerprint_covers_every_row_in_chunks() -> None:
    X = np.random.default_rng(0).standard_normal((1000, 6)).astype(np.float32)
    y = np.arange(1000) % 3
    base = inputs_fingerprint(X, y)
    assert inputs_fingerprint(X, y, chunk_rows=7) == base  # the chunk size does not change the identity
    X2 = X.copy()
    X2[5, 2] += 1e-3  # one value of one row
    assert inputs_fingerprint(X2, y) != base
    assert inputs_fingerprint(X, (y + 1) % 3) != base


def test_dataset_fingerprint_sees_ids_labels_and_texts() -> None:
    base = dataset_fingerprint(["a", "b"], ["x", "y"], ["p1", "p2"], ["h1", "h2"])
    assert dataset_fingerprint(["row-0", "row-1"], ["x", "y"], ["p1", "p2"], ["h1", "h2"]) != base
    assert dataset_fingerprint(["a", "b"], ["x", "x"], ["p1", "p2"], ["h1", "h2"]) != base
    assert dataset_fingerprint(["a", "b"], ["x", "y"], ["p1", "p2"], ["h1", "h3"]) != base
    assert dataset_fingerprint(["a", "b"], ["x", "y"], ["p1", "p2"], None) != base


def test_file_sha256_is_sha256sum_and_a_folder_hash_follows_names_and_bytes(tmp_path) -> None:
    import hashlib

    f = tmp_path / "a.bin"
    f.write_bytes(bytes(range(256)) * 5000)
    assert file_sha256(f, chunk=4096) == hashlib.sha256(f.read_bytes()).hexdigest()
    one, two = tmp_path / "one", tmp_path / "two"
    for folder, order in ((one, ("x", "sub/y")), (two, ("sub/y", "x"))):  # written in another order
        for name in order:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(name)
    assert file_sha256(one) == file_sha256(two)
    (two / "x").write_text("changed")
    assert file_sha256(one) != file_sha256(two)
    (two / "x").write_text("x")
    (two / "x").rename(two / "z")
    assert file_sha256(one) != file_sha256(two)
