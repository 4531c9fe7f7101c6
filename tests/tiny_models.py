"""Small models for tests that need a network but not its quality (fast to load and fine-tune on a CPU); imported
by test modules (``from tiny_models import make_tiny_model``), with nothing else imported at the top so that a
machine without the optional test packages can still use it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any


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


# A few sentences to train the tiny tokenizers on: every word the tests encode is in them (an unknown word would
# still encode, as pieces or [UNK], but a test of the model path should not rest on that).
CORPUS = [f"{w} dog number {i} runs in the park and an animal {v} outside" for i in range(40)
          for w, v in (("a", "is"), ("the", "is very"))] + [
    "Two women are embracing while holding to go packages.", "The sisters are hugging goodbye.",
    "The men are fighting outside a deli.", "A man is playing a guitar.", "Nobody has a cat.", "The cat sleeps."]

# the families of the paper's Φ (RoBERTa-large) and of the models users bring (DeBERTa-v3 is a deberta-v2 model)
ARCHITECTURES = ("roberta", "deberta-v2", "bert", "modernbert")
NO_TOKEN_TYPES = ("roberta", "modernbert")  # their tokenizers give no token type ids


def _roberta_tokenizer(folder: Path, corpus: list[str]) -> Any:
    """Byte-level BPE trained on ``corpus`` (RoBERTa's scheme: <s> A </s></s> B </s>, no token type ids)."""
    import json

    import tokenizers
    import transformers

    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus, vocab_size=600, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(folder))
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    merges: Any = [tuple(line.split()) for line in (folder / "merges.txt").read_text(encoding="utf-8").splitlines()[1:]
              if line.strip()]
    try:  # transformers 5: the vocabulary and merges themselves
        return transformers.RobertaTokenizer(vocab=vocab, merges=merges)
    except TypeError:  # transformers 4: the files
        return transformers.RobertaTokenizerFast(vocab_file=str(folder / "vocab.json"),
                                                 merges_file=str(folder / "merges.txt"))


def _deberta_tokenizer(corpus: list[str]) -> Any:
    """A SentencePiece-style unigram model trained on ``corpus`` (DeBERTa-v2/v3's scheme: [CLS] A [SEP] B [SEP],
    token type ids 0/1)."""
    import tokenizers
    import transformers

    uni = tokenizers.SentencePieceUnigramTokenizer()
    uni.train_from_iterator(corpus, vocab_size=300, unk_token="[UNK]",
                            special_tokens=["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"])
    cls = getattr(transformers, "DebertaV2TokenizerFast", None) or transformers.DebertaV2Tokenizer
    return cls(tokenizer_object=uni._tokenizer, bos_token="[CLS]", eos_token="[SEP]", unk_token="[UNK]",
               sep_token="[SEP]", pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]")


def _bert_tokenizer(folder: Path, corpus: list[str]) -> Any:
    """WordPiece trained on ``corpus`` (BERT's scheme: [CLS] A [SEP] B [SEP], token type ids 0/1)."""
    import tokenizers
    import transformers

    wp = tokenizers.BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(corpus, vocab_size=400, min_frequency=1)
    wp.save_model(str(folder))
    try:
        return transformers.BertTokenizer(vocab=str(folder / "vocab.txt"))
    except TypeError:
        return transformers.BertTokenizerFast(vocab_file=str(folder / "vocab.txt"))  # type: ignore[attr-defined]


def make_tiny_hf_model(folder: Path, architecture: str, corpus: list[str] | None = None, seed: int = 0) -> Path:
    """A randomly initialised 2-layer model of ``architecture`` (one of :data:`ARCHITECTURES`) with a tokenizer of
    its own kind trained on ``corpus``, saved as a local Hugging Face folder (AutoTokenizer/AutoModel load it):
    nothing is downloaded."""
    import torch
    import transformers

    corpus = list(corpus or CORPUS)
    folder.mkdir(parents=True, exist_ok=True)
    small: dict[str, Any] = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    if architecture == "roberta":
        tok: Any = _roberta_tokenizer(folder, corpus)
        cfg: Any = transformers.RobertaConfig(vocab_size=len(tok), max_position_embeddings=130,
                                                 pad_token_id=1, bos_token_id=0, eos_token_id=2, **small)
        model_cls: Any = transformers.RobertaModel
    elif architecture == "deberta-v2":
        tok = _deberta_tokenizer(corpus)
        cfg = transformers.DebertaV2Config(vocab_size=len(tok), max_position_embeddings=128,
                                           relative_attention=True, pos_att_type=["p2c", "c2p"],
                                           type_vocab_size=0, pad_token_id=0, **small)
        model_cls = transformers.DebertaV2Model
    elif architecture == "bert":
        tok = _bert_tokenizer(folder, corpus)
        cfg = transformers.BertConfig(vocab_size=len(tok), max_position_embeddings=128, **small)
        model_cls = transformers.BertModel
    elif architecture == "modernbert":  # byte-level BPE as RoBERTa's (ModernBERT's own is a BPE too)
        tok = _roberta_tokenizer(folder, corpus)
        cfg = transformers.ModernBertConfig(vocab_size=len(tok), max_position_embeddings=128,
                                            pad_token_id=1, bos_token_id=0, eos_token_id=2, cls_token_id=0,
                                            sep_token_id=2, **small)
        model_cls = transformers.ModernBertModel
    else:
        raise ValueError(f"unknown architecture {architecture!r}; one of {ARCHITECTURES}")
    torch.manual_seed(seed)
    model_cls(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
