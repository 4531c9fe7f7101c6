#!/usr/bin/env bash
# The paper's protocol (Le Bras et al. 2020, §4, Tables 1 and 3; appendix A.5-A.6) on a real SNLI training set:
# filter the TRAINING set with three Φ (n-gram, frozen MiniLM, warm-up MiniLM), then train cheap models on D,
# D(Φ), same-size random subsets and the single-iteration sets, and test them on SNLI dev, test, test_hard and
# HANS, which none of them saw.
#
# Usage:  benchmarks/reproduce_snli.sh [DATA_DIR] [OUT_DIR]
#   DATA_DIR  holds snli/{train_100k,dev,test,test_hard}.tsv.gz and hans/evaluation_regenerated.tsv.gz
#             (default ../shared/data); point TRAIN at snli_1.0_train.jsonl to run the full 550K.
#   OUT_DIR   run directories, caches and evaluation outputs (default runs/snli_protocol)
# Environment: TRAIN (training file, default DATA_DIR/snli/train_100k.tsv.gz), WARMUP_STEPS (cap on warm-up
#   fine-tuning steps; default 300 on a CPU, none with a GPU), DEVICE (auto|cpu|cuda, default auto),
#   SEEDS (default 3), MODELS (aflite evaluate --models).
#
# Every stage shows a progress bar with an ETA (tqdm: encoder batches, fine-tuning steps, removed instances,
# model fits); the banner before each stage gives the time it took on a 2-core machine with 100K pairs.
# Table 8's SNLI parameters (m=64, t=50K, k=10K, τ=0.75, n=92K of 550,152) are scaled to |D| by `aflite run`
# itself (×0.1816 for 99,890 pairs: t=9,078, k=1,816, n=16,704); see each run's summary.md.
set -euo pipefail

DATA=${1:-../shared/data}
OUT=${2:-runs/snli_protocol}
TRAIN=${TRAIN:-$DATA/snli/train_100k.tsv.gz}
DEVICE=${DEVICE:-auto}
SEEDS=${SEEDS:-3}
MODELS=${MODELS:-ngram:hypothesis,ngram:pair,ppmi:pair,probe:minilm:pair,mlp:minilm:pair}
STEPS=()
if [[ -n "${WARMUP_STEPS:-}" ]]; then STEPS=(--max-steps "$WARMUP_STEPS"); fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
export MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
mkdir -p "$OUT"

stage() {  # stage N TITLE EXPECTED
    printf '\n[stage %s/6] %s  (%s)  started %s\n' "$1" "$2" "$3" "$(date -u +%H:%M:%S)" >&2
    SECONDS=0
}
done_stage() { printf '[stage %s/6] done in %d s\n' "$1" "$SECONDS" >&2; }

stage 1 "Φ = n-gram: featurize + AFLite on $TRAIN" "measured: 14.5 min on 2 shared cores (featurize 2, filter 8.5, probe 4)"
aflite run "$TRAIN" --featurizer ngram --device "$DEVICE" --out "$OUT/run_ngram"
done_stage 1

stage 2 "frozen MiniLM pair embeddings of D (cached, reused by stages 4 and 5)" "1 CPU thread: 20-70 pairs/s on a busy 2-core machine, i.e. 25-80 min; ~8 min on 2 idle cores"
aflite embed "$TRAIN" --featurizer minilm --device "$DEVICE" --cache-dir "$OUT/minilm_cache" \
    --out "$OUT/emb/train_minilm_pair"
done_stage 2

stage 3 "Φ = warm-up MiniLM: fine-tune on a random slice of t rows, embed the rest, AFLite" \
    "measured: 300 steps took 28 min at load ~15; embedding 90,812 pairs ~25-40 min"
aflite run "$TRAIN" --featurizer warmup "${STEPS[@]}" --device "$DEVICE" --out "$OUT/run_warmup"
done_stage 3

stage 4 "Φ = frozen MiniLM: AFLite (embeddings from stage 2's cache)" "one AFLite run on cached features"
aflite run "$TRAIN" --featurizer minilm --device "$DEVICE" --cache-dir "$OUT/minilm_cache" --out "$OUT/run_minilm"
done_stage 4

stage 5 "evaluate: D / D_random / single-iteration / D(Φ) on SNLI dev, test, test_hard and HANS" \
    "n-gram models: 5 min for one run; MiniLM models also embed the 53K test pairs"
aflite evaluate "$TRAIN" "$OUT/run_ngram" "$OUT/run_warmup" "$OUT/run_minilm" --out "$OUT/evaluate" \
    --no-split --seeds "$SEEDS" --models "$MODELS" --cache-dir "$OUT/minilm_cache" \
    --test "snli-dev=$DATA/snli/dev.tsv.gz" --test "snli-test=$DATA/snli/test.tsv.gz" \
    --test "snli-test-hard=$DATA/snli/test_hard.tsv.gz" --hans "$DATA/hans/evaluation_regenerated.tsv.gz"
done_stage 5

stage 6 "summary" "seconds"
for r in run_ngram run_minilm run_warmup; do
    echo "== $r"; sed -n '1,20p' "$OUT/$r/summary.md"
done
echo "tables: $OUT/evaluate/tables.md" >&2
done_stage 6
