"""Every public name of ``aflite`` documents its parameters in numpydoc form (#58): a ``Parameters`` section that
lists exactly the names of its signature (``inspect.signature``, ``*args``/``**keywords`` spelled so), and a
``Returns`` section for a function that returns something. The API reference (docs/api.rst, napoleon) renders
these sections, so a parameter added without its meaning, or a stale entry after one is removed, fails here.

Left out, with why: ``__version__`` and ``SNLI_DEFAULTS`` are constants; ``AfliteError``, ``ParameterError`` and
``OutputError`` take Exception's message only (no signature of their own; ``InputError``'s ``path=`` is checked).
numpydoc's parser is not a dependency, so the sections are read by the small parser below (numpydoc's rules:
a title underlined with dashes; an entry is an unindented ``name : type`` line, its description indented).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest

import aflite

CONSTANTS = {"__version__", "SNLI_DEFAULTS"}


def sections(doc: str) -> dict[str, list[str]]:
    """The numpydoc sections of a (dedented) docstring: title -> its lines."""
    lines = doc.splitlines()
    found: dict[str, list[str]] = {}
    title = None
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and line.strip() and re.fullmatch(r"-{3,}", lines[i + 1].strip()) \
                and len(lines[i + 1].strip()) == len(line.strip()):
            title = line.strip()
            found[title] = []
            continue
        if title is not None and not re.fullmatch(r"-{3,}", line.strip()):
            found[title].append(line)
    return found


def entries(lines: list[str]) -> list[str]:
    """The names a Parameters section lists (``a, b : int`` lists two)."""
    names = []
    for line in lines:
        if line.strip() and not line[:1].isspace():
            names += [n.strip() for n in line.split(" : ")[0].split(",")]
    return names


def spelled(p: inspect.Parameter) -> str:
    return {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name  # type: ignore[call-overload]


def signature_names(obj: Any) -> list[str] | None:
    """The parameters of a function, or of a class's constructor (a TypedDict: its keys); None without one."""
    if isinstance(obj, type) and issubclass(obj, dict):
        return list(obj.__annotations__)
    try:
        sig = inspect.signature(obj)
    except ValueError:  # a builtin's constructor (Exception's)
        return None
    return [spelled(p) for p in sig.parameters.values()]


def public() -> list[str]:
    return [n for n in aflite.__all__ if n not in CONSTANTS]


@pytest.mark.parametrize("name", public())
def test_parameters_section_lists_exactly_the_signature(name: str) -> None:
    obj = getattr(aflite, name)
    names = signature_names(obj)
    if names is None:
        assert issubclass(obj, Exception), name  # only the errors without a signature of their own are left out
        return
    found = sections(inspect.getdoc(obj) or "")
    if not names:
        assert "Parameters" not in found, f"{name} takes no parameters"
        return
    assert "Parameters" in found, f"aflite.{name}: no numpydoc Parameters section"
    assert entries(found["Parameters"]) == names, f"aflite.{name}: Parameters lists other names, or in another order"
    described = " ".join(found["Parameters"])
    assert len(described.split()) > 2 * len(names), f"aflite.{name}: entries without a description"


@pytest.mark.parametrize("name", [n for n in public() if not isinstance(getattr(aflite, n), type)])
def test_functions_that_return_something_have_a_returns_section(name: str) -> None:
    fn = getattr(aflite, name)
    returns = inspect.signature(fn).return_annotation
    found = sections(inspect.getdoc(fn) or "")
    if returns in (None, "None"):
        assert "Returns" not in found, name
    else:
        assert "Returns" in found and any(line.strip() for line in found["Returns"]), f"aflite.{name}: no Returns"


def test_the_parser_reads_numpydoc() -> None:
    """The parser itself: a section ends at the next title, entries are the unindented lines, a type is cut."""
    doc = inspect.cleandoc('''Summary.

        Parameters
        ----------
        x, y : int
            Two of them.
        **keywords
            More.

        Returns
        -------
        int
            The sum.
        ''')
    found = sections(doc)
    assert entries(found["Parameters"]) == ["x", "y", "**keywords"] and entries(found["Returns"]) == ["int"]
    assert entries(sections("No sections.\n\nParameters:\n    x\n").get("Parameters", [])) == []
