"""Compare two folders made by scripts/make_outputs.sh, file by file, with what changes from call to call masked.

Usage: python scripts/compare_outputs.py BEFORE AFTER

A refactor must leave the outputs byte-identical apart from timings, paths and dates: each folder's own path is
replaced by ``<ROOT>``; the source tree's path by ``<SRC>``; in JSON, the values of timing and date keys (and the
manifest, whose sha256s cover files that hold timings) are masked; in HTML, the cells of a table column headed by a
time; in other text, numbers of seconds and ISO dates. Binary files and caches are not compared (their content
follows from the text files'). Prints one line per missing, extra or differing file (with the first difference)
and exits 1 when there is any, 0 when the folders agree, 2 when a folder is missing.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path
from typing import Any

TIME_KEY = re.compile(r"seconds|wall|_s$|per_second|timings|rate|started|finished|elapsed|created|date", re.I)
MASKED_KEYS = ("manifest", "sealed")  # sha256s of files that hold timings
TEXT_TIME = re.compile(r'"[^"]*(seconds|wall|sealed|sha256|per_second)[^"]*": ?[^,}\]]+'
                       r"|(seconds|per_second)[ :]+[\d.]+|\d+(\.\d+)? ?(s|seconds|ms)\b|\d{4}-\d\d-\d\dT[\d:.]+")
SOURCE_MARK = "/src/aflite/"  # a file of the tree that made the folder (its resources): the path up to here is masked
HTML_TABLE = re.compile(r"<table\b.*?</table>", re.S)
HTML_ROW = re.compile(r"<tr\b.*?</tr>", re.S)
HTML_CELL = re.compile(r"(<t[hd]\b[^>]*>)(.*?)(</t[hd]>)", re.S)
HTML_TIME_HEADER = re.compile(r"\btime\b|seconds|\(s\)", re.I)
SKIPPED_SUFFIXES = {".png", ".gz", ".npy", ".npz", ".parquet", ".pkl", ".joblib"}
SKIPPED_NAMES = {".aflite-owner.json", ".aflite.lock"}  # who holds the folder: a process id, a host


def _mask_source(text: str) -> str:
    """Each path that runs into ``/src/aflite/`` with its head (back to the last space or quote) replaced by
    ``<SRC>``. A scan from each mark rather than a regex: a leading ``[^\\s"']*`` backtracks quadratically over the
    page's long runs without spaces (inlined plotly.js, base64 columns), minutes per 5 MB report.html."""
    out, done, at = [], 0, text.find(SOURCE_MARK)
    while at != -1:
        start = at
        while start > done and not text[start - 1].isspace() and text[start - 1] not in "\"'":
            start -= 1
        out += [text[done:start], "<SRC>"]
        done = at
        at = text.find(SOURCE_MARK, at + len(SOURCE_MARK))
    return "".join([*out, text[done:]])


def _mask_html_times(text: str) -> str:
    """Each HTML table's cells under a header that names a time (``time (s)``, ``seconds``) replaced by ``<t>``: a
    page's timing columns change from call to call like results.json's timing keys."""
    def table(m: re.Match[str]) -> str:
        head = HTML_ROW.search(m.group(0))
        if head is None:
            return m.group(0)
        timed = {i for i, c in enumerate(HTML_CELL.findall(head.group(0))) if HTML_TIME_HEADER.search(c[1])}
        if not timed:
            return m.group(0)
        rows = itertools.count()

        def row(r: re.Match[str]) -> str:
            if next(rows) == 0:  # the header row itself
                return r.group(0)
            cells = itertools.count()
            return HTML_CELL.sub(lambda c: c.group(1) + "<t>" + c.group(3) if next(cells) in timed else c.group(0),
                                 r.group(0))
        return HTML_ROW.sub(row, m.group(0))
    return HTML_TABLE.sub(table, text)


def _mask_json(obj: Any) -> Any:
    """``obj`` with the values of timing and date keys, and the manifest, replaced by ``"<t>"``."""
    if isinstance(obj, dict):
        return {k: "<t>" if TIME_KEY.search(k) or k in MASKED_KEYS else _mask_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_mask_json(v) for v in obj]
    return obj


def _first_json_difference(a: Any, b: Any, where: str = "") -> str:
    """Where two masked JSON values first differ (a key path), key order included."""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return f"{where or '/'}: keys {list(a)} != {list(b)}"
        for k in a:
            if a[k] != b[k]:
                return _first_json_difference(a[k], b[k], f"{where}/{k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_json_difference(x, y, f"{where}[{i}]")
    return f"{where or '/'}: {json.dumps(a)[:120]} != {json.dumps(b)[:120]}"


def compare_file(a: Path, b: Path, root_a: Path, root_b: Path) -> str | None:
    """None when the two files agree once masked, else the first difference in one line."""
    try:
        ta = a.read_text(encoding="utf-8").replace(str(root_a), "<ROOT>")
        tb = b.read_text(encoding="utf-8").replace(str(root_b), "<ROOT>")
        ta, tb = _mask_source(ta), _mask_source(tb)
    except UnicodeDecodeError:
        return None  # binary under a text suffix: not compared
    if a.suffix == ".json":
        try:
            ja, jb = _mask_json(json.loads(ta)), _mask_json(json.loads(tb))
        except ValueError:
            pass
        else:
            return None if json.dumps(ja) == json.dumps(jb) else _first_json_difference(ja, jb)
    if a.suffix == ".html":
        ta, tb = _mask_html_times(ta), _mask_html_times(tb)
    la, lb = TEXT_TIME.sub("<t>", ta).splitlines(), TEXT_TIME.sub("<t>", tb).splitlines()
    for i, (x, y) in enumerate(zip(la, lb, strict=False), 1):
        if x != y:
            at = next((j for j, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))
            return f"line {i}, column {at + 1}: {x[max(at - 40, 0):at + 60]!r} != {y[max(at - 40, 0):at + 60]!r}"
    return None if len(la) == len(lb) else f"{len(la)} lines != {len(lb)} lines"


def _compared(root: Path) -> set[Path]:
    """The files of ``root`` that are compared, relative to it."""
    return {p.relative_to(root) for p in root.rglob("*")
            if p.is_file() and p.suffix not in SKIPPED_SUFFIXES and p.name not in SKIPPED_NAMES
            and "cache" not in p.relative_to(root).parts}


def compare(root_a: Path, root_b: Path) -> list[str]:
    """One line per file missing from ``root_b``, extra in it, or differing; empty when the folders agree."""
    fa, fb = _compared(root_a), _compared(root_b)
    problems = [f"missing {rel}" for rel in sorted(fa - fb)] + [f"extra {rel}" for rel in sorted(fb - fa)]
    for rel in sorted(fa & fb):
        diff = compare_file(root_a / rel, root_b / rel, root_a, root_b)
        if diff is not None:
            problems.append(f"DIFF {rel}: {diff}")
    return problems


def main(argv: list[str]) -> int:
    """Compare the two folders named in ``argv``; print the report; 0 same, 1 different, 2 bad usage."""
    if len(argv) != 2 or not all(Path(p).is_dir() for p in argv):
        print("usage: compare_outputs.py BEFORE_DIR AFTER_DIR (two folders made by scripts/make_outputs.sh)",
              file=sys.stderr)
        return 2
    root_a, root_b = (Path(p).resolve() for p in argv)
    problems = compare(root_a, root_b)
    for line in problems:
        print(line)
    n = len(_compared(root_a) | _compared(root_b))
    print(f"{len(problems)} of {n} files differ" if problems else f"all {n} compared files agree")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
