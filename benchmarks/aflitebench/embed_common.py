"""What the encoder benches share (:mod:`aflitebench.bench_embed` for text,
:mod:`aflitebench.bench_embed_images` for images): the host's GEMM rates for the roofline, and the AFLite
kept set of a Φ (same seed, Table 8 scaled) with the Jaccard that compares two of them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from aflite.atomic import JSON
from aflite.commands.run import scaled_defaults
from aflite.core.filter import AFLite
from aflitebench.filter_agreement import KEPT_JACCARD_FLOOR

__all__ = ["gemm_rates", "jaccard", "filter_kept"]


def gemm_rates(size: int = 1024, repeats: int = 5) -> dict[str, float]:
    """Best-of-``repeats`` GFLOP/s of one size³ GEMM: numpy float32 (its BLAS, all its threads) and ONNX Runtime
    MatMulInteger uint8 × int8 (the kernel the dynamic-int8 backend uses)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    flop = 2.0 * size**3
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    out = {"gemm_size": size, "numpy_float32_gflops": round(flop / best / 1e9, 1)}
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return out
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["A", "B"], ["Y"])], "int8gemm",
        [helper.make_tensor_value_info("A", TensorProto.UINT8, [size, size]),
         helper.make_tensor_value_info("B", TensorProto.INT8, [size, size])],
        [helper.make_tensor_value_info("Y", TensorProto.INT32, [size, size])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 9)
    onnx.checker.check_model(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"A": rng.integers(0, 255, (size, size), dtype=np.uint8),
             "B": rng.integers(-127, 127, (size, size), dtype=np.int8)}
    best = min(_timed(lambda: sess.run(None, feeds)) for _ in range(repeats))
    out["ort_int8_gops"] = round(flop / best / 1e9, 1)
    return out


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def timing_summary(runs: dict[str, list[float]], n: int, loads: list[float], digits: int = 1) -> JSON:
    """The bench's timing keys from each backend's seconds per round (``runs``, torch among them) over ``n`` items:
    all seconds, items/s and speedup over torch at the medians, and the speedup paired within each round, so that
    load drifting between rounds cancels."""
    med = {be: float(np.median(v)) for be, v in runs.items()}
    return {
        "seconds_all": {be: [round(s, 3) for s in v] for be, v in runs.items()},
        "items_per_s": {be: round(n / s, digits) for be, s in med.items()},
        "speedup": {be: round(med["torch"] / s, 3) for be, s in med.items()},
        "speedup_per_round": {be: [round(t / s, 3) for t, s in zip(runs["torch"], v, strict=True)]
                              for be, v in runs.items() if be != "torch"},
        "loadavg_1min_per_round": loads,
    }


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    sa, sb = set(a.tolist()), set(b.tolist())
    return len(sa & sb) / max(1, len(sa | sb))


def filter_kept(X: np.ndarray, y: np.ndarray, seed: int) -> tuple[np.ndarray, str]:
    af = AFLite(**scaled_defaults(len(y)), random_state=seed)  # type: ignore[arg-type]
    af.fit(X, y)
    return np.flatnonzero(af.keep_mask_), str(af.stop_reason_)


def kept_set_agreement(backends: tuple[str, ...] | list[str], embed: Callable[[str], np.ndarray], y: np.ndarray,
                       seed: int, cosine: Callable[[np.ndarray, np.ndarray], np.ndarray], what: str,
                       log: Callable[[str], None], rows: str | None = None) -> JSON:
    """The ``kept_set`` and ``kept_jaccard`` entries of an embed bench: AFLite's kept set (scaled Table 8, ``seed``)
    on each backend's Φ of the rows ``y`` labels (``embed(backend)``, torch first), the Jaccard of each to torch's,
    and each Φ's cosine to torch's on all those rows."""
    kept: dict[str, tuple[np.ndarray, str]] = {}
    full_cos: JSON = {}
    X_ref = None
    for be in backends:
        log(f"kept set: {be} Φ of {what}")
        X = embed(be)
        if be == "torch":
            X_ref = X
        elif X_ref is not None:
            c = cosine(X, X_ref)
            full_cos[be] = {"min": round(float(c.min()), 6), "mean": round(float(c.mean()), 6)}
        kept[be] = filter_kept(X, y, seed)
    base = kept["torch"][0]
    section = {"n": int(len(y)), **({"rows": rows} if rows is not None else {}),
               "parameters": "Table 8 scaled (pipeline.scaled_defaults)",
               "size": {be: int(len(k)) for be, (k, _) in kept.items()},
               "stop_reason": {be: s for be, (_, s) in kept.items()}, "cosine_all_rows": full_cos}
    return {"kept_set": section,
            "kept_jaccard": {be: round(jaccard(k, base), 4) for be, (k, _) in kept.items() if be != "torch"}}


def agreement_passes(res: JSON, backends: tuple[str, ...] | list[str]) -> dict[str, bool]:
    """Which backends pass the default's agreement bar: mean cosine ≥ 0.99 and (when measured) kept-set
    Jaccard at the filter's measured noise floor (:data:`~aflitebench.filter_agreement.KEPT_JACCARD_FLOOR`)."""
    return {be: bool(res["mean_cosine"][be] >= 0.99
                     and res.get("kept_jaccard", {}).get(be, 1.0) >= KEPT_JACCARD_FLOOR)
            for be in backends if be != "torch"}
