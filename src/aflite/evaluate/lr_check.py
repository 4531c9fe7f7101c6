"""The fine-tuned evaluator's learning-rate check: pick the rate once per evaluate run, on training data only.

Appendix A.6's recipe (Adam, lr 1e-5, 3 epochs, batch 92) was written for RoBERTa-large; the bundled
22M-parameter MiniLM barely moves at 1e-5 in a few hundred steps (measured on one H100: loss 1.109 → 1.078
over 3 full epochs of D(Φ warm-up), while 5e-5 trained). A rate is therefore chosen the way practitioners
do: each candidate fine-tunes the same encoder with the same recipe on a seeded slice of D's training part
and is scored on a held-out part of that slice (whole premise groups). The test sets are never seen. The
winner is used for every benchmark set (D, the random subsets, single-iteration, each D(Φ)), so the
comparison between them stays fair. Its figures (accuracy, training loss at start and end, the loss curve
of every candidate) go to results.json.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.atomic import write_json
from aflite.encoders.training import loss_summary
from aflite.errors import InputError
from aflite.evaluate.models import LR_CHECK_FIELDS, FinetuneOptions, _FineTuned
from aflite.hashing import data_fingerprint, hash_parts
from aflite.rundir.evaluate_records import Candidate, LrCheck
from aflite.splits import split_heldout

CHECK_HELDOUT = 0.25  # the slice's share (in premise groups) that scores the candidates
RULE = ("highest accuracy on the slice's held-out part; ties: the lower training loss at the end, then the "
        "smaller rate")
_FORMAT = 1


def choose(candidates: list[Candidate]) -> float:
    """The chosen rate among scored candidates (see RULE); a NaN loss counts as the worst."""
    def key(c: Candidate) -> tuple[float, float, float]:
        end = c.get("loss_end")
        return (-float(c["accuracy"]), math.inf if end is None or not math.isfinite(end) else float(end),
                float(c["lr"]))

    return float(min(candidates, key=key)["lr"])


def check_learning_rate(a: list[str], b: list[str] | None, y: NDArray[np.int64], n_classes: int, *,
                        options: FinetuneOptions, groups: NDArray[Any] | None = None, seed: int = 0,
                        cache_dir: str | Path | None = None, show_progress: bool = False) -> LrCheck:
    """Fine-tune one model per rate in ``options.lr_candidates`` on the slice ``a``/``b``/``y`` (already the view
    the models read) minus a held-out part of CHECK_HELDOUT of its ``groups``, score each on that part, and
    return the record (``chosen``, per candidate ``accuracy``, ``loss_start``, ``loss_end``, ``steps`` and
    ``loss_curve``). ``seed`` draws the split and seeds the training. Cached under ``cache_dir`` by the slice,
    the recipe and the candidates."""
    t0 = time.perf_counter()
    n = len(a)
    cands = sorted({float(c) for c in options.lr_candidates})
    recipe = {k: v for k, v in asdict(options).items()
              if k not in (*LR_CHECK_FIELDS, "lr", "max_train", "cpu_max_train", "eval_max", "cpu_eval_max",
                           "device", "num_threads")}
    key = hash_parts("lr_check", _FORMAT, recipe, cands, data_fingerprint(a, b), np.asarray(y, dtype=np.int64),
                     seed)[:24]
    path = None if cache_dir is None else Path(cache_dir) / "models" / f"lrcheck-{key}.json"
    if path is not None and path.is_file():
        cached: LrCheck = json.loads(path.read_text(encoding="utf-8"))
        cached["from_cache"] = True
        return cached
    held = split_heldout(n, groups, CHECK_HELDOUT, seed)
    tr, te = np.flatnonzero(~held), np.flatnonzero(held)
    y = np.asarray(y, dtype=np.int64)
    if len(np.unique(y[tr])) < 2 or len(te) == 0:
        raise InputError(f"learning-rate check: its slice of {n} rows leaves {len(tr)} training rows with "
                         f"{len(np.unique(y[tr]))} label(s) and {len(te)} held-out rows; give more rows "
                         "(--lr-check-rows) or a rate (--lr)")
    a_tr, a_te = [a[i] for i in tr], [a[i] for i in te]
    b_tr = None if b is None else [b[i] for i in tr]
    b_te = None if b is None else [b[i] for i in te]
    majority = float(np.bincount(y[te]).max() / len(te))
    scored: list[Candidate] = []
    window = 0
    for lr in cands:
        model = _FineTuned(replace(options, lr=lr), seed, show_progress).fit(a_tr, b_tr, y[tr], n_classes)
        acc = float(np.mean(model.predict(a_te, b_te) == y[te]))
        curve = loss_summary(model.losses_, max_points=100)
        window = curve["window"]
        scored.append({"lr": lr, "accuracy": round(acc, 5), "loss_start": curve["start"], "loss_end": curve["end"],
                       "steps": model.steps_, "loss_curve": {"step": curve["step"], "loss": curve["loss"]}})
        del model
    rec: LrCheck = {"chosen": choose(scored), "candidates": scored, "rows": n, "train_rows": int(len(tr)),
           "heldout_rows": int(len(te)), "heldout_majority": round(majority, 5), "seed": seed, "rule": RULE,
           "loss_window": window,
           "seconds": round(time.perf_counter() - t0, 1)}
    if path is not None:
        write_json(path, rec)
    rec["from_cache"] = False
    return rec


def describe(check: LrCheck) -> str:
    """One line for the tables: the slice, each candidate's held-out accuracy and loss, the chosen rate."""
    parts = [f"{c['lr']:g} → {100 * c['accuracy']:.1f} % (loss {_loss(c['loss_start'])} → {_loss(c['loss_end'])})"
             for c in check["candidates"]]
    steps = check["candidates"][0]["steps"] if check["candidates"] else 0
    return (f"learning-rate check on {check['train_rows']:,} + {check['heldout_rows']:,} rows of D's training "
            f"part ({steps} steps each; held-out majority {100 * check['heldout_majority']:.1f} %): "
            + ", ".join(parts) + f"; chosen {check['chosen']:g}")


def _loss(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}"
