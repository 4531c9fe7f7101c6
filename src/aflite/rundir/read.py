"""The one reader of output folders: a folder's results.json, checked (its format, each key's type:
:mod:`aflite.rundir.schema`) and its files verified against the manifest it lists (:mod:`aflite.rundir.manifest`),
and a run folder's ids, per-row table, warm-up slice and fingerprints, for the commands that read a folder back
(``evaluate``, ``explain``, ``audit --compare``, ``card``, ``report``). Every refusal is one
:class:`~aflite.errors.InputError` naming the file: an unfinished folder (no results.json), one made by
aflite < 0.3, a key of the wrong type, a file missing or changed since the command wrote it."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aflite.errors import InputError
from aflite.rundir.manifest import check_seal, verify
from aflite.rundir.names import (
    CHECKPOINT,
    FEATURES,
    INSTANCES,
    KEPT_CSV,
    KEPT_IDS,
    MARKER,
    REMOVED_CSV,
    REMOVED_IDS,
    RESULTS,
    RUN_COMMANDS,
    SUMMARY_MD,
    TOKENS,
    WARMUP_IDS,
    WEIGHTS,
)
from aflite.rundir.results import FORMAT_VERSION
from aflite.rundir.schema import Document, Envelope, RunBody, parse

__all__ = ["RUN_COMMANDS", "Instances", "RunRecord", "check_run_dataset", "read_columns",
           "read_folder", "read_id_list", "read_json", "read_kept_ids", "read_results", "read_run",
           "recorded_dataset_fingerprint"]

INSTANCE_HEADER = ["id", "label", "kept", "predictability", "removed_at"]
OWN_NAMES = frozenset({CHECKPOINT, INSTANCES, KEPT_IDS, REMOVED_IDS, WARMUP_IDS, KEPT_CSV, REMOVED_CSV, TOKENS, WEIGHTS,
                       FEATURES, SUMMARY_MD})  # the names only aflite writes into a folder it claimed


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


def read_folder(folder: str | os.PathLike[str], commands: Iterable[str] | None = None, *, flag: str | None = None,
                names: Iterable[str] | None = None, skip: Iterable[str] = ()) -> Document:
    """The committed results.json of an output folder, checked, with the files of its manifest verified (all but
    ``skip``, or only ``names``); a folder that one of ``commands`` (None: any) did not make is refused, naming
    ``flag`` when given (the option the folder was passed with)."""
    p = Path(folder)
    what = " or ".join(f"aflite {c}" for c in commands) if commands else "an aflite command"
    named = f"{flag} {p}" if flag else str(p)
    if not p.is_dir():
        raise InputError(f"{named}: not a folder (expected the --out folder of {what})")
    path = p / RESULTS
    if not path.is_file():
        if (p / MARKER).is_file() or (p / CHECKPOINT).is_file():
            raise InputError(f"{named}: unfinished: no results.json (the command writing it was interrupted, or is "
                             f"still running); complete it with --resume (a run) or run the command again with "
                             f"--overwrite")
        raise InputError(f"{path}: not found: {p} is not an aflite output folder (expected the --out folder of "
                         f"{what})")
    obj = read_json(path)
    version = obj.get("format_version")
    if version is None:
        raise InputError(f"{path}: made by aflite < 0.3 (no format_version): run it again")
    if version != FORMAT_VERSION:
        raise InputError(f"{path}: format_version {version!r}, but this aflite reads {FORMAT_VERSION}: made by "
                         f"another aflite; run it again with this one")
    doc = parse(obj, path)
    check_seal(obj, path)
    if commands is not None and doc.command not in tuple(commands):
        raise InputError(f"{path}: made by aflite {doc.command}, not {what}")
    listed = doc.envelope.manifest
    left_out = set(skip)
    verify(p, listed, [n for n in (listed if names is None else names) if n not in left_out])
    # a file under one of aflite's names that the committing command did not write (an earlier run's filtered.tsv
    # beside this run's filtered.jsonl, a warmup_ids.txt dropped in) is not the run's: refused, not read
    stray = [e.name for e in p.iterdir() if e.name not in listed and not any(n.startswith(e.name + "/") for n in listed)
             and (e.name in OWN_NAMES or e.name.startswith("filtered."))]
    verify(p, listed, stray)
    return doc


def read_results(folder: str | os.PathLike[str], *, names: Iterable[str] | None = None,
                 skip: Iterable[str] = ()) -> dict[str, Any]:
    """FOLDER/results.json, checked, with its files verified (:func:`read_folder`)."""
    return read_folder(folder, names=names, skip=skip).raw


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


def read_kept_ids(run_dir: str | os.PathLike[str]) -> list[str]:
    """The ids of D(Φ) that ``aflite run``/``filter`` wrote to ``RUN/kept_ids.txt``, verified, for the commands
    that read a run back (``evaluate``, ``audit --compare``, ``card``); a folder without them, or with none kept,
    is refused."""
    return read_run(run_dir).kept_ids()


def recorded_dataset_fingerprint(out: Path) -> str | None:
    """The dataset fingerprint (:func:`aflite.hashing.dataset_fingerprint`) a run in ``out`` recorded, from its
    results.json or checkpoint; None when it records none."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fp = json.loads((out / RESULTS).read_text(encoding="utf-8")).get("dataset_fingerprint")
        if fp:
            return str(fp)
    with contextlib.suppress(Exception):
        with np.load(out / CHECKPOINT, allow_pickle=False) as z:
            fp = json.loads(str(z["meta"])).get("dataset_fingerprint")
        return None if not fp else str(fp)
    return None


