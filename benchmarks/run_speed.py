"""The default ``aflite run`` end to end, this tree against a reference tree (e.g. an older commit's worktree), one
after the other on the same host: CPU seconds (user + sys of the child), wall, peak memory, results.json's per-stage
timings, and how far the two agree (kept-set Jaccard, the probe's accuracies). JSON on stdout.

    python benchmarks/run_speed.py DATA [--reference TREE] [--out DIR] [--rows N,N,...] [-- RUN OPTIONS]

``--rows``: instead, the scaling table of this tree alone, on DATA cut or repeated to each size (repeats get
distinct ids; see :func:`sized_copy`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def load() -> list[float]:
    """The 1, 5 and 15 minute load averages (the host is shared: every figure is read beside them)."""
    return [round(x, 2) for x in os.getloadavg()]


def timed_run(tree: Path, data: Path, out: Path, extra: list[str]) -> dict[str, Any]:
    """``python -m aflite run DATA --out OUT --quiet`` with ``tree``'s sources; the child's own rusage (os.wait4)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    cmd = [sys.executable, "-m", "aflite", "run", str(data), "--out", str(out), "--quiet", "--overwrite", *extra]
    before, t0 = load(), time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return {"tree": str(tree), "command": " ".join(["PYTHONPATH=" + env["PYTHONPATH"], *cmd]),
            "load_before": before, "load_after": load(), "wall_seconds": round(wall, 2),
            "cpu_seconds": round(ru.ru_utime + ru.ru_stime, 2), "peak_rss_mib": ru.ru_maxrss // 1024,
            "timings": results.get("timings", {}), "probe": probe_figures(results)}


def probe_figures(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The probe's rows of results.json (name, accuracy, accuracy_std), wherever the run put them."""
    found = results.get("summary", results).get("partial_input_probe") or results.get("partial_input_probe") or {}
    return [{k: r.get(k) for k in ("name", "size", "accuracy", "accuracy_std")} for r in found.get("results", [])]


def kept_ids(out: Path) -> set[str]:
    """The kept ids of a run directory (its ``kept_ids.txt``)."""
    return set((out / "kept_ids.txt").read_text(encoding="utf-8").split())


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / max(1, len(a | b))


def sized_copy(data: Path, rows: int, out: Path) -> Path:
    """A TSV of exactly ``rows`` data rows cut from, or repeated from, the TSV ``data`` (gzip or not). Repeat r
    rewrites every id (``pairID``, the first column) as ``ID~r`` and appends `` ~r`` to the premise and the
    hypothesis, so rows stay distinct and premise groups never span repeats."""
    opener: Any = gzip.open if data.suffix == ".gz" else open
    with opener(data, "rt", encoding="utf-8") as fh:
        header, *lines = fh.read().splitlines()
    cols = header.split("\t")
    a, b = cols.index("sentence1"), cols.index("sentence2")
    id_col = cols.index("pairID") if "pairID" in cols else None
    path = out / f"rows_{rows}.tsv"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(header + "\n")
        for i in range(rows):
            r, line = divmod(i, len(lines))
            cells = lines[line].split("\t")
            if r:
                cells[a], cells[b] = f"{cells[a]} ~{r}", f"{cells[b]} ~{r}"
                if id_col is not None:
                    cells[id_col] = f"{cells[id_col]}~{r}"
            fh.write("\t".join(cells) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--reference", type=Path, help="another checkout's root (its src/ is imported)")
    ap.add_argument("--out", type=Path, default=Path("run_speed_out"))
    ap.add_argument("--rows", default="", help="sizes for the scaling table, e.g. 10000,100000")
    ap.add_argument("run_options", nargs=argparse.REMAINDER, help="after --: options for aflite run")
    args = ap.parse_args(argv)
    extra = [o for o in args.run_options if o != "--"]
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"argv": sys.argv, "cpus": os.cpu_count(), "data": str(args.data)}
    if args.rows:
        report["scaling"] = []
        for n in [int(x) for x in args.rows.split(",")]:
            data = sized_copy(args.data, n, args.out)
            one = timed_run(ROOT, data, args.out / f"run_{n}", extra)
            data.unlink()
            report["scaling"].append({"rows": n, **one})
            print(f"{n} rows: {one['wall_seconds']} s wall, {one['cpu_seconds']} CPU-s", file=sys.stderr, flush=True)
    else:
        fast = timed_run(ROOT, args.data, args.out / "fast", extra)
        report["fast"] = fast
        if args.reference is not None:
            ref = timed_run(args.reference.resolve(), args.data, args.out / "reference", extra)
            report["reference"] = ref
            report["cpu_ratio"] = round(ref["cpu_seconds"] / fast["cpu_seconds"], 2)
            report["wall_ratio"] = round(ref["wall_seconds"] / fast["wall_seconds"], 2)
            report["kept_jaccard"] = round(jaccard(kept_ids(args.out / "fast"), kept_ids(args.out / "reference")), 4)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
