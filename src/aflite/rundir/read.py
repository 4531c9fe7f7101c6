"""The one reader of output folders: which command wrote a folder, its results, and a run folder's ids, per-row
table, warm-up slice and fingerprints, for the commands that read a run back (``evaluate``, ``explain``,
``audit --compare``, ``report``). Every malformed file is an :class:`~aflite.errors.InputError` naming it."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aflite.errors import InputError
from aflite.rundir.names import (
    CHECKPOINT,
    INSTANCES,
    KEPT_IDS,
    METRICS,
    PAGE,
    RESULTS,
    RUN_COMMANDS,
    SUMMARY,
    WARMUP_IDS,
)

__all__ = ["KINDS", "RUN_COMMANDS", "Instances", "RunRecord", "check_run_dataset", "detect_kind", "read_columns",
           "read_json", "read_kept_ids", "read_made_by", "read_results", "read_run", "recorded_dataset_fingerprint",
           "run_results"]

KINDS = ("run", "explain", "evaluate", "audit")  # the folders that have a page
INSTANCE_HEADER = ["id", "label", "kept", "predictability", "removed_at"]


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object written by aflite, or {} when the file is absent; anything else there (not JSON, not an
    object, a folder) is refused in one line: nothing is built from what cannot be trusted."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise InputError(f"{path}: not aflite's {path.name} (a JSON {type(obj).__name__}, not an object)")
    return obj


def read_results(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """FOLDER/results.json ({} when there is none)."""
    return read_json(Path(folder) / RESULTS)


def run_results(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """A run folder's numbers: summary.json under results.json ({} when it has neither)."""
    p = Path(folder)
    return {**read_json(p / SUMMARY), **read_json(p / RESULTS)}


