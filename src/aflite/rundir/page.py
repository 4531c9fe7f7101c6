"""What a command's page shows, typed, and which commands have one.

A command's :class:`~aflite.rundir.results.Result` builds its page's data itself (``Result.page``: from the
result in memory, when :meth:`aflite.rundir.folder.RunFolder.finish` commits the folder; ``Result.page_of``: from
the verified folder, when ``aflite report`` rebuilds the page), so the page renderer
(:func:`aflite.report.explorer.render`) knows no command: it lays out a :class:`PageData`. A command whose Result
has these hooks is registered here when its class is defined (:func:`register`); :func:`page_commands` lists the
commands that have a page, and :func:`page_class` finds the Result class that rebuilds one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["PageData", "page_class", "page_commands", "register"]


Data = TypeVar("Data")  # the page's embedded data: its type is the page renderer's (aflite.report.rows.PageJson)


@dataclass
class PageData(Generic[Data]):
    """One explorer page: its title, the intro under it, the notes for the reader, the verdict, the summary
    table's rows (label, value; escaped when drawn) and the data embedded as JSON for the page's script
    (``{"kind", "plots", "cols"}``: the plots' data, and the rows' columns when the page has a rows table)."""

    title: str
    intro: str
    data: Data
    summary: list[tuple[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verdict: list[str] = field(default_factory=list)
    # further tables under the summary, each (heading, column names, rows of cells, a caption): what the terminal
    # shows besides the summary (a run's probe table and examples); cells are escaped when drawn
    tables: list[tuple[str, list[str], list[list[Any]], str]] = field(default_factory=list)


_PAGES: dict[str, type[Any]] = {}


def register(cls: type[Any], commands: tuple[str, ...]) -> None:
    """Record that ``cls`` (a Result class with page hooks) makes and rebuilds the pages of ``commands``; a
    subclass registered later for the same command replaces its parent (:class:`RunResult` after
    :class:`FilterResult`)."""
    for command in commands:
        _PAGES[command] = cls


def page_commands() -> tuple[str, ...]:
    """The commands whose folders have a page, as registered so far (the Result classes defined)."""
    return tuple(_PAGES)


def page_class(command: str) -> type[Any] | None:
    """The Result class that rebuilds the page of a folder ``command`` wrote; None: the command has no page."""
    return _PAGES.get(command)
