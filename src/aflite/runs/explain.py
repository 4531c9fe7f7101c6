""":func:`explain` (``aflite explain``; ``aflite.explain_run``): read a run folder and the data file back, recompute
the run's first phase (:mod:`aflite.explain.recompute`), run the analyses of :mod:`aflite.explain`, and write the
explain folder (:mod:`aflite.runs.explain_files`).

Where the data map comes from. A run folder holds the kept/removed ids, the last p̃ and the features cache, not
the first phase's probabilities. Rather than make old runs unreadable, explain *recomputes* the first phase: the
same Φ (from the run's cache, or recomputed with the recorded featurizer options), the same parameters and the
run's seed — phase 0 draws its partitions from ``default_rng([seed, 0])`` exactly as the run did — so the result
is the run's own first phase, deterministic from its seed. As a check, the recomputed p̃ of the rows the run
removed in phase 0 is compared with the p̃ the run recorded for them (``first_phase.agreement`` in results.json;
1.0 means bit-equal). Python users get the same numbers from ``AFLite.fit``'s fitted attributes.

Everything is validated (run folder, ids, labels, Φ's fingerprint against the run's checkpoint) before the first
file is written; files are written atomically (:mod:`aflite.atomic`).
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aflite.errors import InputError, ParameterError
from aflite.results import recording_warnings
from aflite.threads import limited

__all__ = ["ExplainResult", "explain", "read_run"]

@dataclass
class ExplainResult:
    out: Path
    results: dict[str, Any]


@dataclass
class RunRecord:
    """What explain reads from a run folder."""

    path: Path
    summary: dict[str, Any]
    ids: list[str]
    labels: list[str]
    kept: np.ndarray
    predictability: np.ndarray
    removed_at: np.ndarray
    warmup_ids: list[str]
    fingerprint: str | None


def read_run(run_dir: str | Path) -> RunRecord:
    """The run's summary.json and instances.csv (and checkpoint fingerprint); InputError naming what is missing."""
    p = Path(run_dir)
    if not p.is_dir():
        raise InputError(f"{p}: not a folder (expected the run directory of `aflite run`)")
    try:
        summary = json.loads((p / "summary.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{p / 'summary.json'}: not found (is it an AFLite run directory?)") from None
    except ValueError as exc:
        raise InputError(f"{p / 'summary.json'}: not valid JSON ({exc})") from None
    if not isinstance(summary, dict) or "parameters" not in summary or "featurizer" not in summary:
        raise InputError(f"{p / 'summary.json'}: not the summary of `aflite run` (no parameters/featurizer)")
    path = p / "instances.csv"
    if not path.is_file():
        raise InputError(f"{path}: not found (is it an AFLite run directory?)")
    ids, labels, kept, pred, rem = [], [], [], [], []
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header != ["id", "label", "kept", "predictability", "removed_at"]:
            raise InputError(f"{path}: line 1: unexpected header {header!r}")
        for ln, row in enumerate(reader, start=2):
            try:
                ids.append(row[0])
                labels.append(row[1])
                kept.append(int(row[2]))
                pred.append(float(row[3]) if row[3] else np.nan)
                rem.append(int(row[4]))
            except (IndexError, ValueError):
                raise InputError(f"{path}: line {ln}: malformed row {row!r}") from None
    warm = p / "warmup_ids.txt"
    warmup = ([ln.strip() for ln in warm.read_text(encoding="utf-8").splitlines() if ln.strip()]
              if warm.is_file() else [])
    fp = None
    if (p / "checkpoint.npz").is_file():
        try:
            with np.load(p / "checkpoint.npz", allow_pickle=False) as z:
                fp = json.loads(str(z["meta"])).get("fingerprint")
        except Exception:  # noqa: BLE001 - a damaged checkpoint only costs the Φ check
            fp = None
    return RunRecord(p, summary, ids, labels, np.asarray(kept, bool), np.asarray(pred), np.asarray(rem, np.int32),
                     warmup, fp)


def _load(data_path: Path, run: RunRecord, dataset_options: dict[str, Any] | None,
          image_options: dict[str, Any] | None) -> tuple[Any, bool, np.ndarray]:
    """The dataset, whether it is images, and the dataset rows the run filtered (in the run's order)."""
    from aflite import data
    from aflite.data import images

    fz = run.summary["featurizer"]["name"]
    is_images = images.wants_images(data_path, fz)
    dopts = dict(dataset_options or {})
    groups = run.summary.get("groups", "premise")
    if not is_images and groups not in ("premise", None) and "groups" not in dopts:
        dopts["groups"] = groups
    ds = images.load_image_dataset(data_path, **(image_options or {})) if is_images else data.load_dataset(
        data_path, **dopts)
    where = f"{data_path} does not match the run in {run.path}"
    if run.summary.get("dataset_size") not in (None, len(ds)):
        raise InputError(f"{where}: the run filtered a dataset of {run.summary['dataset_size']:,} rows, DATA has "
                         f"{len(ds):,} (a run folder from another dataset?)")
    pos = {str(i): r for r, i in enumerate(ds.ids.astype(str))}
    missing = [i for i in run.ids if i not in pos]
    if missing:
        raise InputError(f"{where}: {len(missing):,} of the run's {len(run.ids):,} ids are not in DATA, e.g. "
                         f"{missing[0]!r} (a run folder from another dataset?)")
    rows = np.asarray([pos[i] for i in run.ids], dtype=np.int64)
    bad = np.flatnonzero(ds.labels[rows].astype(str) != np.asarray(run.labels, dtype=str))
    if len(bad):
        r = int(bad[0])
        raise InputError(f"{where}: {len(bad):,} id(s) carry another label, e.g. id {run.ids[r]!r}: "
                         f"{run.labels[r]!r} in the run, {str(ds.labels[rows[r]])!r} in DATA")
    return ds, is_images, rows


def _features(ds: Any, is_images: bool, run: RunRecord, cache_dir: Path,
              featurizer_options: dict[str, Any] | None, show_progress: bool) -> Any:
    """Φ as the run computed it: read from the run's cache when it is there (never written: a run folder is the
    run's), else recomputed into ``cache_dir`` (explain's own: OUT/cache or --cache-dir)."""
    from aflite import features
    from aflite.features.registry import image_featurizer_options, run_options

    fz = run.summary["featurizer"]
    opts = {k: v for k, v in run_options(fz["name"], fz.get("options")).items() if v is not None}
    opts.update(featurizer_options or {})
    for key in ("word_ngrams", "char_ngrams"):
        if isinstance(opts.get(key), list):
            opts[key] = tuple(opts[key])
    if is_images:
        opts = image_featurizer_options(fz["name"], opts)
    if fz["name"] == "precomputed" and not opts.get("embeddings"):
        raise ParameterError("the run used --featurizer precomputed: pass its --embeddings FILE")
    params = run.summary["parameters"]
    return features.featurize(
        ds.texts_a, ds.texts_b, fz["name"], fz.get("view", "pair"),
        cache_dir=cache_dir, read_only=[run.path / "cache"],
        y=ds.labels.tolist() if fz["name"] == "warmup" else None,
        ids=ds.ids.tolist() if fz["name"] == "precomputed" else None,
        warmup_size=params["train_size"] if fz["name"] == "warmup" else 0.1,
        warmup_seed=run.summary.get("seed", 0), show_progress=show_progress, **opts)


@limited  # one thread policy (aflite.threads)
@recording_warnings()  # scikit-learn's warnings counted in results.json (aflite.results)
def explain(
    data_path: str | Path,
    run_dir: str | Path,
    out: str | Path,
    *,
    alpha: float = 0.01,
    min_count: int = 20,
    random_seeds: int = 5,
    token_view: str = "auto",
    neighbours: int = 3,
    cache_dir: str | Path | None = None,
    dataset_options: dict[str, Any] | None = None,
    image_options: dict[str, Any] | None = None,
    featurizer_options: dict[str, Any] | None = None,
    show_progress: bool = True,
    stop_rule: bool = False,
    stop_floor: int | None = None,
    stop_max_phases: int = 40,
    ngram_coefficients: bool = False,
    null: str = "base",
) -> ExplainResult:
    """Explain a run of ``aflite run`` on DATA: token artifacts with significance (full / kept / random), the
    first phase's data map and label issues, why each row was easy, soft weights; written to ``out`` (see
    :mod:`aflite.explain`). ``stop_rule`` continues filtering past the run's stop until no token artifact is
    significant (:mod:`aflite.explain.stoprule`; off by default, the run folder is never changed). The run folder
    is only read: Φ comes from its cache, or is recomputed into ``cache_dir`` (default ``out/cache``); an ``out``
    or ``cache_dir`` in a run folder is refused.
    ``ngram_coefficients`` (n-gram Φ only) refits the run's n-gram featurizer to read each token's push from the
    ensemble's own weights (:func:`aflite.explain.reasons.ngram_token_scores`; costs one more featurizing pass).
    ``null`` is the token test's p0: ``"base"`` (each label's share of the set, the default) or ``"uniform"``
    (1/|Y|, Gardner et al. 2021's choice)."""
    from aflite.explain import tokens as tk
    from aflite.explain.datamap import label_issues, overlap_table, regions
    from aflite.explain.reasons import fit_surrogate, image_inputs, nearest_kept, text_inputs
    from aflite.explain.recompute import first_phase, ngram_terms, token_texts
    from aflite.hashing import inputs_fingerprint
    from aflite.runs.explain_files import write_all

    if not 0.0 < alpha < 1.0:
        raise ParameterError(f"--alpha must lie in (0, 1), got {alpha}")
    if min_count < 1 or random_seeds < 1 or neighbours < 0:
        raise ParameterError("--min-count and --random-seeds must be >= 1, --neighbours >= 0")
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    out = Path(out)
    from aflite.rundir import check_outside_runs

    check_outside_runs(out, [run_dir])  # explain reads the run folder and writes elsewhere
    if cache_dir is not None:
        check_outside_runs(cache_dir, [run_dir], flag="--cache-dir")
    run = read_run(run_dir)
    ds, is_images, rows = _load(Path(data_path), run, dataset_options, image_options)
    params = run.summary["parameters"]
    seed = int(run.summary.get("seed", params.get("random_state", 0)) or 0)
    fz = run.summary["featurizer"]
    texts: list[str] | None = None
    tview = "image statistics" if is_images else ""
    if not is_images:
        texts, tview = token_texts(ds, fz.get("view", "pair"), token_view)
    elif stop_rule:
        raise ParameterError("--stop-rule tests token artifacts: it needs a text dataset")
    if ngram_coefficients and fz["name"] != "ngram":
        raise ParameterError(f"--ngram-coefficients reads an n-gram Φ; this run used {fz['name']!r}")
    timings["load_seconds"] = time.perf_counter() - t_start

    t0 = time.perf_counter()
    feats = _features(ds, is_images, run, Path(cache_dir) if cache_dir else out / "cache", featurizer_options,
                      show_progress)
    fpos = {int(r): j for j, r in enumerate(np.asarray(feats.rows))}
    if any(int(r) not in fpos for r in rows):
        raise InputError(f"{data_path}: Φ recomputed from DATA leaves out rows the run filtered (warm-up slice "
                         f"differs); is {run.path} a run of this file?")
    X = feats.X[np.asarray([fpos[int(r)] for r in rows])] if len(fpos) != len(rows) or not np.array_equal(
        np.asarray(feats.rows), rows) else feats.X
    y_str = ds.labels[rows]
    if run.fingerprint is not None and inputs_fingerprint(X, y_str) != run.fingerprint:
        raise InputError(f"{data_path}: Φ computed from DATA is not the Φ the run in {run.path} filtered (checkpoint "
                         f"fingerprint differs): another dataset, another featurizer option, or another Φ cache")
    timings["features_seconds"] = time.perf_counter() - t0

    # ------------------------------------------------------------------ everything below computes; nothing written
    t0 = time.perf_counter()
    grp = None
    if run.summary.get("groups", "none") != "none" and ds.groups is not None:
        grp = ds.groups[rows]
    af = first_phase(X, y_str, grp, params, seed)
    classes = af.classes_
    y = np.searchsorted(classes, y_str).astype(np.int64)
    p0 = af.first_phase_predictability_
    rem0 = run.removed_at == 0
    agree = float(np.mean(np.isclose(p0[rem0], run.predictability[rem0]))) if rem0.any() else float("nan")
    timings["first_phase_seconds"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    keep = run.kept
    removed = ~keep
    token_sets: dict[str, Any] = {}
    random_per_seed: list[int] = []
    B = vocab = None
    if texts is not None:
        B, vocab = tk.token_matrix([texts[r] for r in rows])
        token_sets["full"] = tk.competency(B, vocab, y, classes, alpha=alpha, min_count=min_count, p0=null)
        token_sets["kept"] = tk.competency(B, vocab, y, classes, np.flatnonzero(keep), alpha=alpha,
                                           min_count=min_count, p0=null)
        token_sets["random"], random_per_seed = tk.random_competency(
            B, vocab, y, classes, int(keep.sum()), seed, random_seeds, alpha=alpha, min_count=min_count, p0=null)
    timings["tokens_seconds"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    region = regions(af.confidence_, af.variability_)
    issues = label_issues(af.first_phase_proba_, y)
    # the same measure with the labels permuted (seeded; the probabilities unchanged): what confident learning
    # flags when the labels carry no information for the first phase's models, for the count to be read against
    shuffled: list[int] = []
    if issues.flags is not None and issues.skipped is None:
        perm_rng = np.random.default_rng([seed, 34])
        for _ in range(random_seeds):
            sh = label_issues(af.first_phase_proba_, perm_rng.permutation(y))
            if sh.flags is not None and sh.skipped is None:
                shuffled.append(int(sh.flags.sum()))
    overlap = overlap_table(removed, region, issues.flags)
    timings["datamap_seconds"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    F: Any
    if B is not None and vocab is not None:
        F, token_names = text_inputs(B, vocab, min_count)
        names = [str(t) for t in token_names]
    else:
        from aflite.explain.reasons import IMAGE_INPUTS

        F, names = image_inputs([ds.texts_a[r] for r in rows]), list(IMAGE_INPUTS)
    sur = fit_surrogate(F, names, y, classes, p0, random_state=seed)
    timings["surrogate_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    near = nearest_kept(X, keep, k=neighbours, seed=seed) if neighbours else [[] for _ in rows]
    timings["neighbours_seconds"] = time.perf_counter() - t0

    ens_terms = None
    if ngram_coefficients and B is not None and vocab is not None and af.first_phase_coef_ is not None:
        t0 = time.perf_counter()
        ens_terms = ngram_terms(ds, rows, fz, X, B, vocab, y, classes, min_count, af.first_phase_coef_, tview)
        timings["ngram_coefficients_seconds"] = time.perf_counter() - t0

    stop = None
    if stop_rule and B is not None and vocab is not None:
        from aflite.explain.stoprule import continue_until_clean

        t0 = time.perf_counter()
        Bm, vm = B, vocab
        stop = continue_until_clean(
            X, y_str, grp, params, seed, keep, int(run.summary.get("n_iterations", 0)),
            lambda r: tk.competency(Bm, vm, y, classes, r, alpha=alpha, min_count=min_count,
                                    p0=null).n_significant,
            floor=stop_floor, max_phases=stop_max_phases)
        timings["stop_rule_seconds"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    results = write_all(
        out, run=run, ids=np.asarray(run.ids), labels=y_str, af=af, region=region, issues=issues, overlap=overlap,
        token_sets=token_sets, random_per_seed=random_per_seed, token_view=tview, alpha=alpha, min_count=min_count,
        random_seeds=random_seeds, surrogate=sur, near=near, agreement=agree, seed=seed, is_images=is_images, stop=stop,
        ens_terms=ens_terms, null=null, issues_shuffled=shuffled,
        data_path=str(data_path), timings=timings, t_start=t_start)
    results["timings"]["write_seconds"] = time.perf_counter() - t0
    from aflite.report import write_page
    from aflite.results import write_results_json

    write_results_json(out, results, command="explain", seed=seed)  # with the writing time; the CLI adds argv
    write_page(out, dataset=ds)  # report.html: the run's rows with the data map, tokens and weights
    return ExplainResult(out, results)
