#!/usr/bin/env bash
# Produce the folders that scripts/compare_outputs.py compares: `aflite demo` plus run/explain/evaluate/audit/card on a
# 2,000-row SNLI slice. Usage: scripts/make_outputs.sh SRC_DIR OUT_DIR (SRC_DIR: the tree whose src/ is on PYTHONPATH).
set -euo pipefail
src=$(cd "$1" && pwd); out=$2; mkdir -p "$out"; out=$(cd "$out" && pwd)
py=${PY:-/work/main/.venv/bin/python}
export PYTHONPATH=$src/src
snli=$out/snli2k.tsv
if [ ! -f "$snli" ]; then zcat "${SNLI:-/work/shared/data/snli/train_100k.tsv.gz}" 2>/dev/null | head -2001 > "$snli" || true; fi
a() { "$py" -m aflite "$@"; }
cd "$out"
a demo --out "$out/demo" > "$out/demo.stdout"
a run "$snli" --out "$out/run" > "$out/run.stdout"
a explain "$snli" "$out/run" --out "$out/explain" > "$out/explain.stdout"
a evaluate "$snli" "$out/run" --models ngram:pair,ngram:hypothesis --out "$out/eval" > "$out/eval.stdout"
a audit "$snli" --featurizer ngram --no-tra --out "$out/audit" > "$out/audit.stdout"
a audit "$snli" --featurizer ngram --no-tra --compare "$out/run" --out "$out/audit-compare" > "$out/audit-compare.stdout"
a card "$out/run" --evaluate "$out/eval" --explain "$out/explain" --out "$out/card" > "$out/card.stdout"
