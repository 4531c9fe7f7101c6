"""``minilm``: frozen all-MiniLM-L6-v2 sentence embeddings, loaded offline (torch and transformers
imported lazily)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from aflite.device import import_torch, resolve_model_path, torch_device
from aflite.encoders import TextEncoder, embed_items, embed_pairs, tokenize
from aflite.encoders.onnx_text import CPU_DEFAULT, text_runner
from aflite.errors import ParameterError
from aflite.features.base import (
    DEFAULT_MAX_LENGTH,
    BackendEncoder,
    Facts,
    check_gpu_options,
    embed_pipelined,
    progress_bar,
)

if TYPE_CHECKING:  # pragma: no cover
    from tqdm import tqdm as Tqdm




def _load_encoder(model_path: Path, torch: Any, transformers: Any, device: str = "cpu") -> tuple[Any, Any]:
    tok = transformers.AutoTokenizer.from_pretrained(str(model_path), local_files_only=True)
    model = transformers.AutoModel.from_pretrained(str(model_path), local_files_only=True)
    model.to(device)
    return tok, model


def _encode(
    tok: Any,
    model: Any,
    torch: Any,
    a: list[str],
    b: list[str] | None,
    *,
    max_length: int,
    batch_size: int,
    normalize: bool,
    progress: Tqdm | None,
    precision: str = "float32",
    token_budget: int | None = None,
    pipelined: bool = False,
) -> np.ndarray:
    """Mean-pooled (optionally L2-normalised) last hidden states, batches sorted by token length (the opt-in GPU
    path of :mod:`aflite.encoders` with ``precision``, ``token_budget``, ``pipelined``)."""
    enc = TextEncoder.wrap(tok, model, max_length)
    if pipelined:  # tokenized by worker threads ahead of the device
        return embed_pairs(enc, a, b, max_length=max_length, normalize=normalize, progress=progress,
                           precision=precision, token_budget=token_budget)
    items = enc.prepare_pairs(a, b, max_length)
    return embed_items(enc, items, batch_size=batch_size, normalize=normalize, progress=progress,
                       precision=precision, token_budget=token_budget)


class MiniLMFeaturizer(BackendEncoder):
    """Frozen sentence-transformer embeddings: mean pooling over the attention mask, then L2 normalisation.

    Pairs are encoded together (``tokenizer(a, b)``, token type ids 0/1), truncated to ``max_length`` tokens
    (default 256, the model's ``max_seq_length``; 'longest_first' truncation). Batches are sorted by token
    length to minimise padding. ``num_threads=None`` leaves torch's default (all physical cores).

    For a GPU (torch backend): ``pipelined`` (tokenization and padding in worker threads ahead of the device,
    batches of ``token_budget`` padded tokens, default 16,384, embeddings brought back in large blocks; None, the
    default: on a CUDA device only, where one H100 measured it 2.4x the fixed batches), ``precision``
    ``bfloat16``/``float16`` (opt-in autocast; pooling and normalisation in float32; part of the cache key; slower
    than float32 on the H100) and ``token_budget``: see :mod:`aflite.encoders`.
    """

    name = "minilm"
    output_params = ("model_path", "max_length", "normalize")
    # onnx-int8 quantises every MatMul (FFN down-projections too): on 2 quiet cores 2.84x torch against 1.95x with
    # the down-projections in fp32, mean cosine to torch 0.9941, kept-set Jaccard 0.954 on SNLI dev
    # (docs/measured/bench_embed_minilm_int8all.json); both pass the default's bar (0.99 / 0.9)
    INT8_KEEP_FP32 = False

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        batch_size: int = 32,
        normalize: bool = True,
        num_threads: int | None = None,
        device: str | None = None,
        show_progress: bool = True,
        backend: str | None = None,
        export_dir: str | os.PathLike[str] | None = None,
        precision: str | None = None,
        token_budget: int | None = None,
        pipelined: bool | None = None,
    ) -> None:
        # scikit-learn convention: store the arguments as given; _validate (called by transform) checks them
        self.model_path = model_path
        self.max_length = max_length
        self.batch_size = batch_size
        self.normalize = normalize
        self.num_threads = num_threads
        self.device = device
        self.show_progress = show_progress
        self.backend = backend  # torch, onnx, onnx-int8, or None/auto (encoders.onnx_text.resolve_backend)
        self.export_dir = export_dir  # where ONNX exports are cached (featurize sets <cache>/onnx)
        self.precision = precision  # None/float32, bfloat16, float16 (torch backend)
        self.token_budget = token_budget
        self.pipelined = pipelined
        self._tok: Any = None
        self._model: Any = None
        self._resolved: str | None = None
        self._runner: Any = None

    def _validate(self) -> None:
        """Check the constructor arguments; raised at transform time (or early by :func:`make_featurizer`)."""
        if self.max_length < 8:
            raise ParameterError(f"max_length must be >= 8, got {self.max_length}")
        if self.batch_size < 1:
            raise ParameterError(f"batch_size must be >= 1, got {self.batch_size}")
        resolve_model_path(self.model_path)
        self.resolved_backend()
        check_gpu_options(self)

    def resolved_option(self, name: str, value: Any) -> Any:
        """The model folder as found (the default one named outright)."""
        return str(resolve_model_path(value)) if name == "model_path" else value

    def resolved_backend(self) -> str:
        """The backend this featurizer encodes with (the CPU default is decided in encoders.onnx_text)."""
        return self._backend(CPU_DEFAULT)

    def cache_extra(self) -> Facts:
        # Φ cached by the earlier int8 model (down-projections fp32) is not this one's
        if self.resolved_backend() == "onnx-int8" and not self.INT8_KEEP_FP32:
            return {"int8": "every MatMul"}
        return {}

    def _ensure_loaded(self) -> tuple[Any, Any, Any]:
        torch, transformers = import_torch()
        if self.num_threads is not None:
            torch.set_num_threads(int(self.num_threads))
        if self._model is None:
            device = torch_device(self.device) if self.resolved_backend() == "torch" else "cpu"
            self._tok, self._model = _load_encoder(resolve_model_path(self.model_path), torch, transformers, device)
            self._model.eval()
        return self._tok, self._model, torch

    def loaded(self) -> tuple[Any, Any]:
        """The tokenizer and the torch model, loaded once (benchmarks read the model's size from its config)."""
        tok, model, _ = self._ensure_loaded()
        return tok, model

    def transform(
        self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None, *, progress: Tqdm | None = None
    ) -> np.ndarray:
        self._validate()
        tok, model, torch = self._ensure_loaded()
        a = list(texts_a)
        b = None if texts_b is None else list(texts_b)
        own = progress is None
        bar = progress_bar(len(a), self.name, self.show_progress) if own else progress
        try:
            if self.resolved_backend() != "torch":
                return self._encode_onnx(tok, model, torch, a, b, bar)
            return _encode(
                tok,
                model,
                torch,
                a,
                b,
                max_length=self.max_length,
                batch_size=self.batch_size,
                normalize=self.normalize,
                progress=bar,
                precision=check_gpu_options(self),
                token_budget=self.token_budget,
                pipelined=embed_pipelined(self),
            )
        finally:
            if own and bar is not None:
                bar.close()

    def _encode_onnx(self, tok: Any, model: Any, torch: Any, a: list[str], b: list[str] | None,
                     bar: Tqdm | None) -> np.ndarray:
        if self._runner is None:
            pad = tok.pad_token_id if tok.pad_token_id is not None else 0
            self._runner = text_runner(model, torch, self.resolved_backend(), pad_id=pad,
                                       export_dir=self.export_dir, threads=self.num_threads,
                                       keep_fp32=self.INT8_KEEP_FP32)
        items = tokenize(tok, a, b, self.max_length)
        return self._runner.embed(items, batch_size=self.batch_size, normalize=self.normalize, progress=bar)
