"""Models that did not train: marked ``not_trained`` instead of being printed as findings.

A model that answers one class for nearly every row of a test set whose gold labels are mixed, or a fine-tuned
model whose training loss did not fall, says nothing about its training data: its accuracy is the share of that
one class. Such a model is marked with the reason and advice that follows from how far it got (fewer than three
epochs: more steps; three or more: another learning rate or a larger model), and the tables, results.json and
the verdict show "not trained" instead of its accuracy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.rundir.evaluate_records import NotTrained, ScoreRecord

ONE_CLASS_SHARE = 0.95  # predicting one class for at least this share of a test set
LOSS_FALL = 0.10  # a training loss that fell by less than this fraction of its first value "did not fall"
EPOCHS_NEEDED = 3  # the usual fine-tuning budget (BERT-style recipes, and the paper's RoBERTa runs)


def not_trained(pred: NDArray[Any], gold: NDArray[Any], *, steps: int | None = None,
                first_loss: float | None = None, final_loss: float | None = None, train_rows: int = 0,
                batch_size: int | None = None, device: str | None = None, lr: float | None = None,
                lr_source: str | None = None, stopped_by: str | None = None,
                available_rows: int | None = None) -> NotTrained | None:
    """Why this model counts as not trained (a dict for results.json), or None when it trained.

    For a fine-tuned model (``steps`` and ``batch_size`` given) the advice depends on how far it got. Fewer than
    EPOCHS_NEEDED passes over its ``train_rows``: it needs more steps (``steps_needed_estimate``, EPOCHS_NEEDED
    passes at ``batch_size``; a GPU is suggested only when ``device`` is the CPU). EPOCHS_NEEDED passes or more:
    more steps of the same recipe will not help; it needs another learning rate (``lr``, chosen as
    ``lr_source`` says) or a larger model, and no step estimate is given. ``stopped_by`` names the option that
    ended training early (``--max-steps`` or ``--epochs``), for the advice. ``available_rows``: the training rows
    before a cap (``--max-train``) took ``train_rows`` of them; a capped model is also advised more rows."""
    pred, gold = np.asarray(pred).astype(str), np.asarray(gold).astype(str)
    reasons = []
    share = 0.0
    if len(pred):
        values, counts = np.unique(pred, return_counts=True)
        top = int(counts.argmax())
        share = float(counts[top] / len(pred))
        gold_share = float(np.unique(gold, return_counts=True)[1].max() / len(gold)) if len(gold) else 1.0
        if share >= ONE_CLASS_SHARE and gold_share < ONE_CLASS_SHARE:
            reasons.append(f"predicts {str(values[top])!r} for {100 * share:.1f}% of the {len(pred):,} test rows")
    if first_loss is not None and final_loss is not None and math.isfinite(first_loss) and first_loss > 0 and (
            final_loss > (1 - LOSS_FALL) * first_loss):
        reasons.append(f"its training loss did not fall ({first_loss:.3f} → {final_loss:.3f})")
    if not reasons:
        return None
    out: NotTrained = {"reason": "; ".join(reasons), "predicted_class_share": round(share, 4), "steps": steps}
    if steps is not None and batch_size and train_rows > 0:
        per_epoch = math.ceil(train_rows / batch_size)
        epochs = steps / per_epoch
        out["epochs_run"] = round(epochs, 2)
        source = {"check": "chosen by the learning-rate check", "given": "given",
                  "default": "the default"}.get(lr_source or "", lr_source or "")
        ran = (f"it ran {steps:,} steps = {epochs:.1f} epochs of {train_rows:,} rows at batch {batch_size}"
               + (f", lr {lr:g}" + (f" ({source})" if source else "") if lr is not None else ""))
        if epochs >= EPOCHS_NEEDED - 1e-9:
            out["advice"] = "learning rate or capacity"
            out["budget_note"] = (f"{ran}: more steps of this recipe will not help; try another learning rate "
                                  "(--lr, or the learning-rate check's --lr-candidates) or a larger model "
                                  "(--model-path)")
            if available_rows is not None and available_rows > train_rows:
                cap = "--max-train / --cpu-max-train" if device == "cpu" else "--max-train"
                out["budget_note"] += (f", or more of its rows: it trained on a sample of {train_rows:,} of "
                                       f"{available_rows:,} (raise {cap}" + (", or use a GPU)" if device == "cpu"
                                                                             else ")"))
        else:
            need = EPOCHS_NEEDED * per_epoch
            out["advice"] = "more steps"
            out["steps_needed_estimate"] = int(need)
            gpu = ", or use a GPU" if device == "cpu" else ""
            out["budget_note"] = (f"~{need:,} steps ({EPOCHS_NEEDED} epochs of {train_rows:,} rows at batch "
                                  f"{batch_size}); {ran}: raise {stopped_by or '--max-steps or --epochs'}{gpu}")
    else:
        out["budget_note"] = "a model of this kind needs more (or more varied) training rows or features"
    return out


def merge(records: list[ScoreRecord]) -> NotTrained | None:
    """The aggregate mark of one (model, training set) over its seeds: set when any seed did not train."""
    bad = [r for r in records if r.get("not_trained")]
    if not bad:
        return None
    first = bad[0]["not_trained"].copy()
    first["seeds_not_trained"] = [r.get("seed") for r in bad]
    first["seeds"] = len(records)
    return first
