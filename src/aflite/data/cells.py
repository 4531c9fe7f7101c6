"""One cell of a text dataset as the loaders read it: a label (through a label map; no gold label), an id, a
text, each refused in one line naming the file, row and column when it cannot be used: missing, of the wrong
type, a lone UTF-16 surrogate that no file can hold, labels that would merge or split classes by accident."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from aflite.data.files import _INT_RE
from aflite.data.keywords import option_label
from aflite.errors import InputError, ParameterError

__all__ = ["check_cell_limit", "check_encodable", "check_label_apart", "label_of", "row_id", "text_of"]

# Raw label values that mean "no gold label" (SNLI/MNLI `-`; the HF datasets SNLI/MNLI use -1).
_NO_GOLD = "-"


def label_of(path: Path, where: str, column: str, lab: Any, label_map: dict[Any, str] | None, fmt: str) -> str | None:
    """One row's label as a string (through ``label_map`` when given); None for a row without a gold label."""
    if lab is None or (isinstance(lab, str) and lab.strip() == ""):
        raise InputError(f"{path}: {where}, column {column!r}: missing label")
    if (isinstance(lab, str) and lab.strip() == _NO_GOLD) or (fmt == "hf" and isinstance(lab, int) and lab == -1):
        return None
    if label_map is not None:
        key: Any = lab
        if key not in label_map and isinstance(lab, str) and _INT_RE.match(lab.strip()):
            key = int(lab)
        if key not in label_map and str(lab) in label_map:
            key = str(lab)
        if key not in label_map:
            raise InputError(f"{path}: {where}, column {column!r}: label {lab!r} is not in the label map "
                             f"({', '.join(map(repr, label_map))})")
        lab = label_map[key]
    if isinstance(lab, float) and math.isnan(lab) or isinstance(lab, str) and lab.strip().lower() == "nan":
        raise InputError(f"{path}: {where}, column {column!r}: missing label (NaN); give every row a label or "
                         f"remove the row")
    if isinstance(lab, dict | list) or isinstance(lab, float) and not math.isfinite(lab):
        raise InputError(f"{path}: {where}, column {column!r}: invalid label {lab!r}")
    if isinstance(lab, str):
        check_encodable(path, where, column, "label", lab)
    return str(lab)


def check_label_apart(path: Path, where: str, column: str, raw: Any, lab: str,
                      seen: dict[str, tuple[Any, str]]) -> None:
    """Refuse two raw labels that read as one class, or as two classes only by their case or spaces: ``0`` and
    ``"0"`` (labels are compared as strings) would merge silently; ``"entailment"``, ``"Entailment"`` and
    ``"entailment "`` would make classes of a typo. ``seen`` maps each label's stripped, case-folded string to its
    first raw value and where it was (two such labels that are meant as two classes are kept apart by a label map,
    which skips this check)."""
    met = seen.setdefault(lab.strip().casefold(), (raw, where))
    if _label_kind(met[0]) != _label_kind(raw):
        raise InputError(f"{path}: {where}, column {column!r}: label {raw!r} ({type(raw).__name__}) and {met[1]}'s "
                         f"{met[0]!r} ({type(met[0]).__name__}) would be one class {lab!r}; give the column one "
                         f"type{_label_map_hint()}")
    if str(met[0]) != lab:
        raise InputError(f"{path}: {where}, column {column!r}: label {lab!r} differs from {met[1]}'s "
                         f"{str(met[0])!r} only by case or spaces, which would make them two classes; write them "
                         f"alike{_label_map_hint()}")


def _label_map_hint() -> str:
    """The other way out, where there is one: a label map is a keyword of the Python functions (``label_map=``),
    with no command-line flag; the command line names only what its user can do (edit the file)."""
    return option_label(" in the file", ", or map them with label_map=")


def _label_kind(lab: Any) -> str:
    """What kind of value a raw label is (``str``, ``bool``, ``number``): labels are compared as strings, so a
    column holding both 0 and "0" would merge two values into one class."""
    if isinstance(lab, str):
        return "str"
    if isinstance(lab, bool | np.bool_):
        return "bool"
    return "number" if isinstance(lab, int | float | np.number) else type(lab).__name__


def row_id(path: Path, where: str, column: str, v: Any) -> str:
    """One row's id from its id column: present, and one line without surrounding white space (ids are written one
    per line, kept_ids.txt, and every reader of those files strips each line: an id kept exactly here would not be
    found again there), refused in one line naming the file, row and column."""
    at = f"{path}: {where}, column {column!r}"
    if v is None or str(v).strip() == "":
        raise InputError(f"{at}: missing id")
    s = str(v)
    if "\x00" in s or len(s.splitlines()) > 1 or s.endswith(("\n", "\r")):
        raise InputError(f"{at}: id {s!r} contains a line break or NUL; ids are written one per line")
    if s != s.strip():
        raise InputError(f"{at}: id {s!r} begins or ends with white space, which the id files (kept_ids.txt, one id "
                         f"per line) do not keep; remove it from the ids")
    check_encodable(path, where, column, "id", s)
    return s


def text_of(path: Path, where: str, col: str, v: Any, max_bytes: int | None = None) -> str:
    """One text cell: a string, valid Unicode, of at most ``max_bytes`` UTF-8 bytes (None: any size), refused in
    one line naming the file, row and column otherwise."""
    if v is None or isinstance(v, float) and math.isnan(v):  # NaN: a missing string in a pandas column
        raise InputError(f"{path}: {where}, column {col!r}: missing text")
    if not isinstance(v, str):
        raise InputError(f"{path}: {where}, column {col!r}: text must be a string, got {type(v).__name__}")
    if max_bytes is not None and len(v) * 4 > max_bytes and (size := len(v.encode("utf-8", "surrogatepass"))) > \
            max_bytes:  # a character is at most 4 bytes: only a long cell is encoded to be measured
        raise InputError(f"{path}: {where}, column {col!r}: a text of {size:,} bytes, over the limit of "
                         f"{max_bytes:,} bytes per cell ({option_label('--max-cell-bytes', 'max_cell_bytes=')} "
                         f"raises it)")
    check_encodable(path, where, col, "text", v)
    return v


def check_cell_limit(max_bytes: Any) -> None:
    """``max_cell_bytes``: a positive int of bytes, or None (no limit)."""
    if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1):
        raise ParameterError(f"{option_label('--max-cell-bytes', 'max_cell_bytes')} must be a positive number of "
                             f"bytes{option_label('', ' (or None: no limit)')}, got {max_bytes!r}")


def check_encodable(path: Path, where: str, col: str, what: str, v: str) -> None:
    """Refuse a lone UTF-16 surrogate (``"\\ud800"``: a JSON escape or a Python string can hold one, UTF-8 cannot):
    the tokenizers, the hasher and every file written from the row would fail on it later, after the work."""
    if v.isascii():
        return
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = v[exc.start]
        raise InputError(f"{path}: {where}, column {col!r}: the {what} holds a lone surrogate "
                         f"U+{ord(bad):04X} at character {exc.start} ({v[max(0, exc.start - 20):exc.start + 1]!r}), "
                         f"which is not valid Unicode; fix or remove the row") from None
