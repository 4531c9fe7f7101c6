#!/usr/bin/env bash
# Issue #31's GPU check, in one device call of under 8 minutes. Run from the checkout's root on a machine with a
# CUDA GPU, after `python benchmarks/prepare_gpu_carry.py` built carry/ (the fp16-stored MiniLM and the SNLI,
# MNLI and HANS files; the device tool carries it: carry=["carry"]). Writes under $OUT (default a new temporary folder):
#   env.txt                  the card, driver, Python packages, CPU count
#   gpu_tests.txt/.xml       the GPU-marked tests and the thread-policy tests (the 16-core machine's KeyError)
#   bench/device_bench.json  `python benchmarks/bench.py --device cuda`, rewritten after every section (a cut run keeps them)
#   bench.txt                its log; bench/results.json + summary.md when it finished
#   suite.txt                the default test suite with the time left (missing optional packages on the device
#                            machine give collection errors there: --continue-on-collection-errors)
# Every figure is measured with the fp16-rounded MiniLM weights of carry/ (say so next to it).
# A dry run on a CPU: GPU_CHECK_DEVICE=torch-cpu GPU_CHECK_TINY=1 GPU_CHECK_SECONDS=200 bash benchmarks/gpu_check.sh
set -u
OUT=${OUT:-$(mktemp -d -t gpu_check.XXXXXX)}
mkdir -p "$OUT"
START=$(date +%s)
BUDGET=${GPU_CHECK_SECONDS:-465}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
export PYTHONPATH="$PWD/src:$PWD/carry/pkgs${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONDONTWRITEBYTECODE=1
PY=${PYTHON:-python}
DEVICE=${GPU_CHECK_DEVICE:-cuda}
TINY=${GPU_CHECK_TINY:+--tiny}

{
  date -u; nproc; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
  $PY - <<'EOF'
import importlib, sys
print(sys.version)
for m in ("torch", "transformers", "numpy", "scipy", "sklearn", "numba", "threadpoolctl", "pyarrow", "PIL",
          "hypothesis", "matplotlib", "onnxruntime"):
    try:
        print(m, importlib.import_module(m).__version__)
    except Exception as exc:
        print(m, "absent:", type(exc).__name__)
import torch
print("cuda", torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
from aflite.device import default_model_path
print("minilm", default_model_path())
from threadpoolctl import threadpool_info
print([(i["user_api"], i.get("internal_api"), i["num_threads"], i["filepath"]) for i in threadpool_info()])
EOF
} > "$OUT/env.txt" 2>&1

# 1. the GPU branches and the thread policy (about a minute)
timeout 100 $PY -m pytest -q -p no:cacheprovider -rs -m "gpu" tests/test_torch_backend.py tests/test_encoders.py \
  --junitxml="$OUT/gpu_tests.xml" > "$OUT/gpu_tests.txt" 2>&1
timeout 60 $PY -m pytest -q -p no:cacheprovider -rs tests/test_threads.py >> "$OUT/gpu_tests.txt" 2>&1

# 2. the benchmark: the sections in order of importance, each saved as soon as it is done
T=$(( $(left) - 75 ))
timeout "$T" $PY benchmarks/bench.py --device "$DEVICE" $TINY --data-dir carry/data \
  --sections roofline,filter,phi,warmup --out "$OUT/bench" > "$OUT/bench.txt" 2>&1
echo "bench exit $? after $(( $(date +%s) - START )) s (limit $T s)" >> "$OUT/bench.txt"

# 3. the default suite, with what is left
T=$(( $(left) - 5 ))
if [ "$T" -gt 20 ]; then
  timeout "$T" $PY -m pytest -q -p no:cacheprovider -rfE --continue-on-collection-errors tests \
    > "$OUT/suite.txt" 2>&1
  echo "suite exit $? after $(( $(date +%s) - START )) s" >> "$OUT/suite.txt"
fi
echo "gpu_check done in $(( $(date +%s) - START )) s"
tail -n 3 "$OUT/gpu_tests.txt"; tail -n 25 "$OUT/bench.txt"; tail -n 5 "$OUT/suite.txt" 2>/dev/null
