"""Small models for tests that need a network but not its quality (fast to load and fine-tune on a CPU); imported
by test modules (``from tiny_models import make_tiny_model``), with nothing else imported at the top so that a
machine without the optional test packages can still use it."""

from __future__ import annotations

import shutil
from pathlib import Path


def make_tiny_model(folder: Path) -> Path:
    """A randomly initialised 2-layer BERT with MiniLM's tokenizer (fast to fine-tune in tests)."""
    import transformers

    from aflite.device import default_model_path

    src = default_model_path()
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / name).is_file():
            shutil.copy(src / name, folder / name)
    vocab = sum(1 for _ in open(src / "vocab.txt", encoding="utf-8"))
    cfg = transformers.BertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=128)
    transformers.BertModel(cfg).save_pretrained(folder)
    return folder
