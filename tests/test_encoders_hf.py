"""Any Hugging Face text encoder a user brings: tiny RoBERTa-, DeBERTa-v2-, BERT- and ModernBERT-style models, each
with a tokenizer of its kind trained here on the data (byte-level BPE, a SentencePiece-style unigram, WordPiece), built
from a config and saved as local folders (tests/tiny_models.py; nothing is downloaded), run through the three places
aflite loads a model folder: the frozen Φ (``aflite run --featurizer minilm --model-path``, torch and ONNX Runtime),
the warm-up Φ (``--featurizer warmup --model-path``) and the fine-tuned evaluator (``aflite evaluate --models
finetune:pair --model-path``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aflite.cli import main
from aflite.data import demo_dataset_path, load_dataset

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from tiny_models import ARCHITECTURES, NO_TOKEN_TYPES, make_tiny_hf_model  # noqa: E402

SMALL = ["--target-size", "150", "--n-partitions", "8", "--train-size", "60", "--slice-size", "30", "--quiet",
         "--no-probe"]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 240 pairs of the bundled SNLI sample."""
    lines = gzip.decompress(demo_dataset_path().read_bytes()).splitlines(keepends=True)
    path = tmp_path_factory.mktemp("hf") / "small.tsv.gz"
    path.write_bytes(gzip.compress(b"".join(lines[:241])))
    return path


@pytest.fixture(scope="module", params=ARCHITECTURES)
def model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, data: Path) -> tuple[str, Path]:
    """(architecture, folder): a tiny random model whose tokenizer was trained on the data's sentences."""
    ds = load_dataset(data)
    corpus = list(ds.texts_a) + list(ds.texts_b or [])
    return request.param, make_tiny_hf_model(tmp_path_factory.mktemp(request.param) / "model", request.param, corpus)


def test_the_folders_load_as_their_own_kind(model: tuple[str, Path]) -> None:
    arch, folder = model
    tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    net = transformers.AutoModel.from_pretrained(str(folder), local_files_only=True)
    assert net.config.model_type == arch
    enc = tok("A man plays.", "Nobody plays.")
    # RoBERTa and ModernBERT have no token type ids; BERT and DeBERTa mark the second text with 1
    assert ("token_type_ids" in enc) == (arch not in NO_TOKEN_TYPES)
    if arch not in NO_TOKEN_TYPES:
        assert set(enc["token_type_ids"]) == {0, 1}


def read_results(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "results.json").read_text(encoding="utf-8")))


def test_frozen_phi_with_model_path_on_torch_and_onnx(model: tuple[str, Path], data: Path, tmp_path: Path) -> None:
    """``--featurizer minilm --model-path`` embeds with the user's model: the same Φ from torch and from the ONNX
    export (cosine ≥ 0.999 per row), and a finished filter."""
    pytest.importorskip("onnxruntime")  # the [onnx] extra (not in the README's test install)
    pytest.importorskip("onnx")
    arch, folder = model
    phi = {}
    for backend in ("torch", "onnx"):
        out = tmp_path / backend
        embed = tmp_path / f"emb-{backend}"
        assert main(["embed", str(data), "--out", str(embed), "--featurizer", "minilm", "--model-path", str(folder),
                     "--backend", backend, "--quiet"]) == 0
        phi[backend] = np.load(embed / "features.npy")
        assert main(["run", str(data), "--out", str(out), "--featurizer", "minilm", "--model-path", str(folder),
                     "--backend", backend, *SMALL]) == 0
        res = read_results(out)
        assert res["featurizer"]["dim"] == 32 and res["size_after"] < res["size_before"] == 240
    a, b = phi["torch"], phi["onnx"]
    assert a.shape == b.shape == (240, 32)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cos.min() >= 0.999, (arch, cos.min())
    assert np.abs(a[0] - a[1]).max() > 1e-4  # rows differ: the texts reached the model


def test_warmup_phi_with_model_path(model: tuple[str, Path], data: Path, tmp_path: Path) -> None:
    """``--featurizer warmup --model-path``: the model is fine-tuned on the warm-up slice (its steps and losses
    recorded), then embeds the rest, which AFLite filters."""
    arch, folder = model
    out = tmp_path / "run"
    assert main(["run", str(data), "--out", str(out), "--featurizer", "warmup", "--model-path", str(folder),
                 "--max-steps", "4", "--backend", "torch", *SMALL]) == 0
    res = read_results(out)
    info = res["featurizer"]["info"]
    assert res["featurizer"]["dim"] == 32 and res["warmup_rows"] > 0
    assert res["size_before"] == 240 - res["warmup_rows"]
    assert info["warmup_steps"] == 4 and np.isfinite(info["warmup_final_loss"]), info
    assert str(folder) in json.dumps(res["featurizer"])  # the options name the user's folder


@pytest.mark.slow  # 8-18 s per architecture on two busy cores
def test_fine_tuned_evaluator_with_model_path(model: tuple[str, Path], data: Path, tmp_path: Path) -> None:
    """``aflite evaluate --models finetune:pair --model-path``: the user's model is fine-tuned on D and on D(Φ)
    (steps taken, a finite loss) and scored on the held-out rows."""
    arch, folder = model
    run, ev = tmp_path / "run", tmp_path / "ev"
    assert main(["run", str(data), "--out", str(run), "--featurizer", "ngram", *SMALL]) == 0
    assert main(["evaluate", str(data), str(run), "--out", str(ev), "--models", "finetune:pair",
                 "--model-path", str(folder), "--seeds", "1", "--no-single-iteration", "--no-random-baseline",
                 "--lr", "1e-3", "--max-train", "60", "--max-steps", "3", "--batch-size", "8", "--max-length",
                 "48", "--eval-max", "20", "--device", "cpu", "--quiet"]) == 0
    res = read_results(ev)
    rows = [r for r in res["runs"] if r["model"] == "finetune:pair"]
    assert sorted(r["train_set"] for r in rows) == sorted(s["name"] for s in res["training_sets"])
    assert len(rows) == 2  # D and D(Φ)
    for r in rows:
        assert r["steps"] == 3 and np.isfinite(r["final_loss"]) and np.isfinite(r["first_loss"])
        assert 0.0 <= r["own_heldout"]["accuracy"] <= 1.0 and r["own_heldout"]["n"] > 0
    assert str(folder) in json.dumps(res["config"])  # the options name the user's folder
