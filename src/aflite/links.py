"""Checks of ``--link-dir`` (a folder of symlinks to the kept images, built by :func:`aflite.data.images.link_tree`),
made before any work: the folder must be writable and new or empty, and every id (and label, when links are
grouped by label) must name a link inside it, never ``../x``, an absolute path, NUL or a line break."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from aflite.atomic import check_output_path
from aflite.errors import InputError, OutputError


def check_link_dir(link_dir: str | os.PathLike[str]) -> Path:
    """Refuse a ``--link-dir`` that cannot be used, before any work: not a new or empty folder, a file, or a
    place that cannot be written."""
    dest = check_output_path(link_dir, flag="--link-dir", folder=True)
    if dest.exists() and any(dest.iterdir()):
        raise OutputError(f"--link-dir {dest}: must be a new or empty folder")
    return dest


def _unsafe_name(name: str) -> str | None:
    """Why ``name`` cannot be one path component of a link (None when it can)."""
    if name in ("", ".", ".."):
        return "is empty, '.' or '..'"
    for bad, what in (("/", "a '/'"), ("\\", "a '\\'"), ("\x00", "a NUL byte"), ("\n", "a newline"),
                      ("\r", "a carriage return")):
        if bad in name:
            return f"contains {what}"
    return None


def check_link_names(ds: Any, keep: np.ndarray | None = None, by_label: bool = False) -> None:
    """Refuse ids (and, ``by_label``, labels) that would name a link outside ``--link-dir`` (``../x``, an
    absolute path, a separator, NUL or newline), before any work; ``keep`` limits the check to those rows."""
    rows = range(len(ds.ids)) if keep is None else np.flatnonzero(np.asarray(keep, dtype=bool))
    tree = not by_label  # an image folder's ids are its own <class>/<file> paths: each part is checked
    for i in rows:
        for what, value in (("id", ds.ids[i]), *((("label", ds.labels[i]),) if by_label else ())):
            parts = str(value).split("/") if tree and what == "id" else [str(value)]
            why = next((w for w in map(_unsafe_name, parts) if w is not None), None)
            if why is not None:
                src = getattr(getattr(ds, "source", None), "path", None)
                where = f"{src}: " if src else ""
                raise InputError(f"{where}row {int(i) + 1}: {what} {str(value)!r} {why}, so it cannot name a link "
                                 f"in --link-dir; give another --id column or leave out --link-dir")
