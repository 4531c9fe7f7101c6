"""The speed record of issue #57 in one command: (a) the default ``aflite run`` on DATA, this tree against a reference
tree (e.g. an older commit's worktree), one after the other on the same host; (b) a scaling table of this tree's
default run on DATA cut or repeated to each size; (c) ``aflite demo``'s wall time. Each run is a child process:
CPU seconds (user + sys, the child's own rusage), wall, peak RSS, results.json's per-stage timings; (a) adds the
CPU ratio, the kept-set Jaccard and the probe's accuracies side by side. JSON on stdout; ``--record PREFIX`` also
writes PREFIX.json and PREFIX.md (rewritten after every run, so a record cut short keeps what ran).

    python benchmarks/run_speed.py DATA [--reference TREE] [--rows N,N,...] [--demo] [--record PREFIX]
        [--timeout S] [--budget S] [--out DIR] [-- RUN OPTIONS]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("load", "featurize", "filter", "probe", "write")
TEXT_COLUMNS = (("sentence1", "sentence2"), ("premise", "hypothesis"))


def load() -> list[float]:
    """The 1, 5 and 15 minute load averages (the host is shared: every figure is read beside them)."""
    return [round(x, 2) for x in os.getloadavg()]


def git_head(tree: Path) -> str:
    """The commit a tree is at (``git log -1 --oneline``), so a record says what it measured."""
    try:
        out = subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%h %s"], capture_output=True,
                             text=True, timeout=30, check=False).stdout.strip()
    except OSError:
        return "?"
    return out[:100] or "?"


def timed_child(cmd: list[str], tree: Path, timeout: float | None) -> dict[str, Any]:
    """Run ``cmd`` with ``tree``'s sources first on PYTHONPATH and measure it from its own rusage (os.wait4). On
    ``timeout`` seconds the child's process group is killed and the figures say so (``timed_out``)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    before, t0 = load(), time.perf_counter()
    with open(os.devnull, "wb") as null, open(os.devnull, "rb") as nothing:
        err_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"run_speed_{os.getpid()}.err"
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(cmd, env=env, stdin=nothing, stdout=null, stderr=err, start_new_session=True)
            timed_out = False
            while True:
                pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if timeout is not None and time.perf_counter() - t0 > timeout and not timed_out:
                    os.killpg(proc.pid, signal.SIGKILL)
                    timed_out = True
                time.sleep(0.2)
        proc.returncode = os.waitstatus_to_exitcode(status)
        tail = err_path.read_bytes().decode(errors="replace")[-2000:]
        err_path.unlink()
    figures = {"tree": str(tree), "commit": git_head(tree), "command": shlex.join(["PYTHONPATH=" + env["PYTHONPATH"],
               *cmd]), "load_before": before, "load_after": load(),
               "wall_seconds": round(time.perf_counter() - t0, 2),
               "cpu_seconds": round(ru.ru_utime + ru.ru_stime, 2), "peak_rss_mib": ru.ru_maxrss // 1024}
    if timed_out:
        return {**figures, "timed_out": True, "timeout_seconds": timeout}
    if proc.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed ({proc.returncode}): {tail}")
    return figures


def timed_run(tree: Path, data: Path, out: Path, extra: list[str], timeout: float | None = None) -> dict[str, Any]:
    """``python -m aflite run DATA --out OUT --quiet`` with ``tree``'s sources, plus its results.json's stage
    timings and probe rows."""
    cmd = [sys.executable, "-m", "aflite", "run", str(data), "--out", str(out), "--quiet", "--overwrite", *extra]
    one = timed_child(cmd, tree, timeout)
    if one.get("timed_out"):
        return one
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    timings = results.get("timings", {})
    stages = {s: round(timings[f"{s}_seconds"], 2) for s in STAGES if f"{s}_seconds" in timings}
    return {**one, "stages": stages, "timings": timings, "probe": probe_figures(results),
            "size_before": results.get("size_before"), "size_after": results.get("size_after")}


def timed_demo(tree: Path, out: Path, demo_args: list[str], timeout: float | None = None) -> dict[str, Any]:
    """``python -m aflite demo --out OUT --overwrite`` (plus ``demo_args``) with ``tree``'s sources."""
    cmd = [sys.executable, "-m", "aflite", "demo", "--out", str(out), "--overwrite", *demo_args]
    return timed_child(cmd, tree, timeout)


def probe_figures(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The probe's rows of results.json (name, size, accuracy, accuracy_std), wherever the run put them."""
    found = results.get("summary", results).get("partial_input_probe") or results.get("partial_input_probe") or {}
    return [{k: r.get(k) for k in ("name", "size", "accuracy", "accuracy_std")} for r in found.get("results", [])]


def kept_ids(out: Path) -> set[str]:
    """The kept ids of a run directory (its ``kept_ids.txt``)."""
    return set((out / "kept_ids.txt").read_text(encoding="utf-8").split())


def jaccard(a: set[str], b: set[str]) -> float:
    """|a ∩ b| / |a ∪ b|; 0 for two empty sets (nothing kept agrees on nothing)."""
    return len(a & b) / max(1, len(a | b))


def sized_copy(data: Path, rows: int, out: Path) -> Path:
    """A TSV of exactly ``rows`` data rows cut from, or repeated from, the TSV ``data`` (gzip or not). Repeat r
    rewrites every id as ``ID~r`` and appends `` ~r`` to both texts, so rows stay distinct and premise groups never
    span repeats. The id is ``pairID`` or ``id`` where the file has one, else an added ``id`` column (the row's
    line number in ``data``), so the ids of a copy never depend on its size."""
    opener: Any = gzip.open if data.suffix == ".gz" else open
    with opener(data, "rt", encoding="utf-8") as fh:
        header, *lines = fh.read().splitlines()
    cols = header.split("\t")
    pair = next((p for p in TEXT_COLUMNS if p[0] in cols and p[1] in cols), None)
    if pair is None or not lines:
        raise SystemExit(f"{data}: needs rows and a text column pair {' or '.join('/'.join(p) for p in TEXT_COLUMNS)}")
    a, b = cols.index(pair[0]), cols.index(pair[1])
    id_col = next((cols.index(c) for c in ("pairID", "id") if c in cols), None)
    path = out / f"rows_{rows}.tsv"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(header + ("\tid" if id_col is None else "") + "\n")
        for i in range(rows):
            r, line = divmod(i, len(lines))
            cells = lines[line].split("\t")
            if id_col is None:
                cells.append(str(line))
            if r:
                cells[a], cells[b] = f"{cells[a]} ~{r}", f"{cells[b]} ~{r}"
                cells[id_col if id_col is not None else -1] += f"~{r}"
            fh.write("\t".join(cells) + "\n")
    return path


def side_by_side(fast: dict[str, Any], ref: dict[str, Any], out: Path) -> dict[str, Any]:
    """How (a)'s two runs compare: the CPU and wall ratios (reference / this tree), the kept-set Jaccard and each
    probe row's accuracy and fold spread for both trees."""
    ref_probe = {r["name"]: r for r in ref["probe"]}
    probe = [{"name": r["name"], "accuracy": r["accuracy"], "accuracy_std": r["accuracy_std"],
              "reference_accuracy": ref_probe.get(r["name"], {}).get("accuracy"),
              "reference_accuracy_std": ref_probe.get(r["name"], {}).get("accuracy_std")} for r in fast["probe"]]
    return {"cpu_ratio": round(ref["cpu_seconds"] / max(fast["cpu_seconds"], 1e-9), 2),
            "wall_ratio": round(ref["wall_seconds"] / max(fast["wall_seconds"], 1e-9), 2),
            "kept_jaccard": round(jaccard(kept_ids(out / "fast"), kept_ids(out / "reference")), 4), "probe": probe}


def _run_row(label: str, run: dict[str, Any]) -> str:
    """One table row: CPU-s, wall, each stage's seconds, peak RSS, load; a killed run says so in its wall cell."""
    stages = run.get("stages", {})
    cells = [f"{stages[s]:.1f}" if s in stages else "—" for s in STAGES]
    wall = f"{run['wall_seconds']:.1f}" + (" (killed: timeout)" if run.get("timed_out") else "")
    load_ = f"{run['load_before'][0]:.2f} → {run['load_after'][0]:.2f}"
    return f"| {label} | {run['cpu_seconds']:.1f} | {wall} | {' | '.join(cells)} | {run['peak_rss_mib']:,} | {load_} |"


def _acc(value: float | None, std: float | None) -> str:
    return "—" if value is None else f"{value:.4f} ± {std or 0:.4f}"


def markdown(report: dict[str, Any]) -> str:
    """The record as markdown tables: (a) both trees and how they agree, (b) the scaling table, (c) the demo."""
    head = f"| run | CPU-s | wall s | {' | '.join(f'{s} s' for s in STAGES)} | peak RSS MiB | load (1 min) |"
    rule = "|" + "---|" * (len(STAGES) + 5)
    lines = [f"# `aflite run` speed record (benchmarks/run_speed.py, {report['cpus']} CPUs)", "",
             f"Command: `{shlex.join(report['argv'])}`", "",
             *[f"Then (appended): `{shlex.join(c)}`\n" for c in report.get("appended", [])],
             f"Data: `{report['data']}`", ""]
    if "fast" in report:
        lines += ["## (a) this tree against the reference", "", head, rule,
                  _run_row(report["fast"]["commit"].split()[0], report["fast"])]
        if "reference" in report:
            lines.append(_run_row(f"reference {report['reference']['commit'].split()[0]}", report["reference"]))
        if "comparison" in report:
            cmp_ = report["comparison"]
            lines += ["",
                      f"CPU ratio (reference / this tree) **{cmp_['cpu_ratio']}x**, wall ratio {cmp_['wall_ratio']}x, "
                      f"kept-set Jaccard **{cmp_['kept_jaccard']:.4f}**.", "",
                      "| probe set | accuracy (this tree) | accuracy (reference) |", "|---|---|---|"]
            lines += [f"| {p['name']} | {_acc(p['accuracy'], p['accuracy_std'])} | "
                      f"{_acc(p['reference_accuracy'], p['reference_accuracy_std'])} |" for p in cmp_["probe"]]
        lines.append("")
    if report.get("scaling"):
        lines += ["## (b) scaling: the default run at each size", "", head.replace("| run |", "| rows |"), rule]
        lines += [_run_row(f"{s['rows']:,}", s) if "skipped" not in s else f"| {s['rows']:,} | {s['skipped']} |"
                  for s in report["scaling"]]
        lines.append("")
    if "demo" in report:
        d = report["demo"]
        lines += ["## (c) `aflite demo`", "", f"wall **{d['wall_seconds']:.1f} s**, {d['cpu_seconds']:.1f} CPU-s, "
                  f"peak RSS {d['peak_rss_mib']:,} MiB, load {d['load_before'][0]:.2f} → {d['load_after'][0]:.2f}"
                  + (" (killed at the timeout)" if d.get("timed_out") else "") + ".", ""]
    return "\n".join(lines)


def portable(value: Any) -> Any:
    """``value`` with this host's paths written relative to the repository (``.``, ``../base``) and the
    interpreter as ``python``, so that a record under docs/measured/ reads the same on any checkout."""
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v) for v in value]
    if not isinstance(value, str):
        return value
    value = value.replace(sys.executable, "python").replace(str(ROOT / ".."), str(ROOT.parent))
    return value.replace(str(ROOT) + "/", "").replace(str(ROOT), ".").replace(str(ROOT.parent), "..")


