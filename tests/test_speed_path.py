"""The text encoder's fast path (issue #43) on the CPU: the pipelined, token-budget path is the default on CUDA
only; host padding is one vectorised copy with the per-row result; and every faster variant the device benchmark
times agrees with the fixed-batch path (cosine >= 0.999) on the real MiniLM."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _pairs(n: int) -> tuple[list[str], list[str]]:
    from aflite.data import load_dataset
    from aflite.data.text import demo_dataset_path

    ds = load_dataset(demo_dataset_path())
    assert ds.texts_b is not None
    return list(ds.texts_a[:n]), list(ds.texts_b[:n])


def test_pipelined_is_the_default_on_cuda_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import aflite.features.base as base
    from aflite.features.minilm import MiniLMFeaturizer
    from aflite.features.warmup import WarmupFeaturizer

    assert base.embed_pipelined(MiniLMFeaturizer(backend="torch", device="torch-cpu")) is False
    assert base.embed_pipelined(MiniLMFeaturizer(backend="torch", device="torch-cpu", pipelined=True)) is True
    monkeypatch.setattr(base, "torch_device", lambda device: "cuda:0")  # a machine with a GPU
    assert base.embed_pipelined(MiniLMFeaturizer(backend="torch", device="cuda")) is True
    assert base.embed_pipelined(MiniLMFeaturizer(backend="torch", device="cuda", pipelined=False)) is False
    if importlib.util.find_spec("onnxruntime") is not None:  # the [onnx] extra (not in the README's test install)
        assert base.embed_pipelined(MiniLMFeaturizer(backend="onnx", device="cuda")) is False
    warm = WarmupFeaturizer(backend="torch", device="cuda")
    assert base.embed_pipelined(warm) is True and warm._gpu_train_options() == {}  # training keeps its path
    with pytest.raises(Exception, match="pipelined must be True, False or None"):
        base.check_gpu_options(MiniLMFeaturizer(backend="torch", pipelined="yes"))  # type: ignore[arg-type]


def test_pad_batch_is_the_per_row_padding() -> None:
    from aflite.encoders import pad_batch

    rng = np.random.default_rng(0)
    items: list[dict[str, list[int]]] = []
    for n in rng.integers(1, 40, size=57):
        ids = rng.integers(1, 30_000, size=n).tolist()
        types = [0] * (n // 2) + [1] * (n - n // 2)
        items.append({"input_ids": ids, "token_type_ids": types, "attention_mask": [1] * n})
    got = pad_batch(items, 7, torch)
    width = max(len(it["input_ids"]) for it in items)
    for key, fill in (("input_ids", 7), ("token_type_ids", 0), ("attention_mask", 0)):
        want = np.array([it[key] + [fill] * (width - len(it[key])) for it in items])
        assert np.array_equal(got[key].numpy(), want), key
    bare = pad_batch([{"input_ids": [5, 6, 7]}, {"input_ids": [8]}], 0, torch)
    assert bare["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]] and bare["input_ids"].tolist() == [[5, 6, 7],
                                                                                                          [8, 0, 0]]


@pytest.mark.slow  # four MiniLM passes: ~1 min on 2 quiet cores, minutes under load
def test_every_fast_variant_agrees_with_the_fixed_batches_on_minilm(minilm_model_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """cosine >= 0.999 to the fixed-batch float32 rows: pipelined, 4x token budget, bfloat16 weights (the bench's
    candidates for the CUDA default), on the real MiniLM and real SNLI pairs."""
    from aflite.encoders import TextEncoder, embed_items, embed_pairs

    monkeypatch.setenv("AFLITE_NUM_THREADS", "1")
    a, b = _pairs(96)
    enc = TextEncoder(minilm_model_path, device="cpu")
    ref = embed_items(enc, enc.prepare_pairs(a, b), batch_size=32, normalize=True)
    variants: dict[str, Any] = {
        "pipelined": embed_pairs(enc, a, b, normalize=True, token_budget=1024, workers=2),
        "pipelined_budget4x": embed_pairs(enc, a, b, normalize=True, token_budget=4096, workers=2),
    }
    enc.module.to(torch.bfloat16)
    try:
        variants["bfloat16_weights"] = embed_pairs(enc, a, b, normalize=True, token_budget=4096, workers=2)
    finally:
        enc.module.to(torch.float32)
    for name, X in variants.items():
        cos = (X * ref).sum(1)
        assert cos.min() >= 0.999, (name, float(cos.min()))
    assert (variants["pipelined"] * ref).sum(1).min() > 0.99999  # float32: the same rows, other batch shapes
