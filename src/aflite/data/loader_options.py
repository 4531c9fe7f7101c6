"""The keywords :func:`aflite.data.open_dataset` passes on to its loaders, as one type (:class:`LoaderOptions`): what
a library call's ``dataset_options`` may hold, so that mypy checks every key and value of it where it is spread."""

from __future__ import annotations

from aflite.data.keywords import Columns

__all__ = ["LoaderOptions"]


class LoaderOptions(Columns, total=False):
    """The column keywords (:class:`~aflite.data.Columns`), then the text loader's own
    (:func:`aflite.data.load_dataset`) and the image loader's (:func:`aflite.data.images.load_image_dataset`): the
    names of ``aflite.data.source.LOADER_OPTIONS``, which a test holds equal to these."""

    groups: str | None
    group_by_premise: bool
    file_format: str
    max_cell_bytes: int | None
    skip_bad_images: bool
