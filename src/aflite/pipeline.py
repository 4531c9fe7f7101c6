"""From a dataset file to a filtered dataset: load → Φ (featurize) → AFLite → write back, with a summary.

This is what ``aflite run`` and ``aflite demo`` do; it composes :mod:`aflite.data`, :mod:`aflite.features`,
:mod:`aflite.filter` and :mod:`aflite.rundir` without adding logic of its own beyond the paper's protocol:
with the ``warmup`` featurizer the warm-up slice (t rows, as in the paper) trains Φ and is then discarded —
it is neither filtered nor written to the output.
"""

from __future__ import annotations

import html
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aflite._deprecate import progress_flag
from aflite.atomic import write_json, write_text
from aflite.errors import InputError, ParameterError
from aflite.filter import SNLI_DEFAULTS, AFLite
from aflite.threads import limited


@dataclass
class RunResult:
    """What a run left behind: its folder, its summary (also in ``out/summary.json``), the kept mask and the
    filtered dataset (``filtered.<ext>`` for ``run``; ``kept_ids.txt`` for ``filter_files``)."""

    out: Path
    summary: dict[str, Any]
    keep: np.ndarray  # over the dataset's rows: kept in D(Φ) (warm-up rows are False)
    filtered_path: Path


def scaled_defaults(n: int) -> dict[str, int | float]:
    """Table 8's SNLI parameters scaled by n / 550,152 (m and τ do not scale): :class:`AFLite`'s own defaults
    (fractions of |D|) resolved by its own rule, so the defaults live in one place. The floors t >= 2 and n >= 3
    keep what ``aflite run`` chose on tiny data (|D| <= 16); above that the counts are AFLite's exactly."""
    from aflite.phase import resolve_size

    d = AFLite().get_params()
    return {
        "n_partitions": d["n_partitions"],
        "train_size": max(2, resolve_size(d["train_size"], n, "train_size")),
        "slice_size": resolve_size(d["slice_size"], n, "slice_size"),
        "target_size": max(3, resolve_size(d["target_size"], n, "target_size")),
        "threshold": d["threshold"],
    }


def _out_name(src: Path) -> str:
    """filtered<suffixes of the input>, e.g. ``filtered.tsv.gz`` or a folder name for HF datasets."""
    suffixes = "".join(src.suffixes[-2:]) if src.suffix == ".gz" else src.suffix
    return "filtered" + suffixes


