"""The one entry point from what the user gives to a :class:`~aflite.data.Dataset`: :func:`open_dataset` decides
once whether the data are text or images (:func:`modality_of`) and reads them with the loader of that modality,
so that no command decides again.

``source`` is a path (a file or folder of any format the loaders read) or in-memory data (a pandas DataFrame, a
pyarrow Table or a ``datasets.Dataset``): the one branch in :func:`open_dataset` reads those, as text, into the
same :class:`~aflite.data.Dataset` (:mod:`aflite.data.memory`), so that no command tells the two apart.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aflite.data.images import is_image_input, load_image_dataset
from aflite.data.keywords import option_label
from aflite.data.memory import load_memory, memory_kind, source_name
from aflite.data.text import Dataset, load_dataset
from aflite.errors import ParameterError

__all__ = ["MODALITIES", "modality_of", "open_dataset", "refuse_image_options", "refuse_text_options"]

MODALITIES = ("text", "image")
TEXT_OPTIONS = ("file_format", "text_a", "text_b", "label_map", "group_by_premise", "groups",
                "max_cell_bytes")  # text loader only
IMAGE_OPTIONS = ("path_column", "skip_bad_images")  # image loader only
# every keyword open_dataset passes on (an unknown one is named, not a TypeError)
LOADER_OPTIONS = ("text_a", "text_b", "label", "id_column", "label_map", "groups", "group_by_premise", "file_format",
                  "max_cell_bytes", *IMAGE_OPTIONS)


def modality_of(source: Any, *, reads: str = "any", path_column: str | None = None) -> str:
    """``"image"`` or ``"text"``: the modality of ``source`` for a featurizer that ``reads`` ``"text"``,
    ``"image"``, ``"text+image"`` or ``"any"`` (its registry entry's modality). An image-only featurizer or a named
    path column means images; otherwise the data say so (an image folder, a HF dataset with an Image column, a
    table with a path column and no text columns: :func:`aflite.data.images.is_image_input`)."""
    if reads == "image":
        return "image"
    if memory_kind(source) is not None:  # in-memory data are read as text (load_memory refuses an Image column)
        return "text"
    return "image" if is_image_input(source, path_column) else "text"


def refuse_image_options(source: Any, modality: str, given: dict[str, Any]) -> None:
    """Refuse, in one line naming them (the flag on the command line, the keyword in Python), the image options
    set in ``given`` (keyword -> value; None, False and the default image size are "not set") when ``source`` is
    read as text: they would be ignored without a word (``--image-size 64`` on a TSV)."""
    if modality != "text":
        return
    unset = {"image_size": (None, 224)}
    names = [option_label(f"--{k.replace('_', '-')}", k) for k, v in given.items()
             if v is not None and v is not False and v not in unset.get(k, (None,))]
    if names:
        raise ParameterError(f"{', '.join(names)}: image option(s), but {source_name(source)} is read as text (name "
                             f"the image column with {option_label('--path-column', 'path_column=')}, or use an "
                             f"image featurizer)")


def refuse_text_options(source: Any, given: dict[str, Any]) -> None:
    """The reverse of :func:`refuse_image_options`: options that only a text file has (its text columns, its
    format, its cells' size limit), given for data read as images, are refused rather than dropped unread."""
    names = [option_label(f"--{k.replace('_', '-')}", k) for k in ("text_a", "text_b", "file_format", "max_cell_bytes")
             if given.get(k) not in (None, "auto")]
    names += ["label_map"] if given.get("label_map") is not None else []
    if names:
        raise ParameterError(f"{', '.join(names)}: text option(s), but {source_name(source)} is read as images "
                             f"(drop them)")


def open_dataset(source: Any, *, reads: str = "any", modality: str | None = None,
                 **options: Any) -> Dataset:
    """Read ``source`` as a :class:`~aflite.data.Dataset` of its modality (``modality``, or decided by
    :func:`modality_of` for a featurizer that ``reads`` that modality). ``options`` are the loaders' keywords:
    ``label`` and ``id_column`` for both; ``text_a``, ``text_b``, ``groups``, ``file_format``, ... for text
    (:func:`aflite.data.load_dataset`); ``path_column`` and ``skip_bad_images`` for images
    (:func:`aflite.data.images.load_image_dataset`). Options of the other modality, and None values, are
    ignored, so that a command passes everything its user gave."""
    unknown = sorted(set(options) - set(LOADER_OPTIONS))
    if unknown:
        raise ParameterError(f"unknown dataset option(s) {', '.join(map(repr, unknown))}; the loaders take "
                             f"{', '.join(LOADER_OPTIONS)}")
    given = {k: v for k, v in options.items() if v is not None}
    kind = memory_kind(source)
    if kind is not None:
        if modality == "image" or reads == "image" or given.get("path_column"):
            raise ParameterError(f"in-memory {kind}: in-memory data are read as text; for images save them "
                                 f"(an image folder, a table of paths, a datasets folder) and pass the path")
        return load_memory(source, **{k: v for k, v in given.items() if k not in IMAGE_OPTIONS})
    if not isinstance(source, str | os.PathLike):
        raise ParameterError(f"data must be a file or folder path, a pandas DataFrame, a pyarrow Table or a "
                             f"datasets.Dataset, not {type(source).__name__}")
    if modality is None:
        modality = modality_of(source, reads=reads, path_column=given.get("path_column"))
    if modality not in MODALITIES:
        raise ParameterError(f"unknown modality {modality!r}; choose one of {', '.join(MODALITIES)}")
    if modality == "image":
        refuse_text_options(source, given)
        return load_image_dataset(Path(source), **{k: v for k, v in given.items() if k not in TEXT_OPTIONS})
    return load_dataset(source, **{k: v for k, v in given.items() if k not in IMAGE_OPTIONS})
