"""The frame every aflite page shares: head (charset, a Content-Security-Policy that blocks the network), inline
CSS, the verdict block, escaping of dataset text, and data embedded as JSON that the page parses (never runs).

A page is one file that opens from disk with no server and no network: every style and script is inline, images
are ``data:`` URIs, and the CSP forbids any fetch, so a page that tried one would fail visibly, not leak.
"""

from __future__ import annotations

import base64
import gzip
import html
import importlib.util
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# default-src 'none': no fetch, XHR, font, frame or remote image; scripts and styles only inline; images only
# data: URIs (thumbnails, the audit's PNG plots).
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
       "font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'")

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1250px;color:#222;
line-height:1.45;padding:0 16px}
h1{font-size:1.6em;margin-bottom:4px}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:36px}
h3{margin-top:24px}
table{border-collapse:collapse;margin:8px 0 16px 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right;vertical-align:top}
th{background:#f2f2f2}td.l,th.l{text-align:left}
.muted{color:#666;font-size:.9em}.grid{display:flex;flex-wrap:wrap;gap:16px}
.grid>div{flex:1 1 340px;min-width:300px}img{max-width:100%;height:auto;border:1px solid #eee}
.ex{font-size:.9em}.tag{display:inline-block;padding:0 6px;border-radius:3px;background:#eef;margin-right:4px}
.verdict{background:#fff8e1;border-left:4px solid #f0b400;padding:8px 14px;margin:12px 0}
.verdict li{margin:2px 0}.plot{min-height:320px}
"""


def esc(value: Any) -> str:
    """HTML-escape any value's text (quotes included)."""
    return html.escape(str(value), quote=True)


def shorten(value: Any, limit: int = 60) -> str:
    """A dataset string cut to ``limit`` characters for a table cell (a 50,000-character "token" would make
    the table unreadable); the cut is marked with its full length."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[: max(1, limit - 1)]}… ({len(text):,} chars)"


def script_text(source: str) -> str:
    """JavaScript safe inside an inline <script>: no ``</script`` (any case) or ``<!--`` can end the element early
    (``<\\/script`` means the same inside a JavaScript string or regular expression)."""
    return re.sub(r"</(script)", r"<\\/\1", source, flags=re.I).replace("<!--", "<\\!--")


def finite(obj: Any) -> Any:
    """``obj`` with every NaN or infinity replaced by None (JSON has neither; a phase with no scored row records
    NaN quantiles), recursively through dicts, lists and tuples."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    return obj


def json_for_script(obj: Any) -> str:
    """JSON to embed in ``<script type="application/json">``: ``<``, ``>``, ``&`` and the line separators
    U+2028/2029 written as escapes, so no dataset string can end the element or start markup; the page reads it
    with ``JSON.parse``, which turns the escapes back into the same characters."""
    text = json.dumps(finite(obj), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def packed(obj: Any) -> str:
    """The same JSON gzip-compressed and base64-encoded (the page inflates it with DecompressionStream): a
    550K-row run's columns are a few MB instead of tens."""
    raw = json.dumps(finite(obj), ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def plotly_js() -> str | None:
    """plotly.js as shipped inside the plotly Python package (a dependency of aflite), or None when it is missing
    from this environment: the page then shows its tables and says how to get the plots."""
    try:

        spec = importlib.util.find_spec("plotly")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "package_data" / "plotly.min.js"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def page_head(title: str, intro: str, notes: Sequence[str] = (), verdict: Sequence[str] = (),
              extra_css: str = "") -> list[str]:
    """The opening of a page: head with CSP and CSS, the title, the verdict (when the command wrote one),
    what the page shows (``intro`` is trusted HTML written by aflite) and the caller's notes (escaped)."""
    return [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
        f"<title>{esc(title)}</title><style>{CSS}{extra_css}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        verdict_block(verdict),
        f"<p class=\"muted\">{intro}</p>" if intro else "",
        *(f"<p class=\"muted\">{esc(note)}</p>" for note in notes),
    ]


def verdict_block(verdict: Sequence[str] | str | None) -> str:
    """results.json's ``verdict`` (a list of sentences) as a highlighted list; empty when there is none."""
    if not verdict:
        return ""
    items = [verdict] if isinstance(verdict, str) else [str(v) for v in verdict]
    return ('<div class="verdict" id="verdict"><b>Verdict</b><ul>'
            + "".join(f"<li>{esc(s)}</li>" for s in items) + "</ul></div>")