@limited  # one thread policy (aflite.threads)
def run(
    data_path: str | Path,
    out: str | Path,
    *,
    featurizer: str = "ngram",
    view: str = "pair",
    params: dict[str, Any] | None = None,
    strategy: str = "slicing",
    seed: int = 0,
    groups: bool | str = True,
    cache_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    show_progress: bool = True,
    quiet: bool | None = None,
    probe: bool = True,
    dataset_options: dict[str, Any] | None = None,
    featurizer_options: dict[str, Any] | None = None,
    device: str = "auto",
    storage: str = "float32",
    image_options: dict[str, Any] | None = None,
    link_dir: str | Path | None = None,
    aflite: AFLite | None = None,
) -> RunResult:
    """Filter a dataset file end to end. ``params`` overrides the scaled Table 8 defaults (counts or
    fractions of |D|: target_size, n_partitions, train_size, slice_size, threshold); ``device`` and ``storage``
    choose where the encoder and the ensemble run (see :class:`aflite.filter.AFLite`). Instead of ``params``,
    ``strategy``, ``seed``, ``device`` and ``storage``, an ``aflite=AFLite(...)`` may be given, as to
    :func:`filter_files`: its parameters are used (its default sizes, fractions of |D|, resolve to the same counts
    as the scaled defaults). ``groups``: True or
    ``"premise"`` (rows with one premise stay on one side of every partition), False or ``"none"``, or a column
    of the file (e.g. a counterfactual family id). ``overwrite`` starts over in an ``out`` that holds a run."""
    show_progress = progress_flag(show_progress, quiet=quiet, where="run: ")
    base: dict[str, Any] = {}
    if aflite is not None:  # one parameter space with filter_files: the estimator's own keywords
        if params is not None:
            raise ParameterError("give the AFLite parameters either as aflite= or as params=, not both")
        base = aflite.get_params()
        defaults = AFLite().get_params()  # a size left at its default is the scaled default (same counts)
        params = {k: base.pop(k) for k in ("target_size", "n_partitions", "train_size", "slice_size", "threshold")}
        params = {k: v for k, v in params.items() if v != defaults[k]}
        strategy, device, storage = base.pop("strategy"), base.pop("device"), base.pop("storage")
        rs = base.pop("random_state")
        if rs is not None:
            if isinstance(rs, bool) or not isinstance(rs, int | np.integer):
                raise ParameterError(f"aflite.random_state must be an int seed for run(), not {rs!r}")
            seed = int(rs)
    from aflite import data, features
    from aflite.rundir import run_filter

    out = Path(out)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    group_spec = "premise" if groups is True else "none" if groups is False else str(groups)
    dopts = dict(dataset_options or {})
    if group_spec != "premise":  # premise is the loader's own default for pairs (no groups for single texts)
        dopts["groups"] = group_spec
    from aflite.data import images

    # images: an image folder, or an image featurizer on a table / HF folder of image paths (aflite.data.images)
    is_images = images.wants_images(data_path, featurizer)
    ds = (images.load_image_dataset(data_path, **(image_options or {})) if is_images
          else data.load_dataset(data_path, **dopts))
    timings["load_seconds"] = time.perf_counter() - t0
    n = len(ds)
    if view in ("hypothesis",) and not ds.is_pair:
        raise ParameterError("view 'hypothesis' needs a pair dataset")
    # checks that need no features come before featurizing (minutes) and before anything is written
    classes, counts = np.unique(ds.labels, return_counts=True)
    if len(classes) < 2:
        raise InputError(f"{data_path}: every one of the {n:,} rows has the label {str(classes[0])!r}; AFLite needs at "
                         f"least two classes")
    grp_all = ds.groups if group_spec != "none" else None
    if grp_all is not None:
        data.warn_twins(ds, {"pair": ("pair", "hypothesis")}.get(view, (view,)), group_spec)
    chosen = scaled_defaults(n)
    given = {k: v for k, v in (params or {}).items() if v is not None}
    af = AFLite(**{**base, **chosen, **given}, strategy=strategy, random_state=seed,  # type: ignore[arg-type]
                device=device, storage=storage)
    resolved = af.resolved_params(n)  # validates against |D| before any expensive step
    t = resolved["train_size"]

    texts_b = ds.texts_b
    fopts = dict(featurizer_options or {})
    if is_images:
        from aflite.features.registry import image_featurizer_options

        fopts = image_featurizer_options(featurizer, fopts)
    t0 = time.perf_counter()
    feats = features.featurize(
        ds.texts_a, texts_b, featurizer, view,
        cache_dir=Path(cache_dir) if cache_dir else out / "cache",
        y=ds.labels.tolist() if featurizer == "warmup" else None,
        ids=ds.ids.tolist() if featurizer == "precomputed" else None,
        warmup_size=t if featurizer == "warmup" else 0.1,
        warmup_seed=seed,
        show_progress=show_progress,
        **fopts,
    )
    timings["featurize_seconds"] = time.perf_counter() - t0
    rows = np.asarray(feats.rows)
    X = feats.X
    if hasattr(X, "toarray"):
        raise ParameterError("AFLite needs dense features: use the ngram featurizer's default (dense) output")

    # the filter runs on D minus the warm-up slice, with the sizes chosen for D
    filt_params = {
        "target_size": resolved["target_size"],
        "n_partitions": resolved["n_partitions"],
        "train_size": t,
        "slice_size": resolved["slice_size"],
        "threshold": resolved["threshold"],
    }
    af.set_params(**filt_params)
    grp = grp_all[rows] if grp_all is not None else None
    y = ds.labels[rows]
    ids = ds.ids[rows]
    out.mkdir(parents=True, exist_ok=True)
    if len(feats.warmup_rows):
        write_text(out / "warmup_ids.txt", "".join(f"{i}\n" for i in ds.ids[feats.warmup_rows]))
    t0 = time.perf_counter()
    extra = {
        "dataset": str(data_path),
        "dataset_size": n,
        "dropped_at_load": ds.dropped,
        "featurizer": {"name": featurizer, "view": view, "options": feats.options, "dim": int(X.shape[1]),
                       "from_cache": feats.from_cache, "info": feats.info},
        "warmup_rows": int(len(feats.warmup_rows)),
        "scaled_defaults": {"scale": n / SNLI_DEFAULTS["dataset_size"], **chosen},
        "overrides": given,
    }
    extra["groups"] = group_spec if grp is not None else "none"
    summary = run_filter(af, X, y, ids, out, groups=grp, resume=resume, overwrite=overwrite,
                         show_progress=show_progress, extra=extra)
    timings["filter_seconds"] = time.perf_counter() - t0

    keep = np.zeros(n, dtype=bool)
    keep[rows[af.keep_mask_]] = True
    t0 = time.perf_counter()
    if is_images:
        removed = np.zeros(n, dtype=bool)
        removed[rows[~af.keep_mask_]] = True
        filtered_path = images.write_outputs(ds, keep, removed, out, _out_name(Path(data_path)), link_dir)
    else:
        filtered_path = data.write_filtered(ds, keep, out / _out_name(Path(data_path)))
    timings["write_seconds"] = time.perf_counter() - t0
    timings["featurize_rows_per_second"] = len(rows) / max(timings["featurize_seconds"], 1e-9)

    if probe and not is_images:  # the probe is a TF-IDF text model
        from aflite.evaluate import compare_partial_input

        t0 = time.perf_counter()
        probe_texts = texts_b if texts_b is not None else ds.texts_a
        sub = [probe_texts[i] for i in rows]
        from tqdm import tqdm

        # 5-fold CV on D, D(Φ) and 3 random subsets of |D(Φ)| rows: minutes on large sets, so it shows progress
        bar = tqdm(total=5, desc="probe (D, D(Φ), 3 random subsets)", unit="set", disable=not show_progress,
                   file=sys.stderr, dynamic_ncols=True)
        try:
            res = compare_partial_input(sub, y, af.keep_mask_, random_state=seed, progress=bar)
        finally:
            bar.close()
        summary["partial_input_probe"] = {
            "model": "TF-IDF word 1-2-gram logistic regression, 5-fold CV, on the "
            + ("hypothesis only" if texts_b is not None else "text"),
            "results": [{**r.to_dict(), "delta_majority": r.accuracy - r.majority} for r in res],
            "meaning": PROBE_MEANING,
        }
        timings["probe_seconds"] = time.perf_counter() - t0
    summary["label_shift"] = label_shift(summary["label_counts_before"], summary["label_counts_after"])
    summary["timings"] = timings
    summary["filtered_dataset"] = str(filtered_path)
    write_json(out / "summary.json", summary)
    write_text(out / "summary.md", render_summary(summary, ds, rows, af))
    return RunResult(out, summary, keep, filtered_path)


