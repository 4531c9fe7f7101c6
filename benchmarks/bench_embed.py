"""Throughput benchmark: our ``minilm`` featurizer against sentence-transformers ``encode()``.

Both encode the same premise/hypothesis pairs *as one input each*: ours calls
``tokenizer(premise, hypothesis)``; sentence-transformers' ``encode()`` accepts a list of
``(premise, hypothesis)`` tuples and tokenizes them as a pair in the same way (checked here:
``token_ids_identical`` compares the two tokenizations of the first pairs).
Model loading and a short warm-up run are excluded from the timings. Not a test: run it by hand from the
repository root (it needs ``pip install sentence-transformers``, which is in no extra)::

    python benchmarks/bench_embed.py --n-pairs 2000
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aflite.device import default_model_path, import_torch
from aflite.errors import InputError, ParameterError
from aflite.features import MiniLMFeaturizer

# the shared data sit next to the repository (../shared/data); recorded relative to the repository
REPO = Path(__file__).resolve().parents[1]
SNLI_DEV = REPO.parent / "shared" / "data" / "snli" / "dev.tsv.gz"


def load_pairs_tsv(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """Read (premise, hypothesis) from a gzip or plain TSV with a header, no quoting (csv.QUOTE_NONE)."""
    p = Path(path)
    opener: Any = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt", encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        if reader.fieldnames is None or not {"premise", "hypothesis"} <= set(reader.fieldnames):
            raise InputError(f"{p}: needs a header with premise and hypothesis columns")
        return [(row["premise"], row["hypothesis"]) for row in reader]


def run_embed_benchmark(
    n_pairs: int = 2000,
    seed: int = 0,
    pairs_source: str | os.PathLike[str] | Sequence[tuple[str, str]] | None = None,
    batch_size: int = 32,
    st_batch_size: int = 32,
    num_threads: int | None = None,
    warmup_pairs: int = 64,
    repeats: int = 2,
) -> dict[str, Any]:
    """Embed ``n_pairs`` real pairs with ours and with sentence-transformers: pairs/s, ratio, cosine distance.

    ``pairs_source``: a TSV path, a list of (premise, hypothesis), or None for SNLI dev (if present). A seeded
    random sample of ``n_pairs`` is taken (all pairs if fewer).
    """
    torch, _ = import_torch()
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ParameterError("the benchmark compares against sentence-transformers: pip install it") from exc
    if pairs_source is None:
        if not SNLI_DEV.is_file():
            raise InputError(f"{SNLI_DEV} not found: pass pairs_source")
        pairs = load_pairs_tsv(SNLI_DEV)
        source = os.path.relpath(SNLI_DEV, REPO)
    elif isinstance(pairs_source, str | os.PathLike):
        pairs = load_pairs_tsv(pairs_source)
        source = str(pairs_source)
    else:
        pairs = [(str(a), str(b)) for a, b in pairs_source]
        source = "given list"
    if not pairs:
        raise InputError("no pairs to benchmark")
    rng = np.random.default_rng(seed)
    take = np.sort(rng.choice(len(pairs), size=min(n_pairs, len(pairs)), replace=False))
    sample = [pairs[i] for i in take]
    a = [p[0] for p in sample]
    b = [p[1] for p in sample]
    if num_threads is not None:
        torch.set_num_threads(int(num_threads))

    folder = default_model_path()
    ours = MiniLMFeaturizer(batch_size=batch_size, show_progress=False)
    st = SentenceTransformer(str(folder), device="cpu", local_files_only=True)

    # same tokenization? (ST pair input vs tokenizer(a, b))
    tok, _model, _ = ours._ensure_loaded()
    k = min(8, len(sample))
    pre = getattr(st, "preprocess", None) or st.tokenize
    st_ids = pre([(a[i], b[i]) for i in range(k)])["input_ids"]
    ours_ids = tok(a[:k], b[:k], padding=True, truncation=True, max_length=ours.max_length, return_tensors="pt")
    token_ids_identical = bool(torch.equal(st_ids, ours_ids["input_ids"]))

    w = min(warmup_pairs, len(sample))
    ours.transform(a[:w], b[:w])
    st.encode(list(zip(a[:w], b[:w], strict=True)), batch_size=st_batch_size, show_progress_bar=False)

    def time_ours() -> tuple[float, np.ndarray]:
        t0 = time.perf_counter()
        e = ours.transform(a, b)
        return time.perf_counter() - t0, e

    def time_st() -> tuple[float, np.ndarray]:
        t0 = time.perf_counter()
        e = st.encode(
            list(zip(a, b, strict=True)), batch_size=st_batch_size, convert_to_numpy=True, show_progress_bar=False
        )
        return time.perf_counter() - t0, np.asarray(e)

    # alternate the order across repeats (ours first, then ST first, ...) and keep the best time of each, so a
    # neighbour's load on the shared cores does not favour whichever ran second
    times_ours: list[float] = []
    times_st: list[float] = []
    for r in range(max(1, repeats)):
        for which in ("ours", "st") if r % 2 == 0 else ("st", "ours"):
            if which == "ours":
                t, e_ours = time_ours()
                times_ours.append(t)
            else:
                t, e_st = time_st()
                times_st.append(t)
    t_ours, t_st = min(times_ours), min(times_st)
    e_st = np.asarray(e_st, dtype=np.float32)
    cos = (e_ours * e_st).sum(axis=1) / (np.linalg.norm(e_ours, axis=1) * np.linalg.norm(e_st, axis=1))
    dist = 1.0 - cos
    n = len(sample)
    import sentence_transformers
    import transformers

    result = {
        "source": source,
        "n_pairs": n,
        "seed": seed,
        "compared": "premise+hypothesis as one pair input: ours tokenizer(a, b); ST encode([(a, b), ...])",
        "token_ids_identical": token_ids_identical,
        "max_length": ours.max_length,
        "ours_batch_size": batch_size,
        "st_batch_size": st_batch_size,
        "torch_threads": torch.get_num_threads(),
        "repeats": max(1, repeats),
        "ours_seconds_all": [round(t, 3) for t in times_ours],
        "st_seconds_all": [round(t, 3) for t in times_st],
        "ours_seconds": round(t_ours, 3),
        "st_seconds": round(t_st, 3),
        "ours_pairs_per_s": round(n / t_ours, 1),
        "st_pairs_per_s": round(n / t_st, 1),
        "speed_ratio_ours_over_st": round(t_st / t_ours, 3),
        "max_cosine_distance": float(dist.max()),
        "mean_cosine_distance": float(dist.mean()),
        "ours_unit_norm_max_dev": float(np.abs(np.linalg.norm(e_ours, axis=1) - 1).max()),
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__,
        },
    }
    return result


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--n-pairs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pairs", default=None, help="TSV with premise/hypothesis columns (default: SNLI dev)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--st-batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    res = run_embed_benchmark(
        args.n_pairs, args.seed, args.pairs, args.batch_size, args.st_batch_size, args.threads, repeats=args.repeats
    )
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
