"""Every content hash the package keys a cache or a check on, in one place (all sha256, hex digests).

The byte streams are exactly those of the modules these helpers came from, so caches written before the move
keep their keys.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["data_fingerprint", "data_fingerprints", "dataset_fingerprint", "file_sha256", "files_fingerprint",
           "hash_parts", "inputs_fingerprint", "json_digest"]


def data_fingerprint(texts_a: Sequence[str], texts_b: Sequence[str] | None, extra: Any = None) -> str:
    """sha256 of the texts (length-prefixed, so no separator can collide) and any extra JSON-able data."""
    return data_fingerprints(texts_a, texts_b, extra)[1]


def data_fingerprints(texts_a: Sequence[str], texts_b: Sequence[str] | None, extra: Any = None) -> tuple[str, str]:
    """(the texts' fingerprint alone, that of the texts and ``extra``): :func:`data_fingerprint` of both, the texts
    read once (a cache record holds both: the whole key and the input it was computed from)."""
    h = _texts_hash(texts_a, texts_b)
    alone = h.hexdigest()
    if extra is not None:
        h.update(json.dumps(extra, sort_keys=True, default=str).encode())
    return alone, h.hexdigest()


def _texts_hash(texts_a: Sequence[str], texts_b: Sequence[str] | None) -> Any:
    h = hashlib.sha256()
    for field in (texts_a, texts_b):
        _add_field(h, field)
    return h


def _add_field(h: Any, field: Sequence[str] | None) -> None:
    """A field into ``h``: its length, then each string length-prefixed (no separator can collide)."""
    if field is None:
        h.update(b"<none>")
        return
    h.update(f"<field {len(field)}>".encode())
    for t in field:
        raw = t.encode("utf-8", "surrogatepass")
        h.update(len(raw).to_bytes(8, "little") + raw)


def hash_parts(*parts: Any) -> str:
    """sha256 of a sequence of arrays (dtype and bytes) and JSON-able values, each part closed by a NUL byte."""
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, np.ndarray):
            h.update(str(p.dtype).encode())
            h.update(np.ascontiguousarray(p).tobytes())
        else:
            h.update(json.dumps(p, sort_keys=True, default=str).encode())
        h.update(b"\x00")
    return h.hexdigest()


def json_digest(obj: Any) -> str:
    """sha256 of ``obj`` as JSON with sorted keys (the key of an embedding file)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def inputs_fingerprint(X: Any, y: NDArray[Any], chunk_rows: int = 65536) -> str:
    """The identity of the inputs, to refuse resuming on other data: shape, dtype, labels and every value of X
    (read in chunks of rows, so a memory-mapped matrix is never loaded whole)."""
    h = hashlib.sha256()
    h.update(b"full\x00")
    h.update(repr((tuple(X.shape), str(X.dtype))).encode())
    h.update(np.asarray(y).astype(str).tobytes())
    for lo in range(0, X.shape[0], chunk_rows):
        h.update(np.ascontiguousarray(np.asarray(X[lo: lo + chunk_rows], dtype=np.float32)).tobytes())
    return h.hexdigest()[:32]


def dataset_fingerprint(ids: Sequence[Any] | NDArray[Any], labels: Sequence[Any] | NDArray[Any],
                        texts_a: Sequence[str], texts_b: Sequence[str] | None = None) -> str:
    """The identity of a dataset's content (ids, labels and texts or image paths, in order): recorded in a run's
    results so that ``evaluate``, ``audit --compare`` and ``--resume`` can tell that they read the same data."""
    h = hashlib.sha256(b"dataset\x00")
    for field in ([str(i) for i in ids], [str(v) for v in labels]):
        _add_field(h, field)
    h.update(data_fingerprint(texts_a, texts_b).encode())
    return h.hexdigest()[:32]


def files_fingerprint(refs: Sequence[str], folder_of: Callable[[str], str | None] | None = None) -> str:
    """sha256 over each reference and its file's size and modification time (cheap: no content is read), so
    that a cache is recomputed when a file is replaced.

    ``folder_of(ref)`` names the folder behind a reference that is not a file (an image in a Hugging Face
    dataset): that folder's files are hashed instead, once per folder."""
    h = hashlib.sha256()
    seen_dirs: set[str] = set()
    for ref in refs:
        h.update(ref.encode("utf-8", "surrogatepass") + b"\x00")
        folder = folder_of(ref) if folder_of is not None else None
        if folder is not None:
            if folder in seen_dirs:
                continue
            seen_dirs.add(folder)
            for f in sorted(Path(folder).glob("*")):
                if f.is_file():
                    st = f.stat()
                    h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
            continue
        try:
            st = os.stat(ref)
            h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()


def file_sha256(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """sha256 of a file's bytes (what ``sha256sum`` prints), read in chunks; for a folder (a Hugging Face dataset
    saved with ``save_to_disk``, an image folder), sha256 over each file below it, in sorted order of its path
    relative to the folder: ``<relative path>\\0<sha256 of its bytes>\\n`` per file. Identifies an input or an
    output file in a run's results and a dataset card."""
    p = Path(path)
    if p.is_dir():
        h = hashlib.sha256(b"folder\x00")
        for f in sorted((q for q in p.rglob("*") if q.is_file()), key=lambda q: q.relative_to(p).as_posix()):
            h.update(f"{f.relative_to(p).as_posix()}\x00{file_sha256(f, chunk)}\n".encode("utf-8", "surrogatepass"))
        return h.hexdigest()
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()