def filter_files(
    features: str | Path,
    labels: str | Path,
    out: str | Path,
    *,
    aflite: AFLite | None = None,
    ids: str | Path | None = None,
    groups: str | Path | None = None,
    feature_columns: list[str] | None = None,
    label_column: str | None = None,
    id_column: str | None = None,
    mmap: bool = False,
    resume: bool = False,
    overwrite: bool = False,
    show_progress: bool = True,
    quiet: bool | None = None,
    extra: dict[str, Any] | None = None,
) -> RunResult:
    """AFLite on precomputed features and labels read from files (what ``aflite filter`` does).

    Reads the feature matrix (``.npy``, memory-mapped with ``mmap``, or numeric table columns), the labels
    and optional ids and groups (column ``group``), checks they line up, and runs ``aflite`` (default:
    :class:`AFLite` with its defaults) into the run directory ``out`` (see :mod:`aflite.rundir`).
    """
    show_progress = progress_flag(show_progress, quiet=quiet, where="filter_files: ")
    from aflite import data
    from aflite.rundir import run_filter

    out = Path(out)
    X = data.load_features(features, columns=feature_columns, mmap=mmap)
    y = data.load_labels(labels, column=label_column)
    id_arr = data.load_ids(ids, column=id_column) if ids is not None else np.arange(len(y))
    grp = data.load_labels(groups, column="group") if groups is not None else None
    data.check_aligned(X.shape[0], len(y), len(id_arr))
    if grp is not None and len(grp) != len(y):
        raise InputError(f"{groups}: {len(grp)} groups for {len(y)} labels")
    if len(np.unique(id_arr)) != len(id_arr):
        raise InputError(f"{ids}: ids are not unique")
    af = aflite if aflite is not None else AFLite()
    from aflite.device import resolve_device

    info = {"inputs": {"features": str(features), "labels": str(labels), "ids": None if ids is None else str(ids)},
            "device": resolve_device(af.device) if af.model == "logistic" else "cpu", **(extra or {})}
    summary = run_filter(af, X, y, id_arr, out, groups=grp, resume=resume, overwrite=overwrite,
                         show_progress=show_progress, extra=info)
    write_text(out / "summary.md", render_filter_summary(summary))
    return RunResult(out, summary, np.asarray(af.keep_mask_), out / "kept_ids.txt")


