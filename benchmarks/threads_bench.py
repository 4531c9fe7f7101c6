"""Does the thread policy (aflite.threads) hold up alone and beside a CPU-bound job? (issue 13, part 1)

Runs ``aflite run DATA --featurizer ngram`` and ``aflite audit DATA --featurizer ngram --no-tra`` on SNLI dev+test
(19,666 pairs; dev.tsv.gz and test.tsv.gz concatenated into a temporary TSV) in two conditions:

* ``alone``  — nothing of ours beside it (the machine may still run other people's jobs: the load average before
  and after each run is recorded, so read the table with it);
* ``loaded`` — beside one CPU-bound competitor (a one-thread numpy matmul loop, or a pure-Python busy loop),

each with the defaults (no *_NUM_THREADS variables) and with ``OMP_NUM_THREADS=1``, all in one run, settings
interleaved. Prints a table and writes JSON (default docs/measured/threads_bench.json). Goal: the defaults within
1.2x of the best setting in both conditions.

    python benchmarks/threads_bench.py                     # everything, ~10-30 min on 2 cores
    python benchmarks/threads_bench.py --commands run --conditions loaded --repeats 2
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "AFLITE_NUM_THREADS")

# settings: the environment variables each one sets (on top of an environment without THREAD_VARS), extra CLI args
SETTINGS: dict[str, tuple[dict[str, str], list[str]]] = {
    "default": ({}, []),
    "omp1": ({"OMP_NUM_THREADS": "1"}, []),
    "threads1": ({}, ["--threads", "1"]),
    "blas1": ({"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}, []),
}

# each loops until its parent (this script) is gone, so that an interrupted benchmark leaves nothing running
COMPETITORS = {
    # one BLAS thread multiplying 512x512 matrices: CPU- and cache-bound, like someone else's training job
    "numpy": "import os, sys\nimport numpy as np\na = np.random.default_rng(0).random((512, 512))\n"
             "while os.getppid() == int(sys.argv[1]):\n    a = a @ a\n    a /= np.abs(a).max()\n",
    "python": "import os, sys\nparent = int(sys.argv[1])\nwhile os.getppid() == parent:\n"
              "    for _ in range(100_000):\n        pass\n",
}


def make_dataset(snli: Path, dest: Path, limit: int | None = None) -> int:
    """dev.tsv.gz + test.tsv.gz -> one TSV (header once). The files are QUOTE_NONE TSV: copy lines verbatim."""
    n = 0
    with dest.open("w", encoding="utf-8", newline="") as out:
        for i, name in enumerate(("dev.tsv.gz", "test.tsv.gz")):
            with gzip.open(snli / name, "rt", encoding="utf-8", newline="") as f:
                header = f.readline()
                if i == 0:
                    out.write(header)
                for line in f:
                    if limit is not None and n >= limit:
                        break
                    if line.strip():
                        out.write(line if line.endswith("\n") else line + "\n")
                        n += 1
    with dest.open(encoding="utf-8", newline="") as f:  # sanity: every row has the header's columns
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        width = len(next(reader))
        bad = [k for k, row in enumerate(reader, start=2) if len(row) != width]
    if bad:
        raise SystemExit(f"{dest}: line {bad[0]}: expected {width} tab-separated columns")
    return n


def loadavg() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:  # pragma: no cover - not Linux
        return float("nan")


def command_line(command: str, data: Path, out: Path, extra: list[str]) -> list[str]:
    base = [sys.executable, "-m", "aflite"]
    if command == "run":
        return base + ["run", str(data), "--featurizer", "ngram", "--out", str(out), "--quiet"] + extra
    if command == "audit":
        return base + ["audit", str(data), "--featurizer", "ngram", "--no-tra", "--out", str(out), "--quiet"] + extra
    raise ValueError(command)


def outcome(command: str, out: Path) -> dict[str, Any]:
    """What the command computed, to check that every setting gives the same answer."""
    try:
        if command == "run":
            s = json.loads((out / "results.json").read_text())
            return {"size_after": s.get("size_after"), "n_iterations": s.get("n_iterations"),
                    "timings": s.get("timings")}
        m = json.loads((out / "results.json").read_text())
        found: dict[str, Any] = {}

        def walk(x: Any, path: str) -> None:  # every accuracy in the file, wherever its layout puts it
            if isinstance(x, dict):
                for k, v in x.items():
                    if k in ("biased_accuracy", "normal_accuracy") and isinstance(v, (int, float)):
                        found[f"{path}{k}"] = round(float(v), 6)
                    else:
                        walk(v, f"{path}{k}.")
            elif isinstance(x, list):
                for i, v in enumerate(x):
                    walk(v, f"{path}{i}.")

        walk(m.get("results"), "")
        return {"accuracies": found, "seconds": m.get("seconds")}
    except (OSError, KeyError, ValueError, TypeError, IndexError) as exc:
        return {"error": f"could not read the outputs: {exc!r}"}


def run_one(command: str, setting: str, data: Path, work: Path, tag: str, timeout: float) -> dict[str, Any]:
    env_set, extra = SETTINGS[setting]
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    env.update(env_set)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    out = work / f"{command}-{setting}-{tag}"
    cmd = command_line(command, data, out, extra)
    load0 = loadavg()
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        rc, err = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired:
        rc, err = None, f"timed out after {timeout:.0f} s"
    seconds = time.perf_counter() - t0
    rec: dict[str, Any] = {
        "command": command, "setting": setting, "seconds": round(seconds, 2), "returncode": rc,
        "env": env_set, "args": extra, "loadavg_before": load0, "loadavg_after": loadavg(),
    }
    if rc == 0:
        rec["outcome"] = outcome(command, out)
    else:
        rec["stderr_tail"] = (err or "")[-2000:]
    shutil.rmtree(out, ignore_errors=True)
    return rec


def start_competitor(kind: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    env.update({"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    proc = subprocess.Popen([sys.executable, "-c", COMPETITORS[kind], str(os.getpid())], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2.0)  # let it import numpy and reach its loop
    if proc.poll() is not None:
        raise SystemExit(f"the {kind} competitor exited with code {proc.returncode}")
    return proc


def summarize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per condition and command: median seconds per setting, the best, and default / best."""
    rows = []
    keys = sorted({(r["condition"], r["command"]) for r in records}, key=lambda k: (k[0] != "alone", k[1]))
    for cond, cmd in keys:
        per: dict[str, float] = {}
        for setting in dict.fromkeys(r["setting"] for r in records):
            times = sorted(r["seconds"] for r in records if (r["condition"], r["command"], r["setting"]) ==
                           (cond, cmd, setting) and r["returncode"] == 0)
            if times:
                per[setting] = times[len(times) // 2]
        if not per:
            continue
        best = min(per, key=per.__getitem__)
        row: dict[str, Any] = {"condition": cond, "command": cmd, "seconds": per, "best": best}
        if "default" in per:
            row["default_over_best"] = round(per["default"] / per[best], 3)
            row["goal_met"] = row["default_over_best"] <= 1.2
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--snli", type=Path, default=REPO.parent / "shared" / "data" / "snli",
                    help="folder with dev.tsv.gz and test.tsv.gz (default ../shared/data/snli)")
    ap.add_argument("--commands", default="run,audit", help="run,audit (default both)")
    ap.add_argument("--conditions", default="alone,loaded", help="alone,loaded (default both)")
    ap.add_argument("--settings", default="default,omp1",
                    help=f"comma list of {', '.join(SETTINGS)} (default default,omp1)")
    ap.add_argument("--competitor", choices=tuple(COMPETITORS), default="numpy")
    ap.add_argument("--repeats", type=int, default=1, help="runs per cell; the table shows the median (default 1)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per command (default 1800)")
    ap.add_argument("--limit", type=int, default=None, help="first N rows only (a smoke test)")
    ap.add_argument("--json", type=Path, default=REPO / "docs" / "measured" / "threads_bench.json")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-up (competitor, child) on kill
    commands = [c for c in args.commands.split(",") if c]
    conditions = [c for c in args.conditions.split(",") if c]
    settings = [s for s in args.settings.split(",") if s]
    for s in settings:
        if s not in SETTINGS:
            ap.error(f"unknown setting {s!r}")
    for c in conditions:
        if c not in ("alone", "loaded"):
            ap.error(f"unknown condition {c!r}")

    records: list[dict[str, Any]] = []
    t_start = time.time()
    with tempfile.TemporaryDirectory(prefix="aflite-threads-bench-") as tmp:
        work = Path(tmp)
        data = work / "snli_dev_test.tsv"
        n_rows = make_dataset(args.snli, data, args.limit)
        print(f"SNLI dev+test: {n_rows:,} rows; CPUs this process may use: {len(os.sched_getaffinity(0))}; "
              f"load average {loadavg():.2f}", file=sys.stderr)
        for cond in conditions:
            competitor = start_competitor(args.competitor) if cond == "loaded" else None
            try:
                for rep in range(args.repeats):
                    for cmd in commands:
                        # alternate the order of the settings between repeats and commands (drift of the load)
                        order = settings if (rep + commands.index(cmd)) % 2 == 0 else settings[::-1]
                        for setting in order:
                            rec = run_one(cmd, setting, data, work, f"{cond}{rep}", args.timeout)
                            rec.update(condition=cond, repeat=rep)
                            records.append(rec)
                            status = "ok" if rec["returncode"] == 0 else f"FAILED ({rec['returncode']})"
                            print(f"{cond:<7} {cmd:<6} {setting:<9} {rec['seconds']:8.1f} s  {status}  "
                                  f"load {rec['loadavg_before']:.1f}->{rec['loadavg_after']:.1f}",
                                  file=sys.stderr, flush=True)
            finally:
                if competitor is not None:
                    competitor.terminate()
                    competitor.wait()

    table = summarize(records)
    print(f"\n{'condition':<9} {'command':<7} " + " ".join(f"{s:>10}" for s in settings)
          + f" {'best':>9} {'default/best':>13}")
    for row in table:
        cells = " ".join(f"{row['seconds'].get(s, float('nan')):>9.1f}s" for s in settings)
        ratio = row.get("default_over_best")
        print(f"{row['condition']:<9} {row['command']:<7} {cells} {row['best']:>9} "
              f"{'' if ratio is None else f'{ratio:.2f}x':>13}{'' if row.get('goal_met', True) else '  > 1.2x'}")
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=False).stdout.strip() or None
    except OSError:
        commit = None
    result = {
        "benchmark": "threads_bench",
        "command": " ".join(["python", "benchmarks/threads_bench.py", *(sys.argv[1:] if argv is None else argv)])
        .replace(str(REPO.parent), ".."),
        "data": "../shared/data/snli/dev.tsv.gz + test.tsv.gz", "rows": n_rows,
        "cpus_available": len(os.sched_getaffinity(0)), "cpu_count": os.cpu_count(),
        "competitor": args.competitor if "loaded" in conditions else None,
        "commit": commit, "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)),
        "wall_seconds": round(time.time() - t_start, 1),
        "note": "'alone' means no competitor of ours; other jobs on the machine show in loadavg_before/after",
        "summary": table, "runs": records,
    }
    sys.path.insert(0, str(REPO / "src"))
    from aflite.atomic import write_json

    args.json.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.json, result)
    print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
