"""The run directory of a filtering run: results, summary and a resumable checkpoint.

Layout (every file written atomically, so a killed run never leaves a half-written one):

* ``kept_ids.txt`` / ``removed_ids.txt`` — one id per line, in dataset order;
* ``instances.csv`` — id, label, kept, predictability (last p̃; empty if never scored), removed_at;
* ``summary.json`` — parameters, seed, per-iteration sizes and timings, stop reason, label counts, versions;
* ``checkpoint.npz`` — the filter state after the last completed phase (plain arrays, no pickles).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import platform
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from aflite.atomic import atomic_open, check_output_path, write_json, write_npz
from aflite.core.phase import FilterState, IterationRecord
from aflite.errors import AfliteError, InputError, OutputError, OutputWriteError, ParameterError
from aflite.hashing import inputs_fingerprint as fingerprint

CHECKPOINT = "checkpoint.npz"


def read_kept_ids(run_dir: Path) -> list[str]:
    """The ids of D(Φ) that ``aflite run``/``filter`` wrote to ``RUN/kept_ids.txt``, for the commands that read a
    run back (``evaluate``, ``audit --compare``); a folder without them, or with none kept, is refused."""
    path = Path(run_dir) / "kept_ids.txt"
    if not path.is_file():
        raise InputError(f"{path}: not found (is it an AFLite run directory?)")
    ids = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not ids:
        raise InputError(f"{path}: no kept ids (the filtered set D(Φ) is empty)")
    return ids


def save_checkpoint(out: Path, state: FilterState, params: dict[str, Any], fp: str,
                    dataset: str | None = None) -> None:
    meta = {
        "iteration": state.iteration,
        "stop_reason": state.stop_reason,
        "history": [r.to_dict() for r in state.history],
        "params": params,
        "fingerprint": fp,
        "dataset_fingerprint": dataset,
    }
    arrays = {f"ens_{k}": v for k, v in state.ensemble_state.items()}
    arrays.update({f"x_{k}": v for k, v in state.extra.items()})
    write_npz(
        out / CHECKPOINT,
        keep=state.keep,
        predictability=state.predictability,
        removed_at=state.removed_at,
        meta=np.array(json.dumps(meta)),
        **arrays,
    )


def recorded_dataset_fingerprint(out: Path) -> str | None:
    """The dataset fingerprint (:func:`aflite.hashing.dataset_fingerprint`) a run in ``out`` recorded, from its
    results.json, summary.json or checkpoint; None for a run made before it was recorded."""
    for name in ("results.json", "summary.json"):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            fp = json.loads((out / name).read_text(encoding="utf-8")).get("dataset_fingerprint")
            if fp:
                return str(fp)
    with contextlib.suppress(Exception):
        with np.load(out / CHECKPOINT, allow_pickle=False) as z:
            fp = json.loads(str(z["meta"])).get("dataset_fingerprint")
        return None if not fp else str(fp)
    return None


def check_resume_dataset(out: Path, dataset_fp: str) -> None:
    """Refuse ``--resume`` of a run made from another dataset, before anything is computed or written."""
    saved = recorded_dataset_fingerprint(out)
    if saved is not None and saved != dataset_fp:
        raise InputError(f"{out}: the run there was made from a different dataset (its ids, labels or texts differ); "
                         f"use another --out")


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


def load_checkpoint(out: Path, params: dict[str, Any], fp: str) -> FilterState | None:
    """The saved state, or None when there is none; refuses one made with other data or parameters."""
    path = out / CHECKPOINT
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        meta = json.loads(str(data.pop("meta")))
    except Exception as exc:  # noqa: BLE001 - any damage means the checkpoint is unusable
        raise InputError(f"{path}: unreadable checkpoint ({exc}); delete it to start over") from exc
    if meta["fingerprint"] != fp:
        raise InputError(f"{path}: checkpoint was made from different features or labels; use another --out")
    if meta["params"] != params:
        diff = {k: (meta["params"].get(k), v) for k, v in params.items() if meta["params"].get(k) != v}
        raise InputError(f"{path}: checkpoint was made with other parameters {diff} (saved, now)")
    return FilterState(
        iteration=int(meta["iteration"]),
        keep=data.pop("keep").astype(bool),
        predictability=data.pop("predictability").astype(np.float64),
        removed_at=data.pop("removed_at").astype(np.int32),
        history=[IterationRecord(**r) for r in meta["history"]],
        stop_reason=meta["stop_reason"],
        ensemble_state={k[4:]: v for k, v in data.items() if k.startswith("ens_")},
        extra={k[2:]: v for k, v in data.items() if k.startswith("x_")},
    )


def versions() -> dict[str, str]:
    import scipy
    import sklearn

    from aflite import __version__

    return {
        "aflite": __version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "platform": platform.platform(),
        "kernel": _kernel(),
    }


def _kernel() -> str:
    """Which own-row kernel the fast solver uses (results agree either way; speed differs)."""
    from aflite.core import kernels
    if not kernels.available():
        return "numpy"
    import numba

    return f"numba {numba.__version__}"


def write_run_files(
    out: Path,
    ids: NDArray[Any],
    labels: NDArray[Any],
    state: FilterState,
    params: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ids, the per-instance table and summary.json; return the summary."""
    keep = state.keep
    with atomic_open(out / "kept_ids.txt") as fh:
        fh.writelines(f"{i}\n" for i in ids[keep])
    with atomic_open(out / "removed_ids.txt") as fh:
        fh.writelines(f"{i}\n" for i in ids[~keep])
    with atomic_open(out / "instances.csv") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["id", "label", "kept", "predictability", "removed_at"])
        for i, lab, k, p, r in zip(ids, labels, keep, state.predictability, state.removed_at, strict=True):
            w.writerow([i, lab, int(k), "" if np.isnan(p) else f"{p:.6f}", int(r)])
    before = Counter(map(str, labels))
    after = Counter(map(str, labels[keep]))
    summary: dict[str, Any] = {
        "parameters": params,
        "seed": params.get("random_state"),
        "size_before": int(len(keep)),
        "size_after": int(keep.sum()),
        "n_iterations": state.iteration,
        "stop_reason": state.stop_reason,
        "label_counts_before": dict(sorted(before.items())),
        "label_counts_after": dict(sorted(after.items())),
        "sizes": [len(keep)] + [r.size_after for r in state.history],
        "seconds_total": float(sum(r.seconds for r in state.history)),
        "iterations": [r.to_dict() for r in state.history],
        "versions": versions(),
    }
    if extra:
        summary.update(extra)
    write_json(out / "summary.json", summary)
    return summary