def render_filter_summary(summary: dict[str, Any]) -> str:
    """The readable account of ``aflite filter``: sizes, parameters, stop reason and label counts."""
    p = summary["parameters"]
    lines = [
        f"# aflite filter: {summary.get('inputs', {}).get('features', '')}",
        "",
        f"- |D| = {summary['size_before']} → |D(Φ)| = {summary['size_after']} after {summary['n_iterations']} "
        f"phase(s); stopped because {summary['stop_reason']}",
        f"- parameters: m={p['n_partitions']}, t={p['train_size']}, k={p['slice_size']}, n={p['target_size']}, "
        f"τ={p['threshold']}, strategy {p['strategy']}, model {p['model']}, C={p['C']}, seed {summary.get('seed')}",
        "",
        "| label | before | after | kept % |",
        "|---|---|---|---|",
    ]
    for lab, before in summary["label_counts_before"].items():
        after = summary["label_counts_after"].get(lab, 0)
        lines.append(f"| {_md(str(lab))} | {before} | {after} | {100 * after / max(before, 1):.1f} |")
    return "\n".join(lines) + "\n"


PROBE_MEANING = (
    "A probe that always answers the most frequent label scores the majority rate of the rows it is tested on, so "
    "raw accuracy is not leakage: Δ = accuracy − majority rate of the same rows is what the text adds over that "
    "guess. AFLite worked when Δ on D(Φ) is below Δ on random subsets of the same size; near 0 means the probe "
    "finds no more signal than the label frequencies."
)
SHIFT_WARN_POINTS = 5.0


def label_shift(before: dict[str, int], after: dict[str, int]) -> dict[str, Any]:
    """Class shares before/after filtering and the largest move, with a warning above SHIFT_WARN_POINTS points:
    when shares move, the majority rate moves with them, and raw accuracies on D and D(Φ) stop being comparable."""
    nb, na = max(1, sum(before.values())), max(1, sum(after.values()))
    sb = {k: 100 * v / nb for k, v in before.items()}
    sa = {k: 100 * after.get(k, 0) / na for k in before}
    moves = {k: sa[k] - sb[k] for k in before}
    worst = max(moves, key=lambda k: abs(moves[k])) if moves else None
    out: dict[str, Any] = {"shares_before": sb, "shares_after": sa, "change_points": moves,
                           "max_change_points": 0.0 if worst is None else abs(moves[worst]), "warning": None}
    if worst is not None and abs(moves[worst]) > SHIFT_WARN_POINTS:
        out["warning"] = (
            f"filtering moved the class shares by up to {abs(moves[worst]):.1f} points ({worst} {sb[worst]:.1f}% → "
            f"{sa[worst]:.1f}%); the majority rate went from {max(sb.values()):.1f}% to {max(sa.values()):.1f}%, "
            f"so a raw accuracy on D(Φ) rises or falls with it whatever the text carries: read Δ over the "
            f"majority rate, not raw accuracy")
    return out


