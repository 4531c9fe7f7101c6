"""Whether a dataset holds the rows a run read, and when it does not, what differs, in one line: ids the run read
that the data lack (or the other way round), a label changed, the same rows in another order, or other texts.

``evaluate``, ``explain`` and ``audit --compare`` recompute from the data what the run computed (Φ, its warm-up
slice, its partitions), all of which follow the run's row order: the same rows in another order are refused by
name, before anything is computed or written, rather than as a fingerprint that "differs" later."""

from __future__ import annotations

import os
from typing import Any

from aflite.errors import InputError
from aflite.hashing import dataset_fingerprint
from aflite.rundir.names import INSTANCES
from aflite.rundir.read import check_run_dataset, read_run, recorded_dataset_fingerprint

__all__ = ["check_run_rows", "why_rows_differ"]


def check_run_rows(run_dir: str | os.PathLike[str], ds: Any, data: Any, *, any_order: bool = False) -> str:
    """Refuse the run in ``run_dir`` unless ``ds`` (the loaded :class:`~aflite.data.Dataset` of ``data``, its
    name in messages) holds the rows the run read, in its order (``any_order``: in any order, for a reader that
    matches rows by id only, as ``audit --compare`` does); returns the dataset fingerprint. A run that recorded
    no fingerprint gets :func:`check_run_dataset`'s warning."""
    fp = dataset_fingerprint(ds.ids, ds.labels, ds.texts_a, ds.texts_b)
    saved = recorded_dataset_fingerprint(read_run(run_dir).path)
    if saved is not None and saved != fp:
        only_order, why = why_rows_differ(run_dir, ds)
        if not (only_order and any_order):
            raise InputError(f"{run_dir}: {data} is not the data this run read: {why}")
        return fp
    check_run_dataset(run_dir, fp, data)
    return fp


def why_rows_differ(run_dir: str | os.PathLike[str], ds: Any) -> tuple[bool, str]:
    """What differs between the rows of the run (its instances.csv and warm-up ids) and ``ds``, in words, and
    whether only their order does (the same ids with the same labels; texts are not in the run folder, so only
    without a warm-up slice, where instances.csv holds every row)."""
    run = read_run(run_dir)
    try:
        inst, warm = run.instances(), run.warmup_ids()
    except InputError:  # no readable per-row table: the fingerprint is all there is to compare
        return False, ("ids, labels or texts differ; give the data the run was made from, with the same column "
                       "options")
    mine = [str(i) for i in ds.ids]
    theirs = list(inst.ids) + list(warm)
    have, had = set(mine), set(theirs)
    if have != had:
        lost, new = [i for i in theirs if i not in have], [i for i in mine if i not in had]
        parts = ([f"{len(lost):,} of the run's ids are missing (e.g. {lost[0]!r})"] if lost else []) + (
            [f"{len(new):,} ids are not the run's (e.g. {new[0]!r})"] if new else [])
        return False, "; ".join(parts) + "; give the data the run was made from, with the same column options"
    label_of = {str(i): str(v) for i, v in zip(ds.ids, ds.labels, strict=True)}
    changed = [(i, lab) for i, lab in zip(inst.ids, inst.labels, strict=True) if label_of[i] != lab]
    if changed:
        i, lab = changed[0]
        return False, (f"{len(changed):,} row(s) carry another label, e.g. id {i!r}: {lab!r} in the run, "
                       f"{label_of[i]!r} here")
    warm_set = set(warm)
    order = [i for i in mine if i not in warm_set]
    if order != list(inst.ids):
        at = next(k for k, (a, b) in enumerate(zip(order, inst.ids, strict=True)) if a != b)
        exact = not warm and _in_order_fingerprint(ds, inst.ids) == recorded_dataset_fingerprint(run.path)
        return exact, (f"the same {len(mine):,} rows (ids and labels) in another order (the run's row {at} is id "
                       f"{inst.ids[at]!r}, here {order[at]!r})" + ("" if exact or warm else ", and other texts")
                       + f"; Φ, the warm-up slice and the partitions follow the run's row order, so give the rows in "
                       f"that order (the ids of {INSTANCES}"
                       + (", the warm-up ids among them at their places" if warm else "") + ")")
    if warm:
        return False, ("the same ids and labels, but the warm-up rows sit elsewhere or the texts differ; give the "
                       "data the run was made from, in its order")
    return False, ("the same ids and labels in the same order, but other texts (another text column, or edited "
                   "texts); give the data the run was made from, with the same column options")


def _in_order_fingerprint(ds: Any, ids: list[str]) -> str:
    """The dataset fingerprint of ``ds``'s rows put in the order of ``ids`` (all of ``ds``'s ids)."""
    pos = {str(i): k for k, i in enumerate(ds.ids)}
    rows = [pos[i] for i in ids]
    b = None if ds.texts_b is None else [ds.texts_b[r] for r in rows]
    return dataset_fingerprint([ds.ids[r] for r in rows], [ds.labels[r] for r in rows],
                               [ds.texts_a[r] for r in rows], b)
