"""The "known limits" of a dataset card: what a reader of D(Φ) must not conclude, from the facts of its manifest.

Each limit is one sentence built from the run's own record (its stop reason, the phase it stopped in, what it
left out), so that a card never claims more than the run, the evaluation and the explanation measured.
"""

from __future__ import annotations

from aflite.card.schema import CardManifest, FilterFacts, label_shift, probe_record

__all__ = ["known_limits", "stop_kind"]


def stop_kind(reason: str | None) -> str:
    """``k-rule``, ``target``, ``max-iterations`` or ``other``: why the filter stopped, from its stop reason."""
    text = reason or ""
    if text.startswith("fewer than k="):
        return "k-rule"
    if text.startswith("target size reached"):
        return "target"
    if text.startswith("max_iterations="):
        return "max-iterations"
    return "other"


def _stop_limit(flt: FilterFacts) -> str:
    p = flt.get("parameters") or {}
    phases = flt.get("phases") or []
    kind = stop_kind(flt.get("stop_reason"))
    if kind == "k-rule":
        return (f"The filter stopped by its k-rule ({flt['stop_reason']}), before the target size n = "
                f"{p.get('target_size'):,}: |D(Φ)| = {flt['size_after']:,} is larger than n. This means that the "
                f"ensemble of linear models on this Φ no longer found k = {p.get('slice_size'):,} rows it predicts "
                f"right at least τ = {p.get('threshold')} of the time; it does not mean that D(Φ) is free of "
                f"artifacts, and says nothing about cues that Φ does not represent.")
    if kind == "target":
        left = phases[-1]["n_eligible"] if phases else None
        return (f"The filter stopped at its target size n = {p.get('target_size'):,} ({flt['stop_reason']}), not "
                f"because the predictable rows ran out: in its last phase {left:,} rows still had p̃ >= τ = "
                f"{p.get('threshold')} (before the last slice was removed).") if left is not None else (
                f"The filter stopped at its target size ({flt['stop_reason']}), not because the predictable rows "
                f"ran out.")
    if kind == "max-iterations":
        return (f"The filter stopped after a fixed number of phases ({flt['stop_reason']}), neither at its target "
                f"size nor by its k-rule.")
    return f"The filter stopped because: {flt.get('stop_reason')}."


def known_limits(m: CardManifest) -> list[str]:
    """The limits of the card whose manifest is ``m`` (everything but ``limits`` itself)."""
    flt, phi = m["filter"], m["phi"]
    out = [_stop_limit(flt)]
    out.append(f"D(Φ) depends on Φ and on the seed: another featurizer, view, model or seed keeps a different set "
               f"of rows. This card describes one run (Φ {phi['featurizer']}, view {phi['view']}, seed "
               f"{flt.get('seed')}); its kept ids are kept_ids.txt (sha256 above).")
    unscored = sum(int(ph.get("n_unscored") or 0) for ph in flt.get("phases") or [])
    if unscored:
        out.append(f"{unscored:,} row-phases were never held out (no p̃): such rows were neither kept for being hard "
                   f"nor removed for being easy in that phase.")
    if phi.get("warmup_rows"):
        out.append(f"The {phi['warmup_rows']:,} rows that fine-tuned Φ (the warm-up slice, warmup_ids.txt) are in "
                   f"neither D(Φ) nor the filter's input: the paper discards them.")
    training = phi.get("warmup_training") or {}
    if training.get("warmup_loss_judgement") == "barely moved":
        out.append(f"The warm-up's loss barely moved ({float(training.get('warmup_loss_start') or 0):.3f} → "
                   f"{float(training.get('warmup_loss_end') or 0):.3f} over {training.get('warmup_steps')} steps): Φ "
                   f"is close to the "
                   f"frozen encoder, not the fine-tuned Φ of the paper; more warm-up rows or steps would be needed.")
    dropped = (m["input"] or {}).get("dropped_at_load")
    if dropped:
        why = ", ".join(f"{n:,} {k.replace('_', ' ')}" for k, n in sorted(dropped.items())) if isinstance(
            dropped, dict) else str(dropped)
        out.append(f"Rows of the input were dropped when it was read ({why}); they are in neither D nor D(Φ), and "
                   f"the input's row count above does not include them.")
    shift = label_shift(m)
    if shift and shift.warning:
        out.append(f"Label shift: {shift.warning}.")
    probe = probe_record(m)
    if probe and probe.skipped:
        out.append(f"The run's hypothesis-only probe was skipped: {probe.skipped}.")
    elif probe:
        out.append("The run's probe is one cheap model (TF-IDF logistic regression on the hypothesis, or the text): "
                   "a smaller lead over same-size random subsets says the filter removed cues this probe uses, not "
                   "that no cue is left.")
    if m["task_categories"] == ["image-classification"]:
        out.append(f"The card's data file (made from the run's {m['output']['file']}) lists the kept images by path; "
                   f"the images themselves are not in it.")
    ev = m.get("evaluate")
    if ev is None:
        out.append("No evaluation was given (aflite evaluate, --evaluate): how models trained on D(Φ) fare is not "
                   "measured on this card.")
    else:
        caps = ev.get("finetune_caps")
        if caps and (caps["train_cap_used"] or caps["eval_cap_used"]):
            out.append(f"The fine-tuned models of the evaluation ran on {caps['device']} with caps: at most "
                       f"{caps['train_cap_used'] or 'all'} training rows per set and "
                       f"{caps['eval_cap_used'] or 'all'} rows per evaluation set, so their figures are not "
                       f"those of full training.")
        out.append(f"The evaluation trained only these models: {', '.join(ev['models'])}; other models (the paper's "
                   f"RoBERTa-large among them) may be affected differently.")
        if "random" not in (ev.get("sets") or {}):
            out.append("The evaluation trained no same-size random subsets of D (--no-random-baseline): a change "
                       "between D and D(Φ) on this card may be the smaller size alone, not the rows the filter chose.")
    if m.get("explain") is None:
        out.append("No explanation was given (aflite explain, --explain): which tokens remain significant artifacts "
                   "in D(Φ) is not measured on this card.")
    if m["license"]["id"] == "unknown":
        out.append("The license is unknown: aflite does not know the input's license and none was given "
                   "(--license). Set it before publishing.")
    return out