def render_summary(summary: dict[str, Any], ds: Any, rows: np.ndarray, af: AFLite, per_label: int = 2) -> str:
    """A short human-readable account: sizes, parameters, label shift, probe, and examples (as Table 9)."""
    p = summary["parameters"]
    f = summary["featurizer"]
    lines = [
        f"# aflite run: {summary['dataset']}",
        "",
        f"- Φ: `{f['name']}` ({f['dim']} dims), view `{f['view']}`"
        + (f"; warm-up slice of {summary['warmup_rows']} rows trained Φ and was discarded" if summary["warmup_rows"]
           else ""),
        f"- |D| = {summary['dataset_size']}, filtered input {p['dataset_size']}, |D(Φ)| = {summary['size_after']}"
        f" after {summary['n_iterations']} phase(s); stopped because {summary['stop_reason']}",
        f"- parameters: m={p['n_partitions']}, t={p['train_size']}, k={p['slice_size']}, n={p['target_size']}, "
        f"τ={p['threshold']}, strategy {p['strategy']}, seed {p['random_state']} (defaults: Table 8 SNLI scaled by "
        f"{summary['scaled_defaults']['scale']:.4f})",
        "",
        "| label | before | after | kept % | share before % | share after % | Δ share (points) |",
        "|---|---|---|---|---|---|---|",
    ]
    shift = summary.get("label_shift") or label_shift(summary["label_counts_before"], summary["label_counts_after"])
    for lab, before in summary["label_counts_before"].items():
        after = summary["label_counts_after"].get(lab, 0)
        lines.append(f"| {_md(str(lab), 60)} | {before} | {after} | {100 * after / max(before, 1):.1f} | "
                     f"{shift['shares_before'][lab]:.1f} | {shift['shares_after'][lab]:.1f} | "
                     f"{shift['change_points'][lab]:+.1f} |")
    if shift["warning"]:
        lines += ["", f"**Warning:** {shift['warning']}."]
    if "partial_input_probe" in summary:
        pr = summary["partial_input_probe"]
        lines += ["", f"Partial-input probe: {pr['model']}", "",
                  "| training set | size | accuracy | majority rate (same rows) | Δ over majority |",
                  "|---|---|---|---|---|"]
        for r in pr["results"]:
            lines.append(f"| {r['name']} | {r['size']} | {100 * r['accuracy']:.1f} ± {100 * r['accuracy_std']:.1f} "
                         f"| {100 * r['majority']:.1f} | {100 * (r['accuracy'] - r['majority']):+.1f} |")
        lines += ["", PROBE_MEANING]
    if "timings" in summary:
        lines += ["", "Timings: " + ", ".join(f"{k} {v:.1f}" for k, v in summary["timings"].items())]

    p_all = af.predictability_
    keep = af.keep_mask_
    labels = ds.labels[rows]

    def table(title: str, idx: np.ndarray) -> list[str]:
        out = ["", f"## {title}", "", "| premise | hypothesis | label | p̃ |", "|---|---|---|---|"]
        for i in idx:
            r = rows[i]
            prem = ds.texts_a[r]
            hyp = ds.texts_b[r] if ds.texts_b is not None else ""
            out.append(f"| {_md(prem)} | {_md(hyp)} | {_md(str(labels[i]))} | {p_all[i]:.2f} |")
        return out

    rng = np.random.default_rng(0)
    removed_pick: list[int] = []
    kept_pick: list[int] = []
    for lab in sorted(Counter(map(str, labels))):
        is_lab = labels.astype(str) == lab
        rem = np.flatnonzero(~keep & is_lab)
        kep = np.flatnonzero(keep & is_lab & ~np.isnan(p_all))
        if len(rem):
            top = rem[np.lexsort((rng.random(len(rem)), -p_all[rem]))][:per_label]
            removed_pick += top.tolist()
        if len(kep):
            low = kep[np.lexsort((rng.random(len(kep)), p_all[kep]))][:per_label]
            kept_pick += low.tolist()
    lines += table("Removed by AFLite (most predictable, per label)", np.array(removed_pick, dtype=int))
    lines += table("Retained by AFLite (least predictable, per label)", np.array(kept_pick, dtype=int))
    return "\n".join(lines) + "\n"


def _md(text: str, limit: int = 300) -> str:
    """Dataset text in a Markdown table cell: shortened, escaped HTML, no pipes or newlines."""
    from aflite.report import shorten

    return html.escape(shorten(text, limit)).replace("|", "\\|").replace("\n", " ")
