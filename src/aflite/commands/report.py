"""``aflite report DIR``: the page of a committed folder rebuilt from its verified files by its command's
``Result.page_of`` (the builder of the page the command wrote from memory).

The folder's lock is held meanwhile, so a command rebuilding the folder is refused (or refuses this). The page is
atomic and not in the manifest, so a kill leaves the folder with the old page or the new one.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from aflite.errors import InputError
from aflite.report.explorer import render, write_html
from aflite.rundir.commands import declarations, result_class
from aflite.rundir.lock import holding_lock, pause_point
from aflite.rundir.names import PAGE, RESULTS
from aflite.rundir.page import PageData, page_class
from aflite.rundir.read import read_folder

__all__ = ["rebuilt_page", "write_page"]


def rebuilt_page(folder: str | os.PathLike[str]) -> PageData | str:
    """The page of a committed ``folder``, from its verified files (a str: a page its command renders whole);
    a folder whose command has no page is refused in one line."""
    p = Path(folder)
    doc = read_folder(p, skip=(PAGE,))
    declared = result_class(doc.command)  # imported: defining the class registers its page
    cls = page_class(doc.command) if declared is None or declared.has_page else None
    if cls is None:
        names = ", ".join(c for c in declarations() if (r := result_class(c)) is not None and r.has_page)
        raise InputError(f"{p / RESULTS}: written by `aflite {doc.command}`, which has no page; give the --out "
                         f"folder of a command that has one ({names})")
    page: PageData | str = cls.page_of(p, doc)
    return page


def write_page(folder: str | os.PathLike[str], *, pack: bool | None = None) -> Path:
    """(Re)write FOLDER/report.html atomically; a page showing the rows' texts is not replaced by one that cannot
    (``pack``: gzip the data always / never / when large)."""
    p = Path(folder)
    with holding_lock(p) if p.is_dir() else contextlib.nullcontext():  # no command builds the folder meanwhile
        page = rebuilt_page(p)
        html = page if isinstance(page, str) else render(page, pack=pack)
        pause_point("page")  # a test's child stops here to be killed: nothing of the new page is written yet
        return write_html(p, html, keep_better=True)
