"""aflite's HTML pages: one self-contained, offline file per output folder (``report.html``).

* :mod:`aflite.report.frame` — the frame every page shares (head with a CSP that blocks the network, CSS,
  verdict, escaping, data embedded as JSON);
* :mod:`aflite.report.audit` — the leakage audit's content (tables, PECO curves, t-SNE maps, artifacts);
* :mod:`aflite.report.folder` — an output folder's rows, texts and plots' data for its page (which command wrote
  it and its results come from :mod:`aflite.rundir.read`, the one reader of folders);
* :mod:`aflite.report.explorer` — the explorer page: rows table and interactive plots; :func:`write_page`;
* :mod:`aflite.report.inline` — a command's result in a notebook (``_repr_html_``), registered on import.

``write_report``/``render`` (and the image variants) keep the audit's API; :func:`write_page` writes the page of
any output folder (run, explain, evaluate, audit).
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
from aflite.report.explorer import render_page, write_page
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
    "write_page",
    "write_report",
]
