"""How checks write numbers and tables: the cells of a per-row CSV and the Markdown of a summary.md section."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["cell", "md_cell", "md_table", "pct"]


def cell(x: Any, digits: int = 6) -> str:
    """A number in a CSV cell: ``digits`` significant digits, empty for None and NaN."""
    if x is None:
        return ""
    v = float(x)
    return "" if math.isnan(v) else f"{v:.{digits}g}"


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def pct(x: Any) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * float(x):.1f}%"
