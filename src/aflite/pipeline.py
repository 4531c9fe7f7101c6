"""From a dataset file to a filtered dataset: load → Φ (featurize) → AFLite → write back, with a summary.

This is what ``aflite run`` and ``aflite demo`` do; it composes :mod:`aflite.data`, :mod:`aflite.features`,
:mod:`aflite.filter` and :mod:`aflite.rundir` without adding logic of its own beyond the paper's protocol:
with the ``warmup`` featurizer the warm-up slice (t rows, as in the paper) trains Φ and is then discarded —
it is neither filtered nor written to the output.
"""

from __future__ import annotations

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
    """Table 8's SNLI parameters scaled by n / 550,152 (m and τ do not scale)."""
    s = n / SNLI_DEFAULTS["dataset_size"]
    return {
        "n_partitions": SNLI_DEFAULTS["n_partitions"],
        "train_size": max(2, int(round(SNLI_DEFAULTS["train_size"] * s))),
        "slice_size": max(1, int(round(SNLI_DEFAULTS["slice_size"] * s))),
        "target_size": max(3, int(round(SNLI_DEFAULTS["target_size"] * s))),
        "threshold": SNLI_DEFAULTS["threshold"],
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
    title: str | None = None,
) -> RunResult:
    """Filter a dataset file end to end. ``params`` overrides the scaled Table 8 defaults (counts or
    fractions of |D|: target_size, n_partitions, train_size, slice_size, threshold); ``device`` and ``storage``
    choose where the encoder and the ensemble run (see :class:`aflite.filter.AFLite`). ``groups``: True or
    ``"premise"`` (rows with one premise stay on one side of every partition), False or ``"none"``, or a column
    of the file (e.g. a counterfactual family id). ``overwrite`` starts over in an ``out`` that holds a run.
    ``title`` names the data in summary.md's heading (default: its path)."""
    show_progress = progress_flag(show_progress, quiet=quiet, where="run: ")
    from aflite import data, features
    from aflite.rundir import run_filter

    out = Path(out)
    timings: dict[str, float] = {}
    t0 = t_call = time.perf_counter()
    group_spec = "premise" if groups is True else "none" if groups is False else str(groups)
    dopts = dict(dataset_options or {})
    if group_spec != "premise":  # premise is the loader's own default for pairs (no groups for single texts)
        dopts["groups"] = group_spec
    from aflite import images

    # images: an image folder, or an image featurizer on a table / HF folder of image paths (aflite.images)
    is_images = images.wants_images(data_path, featurizer)
    ds = (images.load_image_dataset(data_path, **(image_options or {})) if is_images
          else data.load_dataset(data_path, **dopts))
    timings["load_seconds"] = time.perf_counter() - t0
    n = len(ds)
    if link_dir is not None:  # checked now, not after the filter has run for an hour
        if not is_images:
            raise ParameterError("--link-dir builds links to kept images; this dataset holds text")
        from aflite.links import check_link_dir, check_link_names

        check_link_dir(link_dir)
        check_link_names(ds, by_label=ds.source.format != "imagefolder")
    if view in ("hypothesis",) and not ds.is_pair:
        raise ParameterError("view 'hypothesis' needs a pair dataset")
    # checks that need no features come before featurizing (minutes) and before anything is written
    classes, counts = np.unique(ds.labels, return_counts=True)
    if len(classes) < 2:
        raise InputError(f"{data_path}: every one of the {n:,} rows has the label {str(classes[0])!r}; AFLite needs at "
                         f"least two classes")
    probe_skipped = None
    if probe and not is_images:  # a probe D itself cannot train is known now, not after the filter
        from aflite.evaluate import probe_skip_reason

        probe_skipped = probe_skip_reason(ds.labels)
        if probe_skipped is not None:
            probe = False
            print(f"note: the hypothesis-only probe is skipped: {probe_skipped}", file=sys.stderr)
    grp_all = ds.groups if group_spec != "none" else None
    if grp_all is not None:
        data.warn_twins(ds, {"pair": ("pair", "hypothesis")}.get(view, (view,)), group_spec)
    chosen = scaled_defaults(n)
    given = {k: v for k, v in (params or {}).items() if v is not None}
    af = AFLite(**{**chosen, **given}, strategy=strategy, random_state=seed, device=device,  # type: ignore[arg-type]
                storage=storage)
    resolved = af.resolved_params(n)  # validates against |D| before any expensive step
    t = resolved["train_size"]

    from aflite.hashing import dataset_fingerprint
    from aflite.rundir import check_resume_dataset

    dataset_fp = dataset_fingerprint(ds.ids, ds.labels, ds.texts_a, ds.texts_b)
    if resume:  # another dataset is refused now, before anything is computed or cached
        check_resume_dataset(out, dataset_fp)
    texts_b = ds.texts_b
    fopts = dict(featurizer_options or {})
    if is_images:
        fopts = images.featurizer_options(featurizer, fopts)
    t0 = time.perf_counter()
    cache_path = Path(cache_dir) if cache_dir else out / "cache"
    cached_before = _files(cache_path) if resume else None
    feats = features.featurize(
        ds.texts_a, texts_b, featurizer, view,
        cache_dir=cache_path,
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
    t0 = time.perf_counter()
    extra = {
        "dataset": str(data_path),
        "dataset_fingerprint": dataset_fp,
        "dataset_size": n,
        "dropped_at_load": ds.dropped,
        "featurizer": {"name": featurizer, "view": view, "options": feats.options, "dim": int(X.shape[1]),
                       "from_cache": feats.from_cache, "info": feats.info},
        "warmup_rows": int(len(feats.warmup_rows)),
        "scaled_defaults": {"scale": n / SNLI_DEFAULTS["dataset_size"], **chosen},
        "overrides": given,
    }
    extra["groups"] = group_spec if grp is not None else "none"
    try:
        summary = run_filter(af, X, y, ids, out, groups=grp, resume=resume, overwrite=overwrite,
                             show_progress=show_progress, extra=extra)
    except (InputError, ParameterError):
        if cached_before is not None:  # a refused --resume leaves the run's folder as it was found
            for f in sorted(_files(cache_path) - cached_before, key=lambda q: -len(q.parts)):
                if f.is_dir():
                    f.rmdir()
                else:
                    f.unlink(missing_ok=True)
        raise
    if len(feats.warmup_rows):  # after the filter accepted the folder: a refused --resume writes nothing
        write_text(out / "warmup_ids.txt", "".join(f"{i}\n" for i in ds.ids[feats.warmup_rows]))
    else:  # an --overwrite of a warm-up run: its slice is not this run's
        (out / "warmup_ids.txt").unlink(missing_ok=True)
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
            "results": [_probe_row(r) for r in res],
            "meaning": PROBE_MEANING,
        }
        timings["probe_seconds"] = time.perf_counter() - t0
    elif probe_skipped is not None:
        summary["partial_input_probe"] = {"skipped": probe_skipped, "results": [], "meaning": PROBE_MEANING}
    summary["label_shift"] = label_shift(summary["label_counts_before"], summary["label_counts_after"])
    summary["timings"] = timings
    summary["filtered_dataset"] = str(filtered_path)
    from aflite.verdict import run_verdict

    if title:
        summary["title"] = title
    # the whole call (load, Φ, filter, probe, writing), not only the filter's part of it
    summary["filter_wall_seconds_this_call"] = summary.get("wall_seconds_this_call")
    summary["wall_seconds_this_call"] = time.perf_counter() - t_call
    summary["verdict"] = run_verdict(summary)
    write_json(out / "summary.json", summary)
    write_text(out / "summary.md", render_summary(summary, ds, rows, af))
    return RunResult(out, summary, keep, filtered_path)


