"""From a dataset file to a filtered dataset: load → Φ (featurize) → AFLite → write back, with a summary.

This is what ``aflite run`` and ``aflite demo`` do; it composes :mod:`aflite.data`, :mod:`aflite.features`,
:mod:`aflite.filter` and :mod:`aflite.rundir` without adding logic of its own beyond the paper's protocol:
with the ``warmup`` featurizer the warm-up slice (t rows, as in the paper) trains Φ and is then discarded —
it is neither filtered nor written to the output.
"""

from __future__ import annotations

import html
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import write_json, write_text
from aflite.errors import ParameterError
from aflite.filter import SNLI_DEFAULTS, AFLite


@dataclass
class RunResult:
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


def run(
    data_path: str | Path,
    out: str | Path,
    *,
    featurizer: str = "ngram",
    view: str = "pair",
    params: dict[str, Any] | None = None,
    strategy: str = "slicing",
    seed: int = 0,
    groups: bool = True,
    cache_dir: str | Path | None = None,
    resume: bool = False,
    quiet: bool = False,
    probe: bool = True,
    dataset_options: dict[str, Any] | None = None,
    featurizer_options: dict[str, Any] | None = None,
    device: str = "auto",
    storage: str = "float32",
) -> RunResult:
    """Filter a dataset file end to end. ``params`` overrides the scaled Table 8 defaults (counts or
    fractions of |D|: target_size, n_partitions, train_size, slice_size, threshold); ``device`` and ``storage``
    choose where the encoder and the ensemble run (see :class:`aflite.filter.AFLite`)."""
    from aflite import data, features
    from aflite.rundir import run_filter

    out = Path(out)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    ds = data.load_dataset(data_path, **(dataset_options or {}))
    timings["load_seconds"] = time.perf_counter() - t0
    n = len(ds)
    if view in ("hypothesis",) and not ds.is_pair:
        raise ParameterError("view 'hypothesis' needs a pair dataset")
    chosen = scaled_defaults(n)
    given = {k: v for k, v in (params or {}).items() if v is not None}
    probe_af = AFLite(**{**chosen, **given}, strategy=strategy, random_state=seed)  # type: ignore[arg-type]
    resolved = probe_af.resolved_params(n)  # validates against |D| before any expensive step
    t = resolved["train_size"]

    texts_b = ds.texts_b
    fopts = dict(featurizer_options or {})
    t0 = time.perf_counter()
    feats = features.featurize(
        ds.texts_a, texts_b, featurizer, view,
        cache_dir=Path(cache_dir) if cache_dir else out / "cache",
        y=ds.labels.tolist() if featurizer == "warmup" else None,
        ids=ds.ids.tolist() if featurizer == "precomputed" else None,
        warmup_size=t if featurizer == "warmup" else 0.1,
        warmup_seed=seed,
        show_progress=not quiet,
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
    af = AFLite(**filt_params, strategy=strategy, random_state=seed, device=device,  # type: ignore[arg-type]
                storage=storage)
    grp = ds.groups[rows] if (groups and ds.groups is not None) else None
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
    summary = run_filter(af, X, y, ids, out, groups=grp, resume=resume, quiet=quiet, extra=extra)
    timings["filter_seconds"] = time.perf_counter() - t0

    keep = np.zeros(n, dtype=bool)
    keep[rows[af.keep_mask_]] = True
    t0 = time.perf_counter()
    filtered_path = data.write_filtered(ds, keep, out / _out_name(Path(data_path)))
    timings["write_seconds"] = time.perf_counter() - t0
    timings["featurize_rows_per_second"] = len(rows) / max(timings["featurize_seconds"], 1e-9)

    if probe:
        from aflite.evaluate import compare_partial_input

        t0 = time.perf_counter()
        probe_texts = texts_b if texts_b is not None else ds.texts_a
        sub = [probe_texts[i] for i in rows]
        res = compare_partial_input(sub, y, af.keep_mask_, random_state=seed)
        summary["partial_input_probe"] = {
            "model": "TF-IDF word 1-2-gram logistic regression, 5-fold CV, on the "
            + ("hypothesis only" if texts_b is not None else "text"),
            "results": [r.to_dict() for r in res],
        }
        timings["probe_seconds"] = time.perf_counter() - t0
    summary["timings"] = timings
    summary["filtered_dataset"] = str(filtered_path)
    write_json(out / "summary.json", summary)
    write_text(out / "summary.md", render_summary(summary, ds, rows, af))
    return RunResult(out, summary, keep, filtered_path)


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
        "| label | before | after | kept % |",
        "|---|---|---|---|",
    ]
    for lab, before in summary["label_counts_before"].items():
        after = summary["label_counts_after"].get(lab, 0)
        lines.append(f"| {lab} | {before} | {after} | {100 * after / max(before, 1):.1f} |")
    if "partial_input_probe" in summary:
        pr = summary["partial_input_probe"]
        lines += ["", f"Partial-input probe: {pr['model']}", "", "| training set | size | accuracy | majority |",
                  "|---|---|---|---|"]
        for r in pr["results"]:
            lines.append(f"| {r['name']} | {r['size']} | {100 * r['accuracy']:.1f} ± {100 * r['accuracy_std']:.1f} "
                         f"| {100 * r['majority']:.1f} |")
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


def _md(text: str) -> str:
    """Dataset text in a Markdown table cell: escaped HTML, no pipes or newlines."""
    return html.escape(text).replace("|", "\\|").replace("\n", " ")
