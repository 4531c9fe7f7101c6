"""The paper's numbers that option defaults are computed from, in a module that imports nothing, so that
``aflite --help`` can state them without loading scikit-learn (see :mod:`aflite.cli`)."""

from __future__ import annotations

from typing import Any

# Table 8 (appendix A.5), SNLI column, with the paper's final size; used as defaults expressed as
# fractions of |D| so that they scale with the dataset: t = 50K, k = 10K, n ≈ 92K of |D| = 550,152.
SNLI_DEFAULTS: dict[str, Any] = {
    "dataset_size": 550_152,
    "n_partitions": 64,
    "train_size": 50_000,
    "slice_size": 10_000,
    "target_size": 92_000,
    "threshold": 0.75,
}

# the models `aflite evaluate` trains by default (aflite.evaluate.models.ModelSpec strings)
DEFAULT_MODELS = ("probe:minilm:pair", "mlp:minilm:pair", "ngram:pair", "ngram:hypothesis", "ppmi:pair")
# the fine-tuned evaluator's learning-rate check (aflite.evaluate.lr_check): rates around those small BERT-style
# encoders are fine-tuned at, and appendix A.6's 1e-5 (written for RoBERTa-large)
LR_CANDIDATES = (1e-5, 2e-5, 5e-5, 1e-4)
# the fine-tuned evaluator's training-row cap on a CPU (``--cpu-max-train``): at 2,000 rows (66 steps) fine-tuned
# MiniLM stayed at the label prior on the AFLite-filtered SNLI D(Φ warm-up) ("not trained", loss 1.084 → 1.015);
# at 4,000 (132 steps) every set trained (docs/results.md, issue #30). It doubles the CPU time of a fine-tune.
FINETUNE_CPU_MAX_TRAIN = 4000