def write_record(prefix: Path | None, report: dict[str, Any]) -> None:
    """PREFIX.json and PREFIX.md, rewritten after each run so that a record cut short keeps what ran."""
    if prefix is None:
        return
    prefix.parent.mkdir(parents=True, exist_ok=True)
    report = portable(report)
    prefix.with_name(prefix.name + ".json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n",
                                                       encoding="utf-8")
    prefix.with_name(prefix.name + ".md").write_text(markdown(report), encoding="utf-8")


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--reference", type=Path, help="another checkout's root (its src/ is imported) for (a)")
    ap.add_argument("--out", type=Path, default=Path("run_speed_out"), help="scratch folder for the runs")
    ap.add_argument("--rows", default="", help="sizes for the scaling table (b), e.g. 10000,100000,550000,1000000")
    ap.add_argument("--no-compare", action="store_true", help="skip (a): only the scaling table and/or the demo")
    ap.add_argument("--demo", action="store_true", help="also time `aflite demo` (c)")
    ap.add_argument("--demo-args", default="", help="options for aflite demo, one shell-quoted string")
    ap.add_argument("--timeout", type=float, default=None, help="seconds any one run may take before it is killed")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds for the whole record: each run's timeout shrinks to what is left, and sizes that "
                         "find too little left (< 10 s) are recorded as skipped")
    ap.add_argument("--record", type=Path, default=None, help="write PREFIX.json and PREFIX.md")
    ap.add_argument("--append", action="store_true",
                    help="add to the --record already there: keep its runs, append these scaling rows and demo")
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)  # after --: options for aflite run, passed as they are
    args = ap.parse_args(argv[:cut])
    if args.append and not (args.record and args.record.with_name(args.record.name + ".json").is_file()):
        ap.exit(2, f"run_speed.py: error: --append needs an existing --record PREFIX.json (got {args.record})\n")
    args.run_options = argv[cut + 1:]
    if not args.data.is_file():
        ap.exit(2, f"run_speed.py: error: {args.data}: no such file\n")
    if args.reference is not None and not (args.reference / "src" / "aflite").is_dir():
        ap.exit(2, f"run_speed.py: error: --reference {args.reference}: no src/aflite there\n")
    try:
        args.sizes = [int(x) for x in args.rows.split(",") if x.strip()]
    except ValueError:
        ap.exit(2, f"run_speed.py: error: --rows {args.rows!r}: sizes are whole numbers joined by commas\n")
    return args