def read_columns(path: Path) -> dict[str, list[str]]:
    """A per-row CSV (``instances.csv`` of a run or of explain) as columns of strings, header order; InputError
    naming the line of a row with the wrong number of fields, or a file without an ``id`` column."""
    cols: dict[str, list[str]] = {}
    try:
        with Path(path).open(encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if not header or "id" not in header:
                raise InputError(f"{path}: line 1: no 'id' column (is it aflite's instances.csv?)")
            for name in header:
                cols[name] = []
            lists = [cols[name] for name in header]
            for lineno, row in enumerate(reader, start=2):
                if len(row) != len(header):
                    raise InputError(f"{path}: line {lineno}: {len(row)} fields, expected {len(header)}")
                for lst, value in zip(lists, row, strict=True):
                    lst.append(value)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return cols


def read_id_list(path: Path) -> list[str]:
    """One id per line, blank lines skipped; [] when the file is absent."""
    if not path.is_file():
        return []
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_made_by(folder: str | os.PathLike[str], commands: tuple[str, ...], flag: str) -> dict[str, Any]:
    """The results.json of an output folder that one of ``commands`` made, for a command that builds on it
    (``aflite card``); a folder without one, an unfinished run, or another command's folder is refused in one line
    naming ``flag``."""
    p = Path(folder)
    what = " or ".join(f"aflite {c}" for c in commands)
    if not p.is_dir():
        raise InputError(f"{flag} {p}: not a folder (expected the --out folder of {what})")
    path = p / RESULTS
    if not path.is_file():
        hint = " (a run that has not finished: complete it with --resume)" if (p / CHECKPOINT).is_file() else ""
        raise InputError(f"{path}: not found: {p} is not a folder of {what}{hint}")
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(results, dict) or results.get("command") not in commands:
        made = results.get("command") if isinstance(results, dict) else None
        raise InputError(f"{path}: made by {'aflite ' + str(made) if made else 'something else'}, not {what}")
    return results


def read_kept_ids(run_dir: str | os.PathLike[str]) -> list[str]:
    """The ids of D(Φ) that ``aflite run``/``filter`` wrote to ``RUN/kept_ids.txt``, for the commands that read a
    run back (``evaluate``, ``audit --compare``); a folder without them, or with none kept, is refused."""
    path = Path(run_dir) / KEPT_IDS
    if not path.is_file():
        raise InputError(f"{path}: not found (is it an AFLite run directory?)")
    ids = read_id_list(path)
    if not ids:
        raise InputError(f"{path}: no kept ids (the filtered set D(Φ) is empty)")
    return ids


def recorded_dataset_fingerprint(out: Path) -> str | None:
    """The dataset fingerprint (:func:`aflite.hashing.dataset_fingerprint`) a run in ``out`` recorded, from its
    results.json, summary.json or checkpoint; None for a run made before it was recorded."""
    for name in (RESULTS, SUMMARY):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            fp = json.loads((out / name).read_text(encoding="utf-8")).get("dataset_fingerprint")
            if fp:
                return str(fp)
    with contextlib.suppress(Exception):
        with np.load(out / CHECKPOINT, allow_pickle=False) as z:
            fp = json.loads(str(z["meta"])).get("dataset_fingerprint")
        return None if not fp else str(fp)
    return None


def check_run_dataset(run_dir: str | os.PathLike[str], dataset_fp: str, data: Any) -> None:
    """Refuse a run (``evaluate``, ``audit --compare``) that was made from another dataset than ``data``, by the
    content fingerprint the run recorded; a run made before fingerprints were recorded gets a warning (and only
    the check of its ids that the caller makes)."""
    saved = recorded_dataset_fingerprint(Path(run_dir))
    if saved is None:
        print(f"warning: {run_dir}: the run records no dataset fingerprint (made by an older aflite), so only its "
              f"ids are checked against {data}", file=sys.stderr)
    elif saved != dataset_fp:
        raise InputError(f"{run_dir}: this run was made from a different dataset than {data} (ids, labels or texts "
                         f"differ); give the file the run was made from, with the same column options")


@dataclass
class Instances:
    """A run's per-row table (``instances.csv``), in the run's row order."""

    ids: list[str]
    labels: list[str]
    kept: np.ndarray
    predictability: np.ndarray  # NaN: never scored
    removed_at: np.ndarray  # -1: kept


@dataclass
class RunRecord:
    """A run folder of ``aflite run``/``filter``/``demo`` read back; each file is read when it is first asked for."""

    path: Path
    summary: dict[str, Any] = field(default_factory=dict)  # summary.json (else results.json); {} for neither

    def require(self, *keys: str, what: str = "the summary of `aflite run`") -> dict[str, Any]:
        """The summary, refused in one line when it lacks one of ``keys``."""
        if not self.summary:
            raise InputError(f"{self.path / SUMMARY}: not found (is it an AFLite run directory?)")
        missing = [k for k in keys if k not in self.summary]
        if missing:
            raise InputError(f"{self.path / SUMMARY}: not {what} (no {'/'.join(missing)})")
        return self.summary

    @property
    def featurizer(self) -> dict[str, Any]:
        """What the run recorded of its Φ (name, view, options); {} when it recorded none."""
        return dict(self.summary.get("featurizer") or {})

    def kept_ids(self) -> list[str]:
        return read_kept_ids(self.path)

    def warmup_ids(self) -> list[str]:
        """The rows of the warm-up slice that trained Φ (empty for other featurizers)."""
        return read_id_list(self.path / WARMUP_IDS)

    def instances(self) -> Instances:
        """instances.csv, checked line by line."""
        path = self.path / INSTANCES
        if not path.is_file():
            raise InputError(f"{path}: not found (is it an AFLite run directory?)")
        ids, labels, kept, pred, rem = [], [], [], [], []
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header != INSTANCE_HEADER:
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
        return Instances(ids, labels, np.asarray(kept, bool), np.asarray(pred), np.asarray(rem, np.int32))

    def fingerprint(self) -> str | None:
        """The fingerprint of Φ and the labels the run's checkpoint recorded (None: no readable checkpoint)."""
        try:
            with np.load(self.path / CHECKPOINT, allow_pickle=False) as z:
                fp = json.loads(str(z["meta"])).get("fingerprint")
        except Exception:  # noqa: BLE001 - absent or damaged: a check that cannot be made
            return None
        return None if fp is None else str(fp)

    def check_dataset(self, dataset_fp: str, data: Any) -> None:
        """Refuse the run when it was made from another dataset than ``data`` (:func:`check_run_dataset`)."""
        check_run_dataset(self.path, dataset_fp, data)


def read_run(run_dir: str | os.PathLike[str]) -> RunRecord:
    """A run folder (summary.json, else results.json); InputError when it is no folder or its summary is no JSON."""
    p = Path(run_dir)
    if not p.is_dir():
        raise InputError(f"{p}: not a folder (expected the run directory of `aflite run`)")
    summary = read_json(p / SUMMARY)
    if not summary and (p / SUMMARY).is_file():
        raise InputError(f"{p / SUMMARY}: not a JSON object")
    if not summary:
        results = read_json(p / RESULTS)
        summary = results if "parameters" in results else {}
    return RunRecord(p, summary)


# the files each kind of folder has; a results.json naming a command whose files are not there is refused
_KIND_FILES = {"run": "instances.csv and summary.json", "explain": "tokens.csv or instances.csv with the data map",
               "evaluate": "results.json with the accuracies (\"aggregate\")", "audit": "metrics.json and report.html"}


def detect_kind(folder: str | os.PathLike[str]) -> str:
    """Which command's output FOLDER is: ``run`` (also ``filter``/``demo``), ``explain``, ``evaluate`` or
    ``audit``, from its files (results.json's ``command`` first, checked against the files); anything else is
    refused in one line."""
    p = Path(folder)
    if not p.is_dir():
        raise InputError(f"{p}: not a folder (give the --out folder of aflite run, explain, evaluate or audit)")
    results = read_json(p / RESULTS)
    command = results.get("command")
    if command is not None:  # results.json says which command wrote the folder: its files must be there
        kind = "run" if command in RUN_COMMANDS else str(command)
        if kind not in KINDS:
            raise InputError(f"{p / RESULTS}: written by `aflite {command}`, which has no page; give the --out "
                             f"folder of aflite run, explain, evaluate or audit")
        if not _has_files(p, kind, results):
            raise InputError(f"{p / RESULTS}: written by `aflite {command}`, but {p} lacks its files "
                             f"({_KIND_FILES[kind]}); is results.json from another folder?")
        by_files = _kind_by_files(p)
        if by_files not in (None, kind):
            raise InputError(f"{p / RESULTS}: written by `aflite {command}`, but {p} holds the files of "
                             f"aflite {by_files} ({_KIND_FILES[by_files]}); is results.json from another folder?")
        return kind
    by_files = _kind_by_files(p)
    if "aggregate" in results and by_files not in (None, "evaluate"):
        raise InputError(f"{p / RESULTS}: holds evaluate's accuracies, but {p} holds the files of aflite "
                         f"{by_files}; is results.json from another folder?")
    if by_files is not None:
        return by_files
    if "aggregate" in results:
        return "evaluate"
    raise InputError(f"{p}: not an aflite output folder (no instances.csv + summary.json, tokens.csv, "
                     "evaluate's or audit's results)")


def _kind_by_files(p: Path) -> str | None:
    """The kind the folder's own files say (run, explain, audit), or None when they say nothing."""
    if (p / "tokens.csv").is_file() or "confidence" in _header(p / INSTANCES):
        return "explain"
    if (p / INSTANCES).is_file() and (p / SUMMARY).is_file():
        return "run"
    if (p / METRICS).is_file() and (p / PAGE).is_file():
        return "audit"
    return None


def _has_files(p: Path, kind: str, results: dict[str, Any]) -> bool:
    if kind == "run":
        return (p / INSTANCES).is_file() and ((p / SUMMARY).is_file() or "iterations" in results)
    if kind == "explain":
        return (p / "tokens.csv").is_file() or "confidence" in _header(p / INSTANCES)
    if kind == "evaluate":
        return "aggregate" in results
    return (p / METRICS).is_file() and (p / PAGE).is_file()


def _header(path: Path) -> list[str]:
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            return next(csv.reader(fh), [])
    except OSError:
        return []
