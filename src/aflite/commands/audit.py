"""``aflite audit``: one flow for text and images, D and optionally D(Φ), featurizing their union once.

What differs between the modalities is a ``TextAudit`` or an ``ImageAudit`` (:mod:`aflite.audit.modalities`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Unpack, cast

import numpy as np

from aflite.atomic import JSON, atomic_open
from aflite.audit import AuditConfig, sample_rows, subset
from aflite.audit.modalities import ImageAudit, audit_kind
from aflite.audit.results import AuditMetrics, audit_verdict, check_sections, check_verdicts
from aflite.check import resolve_checks
from aflite.data import Columns, open_dataset, source_name, with_columns
from aflite.data.loader_options import LoaderOptions
from aflite.errors import InputError, ParameterError, takes_mappings
from aflite.option import OptionValue
from aflite.report.explorer import reframe_audit
from aflite.rundir.folder import RunFolder, claims
from aflite.rundir.lock import check_outside_runs
from aflite.rundir.read import read_kept_ids
from aflite.rundir.results import Result, recording_warnings
from aflite.rundir.same_rows import check_run_rows
from aflite.rundir.schema import Document
from aflite.threads import limited
from aflite.verdict import markdown

__all__ = ["AuditResult", "audit_file", "check_audit_config", "check_audit_options", "summary_lines"]


@dataclass(repr=False)  # Result.__repr__: one line, not the arrays
class AuditResult(Result):
    """What :func:`audit_file` wrote; ``page`` renders report.html.

    Parameters
    ----------
    out : Path
        The folder written.
    results : list of DatasetAudit
        One :class:`aflite.audit.DatasetAudit` per audited set.
    metrics : dict
        The JSON saved as results.json.
    notes : list of str
        The notes shown in the report.
    data : str
        The data audited.
    run_seed : int, default 0
        The seed of the run compared (``compare``).
    kind : object
        The kind of data audited (text or images), which decides the page's sections.
    title : str
        What the report calls the data.
    files : dict of str to bytes
        Further files the audit writes into its folder, by name (their bytes).
    """

    command: ClassVar[str] = "audit"
    out: Path
    results: list[Any]
    metrics: AuditMetrics
    notes: list[str]
    data: str = ""
    run_seed: int = 0
    kind: Any = None
    title: str = ""
    files: dict[str, bytes] = dataclasses.field(default_factory=dict)

    @property
    def seed(self) -> Any:
        return self.run_seed

    def to_json(self) -> JSON:
        return dict(self.metrics)

    def write_files(self, out: Path) -> None:
        """What the kind made besides results.json (an image audit's t-SNE maps, its bad images)."""
        for name, content in self.files.items():
            with atomic_open(out / name, "wb") as fh:
                fh.write(content)

    def summary_md(self) -> str:
        """One line per set and condition, every accuracy next to chance (the majority-class rate)."""
        plots = list(self.metrics.get("tsne_plots", {}).values())
        more = "" if not plots else f"; the t-SNE map{'s' if len(plots) > 1 else ''}: {', '.join(plots)}"
        return (f"# aflite audit: {self.data}\n\n" + markdown(self.metrics.get("verdict") or [])
                + "".join(f"- {line}\n" for line in summary_lines(self.results))
                + "".join(f"{line}\n" for line in check_sections(self.results))
                + f"\nThe full report with its explanations: report.html{more}; every figure: results.json.\n")

    def page(self, document: Document) -> str:
        """The audit renders its page whole (tables, PECO curves, t-SNE maps: :mod:`aflite.report.audit`)."""
        return str(self.kind.page(self.results, title=self.title, notes=self.notes,
                                  verdict=list(document.body.verdict or [])))

    @classmethod
    def page_of(cls, folder: Path, document: Document) -> str:
        """The audit's own content (its maps live only in its page) on a fresh frame with the verdict."""
        return reframe_audit(folder, document)


def check_audit_config(cfg: Any) -> None:
    """Sizes of an :class:`aflite.audit.AuditConfig` that no audit can use; refused before any work."""
    flags = {"n_folds": "--n-folds", "n_components": "--n-components", "n_clusters": "--n-clusters",
             "tra_steps": "--tra-steps",
             "tra_sample": "--tra-sample", "tra_eval": "--tra-eval", "peco_shuffles": "--peco-shuffles"}
    least = {"n_folds": 2, "peco_shuffles": 2}
    for name, flag in flags.items():
        if getattr(cfg, name) < least.get(name, 1):
            raise ParameterError(f"{name} ({flag}) must be >= {least.get(name, 1)}, got {getattr(cfg, name)}")
    resolve_checks(getattr(cfg, "checks", None), "audit")  # each audit check's options (--check NAME:KEY=VALUE)


def check_audit_options(data_path: Any, *, featurizer: str | None = None,
                        model_path: str | None = None, path_column: str | None = None,
                        text_options: list[str] | tuple[str, ...] = (),
                        image_options: list[str] | tuple[str, ...] = ()) -> bool:
    """Whether ``data_path`` is audited as images; options of the other modality (named as the caller spells
    them) and a featurizer of the other modality are refused before any work."""
    kind = audit_kind(data_path, featurizer, path_column)
    is_images = isinstance(kind, ImageAudit)
    if text_options and is_images:
        raise ParameterError(f"{', '.join(text_options)}: text-only option(s); {data_path} holds images, whose audit "
                             "has no TRA, views, tokens, paper reference or groups (drop them)")
    if image_options and not is_images:
        raise ParameterError(f"{', '.join(image_options)}: image option(s), but {data_path} is read as text (name the "
                             "image column with --path-column, or use an image featurizer)")
    kind.featurizer(featurizer, model_path, data_path)
    return is_images


def _sets(ds: Any, kept: list[str] | None, sample: int | None, seed: int) -> tuple[Any, Any, Any]:
    """(D, D(Φ) or None, the rows to featurize: the union of both), each a seeded sample of ``sample`` rows."""
    filtered = subset(ds, kept) if kept is not None else None
    if sample is None:
        return ds, filtered, ds
    d = sample_rows(ds, sample, seed)
    if filtered is not None:
        filtered = sample_rows(filtered, sample, seed)
    union = set(np.asarray(d.ids).astype(str)) | (
        set() if filtered is None else set(np.asarray(filtered.ids).astype(str)))
    return d, filtered, subset(ds, sorted(union))


def _featurizer_config(config: Any, featurizer: str | None,
                       options: dict[str, OptionValue] | None) -> tuple[Any, dict[str, OptionValue] | None]:
    """(the config with ``featurizer`` and ``model_path`` in it, the other options): one spelling of Φ for every
    command; the same thing given twice, differently, is refused."""
    cfg = config if config is not None else AuditConfig()
    default = AuditConfig()
    if featurizer is not None:
        if cfg.featurizer not in (default.featurizer, featurizer):
            raise ParameterError(f"the featurizer is given twice, featurizer={featurizer!r} and config.featurizer="
                                 f"{cfg.featurizer!r}: pass featurizer= only")
        cfg = dataclasses.replace(cfg, featurizer=featurizer)
    if options and options.get("model_path") is not None:
        options = dict(options)
        path = str(options.pop("model_path"))
        if cfg.model_path not in (None, path):
            raise ParameterError(f"the model folder is given twice, featurizer_options model_path={path!r} and "
                                 f"config.model_path={cfg.model_path!r}: pass featurizer_options only")
        cfg = dataclasses.replace(cfg, model_path=path)
    return cfg, options


@claims("audit")  # a path given as out is claimed as the CLI claims --out
@limited  # one thread policy (aflite.threads)
@recording_warnings()  # scikit-learn's warnings counted in results.json (aflite.rundir.results)
@takes_mappings("dataset_options", "image_options", "featurizer_options")
def audit_file(
    data_path: Any,
    out: str | os.PathLike[str] | RunFolder,
    config: Any = None,
    *,
    compare: str | os.PathLike[str] | None = None,
    sample: int | None = None,
    title: str | None = None,
    reference: str = "none",
    dataset_options: JSON | None = None,
    groups: str = "premise",
    show_progress: bool = True,
    image_options: JSON | None = None,
    featurizer: str | None = None,
    featurizer_options: dict[str, OptionValue] | None = None,
    overwrite: bool = False, **columns: Unpack[Columns],
) -> AuditResult:
    """Audit a dataset file for single-sentence label leakage (what ``aflite audit`` does) into ``out``.

    Image data (:func:`aflite.data.modality_of`) is read with ``image_options`` and featurized with
    ``featurizer_options`` (image_size; embeddings/embedding_ids for ``precomputed``); the default ``minilm``
    means EfficientNet-Lite0 there, and ``reference``, ``groups``, ``dataset_options`` do not apply. In-memory
    data are text. ``config.tra=None`` becomes "only on a GPU" here, once, so that the estimate and both audits
    agree. Nothing is written before the data are read and checked.

    Parameters
    ----------
    data_path : path or data frame
        The data to audit.
    out : path or RunFolder
        The folder to write.
    config : AuditConfig, optional
        Models, sizes and stages (its ``cache_dir`` defaults to ``out/cache``).
    compare : path, optional
        A run folder whose kept rows are audited as D(Φ).
    sample : int, optional
        Audit a seeded random sample of this many rows of each set.
    title : str, optional
        What the report calls the data.
    reference : str, default "none"
        A reference set audited alongside (``none``: only the data).
    dataset_options : dict, optional
        The loader's keywords.
    groups : str, default "premise"
        Rows kept together in the cross-validation folds, as for :func:`load_dataset`.
    show_progress : bool, default True
        Show progress bars.
    image_options : dict, optional
        The image loader's keywords.
    featurizer : str, optional
        The Φ (default ``config.featurizer``).
    featurizer_options : dict, optional
        The featurizer's own options; their ``model_path`` (also TRA's) fills ``config``'s.
    overwrite : bool, default False
        Start over in an ``out`` that holds an audit.
    **columns
        The column keywords of :class:`aflite.data.Columns`.

    Returns
    -------
    AuditResult
        One audit per set, the notes and the folder.
    """
    text_loader, image_loader = _columns(dataset_options, image_options, columns)
    cfg, featurizer_options = _featurizer_config(config, featurizer, featurizer_options)
    folder = RunFolder.of(out, "audit")
    name = source_name(data_path)
    cfg = cfg if show_progress else dataclasses.replace(cfg, show_progress=False)  # the features' bars too
    kind = audit_kind(data_path, cfg.featurizer, (image_loader or {}).get("path_column"))
    cfg = kind.configure(cfg, name, reference)
    check_audit_config(cfg)
    kept = read_kept_ids(Path(compare)) if compare is not None else None
    if compare is not None:  # the run compared with is read, never written
        check_outside_runs(folder.path, [compare])
    t0 = time.perf_counter()
    ds = open_dataset(data_path, modality=kind.modality, **kind.loader_options(text_loader, groups, image_loader))
    _check_two_classes(ds, name, kind.rows_word)  # before featurizing (minutes): nothing computed for nothing
    if compare is not None:
        check_run_rows(compare, ds, name, any_order=True)  # D(Φ) is taken by id: the rows' order does not matter
    kind.check(ds, cfg, groups, name)
    if cfg.cache_dir is None:
        cfg = dataclasses.replace(cfg, cache_dir=str(folder.path / "cache"))
    d, filtered, base = _sets(ds, kept, sample, cfg.seed)
    cfg = kind.resolve(cfg, len(base), show_progress)
    t_feat = time.perf_counter()
    feats = kind.features(base, cfg, featurizer_options, show_progress)  # D and D(Φ) take their rows from it
    t_feat = time.perf_counter() - t_feat
    row_of = {str(i): r for r, i in enumerate(np.asarray(base.ids).astype(str))}

    def audit_set(sub: Any, name: str) -> Any:
        rows = np.fromiter((row_of[str(i)] for i in sub.ids), dtype=np.int64, count=len(sub))
        return kind.audit(sub, name, rows, feats, cfg)

    results = [audit_set(d, "D")]
    # the featurization ran once for every audited set; D's time carries it (so the table's time is real)
    results[0].add_time("features", t_feat)
    notes = kind.notes(name, ds, cfg, feats)
    if filtered is not None and kept is not None:
        results.append(audit_set(filtered, "D(Φ)"))
        notes += kind.compare_notes(t_feat)
        notes.append(f"D(Φ): the {len(kept):,} kept ids of the AFLite run {compare}"
                     + ("" if sample is None else f" (a random sample of {len(filtered):,})"))
    if sample is not None:
        notes.append(f"D: a random sample of {len(d):,} of the {len(ds):,} {kind.unit} (seed {cfg.seed})")
    metrics, files = kind.metrics(name, compare, ds, results, feats, cfg, notes)
    metrics["seconds"] = round(time.perf_counter() - t0, 2)
    metrics["verdict"] = audit_verdict(metrics) + check_verdicts(results)
    run = AuditResult(folder.path, results, metrics, notes, name, cfg.seed, kind,
                   title or f"Label-leakage audit of {Path(name).name}", files)
    folder.finish(run)
    return run


def _columns(dataset_options: JSON | None, image_options: JSON | None,
             columns: Columns) -> tuple[LoaderOptions, LoaderOptions | None]:
    """The column keywords into both loaders' options (an image table's: path, label, id), since which loader
    reads the data is decided later (:func:`aflite.audit.modalities.audit_kind`)."""
    text = with_columns(dataset_options, {k: v for k, v in columns.items() if k != "path_column"}, "audit_file")
    image = {k: v for k, v in columns.items() if k in ("path_column", "label", "id_column") and v is not None}
    given = with_columns(image_options, image, "audit_file") if image else image_options
    return cast(LoaderOptions, text), cast("LoaderOptions | None", given)


def _check_two_classes(ds: Any, name: str, rows_word: str) -> None:
    """An audit needs two labels at least: refused in one line naming the one label."""
    classes = np.unique(ds.labels)
    if len(classes) < 2:
        raise InputError(f"{name}: every one of the {len(ds):,} {rows_word} has the label {str(classes[0])!r}; "
                         "an audit needs at least two classes")


def summary_lines(results: list[Any]) -> list[str]:
    """One line per audited set and condition, every accuracy next to chance (the majority-class rate)."""
    lines: list[str] = []
    for r in results:
        for v, va in r.views.items():
            m = va.metrics
            null = va.peco_null
            peco_null = "" if null is None else (f" vs shuffled labels {null.mean:.3f} (p95 {null.p95:.3f}),"
                                                 f" excess {null.excess:+.3f}, p={null.p_value:.2f}")
            image = v == "colour"
            tra = "" if image else "  TRA " + ("–" if va.tra is None else f"{100 * va.tra.score:.1f}")
            lines.append(f"{r.name} {v}-only (chance = majority class {100 * m.majority_accuracy:.1f}%):"
                         f" biased {100 * m.biased_accuracy:.1f}% (Δmaj {100 * m.delta_maj:+.1f})"
                         f"  normal{' (image embeddings)' if image else ''} {100 * m.normal_accuracy:.1f}%"
                         f" ({100 * m.normal_delta_maj:+.1f})  %R_R {100 * m.pct_rr:.1f}  NBA {100 * m.nba:.1f}"
                         f"  NBR {100 * m.nbr:.1f}{tra}  PECO{' (image embeddings)' if image else ''}"
                         f" {va.peco.score:.3f}{peco_null} (Table-4 scale {va.peco.score_fraction20:.3f})")
    return lines
