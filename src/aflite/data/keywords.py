"""How the data loaders' error messages name their options: the library's keyword (``text_a=``) or, under the
command line, its flag (``--text-a``), so that every message names what the user typed."""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any, TypedDict

from aflite.errors import ParameterError, UnknownKeywordError

# How messages name the loader's options: the library's keyword (``text_a=``) or, under the command line, its
# flag (``--text-a``); the CLI sets this once (see :func:`option_names`), so every message names what the user typed.
_CLI_NAMES = contextvars.ContextVar("aflite_cli_option_names", default=False)
_FLAGS = {"text_a": "--text-a", "text_b": "--text-b", "label": "--label", "id": "--id-column", "groups": "--groups",
          "format": "--file-format"}


def option_names(cli: bool) -> contextvars.Token[bool]:
    """Name options as command-line flags (``cli=True``) or as keywords in error messages."""
    return _CLI_NAMES.set(cli)


_KEYWORDS = {"id": "id_column", "format": "file_format"}  # roles whose load_dataset keyword is longer


def _opt(role: str) -> str:
    keyword = f"{_KEYWORDS.get(role, role)}="
    if not _CLI_NAMES.get():
        return keyword
    # an option with no flag (label_map) is named as what it is, not as a flag the command line does not have
    return _FLAGS.get(role, f"{keyword} (in Python: the command line has no such option)")


def option_label(flag: str, keyword: str) -> str:
    """How a message names an option outside the loaders: ``flag`` under the command line, else ``keyword``."""
    return flag if _CLI_NAMES.get() else keyword


class Columns(TypedDict, total=False):
    """The column keywords of every entry point that reads a dataset (``aflite.run(df, text_a="sent_a",
    text_b="sent_b", label="gold")``): the command line's ``--text-a``, ``--text-b``, ``--label``, ``--id-column``
    and ``--path-column``, and ``label_map`` (raw label → class name; Python only). Typed once here, taken as
    ``**columns: Unpack[Columns]``, so that a type checker and an editor know them on every entry point.

    Parameters
    ----------
    text_a : str, optional
        The first text column (a premise; the only text of a single-text task), ``--text-a``.
    text_b : str, optional
        The second text column (a hypothesis), ``--text-b``.
    label : str, optional
        The label column, ``--label``.
    id_column : str, optional
        The column of row ids (default: the row numbers), ``--id-column``.
    path_column : str, optional
        The column of image paths in a table of images, ``--path-column``.
    label_map : dict, optional
        Raw label -> class name (``{0: "entailment", ...}``); Python only.
    """

    #: the first text column (a premise; the only text of a single-text task), ``--text-a``
    text_a: str | None
    #: the second text column (a hypothesis), ``--text-b``
    text_b: str | None
    #: the label column, ``--label``
    label: str | None
    #: the column of row ids (default: the row numbers), ``--id-column``
    id_column: str | None
    #: the column of image paths in a table of images, ``--path-column``
    path_column: str | None
    #: raw label → class name (``{0: "entailment", ...}``); Python only
    label_map: dict[Any, str] | None


COLUMNS = tuple(Columns.__annotations__)


def with_columns(options: Mapping[str, Any] | None, columns: Mapping[str, Any], function: str,
                 also: tuple[str, ...] = ()) -> dict[str, Any]:
    """``options`` (a ``dataset_options`` dict) with the column keywords ``columns`` in it. A keyword that is no
    column (nor one of ``also``) is an :class:`~aflite.errors.UnknownKeywordError` (a TypeError, as Python's own:
    ``**columns`` would otherwise swallow a typo); a column given here and in ``options`` with two values is a
    ParameterError."""
    unknown = sorted(set(columns) - set(COLUMNS) - set(also))
    if unknown:
        raise UnknownKeywordError(f"{function}() got an unexpected keyword argument {unknown[0]!r} (the column "
                                  f"keywords are {', '.join(COLUMNS)})")
    merged = dict(options or {})
    for key, value in columns.items():
        if value is None or key not in COLUMNS:
            continue
        if merged.get(key) is not None and merged[key] != value:
            raise ParameterError(f"{key} is given twice, {key}={value!r} and dataset_options[{key!r}]="
                                 f"{merged[key]!r}: give it once")
        merged[key] = value
    return merged
