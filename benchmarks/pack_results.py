"""Pack what a benchmark wrote into what one device call can bring back: ONE ``.tar.gz`` of every small file under
a folder (caches, sampled data and files over a size limit left out, each listed) and a short Markdown summary
beside it (the exit status, the stage times, the ladder tables when there are any, what was left out).

A device call returns at most 8 files of at most 16 MiB each, no more than 2 folders down, so the run folders of
``benchmarks/protocol_gpu.sh`` and ``bench.py --out`` do not come back as they are; this is the step that makes
them fit. Used by ``benchmarks/protocol_gpu.sh`` (``RESULTS=DIR``) and ``benchmarks/device_check.sh``.

Usage: python benchmarks/pack_results.py SRC --archive OUT.tar.gz --summary OUT.md [--exit-code N] [--note TEXT]
       [--max-file-mib 2] [--max-total-mib 15] [--exclude NAME ...] [--include-md FILE ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tarfile
from pathlib import Path

MIB = 1 << 20
EXCLUDE = ("cache", "tiny_data", "__pycache__")


def select(src: Path, exclude: tuple[str, ...], max_file: int, max_total: int) -> tuple[list[Path], list[str]]:
    """(files to pack, 'path (why)' for each left out): smallest first until ``max_total`` bytes (compression only
    helps), none over ``max_file``, none under a folder named in ``exclude``."""
    keep: list[Path] = []
    left: list[str] = []
    files = sorted((p for p in src.rglob("*") if p.is_file() and not p.is_symlink()), key=lambda p: p.stat().st_size)
    total = 0
    for p in files:
        rel = p.relative_to(src)
        size = p.stat().st_size
        if any(part in exclude for part in rel.parts[:-1]):
            continue  # a cache or sampled data: never wanted back, not listed one by one
        if size > max_file:
            left.append(f"{rel} ({size / MIB:.1f} MiB > {max_file / MIB:g} MiB)")
        elif total + size > max_total:
            left.append(f"{rel} ({size / MIB:.1f} MiB: the archive's {max_total / MIB:g} MiB were full)")
        else:
            keep.append(p)
            total += size
    return keep, left


def write_archive(src: Path, files: list[Path], archive: Path) -> None:
    """The files under their paths relative to ``src``'s parent, written to a temporary name and renamed."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(archive.name + ".part")
    with tarfile.open(tmp, "w:gz") as tar:
        for p in files:
            tar.add(p, arcname=str(Path(src.name) / p.relative_to(src)), recursive=False)
    os.replace(tmp, archive)


def summary(src: Path, archive: Path, files: list[Path], left: list[str], exit_code: int | None, note: str,
            include: list[str]) -> str:
    """The Markdown summary: status, stage times, the named Markdown files' contents, what was left out."""
    status = "unknown" if exit_code is None else ("ok (exit 0)" if exit_code == 0 else f"FAILED (exit {exit_code})")
    lines = [f"# {src.name}: {status}", ""]
    if note:
        lines += [note, ""]
    stages = src / "stages.tsv"
    if stages.is_file() and stages.read_text(encoding="utf-8").strip():
        rows = [ln.split("\t") for ln in stages.read_text(encoding="utf-8").splitlines() if "\t" in ln]
        lines += ["| stage | seconds |", "|---|---|", *[f"| {n} | {s} |" for n, s in rows], ""]
    for name in include:
        path = src / name
        if path.is_file():
            lines += [f"## {name}", "", path.read_text(encoding="utf-8").rstrip(), ""]
        else:
            lines += [f"## {name}: not written", ""]
    size = archive.stat().st_size if archive.is_file() else 0
    lines += [f"Archive: {archive.name}, {len(files)} files, {size / MIB:.2f} MiB."]
    if left:
        lines += ["", "Left out (" + str(len(left)) + "): " + "; ".join(left[:40])
                  + ("; …" if len(left) > 40 else "") + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("--archive", type=Path, required=True)
    ap.add_argument("--summary", type=Path, required=True)
    ap.add_argument("--exit-code", type=int, default=None, help="the benchmark's exit status, for the summary")
    ap.add_argument("--note", default="")
    ap.add_argument("--max-file-mib", type=float, default=2.0)
    ap.add_argument("--max-total-mib", type=float, default=15.0)
    ap.add_argument("--exclude", action="append", default=None, help=f"folder names left out (default {EXCLUDE})")
    ap.add_argument("--include-md", action="append", default=[], help="a Markdown file under SRC copied into "
                    "the summary (repeatable)")
    args = ap.parse_args(argv)
    if not args.src.is_dir():
        print(f"error: {args.src}: not a folder", file=sys.stderr)
        return 2
    files, left = select(args.src, tuple(args.exclude or EXCLUDE), int(args.max_file_mib * MIB),
                         int(args.max_total_mib * MIB))
    write_archive(args.src, files, args.archive)
    text = summary(args.src, args.archive, files, left, args.exit_code, args.note, args.include_md)
    args.summary.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.summary.with_name(args.summary.name + ".part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, args.summary)
    print(f"packed {len(files)} files into {args.archive} ({args.archive.stat().st_size / MIB:.2f} MiB); "
          f"left out {len(left)}; summary {args.summary}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
