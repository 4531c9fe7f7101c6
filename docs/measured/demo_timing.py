"""`aflite demo` timed as a newcomer runs it: wall seconds, peak memory, and the machine and its load (the
1-minute load average before and after), appended to the runs of docs/measured/demo_timing.json (cited by the
README and docs/guide/demo.md through scripts/gen_docs.py, every run with its load: the time depends on it).

    python docs/measured/demo_timing.py [--featurizer NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--featurizer", default=None)
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("demo_timing.json"))
    args = ap.parse_args()
    import aflite

    with tempfile.TemporaryDirectory() as tmp:
        argv = ["demo", "--out", str(Path(tmp) / "demo"), "--quiet"]
        if args.featurizer:
            argv += ["--featurizer", args.featurizer]
        load_before = os.getloadavg()
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "aflite", *argv], capture_output=True, text=True)
        wall = time.perf_counter() - start
        load_after = os.getloadavg()
    if proc.returncode != 0:
        sys.exit(proc.stderr)
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    record = {
        "argv": argv[:1] + argv[4:],
        "wall_seconds": round(wall, 1),
        "peak_rss_mib": round(peak_kib / 1024),
        "machine": {"cpu": cpu_model(), "cpus_usable": len(os.sched_getaffinity(0)), "os": platform.platform()},
        "load_1min_before": round(load_before[0], 2),
        "load_1min_after": round(load_after[0], 2),
        "versions": {"aflite": aflite.__version__, "python": platform.python_version()},
    }
    runs = json.loads(args.out.read_text(encoding="utf-8"))["runs"] if args.out.is_file() else []
    args.out.write_text(json.dumps({"command": "aflite demo", "runs": [*runs, record]}, indent=2, ensure_ascii=False)
                        + "\n", encoding="utf-8")
    print(json.dumps(record, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