def check_run_dataset(run_dir: str | os.PathLike[str], dataset_fp: str, data: Any) -> None:
    """Refuse a run (``evaluate``, ``audit --compare``) that was made from another dataset than ``data``, by the
    content fingerprint the run recorded; a run that records none (``aflite filter`` of precomputed features)
    gets a warning (and only the check of its ids that the caller makes)."""
    saved = recorded_dataset_fingerprint(Path(run_dir))
    if saved is None:
        print(f"warning: {run_dir}: the run records no dataset fingerprint (made from precomputed features), so "
              f"only its ids are checked against {data}", file=sys.stderr)
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
    """A run folder of ``aflite run``/``filter``/``demo`` read back: results.json checked and every file of its
    manifest verified when it is opened (:func:`read_run`), typed: its envelope (seed, versions, manifest) and its
    body; each file is read when it is first asked for."""

    path: Path
    envelope: Envelope
    body: RunBody

    @property
    def seed(self) -> int | None:
        """The seed the run filtered with (the envelope's; None: a filter given no random_state)."""
        return self.envelope.seed

    def _used(self, name: str) -> Path:
        """FOLDER/name, refused when the folder holds it but the run's manifest does not list it."""
        verify(self.path, self.envelope.manifest, [name])
        return self.path / name

    def kept_ids(self) -> list[str]:
        path = self._used(KEPT_IDS)
        if not path.is_file():
            raise InputError(f"{path}: not found (is it an AFLite run directory?)")
        ids = read_id_list(path)
        if not ids:
            raise InputError(f"{path}: no kept ids (the filtered set D(Φ) is empty)")
        return ids

    def warmup_ids(self) -> list[str]:
        """The rows of the warm-up slice that trained Φ (empty for other featurizers)."""
        return read_id_list(self._used(WARMUP_IDS))

    def instances(self) -> Instances:
        """instances.csv, checked line by line."""
        path = self._used(INSTANCES)
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
            with np.load(self._used(CHECKPOINT), allow_pickle=False) as z:
                fp = json.loads(str(z["meta"])).get("fingerprint")
        except (OSError, ValueError, KeyError):  # absent or damaged: a check that cannot be made
            return None
        return None if fp is None else str(fp)



def read_run(run_dir: str | os.PathLike[str], *, flag: str | None = None,
             commands: tuple[str, ...] = RUN_COMMANDS) -> RunRecord:
    """A run folder, its results.json checked and every file it lists verified (:func:`read_folder`)."""
    doc = read_folder(run_dir, commands, flag=flag)
    assert isinstance(doc.body, RunBody)
    return RunRecord(Path(run_dir), doc.envelope, doc.body)
