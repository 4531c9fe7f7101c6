"""``OUT/results.json`` and what every command returns: the same envelope for every command, whether it runs from
the CLI or from Python, and the :class:`Result` that knows a command's JSON, verdict, summary.md and per-row table.

The envelope (command, argv, seed, versions) comes first, the command's own results after it. A library
function called from Python records the process's arguments (``argv=None``); the CLI passes the argv it parsed
in through its claimed :class:`aflite.rundir.folder.RunFolder`, so the file is written once either way.

Warnings of scikit-learn, numpy and scipy met while a command's library function runs (convergence warnings of
thousands of small fits, say) are counted by :func:`recording_warnings` and listed in results.json under
``"warnings"`` (``[{"warning": "ConvergenceWarning: ...", "count": N}]``), so that a Python caller gets the same
file as the CLI and the report page sees them; other warnings pass through unchanged.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import sys
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from aflite.atomic import JsonObject, json_text, write_text
from aflite.rundir import display
from aflite.rundir.manifest import ManifestEntry, seal
from aflite.rundir.names import INSTANCES, RESULTS
from aflite.rundir.page import PageData, register
from aflite.rundir.schema import Document, WarningEntry
from aflite.rundir.versions import versions

__all__ = ["FORMAT_VERSION", "Result", "Table", "WarningsRecord", "recording_warnings", "results_document",
           "write_results_json"]

# results.json's format: 1 since aflite 0.3 (the envelope's format_version, the manifest under "files", written
# last); a folder without it was made by aflite < 0.3 and is refused by the readers (aflite.rundir.read)
FORMAT_VERSION = 1

LIBRARIES = ("sklearn", "numpy", "scipy")  # whose warnings are counted in results.json instead of shown one by one


@dataclass
class WarningsRecord:
    """The warnings met inside :func:`recording_warnings`: those of :data:`LIBRARIES` are counted (:meth:`counts`);
    ``written`` lists the results.json files that carry them."""

    caught: list[warnings.WarningMessage] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)

    @staticmethod
    def is_library(w: warnings.WarningMessage) -> bool:
        origin = getattr(w.category, "__module__", "") or ""
        return origin.split(".")[0] in LIBRARIES or "/sklearn/" in (w.filename or "")

    def counts(self) -> dict[str, int]:
        """``{"Category: first line of the message": count}`` of the library warnings so far."""
        return dict(Counter(f"{w.category.__name__}: {str(w.message).splitlines()[0] if str(w.message) else ''}"
                            for w in list(self.caught) if self.is_library(w)))

    def entries(self) -> list[WarningEntry]:
        """What results.json lists under ``"warnings"``."""
        return [WarningEntry(k, n) for k, n in self.counts().items()]


_RECORD: contextvars.ContextVar[WarningsRecord | None] = contextvars.ContextVar("aflite_warnings", default=None)


@contextlib.contextmanager
def recording_warnings(*, summarize: bool = True) -> Iterator[WarningsRecord]:
    """Count library warnings (see the module docstring) while the block runs; results.json written inside it
    lists them. Nested uses share the outermost record. When the outermost block ends, other warnings are passed on
    (once per place) and, with ``summarize``, the library warnings as one warning that names their count and the
    results.json listing them (the CLI prints its own line instead: ``summarize=False``)."""
    current = _RECORD.get()
    if current is not None:
        yield current
        return
    record = WarningsRecord()
    token = _RECORD.set(record)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            record.caught = caught  # filled as warnings are raised: write_results_json reads it live
            yield record
    finally:
        _RECORD.reset(token)
        shown = set()
        for w in record.caught:
            if not record.is_library(w) and (key := (w.category, str(w.message), w.filename, w.lineno)) not in shown:
                shown.add(key)
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        counts = record.counts()
        if summarize and counts:
            where = f"; listed in {record.written[-1]} under \"warnings\"" if record.written else ""
            warnings.warn(f"{sum(counts.values())} warning(s) from scikit-learn/numpy/scipy, e.g. "
                          f"{next(iter(counts))[:160]}{where}", UserWarning, stacklevel=3)


def results_document(out: str | Path, results: JsonObject, *, command: str | None,
                     argv: Sequence[str] | None = None, seed: Any = None) -> JsonObject:
    """``OUT/results.json`` as it will be written (without its manifest): the envelope every command's file starts
    with (the command, its arguments, the seed and the versions), followed by ``results``.
    A ``seed`` key in the body is the default seed of the envelope. Inside :func:`recording_warnings`, the library
    warnings met so far are listed under ``"warnings"``."""
    path = Path(out) / RESULTS
    body = dict(results)
    body_seed = body.pop("seed", None)
    for key in ("command", "format_version", "argv", "versions", "manifest", "sealed"):
        body.pop(key, None)
    record = _RECORD.get()
    if record is not None and (entries := record.entries()):
        body["warnings"] = [dataclasses.asdict(e) for e in entries]
        record.written.append(path)
    head = {"command": command, "format_version": FORMAT_VERSION,
            "argv": list(argv) if argv is not None else sys.argv[1:],
            "seed": seed if seed is not None else body_seed, "versions": versions()}
    text = json_text({**head, **body})
    return dict(json.loads(text))


def write_results_json(out: str | Path, document: JsonObject, files: dict[str, ManifestEntry]) -> dict[str, Any]:
    """Write ``OUT/results.json``: ``document`` (:func:`results_document`) and the folder's manifest under
    ``"manifest"`` (:mod:`aflite.rundir.manifest`): the commit of the folder, so written last and atomically.
    :meth:`aflite.rundir.folder.RunFolder.finish` is its one caller. Returns what was written."""
    full = seal({**document, "manifest": files})
    write_text(Path(out) / RESULTS, json_text(full))
    return full


@dataclass
class Table:
    """A per-row table as it is written (``instances.csv``): the header and the rows, each cell as written."""

    columns: Sequence[str]
    rows: Iterable[Sequence[Any]]
    name: str = INSTANCES


class Result:
    """What a command's library function returns, and all that its folder's last files are made of.

    A command's result knows its results.json body (:meth:`to_json`, without the envelope), its verdict sentences
    (:meth:`verdict_sentences`, in the body), its summary.md (:meth:`summary_md`), its per-row table (:meth:`table`,
    None for commands without one) and its page (:meth:`page`, from the result in memory; :meth:`page_of`, the same
    page from its verified folder, for ``aflite report``); :meth:`write_files` writes what else is its own (kept
    ids, tokens.csv, ...). :meth:`aflite.rundir.folder.RunFolder.finish` writes them, then summary.md and
    report.html, then results.json, once and in that order. A class that defines :meth:`page` is registered, when
    it is defined, as the page of its ``page_commands`` (default: its ``command``; :mod:`aflite.rundir.page`);
    ``has_page`` says whether it has one (embed and synthetic have none)."""

    command: ClassVar[str] = ""
    file_names: ClassVar[tuple[str, ...]] = ()  # the top-level names write_files writes (checked before the build)
    page_commands: ClassVar[tuple[str, ...]] = ()  # the commands whose folders' pages it builds (): (command,)
    has_page: ClassVar[bool] = False  # set for each subclass: whether it defines page()
    out: Path | None  # None: a result computed without a folder (aflite.run(..., out=None))

    dataset: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.has_page = cls.page is not Result.page
        if cls.has_page and cls.command:
            register(cls, cls.page_commands or (cls.command,))

    @property
    def seed(self) -> Any:
        """The seed the envelope records (default: the body's ``seed``)."""
        return self.to_json().get("seed")

    def to_json(self) -> JsonObject:
        """results.json's body, as JSON-ready data: the verdict and every figure (the envelope — command, argv,
        seed, versions, manifest — is the folder's)."""
        raise NotImplementedError

    def verdict_sentences(self) -> list[str]:
        """The verdict (results.json's ``verdict``): two or three sentences that say what the numbers mean."""
        verdict = self.to_json().get("verdict")
        return [str(s) for s in verdict] if isinstance(verdict, list) else []

    def summary_md(self) -> str:
        """summary.md as Markdown: the verdict first, then what the numbers are."""
        raise NotImplementedError

    def table(self) -> Table | None:
        """The per-row table the folder writes (``instances.csv``); None for a command without one."""
        return None

    def write_files(self, out: Path) -> None:
        """The result's own files besides the last three (default: none)."""

    def __repr__(self) -> str:
        """One line: the command, the sizes, the verdict's first sentence, the folder (:mod:`aflite.rundir.display`);
        subclasses are ``@dataclass(repr=False)`` so that a notebook never prints their arrays and dicts."""
        return display.describe(self)

    def _repr_html_(self) -> str | None:
        """A notebook's view: the verdict, the label shift and the page's first plots (:mod:`aflite.report.inline`)."""
        return display.html_of(self)

    def page(self, document: Document) -> str | None:
        """The page (report.html, as HTML) from the result in memory (``document``: results.json as it is being
        written, typed as :meth:`page_of` gets it; nothing is read back from the files just written): the folder
        writes it as it is, so it needs no renderer (those live above it, in :mod:`aflite.report`); None: no page
        (the default)."""
        return None

    @classmethod
    def page_of(cls, folder: Path, document: Document) -> PageData | str:
        """The same page rebuilt from the committed, verified ``folder`` (``document``: its results.json read
        through :mod:`aflite.rundir.read`), for ``aflite report``."""
        raise NotImplementedError(f"aflite {cls.command}: no page")
