"""Exceptions that the CLI turns into a one-line message and a non-zero exit."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])


class AfliteError(Exception):
    """A problem with the user's input or parameters (not a bug): reported as one line, exit code 2."""


class InputError(AfliteError, ValueError):
    """Unreadable, malformed or inconsistent input data; the message names the file, line or column.

    ``path`` is the file (or image reference) at fault when there is one, so that a caller can list it (e.g. the
    unreadable images skipped by ``--skip-bad-images``) without parsing the message.

    Parameters
    ----------
    *args
        The message (one line naming the file, line or column), as for ``ValueError``.
    path : str, optional
        The file or image reference at fault, when there is one.
    """

    def __init__(self, *args: object, path: str | None = None) -> None:
        super().__init__(*args)
        self.path = path


class ParameterError(AfliteError, ValueError):
    """Parameters that are out of range or inconsistent with the data."""


class UnknownKeywordError(ParameterError, TypeError):
    """A keyword that a function taking ``**columns`` does not know: a :class:`TypeError`, as Python's own for an
    unknown keyword, and a :class:`ParameterError`, so that the folder claimed for the call is left as it was."""


class OutputError(AfliteError, ValueError):
    """An output path that cannot be used (not writable, a file where a folder should be, someone else's
    folder, a folder in use by another process); raised before any computation. A ``ValueError``, as the other
    errors of a bad call are, so that ``except ValueError`` catches every refusal of what was asked."""


class OutputWriteError(OutputError, OSError):
    """A write that failed part-way (disk full, quota, read-only file system, permission): nothing was left
    half-written (see :mod:`aflite.atomic`), and the files already written stay, so a run can be resumed once
    there is room. Also an :class:`OSError`, so code that handled the raw error still does (and, as every
    :class:`OutputError`, a ``ValueError``)."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        OSError.__init__(self, message)
        self.errno = errno

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def takes_mappings(*keywords: str) -> Callable[[F], F]:
    """Decorate an entry point whose ``keywords`` each take a dict of options (``featurizer_options``,
    ``dataset_options``, ``params``, ...): a call that gives one of them something else
    (``featurizer_options="lr=1"``) is refused in one line naming the keyword (:func:`check_mappings`) before the
    function runs, instead of a traceback where the value is unpacked deep inside."""

    def wrap(fn: F) -> F:
        signature = inspect.signature(fn)
        var_keyword = next((p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None)

        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                given = dict(signature.bind_partial(*args, **kwargs).arguments)
            except TypeError:  # a wrong call: Python's own error, from the function itself
                return fn(*args, **kwargs)
            if var_keyword is not None:  # evaluate(**keywords): its keywords are looked at as the others
                given.update(given.pop(var_keyword, None) or {})
            check_mappings(**{k: given.get(k) for k in keywords})
            return fn(*args, **kwargs)

        return cast(F, checked)

    return wrap


def check_mappings(**given: object) -> None:
    """Refuse, in one line naming the keyword, a keyword that takes a dict of options given something else; None
    is "not given". A "k=v,k=v" string is shown as the dict to write (the command line has no such grammar: each
    option is its own flag)."""
    for keyword, value in given.items():
        if value is not None and not isinstance(value, Mapping):
            hint = ""
            if isinstance(value, str) and "=" in value:
                split = (p.partition("=") for p in value.split(","))
                pairs = ", ".join(f"{k.strip()!r}: {_literal(v.strip())}" for k, _, v in split)
                hint = f"; write it as a dict: {keyword}={{{pairs}}}"
            raise ParameterError(f"{keyword} must be a dict of option names to values, not {type(value).__name__} "
                                 f"{value!r}{hint}")


def _literal(text: str) -> str:
    """``text`` as it would be written in a dict: a number or True/False/None as it is, anything else quoted."""
    if text in ("True", "False", "None"):
        return text
    try:
        float(text)
    except ValueError:
        return repr(text)
    return text
