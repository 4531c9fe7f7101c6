"""How the data loaders' error messages name their options: the library's keyword (``text_a=``) or, under the
command line, its flag (``--text-a``), so that every message names what the user typed."""

from __future__ import annotations

import contextvars

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
    return _FLAGS.get(role, role) if _CLI_NAMES.get() else f"{_KEYWORDS.get(role, role)}="


def option_label(flag: str, keyword: str) -> str:
    """How a message names an option outside the loaders: ``flag`` under the command line, else ``keyword``."""
    return flag if _CLI_NAMES.get() else keyword
