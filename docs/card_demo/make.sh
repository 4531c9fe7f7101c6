#!/bin/sh
# Writes docs/card_demo/README.md, data/train-00000-of-00001.parquet, croissant.json and manifest.json: the release
# of `aflite demo`'s run, with a cheap
# `aflite evaluate` (n-gram logistic regressions only) and `aflite explain` of it. Run from the repository root
# with the [text] extra installed (the demo's Φ is MiniLM); the run folders go to a temporary folder.
set -e
tmp=$(mktemp -d)
data=src/aflite/resources/snli_sample.tsv.gz
aflite demo --out "$tmp/run" --backend torch --quiet > /dev/null  # the quick start's backend ([text]: PyTorch)
aflite evaluate "$data" "$tmp/run" --models ngram:pair,ngram:hypothesis --out "$tmp/eval" --quiet > /dev/null
aflite explain "$data" "$tmp/run" --out "$tmp/explain" --quiet > /dev/null
aflite card "$tmp/run" --evaluate "$tmp/eval" --explain "$tmp/explain" --out docs/card_demo
rm -f docs/card_demo/.aflite.lock  # the lock the writer held, not a file of the card
rm -rf "$tmp"
