"""benchmarks/device_check.sh, the one device call of issue #43: its control flow with a stand-in interpreter (every
step runs, at most 8 files come back, none in a folder, the summary says what each step did), and for real in its
TINY mode on the CPU (slow, shared data)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"

# `-m aflite`, ladder_summary.py and device_speed.py leave the files they would; `python -` with no arguments (the
# versions step) and pack_results.py run in the real interpreter
FAKE_PYTHON = r"""#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
out=""; prev=""
for a in "$@"; do if [[ "$prev" == --out ]]; then out=$a; fi; prev=$a; done
if [[ "$1" == -m && "$2" == aflite ]]; then mkdir -p "$out"; echo '{}' > "$out/results.json"; exit 0; fi
if [[ "$1" == *device_speed.py ]]; then echo '{"profile": {}}' > "$out"; echo "device benchmark (fake)"; exit 0; fi
if [[ "$1" == *ladder_summary.py ]]; then echo "# ladder of $2" > "$out.md"; echo '{}' > "$out.json"; exit 0; fi
exec "$REAL_PYTHON" "$@"
"""


def _fake_check(tmp_path: Path, **extra: str) -> tuple[Path, str]:
    fake = tmp_path / "fakepython"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    out = tmp_path / "OUT"
    env = {**os.environ, "OUT": str(out), "PYTHON": str(fake), "REAL_PYTHON": sys.executable,
           "FAKE_LOG": str(tmp_path / "calls.log"), "DATA": str(tmp_path / "data"), "MODEL": str(tmp_path / "m"),
           **extra}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "device_check.sh")], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out, (tmp_path / "calls.log").read_text()


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_the_protocols_other_calls_skip_the_speed_step(tmp_path: Path) -> None:
    out, calls = _fake_check(tmp_path, CHECK_STEPS="ladder", CHECK_RUNGS="warmup",
                             CHECK_PROTOCOL="MAX_TRAIN=all LABEL_MATCHED=1")
    assert "device_speed.py" not in calls and not (out / "device_bench.json").exists()
    evaluate = next(c for c in calls.splitlines() if c.startswith("-m aflite evaluate"))
    assert "--max-train" not in evaluate and "--label-matched" in evaluate and "run_warmup" in evaluate


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_the_fast_paths_second_call_runs_the_filter_and_the_warmup(tmp_path: Path) -> None:
    out, calls = _fake_check(tmp_path, CHECK_STEPS="filter warmup")
    files = sorted(p.name for p in out.iterdir())
    assert files == ["device_filter.json", "device_warmup.json", "env.txt", "log.txt", "summary.md"]
    assert "--sections warmup" in calls and "protocol" not in calls and "ladder_summary" not in calls
    assert "- warm-up paths: exit 0" in (out / "summary.md").read_text()


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_the_device_check_returns_a_few_flat_files_and_a_summary(tmp_path: Path) -> None:
    out, calls = _fake_check(tmp_path)
    files = sorted(p.name for p in out.iterdir())
    assert files == ["device_bench.json", "device_filter.json", "env.txt", "ladder.md", "ladder.tar.gz", "log.txt",
                     "summary.md"]
    assert all(p.is_file() for p in out.iterdir()) and len(files) <= 8  # what a device call brings back
    summary = (out / "summary.md").read_text()
    assert "- profile + speed table: exit 0" in summary and "- ladder (protocol_gpu.sh): exit 0" in summary
    assert "- filter modes (n=137538: device_lbfgs,device_onepass,device_onepass_bfloat16): exit 0" in summary
    filt = next(c for c in calls.splitlines() if "--sections filter" in c)
    assert "--no-profile" in filt and "--device cuda" in filt and "device_filter.json" in filt
    assert "device benchmark (fake)" in summary and "# ladder of" in summary
    assert "--device cuda" in calls and "--max-train 6000" in calls and "--seeds 3" in calls
    with tarfile.open(out / "ladder.tar.gz") as tar:
        assert "ladder/ladder.md" in tar.getnames()


@pytest.mark.slow
@pytest.mark.shared_data
def test_the_device_check_runs_for_real_in_tiny_mode(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from tiny_models import make_tiny_model

    torch.manual_seed(0)
    model = make_tiny_model(tmp_path / "bert")
    out = tmp_path / "OUT"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "CHECK_TINY": "1", "CHECK_RUNGS": "ngram",
           "DATA": str(DATA), "MODEL": str(model), "OMP_NUM_THREADS": "1", "AFLITE_NUM_THREADS": "1",
           "CHECK_SECONDS": "1500"}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "device_check.sh")], env=env, capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = (out / "summary.md").read_text()
    assert "- profile + speed table: exit 0" in summary and "- ladder (protocol_gpu.sh): exit 0" in summary, summary
    bench = json.loads((out / "device_bench.json").read_text())
    assert "error" not in bench["profile"] and bench["profile"]["phi"]["serial"]["steps"]["forward"]["seconds"] > 0
    assert "kept_set" not in bench["phi"] and "float32_pipelined_budget4x" in bench["phi"]["modes"]
    filt = json.loads((out / "device_filter.json").read_text())["filter"]
    assert "error" not in filt and {"cpu", "cpu_other_seed", "device_onepass"} <= set(filt["runs"])
    with tarfile.open(out / "ladder.tar.gz") as tar:
        names = tar.getnames()
    assert "ladder/ladder.md" in names and "ladder/evaluate/results.json" in names
    assert len(list(out.iterdir())) <= 8 and all(p.is_file() for p in out.iterdir())