def left(args: argparse.Namespace) -> float | None:
    """The timeout of the next run: ``--timeout``, cut to what ``--budget`` has left since the start."""
    if args.budget is None:
        return args.timeout
    rest = args.budget - (time.perf_counter() - args.started)
    return rest if args.timeout is None else min(args.timeout, rest)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    args.started = time.perf_counter()
    extra = args.run_options
    args.out.mkdir(parents=True, exist_ok=True)
    command = ["benchmarks/run_speed.py", *(sys.argv[1:] if argv is None else argv)]
    report: dict[str, Any] = {"argv": command, "cpus": os.cpu_count(), "data": str(args.data), "run_options": extra}
    if args.append:
        report = json.loads(args.record.with_name(args.record.name + ".json").read_text(encoding="utf-8"))
        report["appended"] = [*report.get("appended", []), command]
    if not args.no_compare:
        report["fast"] = timed_run(ROOT, args.data, args.out / "fast", extra, left(args))
        write_record(args.record, report)
        if args.reference is not None:
            report["reference"] = timed_run(args.reference.resolve(), args.data, args.out / "reference", extra,
                                            left(args))
            if not (report["fast"].get("timed_out") or report["reference"].get("timed_out")):
                report["comparison"] = side_by_side(report["fast"], report["reference"], args.out)
            write_record(args.record, report)
    if args.demo:  # before the scaling table: its largest sizes are the runs a budget cuts
        report["demo"] = timed_demo(ROOT, args.out / "demo", shlex.split(args.demo_args), left(args))
        write_record(args.record, report)
    report.setdefault("scaling", [])
    for n in args.sizes:
        if args.budget is not None and args.budget - (time.perf_counter() - args.started) < 10:
            report["scaling"].append({"rows": n, "skipped": f"budget of {args.budget:.0f} s spent"})
            continue
        data = sized_copy(args.data, n, args.out)
        one = timed_run(ROOT, data, args.out / f"run_{n}", extra, left(args))
        data.unlink()
        report["scaling"].append({"rows": n, **one})
        write_record(args.record, report)
        print(f"{n} rows: {one['wall_seconds']} s wall, {one['cpu_seconds']} CPU-s", file=sys.stderr, flush=True)
    write_record(args.record, report)
    print(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
