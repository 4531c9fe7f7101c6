"""Image thumbnails for the rows table of an image run: small (48 px) JPEG ``data:`` URIs for a bounded sample
of rows (the first rows of the table and the most predictable removed ones), so that a page of a large image
set stays a few MB and opens at once."""

from __future__ import annotations

import base64
import io
from typing import Any

THUMB_PX = 48
THUMB_ROWS = 300  # the first rows in table order, and as many of the most predictable removed rows


def is_image_run(results: dict[str, Any], path: str | None) -> bool:
    """Whether the run read images (an image featurizer, or an image folder as DATA)."""
    feat = results.get("featurizer")
    name = feat.get("name") if isinstance(feat, dict) else None
    from aflite.images import IMAGE_FEATURIZERS, is_image_folder

    return name in IMAGE_FEATURIZERS or (path is not None and is_image_folder(path))


def sample_rows(cols: dict[str, Any], limit: int = THUMB_ROWS) -> list[int]:
    """The table rows that get a thumbnail: the first ``limit``, then the ``limit`` removed with the highest p̃."""
    n = len(cols["id"])
    first = list(range(min(n, limit)))
    phase, p = cols.get("phase"), cols.get("p")
    removed: list[int] = []
    if phase is not None and p is not None:
        removed = sorted((r for r in range(n) if phase[r] >= 0), key=lambda r: -p[r])[:limit]
    return sorted(set(first) | set(removed))


def thumbnail(ref: str, px: int = THUMB_PX) -> str | None:
    """One image as a ``data:image/jpeg`` URI at most ``px`` on a side; None when it cannot be read."""
    from aflite.errors import InputError
    from aflite.images import open_image

    try:
        im = open_image(ref)
    except InputError:
        return None
    im.thumbnail((px, px))
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=80)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def add_thumbnails(cols: dict[str, Any], refs: list[str]) -> int:
    """Put ``cols["thumb"]`` = {row: data URI} for the sampled rows (``refs``: each row's image reference);
    returns how many were made."""
    thumbs = {}
    for r in sample_rows(cols):
        uri = thumbnail(refs[r])
        if uri is not None:
            thumbs[str(r)] = uri
    cols["thumb"] = thumbs
    return len(thumbs)
