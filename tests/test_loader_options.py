"""LoaderOptions (the type of a library call's ``dataset_options``) names exactly the keywords open_dataset passes
on to its loaders: a loader keyword added to one and not the other fails here."""

from __future__ import annotations

import typing

from aflite.data.loader_options import LoaderOptions
from aflite.data.source import LOADER_OPTIONS


def test_loader_options_type_names_every_loader_keyword() -> None:
    assert sorted(typing.get_type_hints(LoaderOptions)) == sorted(LOADER_OPTIONS)
