"""The file names of an output folder, named once: every writer and every reader of a folder takes them from here."""

from __future__ import annotations

RESULTS = "results.json"  # every command: the envelope (command, argv, seed, versions, warnings) and its numbers
SUMMARY_MD = "summary.md"  # every command: the readable account, its verdict first
PAGE = "report.html"  # the explorer page of run, explain, evaluate and audit folders
SUMMARY = "summary.json"  # run and filter: the run's own numbers (results.json without the envelope)
CHECKPOINT = "checkpoint.npz"  # run and filter: the filter state after the last completed phase
INSTANCES = "instances.csv"  # run, filter and explain: the per-row table
KEPT_IDS = "kept_ids.txt"
REMOVED_IDS = "removed_ids.txt"
WARMUP_IDS = "warmup_ids.txt"  # run with the warm-up Φ: the slice that trained Φ and was then left out
RUN_COMMANDS = ("run", "filter", "demo")  # the commands whose --out is a run folder
METRICS = "metrics.json"  # audit: every figure (results.json carries them too, under the envelope)
CARD = "README.md"  # card: the dataset card (YAML front matter and its body)
MANIFEST = "manifest.json"  # card: the card's facts, machine-readable
