"""Image thumbnails for the rows table of an image run: small (48 px) JPEG ``data:`` URIs for a bounded sample
of rows (the first rows of the table and the most predictable removed ones), so that a page of a large image
set stays a few MB and opens at once.

Each row's image is the run's own reference to it: from the dataset in memory when the run writes its page, from
``kept.csv``/``removed.csv`` (written in dataset order, paths relative to the image folder or to the table) when
``aflite report`` rebuilds it, so the page needs neither the image loader nor an encoder."""

from __future__ import annotations

import base64
import csv
import io
from pathlib import Path

from aflite.report.rows import PageColumns

THUMB_PX = 48
THUMB_ROWS = 300  # the first rows in table order, and as many of the most predictable removed rows


def read_paths(path: Path) -> list[str]:
    """The ``path`` column of kept.csv or removed.csv."""
    with path.open(encoding="utf-8", newline="") as fh:
        return [row.get("path", "") for row in csv.DictReader(fh)]


def folder_paths(kept: list[str], removed: list[str], phase: list[int]) -> list[str | None] | None:
    """Each table row's image path as kept.csv and removed.csv list them: the k-th kept (removed) row of the table
    is the k-th row of ``kept`` (``removed``); warm-up rows have none. None when they do not line up (files
    edited by hand)."""
    if sum(p == -1 for p in phase) != len(kept) or sum(p >= 0 for p in phase) != len(removed):
        return None
    it_k, it_r = iter(kept), iter(removed)
    return [next(it_k) if p == -1 else next(it_r) if p >= 0 else None for p in phase]


def image_refs(paths: list[str | None], dataset: str | None, folder: Path) -> list[str | None]:
    """Each row's image file from its recorded path (relative to DATA when it is a folder, else to the table's
    folder; absolute paths as they are)."""
    root = Path(dataset) if dataset and Path(dataset).is_dir() else Path(dataset).parent if dataset else folder
    return [None if rel is None else str(Path(rel) if Path(rel).is_absolute() else root / rel) for rel in paths]


def sample_rows(cols: PageColumns, limit: int = THUMB_ROWS) -> list[int]:
    """The table rows that get a thumbnail: the first ``limit``, then the ``limit`` removed with the highest p̃."""
    n = len(cols["id"])
    first = list(range(min(n, limit)))
    phase, p = cols.get("phase"), cols.get("p")
    removed: list[int] = []
    if phase is not None and p is not None:
        removed = sorted((r for r in range(n) if phase[r] >= 0), key=lambda r: -p[r])[:limit]
    return sorted(set(first) | set(removed))


def thumbnail(ref: str, px: int = THUMB_PX) -> str | None:
    """One image file as a ``data:image/jpeg`` URI at most ``px`` on a side; None when it cannot be read
    (Pillow's decompression-bomb limit applies)."""
    try:
        from PIL import Image
    except ImportError:
        return None
    try:
        with Image.open(ref) as im:
            im.draft("RGB", (px * 2, px * 2))  # JPEG: decode at a reduced size
            small = im.convert("RGB")
    except Exception:  # noqa: BLE001 - any unreadable file just has no thumbnail
        return None
    small.thumbnail((px, px))
    buf = io.BytesIO()
    small.save(buf, format="JPEG", quality=80)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def add_thumbnails(cols: PageColumns, refs: list[str | None]) -> int:
    """Put ``cols["thumb"]`` = {row: data URI} for the sampled rows (``refs``: each row's image file, or None);
    returns how many were made."""
    thumbs = {}
    for r in sample_rows(cols):
        ref = refs[r]
        uri = None if ref is None else thumbnail(ref)
        if uri is not None:
            thumbs[str(r)] = uri
    cols["thumb"] = thumbs
    return len(thumbs)
