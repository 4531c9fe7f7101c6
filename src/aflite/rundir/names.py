"""The file names of an output folder, named once: every writer and every reader of a folder takes them from here."""

from __future__ import annotations

RESULTS = "results.json"  # every command: the envelope, its numbers and the folder's manifest; written last (commit)
SUMMARY_MD = "summary.md"  # every command: the readable account, its verdict first
PAGE = "report.html"  # the explorer page of run, explain, evaluate and audit folders
CHECKPOINT = "checkpoint.npz"  # run and filter: the filter state after the last completed phase
INSTANCES = "instances.csv"  # run, filter and explain: the per-row table
KEPT_IDS = "kept_ids.txt"
REMOVED_IDS = "removed_ids.txt"
WARMUP_IDS = "warmup_ids.txt"  # run with the warm-up Φ: the slice that trained Φ and was then left out
KEPT_CSV = "kept.csv"  # run on an image folder: the kept images (removed.csv: the others)
REMOVED_CSV = "removed.csv"
TOKENS = "tokens.csv"  # explain: the token test per (token, label, set)
WEIGHTS = "weights.csv"  # explain: soft training weights
FEATURES = "features.npy"  # embed: the feature matrix `aflite filter --features` reads
CACHE = "cache"  # run, explain, evaluate: Φ's cache (content-addressed; neither listed in the manifest nor removed)
RUN_COMMANDS = ("run", "filter", "demo")  # the commands whose --out is a run folder
CARD = "README.md"  # card: the dataset card (YAML front matter and its body)
MANIFEST = "manifest.json"  # card: the card's facts, machine-readable
MARKER = ".aflite-owner.json"  # every claimed folder: the command that owns it and the entries that were not its own
LOCK = ".aflite.lock"  # held while a process writes the folder