def _files(folder: Path) -> set[Path]:
    """Every file and folder under ``folder`` (the folder itself too, when it exists)."""
    return {folder, *folder.rglob("*")} if folder.is_dir() else set()


def _probe_row(r: Any) -> dict[str, Any]:
    """One probe result as JSON: a set that could not be probed has no accuracy (null) and says why."""
    row = {**r.to_dict(), "delta_majority": r.accuracy - r.majority}
    if r.skipped is not None:
        row.update(accuracy=None, accuracy_std=None, delta_majority=None)
    return row


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
    t_call = time.perf_counter()
    X = data.load_features(features, columns=feature_columns, mmap=mmap)
    y = data.load_labels(labels, column=label_column)
    id_arr = data.load_ids(ids, column=id_column) if ids is not None else np.arange(len(y))
    grp = data.load_labels(groups, column="group") if groups is not None else None
    data.check_aligned(X.shape[0], len(y), len(id_arr), files=(features, labels, ids))
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
    from aflite.verdict import filter_verdict

    summary["filter_wall_seconds_this_call"] = summary.get("wall_seconds_this_call")
    summary["wall_seconds_this_call"] = time.perf_counter() - t_call  # the whole call, reading included
    summary["verdict"] = filter_verdict(summary)
    write_json(out / "summary.json", summary)
    write_text(out / "summary.md", render_filter_summary(summary))
    return RunResult(out, summary, np.asarray(af.keep_mask_), out / "kept_ids.txt")


