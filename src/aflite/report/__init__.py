"""aflite's HTML pages: one self-contained, offline file per output folder (``report.html``).

* :mod:`aflite.report.frame` — the frame every page shares (head with a CSP that blocks the network, CSS,
  verdict, escaping, data embedded as JSON);
* :mod:`aflite.report.audit` — the leakage audit's content (tables, PECO curves, t-SNE maps, artifacts);
* :mod:`aflite.report.rows` — a page's rows (a per-row table's columns, compact; any column it does not know
  shown as it is), texts and plots' data;
* :mod:`aflite.report.pages` — the data of the run, explain and evaluate pages, which their Results build (from
  memory, or from the verified folder for ``aflite report``: :mod:`aflite.commands.report`);
* :mod:`aflite.report.explorer` — the explorer page, laid out from that data: rows table and interactive plots;
* :mod:`aflite.report.inline` — a command's result in a notebook (``_repr_html_``), registered on import.

``write_report``/``render`` (and the image variants) keep the audit's API; :func:`render_page` lays out any
command's :class:`~aflite.rundir.page.PageData`.
"""

from __future__ import annotations

from aflite.report.audit import (
    PAPER_REFERENCE,
    paper_reference,
    peco_plot,
    png_bytes,
    render,
    render_images,
    tsne_figure,
    tsne_plot,
    write_image_report,
    write_report,
)
from aflite.report.explorer import render as render_page
from aflite.report.frame import esc, shorten
from aflite.report.inline import result_html

__all__ = [
    "PAPER_REFERENCE",
    "esc",
    "paper_reference",
    "peco_plot",
    "png_bytes",
    "render",
    "render_images",
    "render_page",
    "result_html",
    "shorten",
    "tsne_figure",
    "tsne_plot",
    "write_image_report",
    "write_report",
]
