"""``benchmarks/bench.py --embed minilm``: the encoder's CPU backends side by side in one run.

What users wait for is Φ, so this measures, on the same machine and in the same process: items/s of torch fp32
and of each ONNX Runtime backend on the same pairs (the backends alternate round after round, so that a change in
the machine's load hits them alike), sentence-transformers' own ``encode`` as the reference users know, per-row
cosine of each backend's Φ to torch's, the Jaccard of the AFLite kept sets (same seed, Table 8 scaled to the
data) with each Φ, and the roofline: the host's float32 GEMM rate (numpy) and int8 GEMM rate (ONNX Runtime's
MatMulInteger) next to the GFLOP/s each backend reaches.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from aflite.atomic import JSON
from aflite.data import load_dataset
from aflite.errors import ParameterError
from aflite.features.minilm import MiniLMFeaturizer
from aflite.threads import budget
from aflitebench.bench_embed_images import image_embed_benchmark
from aflitebench.embed_common import agreement_passes, gemm_rates, kept_set_agreement, timing_summary

__all__ = ["EMBED_MODELS", "DEFAULT_ITEMS", "embed_benchmark", "format_embed_report", "flops_per_token"]

BACKENDS = ("torch", "onnx", "onnx-int8")
EMBED_MODELS = ("minilm", "efficientnet-lite0")  # what --embed benchmarks (the first: text pairs; then images)
DEFAULT_ITEMS = {"minilm": 2000, "efficientnet-lite0": 500}


def flops_per_token(config: Any) -> float:
    """FLOPs per token of a BERT-style encoder's dense layers (2 per multiply-add; attention scores excluded):
    2 · layers · (4·h² + 2·h·ffn). MiniLM-L6 (h 384, ffn 1536): 21.2 MFLOP."""
    h, i, n = int(config.hidden_size), int(config.intermediate_size), int(config.num_hidden_layers)
    return 2.0 * n * (4 * h * h + 2 * h * i)


def embed_benchmark(data: str | os.PathLike[str], *, model: str = "minilm", n_items: int = 2000, rounds: int = 3,
                    seed: int = 0, kept_set: bool = True, backends: tuple[str, ...] = BACKENDS,
                    reference: bool = True, batch_size: int = 32,
                    log: Callable[[str], None] = lambda m: None) -> JSON:
    """The ``embed`` section of ``benchmarks/bench.py --json`` for ``model``: the text pairs of ``data`` for the text
    encoder (:data:`EMBED_MODELS`' first), an image folder for the image encoder
    (:func:`aflitebench.bench_embed_images.image_embed_benchmark`)."""
    benches: dict[str, Callable[[], JSON]] = {
        EMBED_MODELS[0]: lambda: _text_benchmark(data, n_items=n_items, rounds=rounds, seed=seed, kept_set=kept_set,
                                                 backends=backends, reference=reference, batch_size=batch_size,
                                                 log=log),
        EMBED_MODELS[1]: lambda: image_embed_benchmark(data, model=model, n_items=n_items, rounds=rounds, seed=seed,
                                                       kept_set=kept_set, batch_size=batch_size, log=log)}
    if model not in benches:
        raise ParameterError(f"--embed {model}: choose one of {', '.join(EMBED_MODELS)}")
    return benches[model]()


def _text_benchmark(data: str | os.PathLike[str], *, n_items: int, rounds: int, seed: int, kept_set: bool,
                    backends: tuple[str, ...], reference: bool, batch_size: int,
                    log: Callable[[str], None]) -> JSON:
    """The text encoder's bench: MiniLM on ``n_items`` pairs, each backend, ``rounds`` times."""
    if n_items < 1 or rounds < 1:
        raise ParameterError("--n-items and --rounds must be >= 1")

    ds = load_dataset(data)
    a_all, b_all = list(ds.texts_a), list(ds.texts_b if ds.texts_b is not None else [])
    if not b_all:
        raise ParameterError(f"{data}: the embed bench needs premise/hypothesis pairs")
    n = min(n_items, len(a_all))
    a, b = a_all[:n], b_all[:n]
    feats = {be: MiniLMFeaturizer(backend=be, show_progress=False, batch_size=batch_size) for be in backends}
    for f in feats.values():  # load, export and quantise outside the timings
        f.transform(a[:8], b[:8])
    tok, torch_model = feats[backends[0]].loaded()
    cfg = torch_model.config
    tokens = sum(len(ids) for ids in tok(a, b, truncation=True, max_length=256)["input_ids"])
    fpt = flops_per_token(cfg)
    res: JSON = {"model": EMBED_MODELS[0], "data": str(data), "n_items": n, "rounds": rounds, "seed": seed,
                           "batch_size": batch_size, "threads": budget(), "tokens_per_item": round(tokens / n, 2),
                           "mflop_per_token": round(fpt / 1e6, 2), "host": platform.processor() or platform.machine(),
                           "loadavg_start": list(os.getloadavg())}
    st: Any = None
    if reference:
        try:
            from sentence_transformers import SentenceTransformer

            st = SentenceTransformer(str(feats[backends[0]].get_options()["model_path"]), device="cpu")
            st.encode([(a[0], b[0])], batch_size=batch_size)
        except Exception as exc:  # noqa: BLE001 - the reference is optional; say why it is missing
            res["sentence_transformers"] = f"skipped: {type(exc).__name__}: {exc}"
            st = None
    runs: dict[str, list[float]] = {be: [] for be in backends}
    if st is not None:
        runs["sentence-transformers"] = []
    small: dict[str, np.ndarray] = {}
    loads: list[float] = []
    for r in range(rounds):  # alternate: every backend once per round
        for be in runs:
            t0 = time.perf_counter()
            if be == "sentence-transformers":
                x = np.asarray(st.encode(list(zip(a, b, strict=True)), batch_size=batch_size,
                                         normalize_embeddings=True, convert_to_numpy=True), dtype=np.float32)
            else:
                x = feats[be].transform(a, b)
            runs[be].append(time.perf_counter() - t0)
            small[be] = x
        loads.append(round(os.getloadavg()[0], 2))
        log(f"round {r + 1}/{rounds}: " + ", ".join(f"{be} {n / v[-1]:.0f}/s" for be, v in runs.items()))
    med = {be: float(np.median(v)) for be, v in runs.items()}
    res.update(timing_summary(runs, n, loads, digits=1))
    res["gflops_achieved"] = {be: round(n / s * tokens / n * fpt / 1e9, 1) for be, s in med.items()}
    ref = small["torch"]
    cos = {be: (x * ref).sum(axis=1) for be, x in small.items() if be != "torch"}
    res["min_cosine"] = {be: round(float(c.min()), 6) for be, c in cos.items()}
    res["mean_cosine"] = {be: round(float(c.mean()), 6) for be, c in cos.items()}
    res["loadavg_end_of_timing"] = list(os.getloadavg())
    log("roofline: GEMM rates")
    res["roofline"] = gemm_rates()
    if kept_set:
        y = np.asarray(ds.labels)
        res.update(kept_set_agreement(backends, lambda be: feats[be].transform(a_all, b_all), y, seed,
                                      lambda x, ref: (x * ref).sum(axis=1), f"all {len(y)} pairs", log))
    res["passes"] = agreement_passes(res, backends)
    res["loadavg_end"] = list(os.getloadavg())
    return res


def format_embed_report(res: JSON) -> str:
    if res.get("unit") == "image":
        head = (f"{res['model']} on {res['n_items']} images of {res['data']} ({res['image_size']} px, "
                f"{res['gflop_per_item']} GFLOP/image)")
    else:
        head = (f"{res['model']} on {res['n_items']} pairs of {res['data']} ({res['tokens_per_item']} tokens/pair, "
                f"{res['mflop_per_token']} MFLOP/token)")
    lines = [f"{head}, median of {res['rounds']} alternating rounds, {res['threads']} threads:"]
    for be, v in res["items_per_s"].items():
        extra = ""
        if be in res["mean_cosine"]:
            extra = f", cosine to torch mean {res['mean_cosine'][be]:.5f} min {res['min_cosine'][be]:.5f}"
        if be in res.get("kept_jaccard", {}):
            extra += f", kept-set Jaccard {res['kept_jaccard'][be]:.4f}"
        lines.append(f"  {be:<22} {v:8.1f} items/s  {res['speedup'][be]:.2f}x torch  "
                     f"{res['gflops_achieved'][be]:.1f} GFLOP/s{extra}")
    rl = res["roofline"]
    lines.append(f"  roofline: numpy float32 GEMM {rl['numpy_float32_gflops']} GFLOP/s"
                 + (f", ORT int8 GEMM {rl['ort_int8_gops']} GOP/s" if "ort_int8_gops" in rl else ""))
    return "\n".join(lines)