def run_filter(
    af: Any,
    X: Any,
    y: np.ndarray,
    ids: np.ndarray,
    out: Path,
    *,
    groups: np.ndarray | None = None,
    resume: bool = False,
    overwrite: bool = False,
    show_progress: bool = True,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fit ``af`` with a progress bar, a checkpoint after every phase, and the run directory's outputs.
    A previous run in ``out`` is continued with ``resume``, replaced with ``overwrite``, else refused."""
    from tqdm import tqdm

    from aflite import rundir  # late-bound so that tests can intercept checkpoint writes
    from aflite.core.phase import validate_inputs

    # validate everything before touching the output directory
    validate_inputs(X, y, groups)
    params = af.resolved_params(len(y))
    if groups is not None:
        params["groups"] = True
    fp = fingerprint(X, y)
    dataset_fp = (extra or {}).get("dataset_fingerprint")
    state = None
    if (out / CHECKPOINT).exists() or (out / "summary.json").exists():
        if resume:
            if dataset_fp is not None:
                check_resume_dataset(out, dataset_fp)
            state = rundir.load_checkpoint(out, params, fp)
        elif not overwrite:
            raise ParameterError(f"{out} holds a previous run: pass --resume to continue it, --overwrite to start "
                                 f"over, or choose another --out")
    out.mkdir(parents=True, exist_ok=True)

    total = params["dataset_size"] - params["target_size"]
    done0 = 0 if state is None else int((~state.keep).sum())
    bar = tqdm(total=total, initial=done0, unit="inst", desc="removed", disable=not show_progress, file=sys.stderr,
               dynamic_ncols=True)

    def on_phase(record: Any, st: Any) -> None:
        rundir.save_checkpoint(out, st, params, fp, dataset_fp)
        bar.update(record.n_removed)
        bar.set_postfix(iter=record.iteration, S=record.size_after, eligible=record.n_eligible,
                        s_per_phase=f"{record.seconds:.1f}")

    resumed_from = None if state is None else int(state.iteration)
    start = time.perf_counter()
    try:
        af.fit(X, y, groups, resume=state, callback=on_phase)
        if bar.n < bar.total:  # stopped before n (k-rule, no eligible instance): the bar ends at 100 % of what ran
            bar.total = bar.n
            bar.set_postfix_str(f"stopped: {af.state_.stop_reason}"[:60], refresh=False)
            bar.refresh()
    finally:
        bar.close()
    info = {"wall_seconds_this_call": time.perf_counter() - start, "resumed_from_iteration": resumed_from}
    if extra:
        info.update(extra)
    summary = rundir.write_run_files(out, ids, np.asarray(y), af.state_, params, info)
    return summary


# ============================================================================== output folders of commands
# Every command that writes a folder claims it first: the path is checked before any computation, a marker
# file names the command that owns the folder (so that another command, or ``demo``'s clean start, never
# overwrites or deletes what it did not make), and a lock keeps a second process out while the first writes.
MARKER = ".aflite-owner.json"
LOCK = ".aflite.lock"
RUN_FILES = (CHECKPOINT, "summary.json")  # a run directory holds one of these once a run has written it


RUN_COMMANDS = ("run", "filter", "demo")  # the commands whose --out is a run folder


def is_run_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` is a run folder: marked by ``aflite run``/``filter``/``demo``, or (made from Python, no
    marker) holding a checkpoint, or a summary.json beside instances.csv."""
    p = Path(folder)
    if not p.is_dir():
        return False
    marker = read_marker(p)
    if marker is not None:
        return marker["command"] in RUN_COMMANDS
    return (p / CHECKPOINT).is_file() or ((p / "summary.json").is_file() and (p / "instances.csv").is_file())


def check_outside_runs(path: str | os.PathLike[str], runs: Any = (), *, flag: str = "--out") -> None:
    """Refuse (one line, before anything is written) an output or cache path of a command that reads run folders
    (explain, evaluate, audit --compare) when it is one of the input ``runs``, inside one, or inside any other run
    folder: a run folder is written by its run only, so that what it recorded stays what the run did."""
    resolved = Path(path).expanduser().resolve()
    inputs = [Path(r).expanduser().resolve() for r in runs]
    for run in inputs:
        if resolved == run or run in resolved.parents:
            where = "is" if resolved == run else "is inside"
            raise OutputError(f"{flag} {path} {where} the run folder {run}, which this command reads: a run folder "
                              f"is written by its run only; choose another {flag}")
    for folder in (resolved, *resolved.parents):
        if is_run_folder(folder):
            where = "is" if folder == resolved else "is inside"
            raise OutputError(f"{flag} {path} {where} the run folder {folder}: a run folder is written by its run "
                              f"only; choose another {flag}")


def read_marker(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The owner marker of a folder (command, whether that command created the folder), or None."""
    path = Path(folder) / MARKER
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) and isinstance(obj.get("command"), str) else None


class OutputFolder:
    """A claimed output folder: checked, created if needed, marked as the command's own and locked.

    Use as a context manager; on an :class:`~aflite.errors.AfliteError` inside the block, a folder that this
    claim created is removed again (nothing is left behind by a refused input); any other exit keeps it (an
    interrupted run stays resumable).
    """

    def __init__(self, path: Path, command: str, created: bool, lock_fh: IO[str] | None) -> None:
        self.path = path
        self.command = command
        self.created = created
        self.marked = False  # whether this claim wrote the marker (and the lock file) into an existing folder
        self._lock_fh = lock_fh

    def release(self, failed: bool = False) -> None:
        if self._lock_fh is not None:
            with contextlib.suppress(OSError):
                self._lock_fh.close()  # closing the descriptor releases the flock
            self._lock_fh = None
        if failed and self.created:
            shutil.rmtree(self.path, ignore_errors=True)
        elif failed and self.marked:  # an existing folder that was not ours: leave it as it was found
            for name in (MARKER, LOCK):
                with contextlib.suppress(OSError):
                    (self.path / name).unlink()

    def __enter__(self) -> OutputFolder:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # a refused input leaves nothing behind; a write that failed part-way (disk full) keeps what was
        # completed (each file is whole), so that the run can be resumed once there is room
        self.release(failed=exc_type is not None and issubclass(exc_type, AfliteError)
                     and not issubclass(exc_type, OutputWriteError))


def claim_output(
    out: str | os.PathLike[str],
    command: str,
    *,
    overwrite: bool = False,
    resume: bool = False,
    flag: str = "--out",
) -> OutputFolder:
    """Check, create, mark and lock the output folder of ``aflite COMMAND``.

    A non-empty folder is refused unless its marker names this command, or ``overwrite`` (the user's
    ``--overwrite``); a folder holding a run (checkpoint or summary) is refused unless ``resume`` or
    ``overwrite``; a folder locked by a live process is refused. All before any computation.
    """
    p = check_output_path(out, flag=flag, folder=True)
    existed = p.exists()
    if existed:
        entries = [e for e in p.iterdir() if e.name not in (MARKER, LOCK)]
        marker = read_marker(p)
        owner = None if marker is None else marker["command"]
        legacy_run = marker is None and command in ("run", "filter", "demo") and any(
            (p / f).exists() for f in RUN_FILES)
        if entries and owner != command and not overwrite and not (resume and legacy_run):
            made = f"made by `aflite {owner}`" if owner else f"not made by `aflite {command}`"
            raise OutputError(f"{flag} {p}: folder is not empty ({len(entries)} entr"
                              f"{'y' if len(entries) == 1 else 'ies'}) and was {made}; pass --overwrite to write "
                              f"into it anyway, or choose another {flag}")
        if not resume and not overwrite and any((p / f).exists() for f in RUN_FILES) and command in (
                "run", "filter"):
            raise OutputError(f"{flag} {p}: holds a previous run: pass --resume to continue it, --overwrite to "
                              f"start over, or choose another {flag}")
    else:
        marker = None
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{flag} {p}: cannot create the folder: {exc.strerror or exc}") from None
    had_lock = (p / LOCK).exists()
    try:
        lock_fh = _lock(p, flag)
    except OutputError:
        if not existed:
            shutil.rmtree(p, ignore_errors=True)
        raise
    claim = OutputFolder(p, command, created=not existed, lock_fh=lock_fh)
    try:
        if marker is None or marker.get("command") != command:
            claim.marked = existed and marker is None and not had_lock
            from aflite import __version__

            write_json(p / MARKER, {"command": command, "created": not existed, "aflite": __version__,
                                    "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    except OSError as exc:
        claim.release(failed=True)
        raise OutputError(f"{flag} {p}: cannot write into the folder: {exc.strerror or exc}") from None
    return claim


def _lock(folder: Path, flag: str) -> IO[str] | None:
    """An exclusive, non-blocking lock on FOLDER/.aflite.lock held while the returned file stays open."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock (documented)
        return None
    try:
        fh = open(folder / LOCK, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the lock's lifetime
    except OSError as exc:
        raise OutputError(f"{flag} {folder}: cannot write into the folder: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        pid = fh.read().strip() or "?"
        fh.close()
        raise OutputError(f"{flag} {folder}: in use by another aflite process (pid {pid}); wait for it to "
                          f"finish or choose another {flag}") from None
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
    except OSError as exc:  # disk full or quota: the lock file cannot even hold a pid
        fh.close()
        raise OutputError(f"{flag} {folder}: cannot write into the folder: {exc.strerror or exc}") from None
    return fh


def clear_own_folder(folder: Path, command: str) -> bool:
    """Empty a folder that ``aflite COMMAND`` created and marked as its own (its marker and lock stay);
    anything else is left alone. Returns whether it was cleared."""
    marker = read_marker(folder)
    if marker is None or marker.get("command") != command or marker.get("created") is not True:
        return False
    for entry in folder.iterdir():
        if entry.name in (MARKER, LOCK):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return True
