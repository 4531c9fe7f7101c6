"""aflite's HTML pages: one self-contained, offline file per output folder (``report.html``).

:mod:`~aflite.report.frame` is the frame every page shares (a CSP that blocks the network, CSS, the verdict,
escaping, data embedded as JSON); :mod:`~aflite.report.audit` the leakage audit's content;
:mod:`~aflite.report.rows` and :mod:`~aflite.report.pages` the data of the run, explain and evaluate pages, which
:mod:`~aflite.report.explorer` lays out; :mod:`~aflite.report.inline` a result in a notebook (registered on import).
"""

from __future__ import annotations

from aflite.report.audit import paper_reference, png_bytes, render, render_images, tsne_figure, write_report
from aflite.report.frame import esc, shorten
from aflite.report.inline import result_html

__all__ = ["esc", "paper_reference", "png_bytes", "render", "render_images", "result_html", "shorten",
           "tsne_figure", "write_report"]
