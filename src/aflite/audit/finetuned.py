"""Fine-tuned encoders, gradient-norm token relevance and TRA (eqs. 9-10)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aflite.audit.check_summaries import TraDetails
from aflite.audit.metrics import _as_1d
from aflite.device import import_torch, resolve_model_path
from aflite.encoders import Batch, TextEncoder, training
from aflite.errors import InputError, ParameterError
from aflite.progress import tqdm  # Jupyter: a widget bar, or none without ipywidgets


@dataclasses.dataclass
class FineTuned:
    """A fine-tuned encoder with a linear head over the mean-pooled last hidden state."""

    tokenizer: Any
    encoder: Any
    head: Any
    classes: np.ndarray
    steps: int
    losses: list[float]
    max_length: int = 128


def _torch() -> tuple[Any, Any]:
    return import_torch()


def _model_path(model_path: str | Path | None) -> Path:
    return resolve_model_path(model_path)


def _batch(tok: Any, a: list[str], b: list[str] | None, max_length: int, device: str) -> Batch:
    enc = tok(a, b, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
    return {k: v.to(device) for k, v in enc.items()}


def _pool(hidden: Any, mask: Any) -> Any:
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)


def finetune(
    texts_a: Sequence[str],
    texts_b: Sequence[str] | None,
    y: Any,
    *,
    model_path: str | Path | None = None,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 5e-5,
    max_length: int = 128,
    seed: int = 0,
    device: str | None = None,
    cache_file: Path | None = None,
    show_progress: bool = True,
    desc: str = "fine-tuning",
) -> FineTuned:
    """Fine-tune the encoder (default the bundled MiniLM) + linear head for ``steps`` AdamW steps (linear decay):
    the one trainer, :func:`aflite.encoders.training.fit_classifier` with the ``AUDIT`` preset.

    With ``cache_file`` an identical earlier run's weights are loaded instead of training again.
    """
    path = _model_path(model_path)
    yy = _as_1d(y, "labels")
    classes, yi = np.unique(yy, return_inverse=True)
    if len(classes) < 2:
        raise InputError("fine-tuning needs at least 2 label classes")
    a = list(texts_a)
    b = None if texts_b is None else list(texts_b)
    cfg = training.AUDIT.replace(max_steps=steps, batch_size=batch_size, lr=lr, seed=seed, shuffle_seed=(seed,),
                                 device=device)
    training.seeded(seed)
    enc = TextEncoder(path, device=device, max_length=max_length)
    if cache_file is not None and cache_file.is_file():
        head = training.make_head(enc.torch, enc.dim, len(classes), cfg.head_dropout, enc.device)
        _, res = training.load_checkpoint(cache_file, enc, head)
        return FineTuned(enc.tokenizer, enc.module, head, classes, res.steps, res.losses, max_length)
    head, res = training.fit_classifier(enc, enc.prepare_pairs(a, b, max_length), yi, len(classes), cfg, desc=desc,
                                        show_progress=show_progress)
    if cache_file is not None:
        training.save_checkpoint(cache_file, enc, head, classes, res)
    return FineTuned(enc.tokenizer, enc.module, head, classes, res.steps, res.losses, max_length)


def predict(model: FineTuned, texts_a: Sequence[str], texts_b: Sequence[str] | None = None,
            batch_size: int = 64) -> np.ndarray:
    """Predicted labels (from ``model.classes``)."""
    torch, _ = _torch()
    dev = str(next(model.encoder.parameters()).device)
    a = list(texts_a)
    b = None if texts_b is None else list(texts_b)
    out = np.empty(len(a), dtype=np.int64)
    with torch.inference_mode():
        for s in range(0, len(a), batch_size):
            batch = _batch(model.tokenizer, a[s : s + batch_size], None if b is None else b[s : s + batch_size],
                           model.max_length, dev)
            logits = model.head(_pool(model.encoder(**batch).last_hidden_state, batch["attention_mask"]))
            out[s : s + batch_size] = logits.argmax(dim=1).cpu().numpy()
    return model.classes[out]


def embed_finetuned(model: FineTuned, texts: Sequence[str], batch_size: int = 64,
                    show_progress: bool = False) -> np.ndarray:
    """Mean-pooled last hidden states of the fine-tuned encoder (what its head reads) for single texts (a
    dataset file's Φ is :func:`aflite.commands.embed.embed`)."""
    torch, _ = _torch()

    dev = str(next(model.encoder.parameters()).device)
    t = list(texts)
    order = np.argsort([len(x) for x in t], kind="stable")
    out = np.empty((len(t), int(model.encoder.config.hidden_size)), dtype=np.float32)
    with torch.inference_mode():
        for s in tqdm(range(0, len(t), batch_size), desc="embedding (fine-tuned)", disable=not show_progress):
            idx = order[s : s + batch_size]
            batch = _batch(model.tokenizer, [t[i] for i in idx], None, model.max_length, dev)
            out[idx] = _pool(model.encoder(**batch).last_hidden_state, batch["attention_mask"]).float().cpu().numpy()
    return out


def token_relevance(model: FineTuned, text_a: str, text_b: str | None = None) -> np.ndarray:
    """Eq. 9: ‖∂ f_ŷ / ∂ emb(w_j)‖₂ over the input tokens (special tokens included), normalised to sum to 1.

    f_ŷ is the logit of the model's predicted class; emb(w_j) the input word embedding of token j.
    """
    torch, _ = _torch()
    dev = str(next(model.encoder.parameters()).device)
    batch = _batch(model.tokenizer, [text_a], None if text_b is None else [text_b], model.max_length, dev)
    ids = batch.pop("input_ids")
    emb = model.encoder.get_input_embeddings()(ids).detach().requires_grad_(True)
    hidden = model.encoder(inputs_embeds=emb, **batch).last_hidden_state
    logits = model.head(_pool(hidden, batch["attention_mask"]))[0]
    logits[int(logits.argmax())].backward()
    g = emb.grad[0].norm(dim=1).detach().cpu().numpy().astype(np.float64)
    total = g.sum()
    return g / total if total > 0 else g


def pad_relevance(m_bias: Any, length: int, view: str) -> np.ndarray:
    """Zero-pad the biased model's relevance vector to ``length``: prepended for the hypothesis, appended for the
    premise (so that the sentence's tokens line up with its tokens at the end / start of the pair input)."""
    m = np.asarray(m_bias, dtype=np.float64)
    if len(m) > length:
        raise InputError(f"biased relevance vector ({len(m)}) is longer than the pair's ({length})")
    pad = np.zeros(length - len(m))
    if view == "hypothesis":
        return np.concatenate([pad, m])
    if view == "premise":
        return np.concatenate([m, pad])
    raise ParameterError(f"view must be 'hypothesis' or 'premise', got {view!r}")


def tra_score(m_normal: Any, m_bias: Any, view: str) -> float:
    """Eq. 10: cosine between the normal relevance vector and the zero-padded biased one."""
    mn = np.asarray(m_normal, dtype=np.float64)
    mb = pad_relevance(m_bias, len(mn), view)
    den = float(np.linalg.norm(mn) * np.linalg.norm(mb))
    return float(mn @ mb / den) if den > 0 else float("nan")


@dataclasses.dataclass
class TraResult:
    score: float
    per_sample: np.ndarray
    rows: np.ndarray

    def details(self) -> TraDetails:
        """What the TRA check's summary records: the mean, the rows scored and the spread."""
        return TraDetails(self.score, len(self.rows), float(np.nanstd(self.per_sample)))


def tra(
    normal: FineTuned, biased: FineTuned, premises: Sequence[str], hypotheses: Sequence[str], view: str,
    rows: Any = None, show_progress: bool = False,
) -> TraResult:
    """Dataset-level TRA: mean over ``rows`` (default all) of eq. 10."""

    r = np.arange(len(premises)) if rows is None else np.asarray(rows, dtype=np.int64)
    vals = np.empty(len(r))
    for j, i in enumerate(tqdm(r, desc=f"TRA ({view})", disable=not show_progress)):
        mn = token_relevance(normal, premises[i], hypotheses[i])
        single = hypotheses[i] if view == "hypothesis" else premises[i]
        mb = token_relevance(biased, single)
        if len(mb) > len(mn):  # pair input truncated harder than the single sentence
            mb = mb[-len(mn):] if view == "hypothesis" else mb[: len(mn)]
        vals[j] = tra_score(mn, mb, view)
    return TraResult(float(np.nanmean(vals)) if len(vals) else float("nan"), vals, r)
