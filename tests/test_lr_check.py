"""The fine-tuned evaluator's learning-rate check (aflite.evaluate.lr_check), on a tiny randomly initialised BERT."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from aflite.errors import InputError
from aflite.evaluate import FinetuneOptions
from aflite.evaluate.lr_check import check_learning_rate, choose, describe

WORDS = ("yes", "maybe", "never")
NOUNS = ("dog", "cat", "man", "woman", "child", "bird", "car", "tree")


def planted(n: int = 240, seed: int = 0) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """Pairs whose hypothesis ends in its label's word (learnable in a few dozen steps), premise groups of 3."""
    rng = np.random.default_rng(seed)
    a, b, y = [], [], []
    for i in range(n):
        lab = i % 3
        a.append(f"a {NOUNS[rng.integers(8)]} is here number {i // 3}")
        b.append(f"the {NOUNS[rng.integers(8)]} says {WORDS[lab]}")
        y.append(lab)
    return a, b, np.array(y), np.arange(n) // 3


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch = pytest.importorskip("torch")
    from tiny_models import make_tiny_model

    torch.manual_seed(0)  # the tiny model's random weights (5 epochs learn the planted words from 4 of 4 inits)
    return make_tiny_model(tmp_path_factory.mktemp("lr") / "bert")


def test_choose_takes_the_best_accuracy_then_the_lower_loss_then_the_smaller_rate():
    c = [{"lr": 1e-5, "accuracy": 0.5, "loss_end": 0.9}, {"lr": 5e-5, "accuracy": 0.7, "loss_end": 0.8},
         {"lr": 1e-4, "accuracy": 0.7, "loss_end": 0.6}]
    assert choose(c) == 1e-4  # tie on accuracy: the lower final loss
    c[2]["loss_end"] = 0.8
    assert choose(c) == 5e-5  # tie on both: the smaller rate
    c[1]["loss_end"] = float("nan")
    assert choose(c) == 1e-4  # a diverged loss counts as the worst


def test_the_check_picks_the_rate_that_learns_and_records_why(tiny: Path, tmp_path: Path):
    a, b, y, g = planted()
    opts = FinetuneOptions(model_path=str(tiny), batch_size=16, max_length=32, epochs=5, lr_candidates=(3e-3, 1e-6))
    rec = check_learning_rate(a, b, y, 3, options=opts, groups=g, seed=0, cache_dir=tmp_path)
    by_lr = {c["lr"]: c for c in rec["candidates"]}
    assert list(by_lr) == [1e-6, 3e-3]  # tried in increasing order
    assert rec["chosen"] == 3e-3
    # the rate that learns fits the planted words; the tiny one stays near chance with a flat loss
    assert by_lr[3e-3]["accuracy"] > 0.9 > 0.5 > by_lr[1e-6]["accuracy"]
    assert by_lr[3e-3]["loss_end"] < 0.5 * by_lr[3e-3]["loss_start"]
    assert by_lr[1e-6]["loss_end"] > 0.9 * by_lr[1e-6]["loss_start"]
    # held-out part: whole premise groups, never trained on
    assert rec["train_rows"] + rec["heldout_rows"] == len(a) and 40 <= rec["heldout_rows"] <= 80
    assert all(c["steps"] == 5 * int(np.ceil(rec["train_rows"] / 16)) for c in rec["candidates"])
    assert len(by_lr[3e-3]["loss_curve"]["loss"]) == by_lr[3e-3]["steps"]
    assert "chosen 0.003" in describe(rec) and rec["from_cache"] is False
    again = check_learning_rate(a, b, y, 3, options=opts, groups=g, seed=0, cache_dir=tmp_path)
    assert again["from_cache"] is True and again["candidates"] == rec["candidates"]


def test_a_slice_too_small_to_check_is_a_clear_error(tiny: Path):
    a, b, y, _ = planted(6)
    opts = FinetuneOptions(model_path=str(tiny), batch_size=4, max_length=16, lr_candidates=(1e-3,))
    with pytest.raises(InputError, match="learning-rate check"):
        check_learning_rate(a[:3], b[:3], np.zeros(3, dtype=np.int64), 3, options=opts, seed=0)