def render_filter_summary(summary: dict[str, Any]) -> str:
    """The readable account of ``aflite filter``: sizes, parameters, stop reason and label counts."""
    p = summary["parameters"]
    from aflite.verdict import markdown

    lines = [
        f"# aflite filter: {summary.get('inputs', {}).get('features', '')}",
        "",
        *([markdown(summary["verdict"]).rstrip("\n"), ""] if summary.get("verdict") else []),
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


@dataclass
class AuditRun:
    """What :func:`audit_file` wrote: the folder, one :class:`aflite.audit.AuditResult` per audited set (D, and
    D(Φ) with ``compare``), the JSON it saved as ``results.json`` and the notes shown in the report."""

    out: Path
    results: list[Any]
    metrics: dict[str, Any]
    notes: list[str]


def check_audit_config(cfg: Any) -> None:
    """Sizes of an :class:`aflite.audit.AuditConfig` that no audit can use; refused before any work."""
    flags = {"n_folds": "--folds", "n_components": "--pca", "n_clusters": "--clusters", "tra_steps": "--tra-steps",
             "tra_sample": "--tra-sample", "tra_eval": "--tra-eval", "peco_shuffles": "--peco-shuffles"}
    least = {"n_folds": 2, "peco_shuffles": 2}
    for name, flag in flags.items():
        if getattr(cfg, name) < least.get(name, 1):
            raise ParameterError(f"{name} ({flag}) must be >= {least.get(name, 1)}, got {getattr(cfg, name)}")


def audit_file(
    data_path: str | Path,
    out: str | Path,
    config: Any = None,
    *,
    compare: str | Path | None = None,
    sample: int | None = None,
    title: str | None = None,
    reference: str = "none",
    dataset_options: dict[str, Any] | None = None,
    groups: str = "premise",
    show_progress: bool = True,
    quiet: bool | None = None,
    image_options: dict[str, Any] | None = None,
    featurizer_options: dict[str, Any] | None = None,
) -> AuditRun:
    """Audit a dataset file for single-sentence label leakage (what ``aflite audit`` does).

    Image data (an image folder, a table with a path column, a HF dataset with an Image column, or an image
    featurizer; :func:`aflite.images.is_image_input`) goes to :func:`aflite.images.audit_image_file`, with
    ``image_options`` (path_column, label_column, id_column, skip_bad_images) and ``featurizer_options``
    (image_size; path/ids_path for ``precomputed``); there the default ``minilm`` means EfficientNet-Lite0
    (``hf-image`` when ``config.model_path`` is set), and ``reference``, ``groups`` and ``dataset_options`` do not
    apply.

    Loads ``data_path``, and with ``compare`` the kept rows of that AFLite run directory as D(Φ); with
    ``sample`` audits a seeded random sample of each; featurizes the union once (cached in ``config.cache_dir``,
    default ``out/cache``); audits each set with ``config`` (an :class:`aflite.audit.AuditConfig`); and writes
    ``out/report.html`` and ``out/metrics.json``. ``config.tra=None`` becomes "only on a GPU" here, once, so that
    the time estimate and both audits agree.
    """
    show_progress = progress_flag(show_progress, quiet=quiet, where="audit_file: ")
    import dataclasses
    import sys

    from aflite import audit as A
    from aflite.atomic import write_json
    from aflite.data import load_dataset, warn_twins
    from aflite.report import paper_reference, write_report

    out = Path(out)
    cfg = config if config is not None else A.AuditConfig()
    from aflite import images

    if images.is_image_input(data_path, cfg.featurizer, (image_options or {}).get("path_column")):
        return images.audit_image_file(data_path, out, cfg, compare=compare, sample=sample, title=title,
                                       image_options=image_options, featurizer_options=featurizer_options,
                                       show_progress=show_progress)
    if cfg.featurizer not in ("minilm", "ngram"):
        raise ParameterError(f"--featurizer {cfg.featurizer} is for images; a sentence-pair audit takes minilm or "
                             "ngram")
    check_audit_config(cfg)
    paper_reference(reference)  # an unknown name fails here, before any work
    from aflite.rundir import read_kept_ids

    kept = read_kept_ids(Path(compare)) if compare is not None else None
    t0 = time.perf_counter()
    ds = load_dataset(data_path, **{**(dataset_options or {}), "groups": groups})
    if not ds.is_pair:
        raise InputError(f"{data_path}: the audit needs sentence pairs (give the first and second text columns)")
    classes = np.unique(ds.labels)
    if len(classes) < 2:  # before featurizing (minutes), so nothing is computed or cached for nothing
        raise InputError(f"{data_path}: every one of the {len(ds):,} rows has the label {str(classes[0])!r}; an "
                         f"audit needs at least two classes")
    if compare is not None:
        from aflite.hashing import dataset_fingerprint
        from aflite.rundir import check_run_dataset

        check_run_dataset(compare, dataset_fingerprint(ds.ids, ds.labels, ds.texts_a, ds.texts_b), data_path)
    warn_twins(ds, ("pair", *cfg.views), groups)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.cache_dir is None:
        cfg = dataclasses.replace(cfg, cache_dir=str(out / "cache"))
    full = ds
    filtered = A.subset(full, kept) if kept is not None else None
    if sample is not None:
        ds = A.sample_rows(ds, sample, cfg.seed)
        if filtered is not None:
            filtered = A.sample_rows(filtered, sample, cfg.seed)
        # featurize only the rows audited (the union of both samples)
        union = set(np.asarray(ds.ids).astype(str)) | (
            set() if filtered is None else set(np.asarray(filtered.ids).astype(str)))
        base = A.subset(full, sorted(union))
    else:
        base = full
    if cfg.tra is None:
        dev = A.resolve_device(cfg.device)
        cfg = dataclasses.replace(cfg, tra=dev.startswith("cuda"))
        if not cfg.tra and show_progress:
            minutes = A.estimate_seconds(len(base), dataclasses.replace(cfg, tra=True))["fine-tuning (TRA)"] / 60
            print(f"TRA skipped: no GPU ({dev}); fine-tuning its {1 + len(cfg.views)} models on this CPU would take "
                  f"~{minutes:.0f} min (--tra runs it anyway)", file=sys.stderr)
    if cfg.peco_encoder == "finetuned" and not cfg.tra:
        raise ParameterError("peco_encoder 'finetuned' needs the fine-tuned models (--tra)")
    if show_progress:
        A.announce(A.estimate_seconds(len(base), cfg))
    t_feat = time.perf_counter()
    feats = A.compute_features(base, cfg)  # cached; D and D(Φ) take their rows from it
    t_feat = time.perf_counter() - t_feat
    row_of = {str(i): r for r, i in enumerate(np.asarray(base.ids).astype(str))}

    def rows_features(sub: Any) -> dict[str, Any]:
        rows = np.fromiter((row_of[str(i)] for i in sub.ids), dtype=np.int64, count=len(sub))
        return {k: x[rows] for k, x in feats.items()}

    results = [A.audit(ds, config=cfg, name="D", features=rows_features(ds))]
    # the featurization ran once for every audited set; D's time carries it (so the table's time is real)
    results[0].add_time("features", t_feat)
    notes = [f"Data: {data_path}"]
    if filtered is not None and kept is not None:
        results.append(A.audit(filtered, config=cfg, name="D(Φ)", features=rows_features(filtered)))
        notes.append(f"D's time includes the {t_feat:.0f} s featurization shared with D(Φ).")
        notes.append(f"D(Φ): the {len(kept):,} kept ids of the AFLite run {compare}"
                     + ("" if sample is None else f" (a random sample of {len(filtered):,})"))
    if sample is not None:
        notes.append(f"D: a random sample of {len(ds):,} of the {len(full):,} pairs (seed {cfg.seed})")
    metrics: dict[str, Any] = {
        "data": str(data_path),
        "compare": None if compare is None else str(compare),
        "results": [r.to_dict() for r in results],
        "seconds": round(time.perf_counter() - t0, 2),
    }
    from aflite.verdict import audit_verdict

    metrics["verdict"] = audit_verdict(metrics)
    write_json(out / "metrics.json", metrics)
    write_report(out / "report.html", results, title=title or f"Label-leakage audit of {Path(data_path).name}",
                 notes=notes, reference=reference)
    return AuditRun(out, results, metrics, notes)


def render_summary(summary: dict[str, Any], ds: Any, rows: np.ndarray, af: AFLite, per_label: int = 2) -> str:
    """A short human-readable account: sizes, parameters, label shift, probe, and examples (as Table 9)."""
    p = summary["parameters"]
    f = summary["featurizer"]
    from aflite.verdict import markdown

    lines = [
        f"# aflite run: {summary.get('title') or summary['dataset']}",
        "",
        *([markdown(summary["verdict"]).rstrip("\n"), ""] if summary.get("verdict") else []),
        f"- Φ: `{f['name']}` ({f['dim']} dims), view `{f['view']}`"
        + (f"; warm-up slice of {summary['warmup_rows']} rows trained Φ and was discarded" if summary["warmup_rows"]
           else "") + warmup_line(f.get("info") or {}, "; "),
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
        lines += ["", f"Partial-input probe: {pr.get('model', 'TF-IDF logistic regression')}", "",
                  "| training set | size | accuracy | majority rate (same rows) | Δ over majority |",
                  "|---|---|---|---|---|"]
        for r in pr["results"]:
            if r.get("skipped"):
                lines.append(f"| {r['name']} | {r['size']} | not probed: {r['skipped']} | "
                             f"{100 * r['majority']:.1f} | – |")
                continue
            lines.append(f"| {r['name']} | {r['size']} | {100 * r['accuracy']:.1f} ± {100 * r['accuracy_std']:.1f} "
                         f"| {100 * r['majority']:.1f} | {100 * (r['accuracy'] - r['majority']):+.1f} |")
        if pr.get("skipped"):
            lines.append(f"| – | – | not probed: {pr['skipped']} | – | – |")
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


def warmup_line(info: dict[str, Any], lead: str = "") -> str:
    """The warm-up's loss in words (start → end over its steps, against chance), or "" without a warm-up."""
    if "warmup_loss_start" not in info:
        return ""
    verdict = ("it fell: fine-tuning moved Φ" if info["warmup_loss_judgement"] == "fell" else
               "it barely moved: Φ is close to the frozen encoder (more rows or steps would be needed)")
    return (f"{lead}warm-up loss {info['warmup_loss_start']:.3f} → {info['warmup_loss_end']:.3f} over "
            f"{info.get('warmup_steps')} steps (chance ln K = {info['warmup_loss_chance']:.3f}): {verdict}")


def _md(text: str, limit: int = 300) -> str:
    """Dataset text in a Markdown table cell: shortened, on one line, and plain: the text as written (``isn't``,
    not ``isn&#x27;t``), with Markdown's backslash escapes for what a renderer would otherwise read as HTML or as
    a cell border (``<``, ``>``, ``&``, ``|``). HTML escaping belongs to the HTML pages only."""
    from aflite.report import shorten

    out = shorten(text, limit).replace("\\", "\\\\")
    for ch in "<>&|":
        out = out.replace(ch, "\\" + ch)
    return out.replace("\r", " ").replace("\n", " ")
