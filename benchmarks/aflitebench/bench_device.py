"""``benchmarks/bench.py --device cuda``: issue #31's figures for one GPU in one run, as JSON.

Sections (each written as soon as it is done, so that a run cut short keeps what it measured):

* ``roofline`` — the card's measured dense GEMM rates (float32, TF32, bfloat16, float16; n × n × n) and its
  memory bandwidth (a large copy): the ceiling every other figure is read against;
* ``phi`` — frozen MiniLM Φ of SNLI pairs: pairs/s of the measured float32 path and of the opt-in paths
  (token-budget batches, tokenization ahead in worker threads, results on the device until a block is done;
  float32, bfloat16, float16), each Φ's cosine to the float32 path's and the AFLite kept set on each Φ (Jaccard to
  float32's, next to the filter's own noise floor: the same Φ times 1 + 1e-6);
* ``filter`` — the complete SNLI-shaped filter (550,152 × 768, Table 8, the benchmark's synthetic features) on
  the CPU path and on the device in each mode (classic, ``device_resident``, ``device_lbfgs``, larger pass
  chunks, bfloat16 and float16 storage): wall seconds, phases, peak device memory, kept-set and removed-set
  Jaccard to the CPU run and to the classic device run, next to a CPU run with another seed (AFLite's own
  randomness) and the measured agreement bar :data:`aflitebench.filter_agreement.KEPT_JACCARD_FLOOR`;
* ``profile`` — where the time goes (:mod:`aflitebench.bench_profile`): per Φ batch tokenising,
  collating, host→device copy, forward and device→host copy, tokenising pairs per CPU second, the device's busy
  fraction serial and pipelined; per filter phase device vs host seconds under the torch profiler;
* ``warmup`` — ``aflite run train_100k --featurizer warmup`` end to end (:func:`aflite.commands.run.run`, probe off),
  the measured path against the opt-in ones (bfloat16 fine-tuning and embedding, pipelined, the filter with
  ``device_lbfgs``; float32 prefetched fine-tuning, pipelined embedding, the filter with ``device_onepass``):
  load, featurize, filter and total seconds, and the kept sets' Jaccard.

``tiny=True`` shrinks every size so that the whole run takes seconds on a CPU (``device="torch-cpu"``): that is how
it is tested on machines without a GPU. The figures of a tiny run say nothing about speed.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict, cast

import numpy as np

from aflite import data
from aflite.atomic import JSON, write_json
from aflite.commands.run import run as run_dataset
from aflite.commands.run import scaled_defaults
from aflite.core.ensemble import FastLogisticEnsemble
from aflite.core.filter import AFLite
from aflite.data.text import demo_dataset_path
from aflite.device import resolve_device, torch_device, torch_module
from aflite.errors import ParameterError
from aflite.features.minilm import MiniLMFeaturizer
from aflite.rundir.versions import versions
from aflitebench.bench_profile import FilterMode, filter_profile, phi_profile
from aflitebench.filter_agreement import KEPT_JACCARD_FLOOR
from aflitebench.shapes import make_snli_like

__all__ = ["SECTIONS", "device_benchmark", "format_device_report"]

SECTIONS = ("roofline", "profile", "phi", "filter", "warmup")
DEFAULT_SECTIONS = ("roofline", "phi", "filter", "warmup")  # the profile is asked for (--profile)
class Sizes(TypedDict):
    """How big each section's work is (:data:`FULL`, :data:`TINY`)."""

    gemm: int
    gemm_repeats: int
    phi_rows: int | None
    filter_n: int
    filter_d: int
    warmup_rows: int | None
    warmup_max_steps: int | None
    token_budget: int
    filter_modes: Sequence[str] | None
    profile_rows: int
    profile_filter_modes: Sequence[str]
    phi_modes: Sequence[str] | None  # a tiny run times a few of PHI_MODES
    filter_max_phases: int | None
    warmup_max_phases: int | None


class PhiMode(TypedDict, total=False):
    """One way of computing MiniLM's Φ: :class:`aflite.features.minilm.MiniLMFeaturizer` keywords (pipelined,
    precision), a token budget this many times the section's, TF32 matmuls, the weights' own dtype."""

    pipelined: bool
    precision: str
    budget_factor: int
    tf32: bool
    weights: str


FULL: Sizes = {"gemm": 8192, "gemm_repeats": 20, "phi_rows": None, "filter_n": 550_152, "filter_d": 768,
                        "warmup_rows": None, "warmup_max_steps": None, "token_budget": 16_384, "filter_modes": None,
                        "profile_rows": 20_000, "profile_filter_modes": ("classic", "device_lbfgs"), "phi_modes": None,
                        "filter_max_phases": None, "warmup_max_phases": None}
TINY: Sizes = {"gemm": 192, "gemm_repeats": 2, "phi_rows": 32, "filter_n": 2_400, "filter_d": 40,
                        "warmup_rows": 80, "warmup_max_steps": 2, "token_budget": 512,
                        "filter_modes": ("classic", "device_lbfgs"),
                        "profile_rows": 96, "profile_filter_modes": ("classic", "device_lbfgs"),
                        # issue #49: every Φ mode timed 160 pairs, and half precision runs at ~5 pairs/s on a CPU (over
                        # 200 s in all): a tiny run times 32 pairs in one mode of each kind (fixed, pipelined, a larger
                        # token budget, bfloat16); tests/test_bench.py runs every mode
                        "phi_modes": ("float32", "float32_pipelined", "float32_pipelined_budget4x",
                                      "bfloat16_pipelined"),
                        # and the filter: every device mode, each 17 phases of m=64 torch-cpu fits (~35 s each): two
                        # modes, three phases
                        "filter_max_phases": 3, "warmup_max_phases": 2}
# the filter's device modes: FastLogisticEnsemble keywords (storage is the ensemble's too)
FILTER_MODES: dict[str, FilterMode] = {
    "classic": {},
    "resident": {"device_resident": True},
    "device_lbfgs": {"device_lbfgs": True},
    "device_lbfgs_pass1024": {"device_lbfgs": True, "device_pass_mb": 1024},
    "device_lbfgs_bfloat16": {"device_lbfgs": True, "storage": "bfloat16"},
    "device_lbfgs_float16": {"device_lbfgs": True, "storage": "float16"},
    # issue #43: one pass per evaluation serving every model of a block (aflite.core.backends.onepass)
    "device_onepass": {"device_onepass": True},
    "device_onepass_bfloat16": {"device_onepass": True, "storage": "bfloat16"},
}
PHI_MODES: dict[str, PhiMode] = {
    "float32": {"pipelined": False},  # the path every device took before pipelining became the CUDA default
    "float32_pipelined": {"pipelined": True},
    "bfloat16_pipelined": {"pipelined": True, "precision": "bfloat16"},
    "float16_pipelined": {"pipelined": True, "precision": "float16"},
    "bfloat16_pipelined_budget4x": {"pipelined": True, "precision": "bfloat16", "budget_factor": 4},
    # issue #43: fewer, larger batches; TF32 matmuls; weights stored in bfloat16 (no autocast casts per op)
    "float32_pipelined_budget4x": {"pipelined": True, "budget_factor": 4},
    "tf32_pipelined_budget4x": {"pipelined": True, "budget_factor": 4, "tf32": True},
    "bfloat16_weights_pipelined_budget4x": {"pipelined": True, "budget_factor": 4, "weights": "bfloat16"},
}


def device_benchmark(
    device: str = "cuda",
    *,
    tiny: bool = False,
    data_dir: str | os.PathLike[str] | None = None,
    model_path: str | os.PathLike[str] | None = None,
    sections: tuple[str, ...] = DEFAULT_SECTIONS,
    profile: bool = False,
    seed: int = 0,
    out_json: str | os.PathLike[str] | None = None,
    log: Callable[[str], None] | None = None,
    sizes: Mapping[str, object] | None = None,
    kept_sets: bool = True,
) -> JSON:
    """Run the ``sections`` on ``device`` and return their figures (see the module docstring). ``data_dir`` holds
    ``snli/train_100k.tsv.gz`` (default ``../shared/data`` beside the checkout, or the bundled SNLI sample when
    ``tiny``); ``model_path`` is the text model (default the bundled MiniLM). With ``out_json`` the results so far
    are written there (atomically) after every section. ``sizes`` overrides entries of :data:`FULL` / :data:`TINY`
    (``filter_modes``: the names of :data:`FILTER_MODES` to run, None for all). ``profile=True`` runs the ``profile``
    section first (also when ``sections`` does not name it); ``kept_sets=False`` skips the ``phi`` section's
    kept-set comparisons (timing only: what fits a short device call)."""
    if profile:
        sections = ("profile", *(s for s in sections if s != "profile"))
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise ParameterError(f"unknown bench section(s) {', '.join(unknown)}: choose from {', '.join(SECTIONS)}")
    if resolve_device(device) == "cpu":
        raise ParameterError("bench --device measures a PyTorch device: cuda, cuda:N or torch-cpu (not cpu)")
    torch = torch_module()
    say = log or (lambda _msg: None)
    unknown = [k for k in (sizes or {}) if k not in FULL]
    if unknown:
        raise ParameterError(f"unknown bench size(s) {', '.join(unknown)}: choose from {', '.join(FULL)}")
    size = cast(Sizes, {**(TINY if tiny else FULL), **(sizes or {})})  # keys checked above
    res: JSON = {"device": _describe(torch, device), "tiny": tiny, "sizes": size, "seed": seed,
                           "versions": {**versions(), "torch": torch.__version__},
                           "load_average_at_start": list(os.getloadavg()),
                           "note": "figures of a tiny run say nothing about speed"}
    data_file = _data_file(data_dir, tiny)

    def checkpoint(part: JSON) -> None:  # a section's figures so far, kept if a time limit cuts it
        res["profile"] = part
        if out_json is not None:
            write_json(Path(out_json), res)

    runners: dict[str, Callable[[], JSON]] = {
        "roofline": lambda: roofline(torch, device, size["gemm"], size["gemm_repeats"]),
        "profile": lambda: profile_section(device, data_file, size, model_path, seed, say, checkpoint),
        "phi": lambda: phi_section(device, data_file, size, model_path, seed, say, kept_sets=kept_sets),
        "filter": lambda: filter_section(device, size, seed, say),
        "warmup": lambda: warmup_section(device, data_file, size, model_path, seed, say),
    }
    for name in sections:
        say(f"{name} ...")
        t0 = time.perf_counter()
        try:
            res[name] = runners[name]()
        except Exception as exc:  # one failed section is reported, the next ones still run
            res[name] = {**res.get(name, {}), "error": f"{type(exc).__name__}: {exc}"}  # what it had kept
        res[name]["section_seconds"] = round(time.perf_counter() - t0, 2)
        if out_json is not None:
            write_json(Path(out_json), res)
    res["load_average_at_end"] = list(os.getloadavg())
    if out_json is not None:
        write_json(Path(out_json), res)
    return res


# ----------------------------------------------------------------------------------------------- helpers
def _describe(torch: Any, device: str) -> JSON:
    dev = torch.device(torch_device(device))
    out: JSON = {"name": device, "torch_device": str(dev), "cpus": os.cpu_count()}
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        out.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 2**30, 1), cuda=torch.version.cuda,
                   capability=f"{p.major}.{p.minor}", tf32_matmul_default=bool(torch.backends.cuda.matmul.allow_tf32))
    return out


def _sync(torch: Any, device: str) -> None:
    if torch.device(torch_device(device)).type == "cuda":
        torch.cuda.synchronize()


def _data_file(data_dir: str | os.PathLike[str] | None, tiny: bool) -> Path:
    if data_dir is not None:
        path = Path(data_dir) / "snli" / "train_100k.tsv.gz"
    else:
        shared = Path(__file__).resolve().parents[4] / "shared" / "data" / "snli" / "train_100k.tsv.gz"
        if tiny or not shared.is_file():
            return demo_dataset_path()
        path = shared
    if not path.is_file():
        raise ParameterError(f"{path}: the SNLI train_100k file is not there (--data-dir)")
    return path


def _pairs(data_file: Path, rows: int | None) -> tuple[list[str], list[str], np.ndarray]:
    ds = data.load_dataset(data_file)
    n = len(ds) if rows is None else min(rows, len(ds))
    assert ds.texts_b is not None
    return list(ds.texts_a[:n]), list(ds.texts_b[:n]), np.asarray(ds.labels[:n])


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


def _agreement(keep: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    return {"kept_jaccard": round(_jaccard(keep, ref), 4), "removed_jaccard": round(_jaccard(~keep, ~ref), 4)}


# ----------------------------------------------------------------------------------------------- sections
def roofline(torch: Any, device: str, size: int, repeats: int) -> JSON:
    """Best-of-``repeats`` TFLOP/s of one size³ GEMM per dtype (TF32: float32 with tensor cores allowed, on a GPU)
    and the GB/s of copying 256 MiB (read + write)."""
    dev = torch.device(torch_device(device))
    cuda = dev.type == "cuda"
    out: JSON = {"gemm_size": size, "tflops": {}}
    kinds = [("float32", torch.float32, False), ("bfloat16", torch.bfloat16, False), ("float16", torch.float16, False)]
    if cuda:
        kinds.insert(1, ("tf32", torch.float32, True))
    for name, dtype, tf32 in kinds:
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            a = torch.randn(size, size, device=dev).to(dtype)
            b = torch.randn(size, size, device=dev).to(dtype)
            for _ in range(2):
                a @ b
            best = float("inf")
            for _ in range(repeats):
                _sync(torch, device)
                t0 = time.perf_counter()
                a @ b
                _sync(torch, device)
                best = min(best, time.perf_counter() - t0)
            out["tflops"][name] = float(f"{2.0 * size**3 / best / 1e12:.4g}")
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
    x = torch.empty(64 << 20, dtype=torch.float32, device=dev)
    x.clone()
    _sync(torch, device)
    t0 = time.perf_counter()
    for _ in range(5):
        x.clone()
    _sync(torch, device)
    out["copy_gb_per_s"] = round(5 * 2 * x.numel() * 4 / (time.perf_counter() - t0) / 1e9, 1)
    return out


def _kept(X: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    """AFLite's kept set on a Φ (Table 8 scaled, the CPU path: the reference, and the device stays free)."""
    af = AFLite(**scaled_defaults(len(y)), random_state=seed, device="cpu")  # type: ignore[arg-type]
    return np.asarray(af.fit(X, y).keep_mask_)


def phi_section(device: str, data_file: Path, sizes: Sizes, model_path: Any, seed: int,
                say: Callable[[str], None], kept_sets: bool = True) -> JSON:
    """Frozen MiniLM Φ in each of :data:`PHI_MODES`: pairs/s, cosine to float32's, kept-set Jaccard."""
    torch = torch_module()
    a, b, y = _pairs(data_file, sizes["phi_rows"])
    out: JSON = {"pairs": len(a), "data": str(data_file), "token_budget": sizes["token_budget"],
                           "modes": {}}
    X: dict[str, np.ndarray] = {}
    modes = sizes["phi_modes"] or tuple(PHI_MODES)
    warm = min(64, len(a))
    for name in modes:
        kw = PHI_MODES[name]
        factor = kw.get("budget_factor", 1)
        tf32, weights = kw.get("tf32", False), kw.get("weights")
        budget = factor * sizes["token_budget"] if kw.get("pipelined") else None
        feat = MiniLMFeaturizer(model_path=model_path, device=device, backend="torch", show_progress=False,
                                pipelined=kw.get("pipelined"), precision=kw.get("precision"), token_budget=budget)
        feat.transform(a[:warm], b[:warm])  # load the model and warm the kernels up
        if weights is not None:  # the frozen network's weights themselves in that type (pooling stays float32)
            feat.loaded()[1].to(getattr(torch, weights))
            feat.transform(a[:warm], b[:warm])
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32 or before
        try:
            _sync(torch, device)
            t0 = time.perf_counter()
            X[name] = feat.transform(a, b)
            _sync(torch, device)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
        secs = time.perf_counter() - t0
        entry: JSON = {"seconds": round(secs, 3), "pairs_per_s": round(len(a) / secs, 1)}
        if name != "float32":
            cos = (X[name] * X["float32"]).sum(1)
            entry["cosine_to_float32"] = {"mean": round(float(cos.mean()), 6), "min": round(float(cos.min()), 6)}
        out["modes"][name] = entry
        say(f"  Φ {name}: {entry['pairs_per_s']:.0f} pairs/s")
        del feat
    if not kept_sets:
        return out
    say("  kept sets on each Φ ...")
    ref = _kept(X["float32"], y, seed)
    noise = _kept(X["float32"] * np.float32(1 + 1e-6), y, seed)
    out["kept_set"] = {"noise_floor_jaccard": _agreement(noise, ref)["kept_jaccard"],
                       **{name: _agreement(_kept(v, y, seed), ref)["kept_jaccard"]
                          for name, v in X.items() if name != "float32"}}
    return out


def filter_section(device: str, sizes: Sizes, seed: int, say: Callable[[str], None]) -> JSON:
    """The complete SNLI-shaped filter on the CPU path and in each of :data:`FILTER_MODES` on ``device``."""
    torch = torch_module()
    cuda = torch.device(torch_device(device)).type == "cuda"
    data = make_snli_like(sizes["filter_n"], sizes["filter_d"], random_state=seed)
    params = scaled_defaults(len(data.y))  # Table 8 (exactly, at SNLI's size)
    out: JSON = {"data": data.description, "parameters": params, "runs": {}}
    keeps: dict[str, np.ndarray] = {}
    modes = FILTER_MODES if sizes["filter_modes"] is None else {k: FILTER_MODES[k] for k in sizes["filter_modes"]}
    out["agreement_bar"] = {"kept_jaccard": KEPT_JACCARD_FLOOR, "source": "aflitebench.filter_agreement"}
    for name, kw in {"cpu": None, "cpu_other_seed": None, **modes}.items():
        model: Any = "logistic" if kw is None else FastLogisticEnsemble(device=device, **kw)
        run_seed = seed + 1 if name == "cpu_other_seed" else seed  # the floor: AFLite's own randomness
        af = AFLite(**params, random_state=run_seed, device="cpu", model=model,  # type: ignore[arg-type]
                    max_iterations=sizes.get("filter_max_phases"))
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        _sync(torch, device)
        t0 = time.perf_counter()
        af.fit(data.X, data.y)
        _sync(torch, device)
        wall = time.perf_counter() - t0
        keeps[name] = np.asarray(af.keep_mask_)
        run: JSON = {"wall_seconds": round(wall, 2), "phases": af.n_iterations_,
                               "kept": int(keeps[name].sum()), "stop_reason": af.stop_reason_,
                               "seconds_per_phase": round(wall / max(1, af.n_iterations_), 3)}
        if cuda and kw is not None:
            run["device_peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        if name != "cpu":
            run["vs_cpu"] = _agreement(keeps[name], keeps["cpu"])
            run["agrees"] = run["vs_cpu"]["kept_jaccard"] >= KEPT_JACCARD_FLOOR
            if "cpu_other_seed" in keeps and name != "cpu_other_seed":  # this size's own floor, measured beside
                floor = _agreement(keeps["cpu_other_seed"], keeps["cpu"])["kept_jaccard"]
                run["at_seed_floor"] = run["vs_cpu"]["kept_jaccard"] >= floor
        if name not in ("cpu", "cpu_other_seed", "classic") and "classic" in keeps:
            run["vs_classic"] = _agreement(keeps[name], keeps["classic"])
        out["runs"][name] = run
        say(f"  filter {name}: {wall:.1f} s, {af.n_iterations_} phases, kept {run['kept']}")
    return out


def profile_section(device: str, data_file: Path, sizes: Sizes, model_path: Any, seed: int,
                    say: Callable[[str], None],
                    checkpoint: Callable[[JSON], None] = lambda _part: None) -> JSON:
    """:func:`~aflitebench.bench_profile.phi_profile` on the first ``profile_rows`` pairs and
    :func:`~aflitebench.bench_profile.filter_profile` on the ``filter`` section's features per mode, handing
    the figures so far to ``checkpoint`` after each part."""
    a, b, _ = _pairs(data_file, sizes["profile_rows"])
    out: JSON = {"phi": phi_profile(device, a, b, model_path=model_path,
                                              token_budget=sizes["token_budget"])}
    say(f"  Φ profile: {out['phi']['verdict']}")
    out["filter"] = {}
    checkpoint(out)
    feats = make_snli_like(sizes["filter_n"], sizes["filter_d"], random_state=seed)
    for name in sizes["profile_filter_modes"]:
        prof = filter_profile(device, feats.X, feats.y, scaled_defaults(len(feats.y)), seed=seed,
                              mode=FILTER_MODES[name])
        out["filter"][name] = prof
        say(f"  filter profile {name}: {prof['wall_seconds_profiled']} s, device {prof['device_seconds']} s, "
            f"host {prof['host_seconds']} s")
        checkpoint(out)
    return out


def warmup_section(device: str, data_file: Path, sizes: Sizes, model_path: Any, seed: int,
                   say: Callable[[str], None]) -> JSON:
    """``aflite run DATA --featurizer warmup`` end to end (probe off), measured path vs the opt-in one."""
    base: JSON = {"device": device, "backend": "torch"}
    if model_path is not None:
        base["model_path"] = str(model_path)
    if sizes["warmup_max_steps"] is not None:
        base["max_steps"] = sizes["warmup_max_steps"]
    variants = {
        "measured": (base, None),
        "opt_in": ({**base, "precision": "bfloat16", "pipelined": True, "token_budget": sizes["token_budget"]},
                   AFLite(random_state=seed, model=FastLogisticEnsemble(device=device, device_lbfgs=True))),
        # issue #43: float32 (bfloat16 was slower on the H100), fine-tuning prefetched, embedding pipelined with
        # the token budget, the filter's one-pass ensemble
        "fast_float32": ({**base, "pipelined": True, "token_budget": sizes["token_budget"]},
                         AFLite(random_state=seed, model=FastLogisticEnsemble(device=device, device_onepass=True))),
    }
    if sizes["warmup_max_phases"] is not None:  # tiny runs: the end-to-end path, not the filter's length
        variants = {k: (f, (af or AFLite(random_state=seed, device=device)).set_params(
            max_iterations=sizes["warmup_max_phases"])) for k, (f, af) in variants.items()}
    out: JSON = {"data": str(data_file), "probe": False, "runs": {}}
    keeps: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory(prefix="aflite-bench-warmup-") as tmp:
        src = data_file
        if sizes["warmup_rows"] is not None:  # the first rows only (tiny runs)
            src = Path(tmp) / "data.tsv"
            a, b, y = _pairs(data_file, sizes["warmup_rows"])
            src.write_text("premise\thypothesis\tlabel\n" + "".join(f"{p}\t{h}\t{lab}\n" for p, h, lab in
                                                                    zip(a, b, y, strict=True)), encoding="utf-8")
        for name, (fopts, af) in variants.items():
            t0 = time.perf_counter()
            params = af if af is not None else {"device": device, "random_state": seed}  # an AFLite: its own
            result = run_dataset(src, Path(tmp) / name, featurizer="warmup", show_progress=False, probe=False,
                                 featurizer_options=fopts, params=params)
            wall = time.perf_counter() - t0
            timings = result.body.timings or {}
            keeps[name] = np.asarray(result.keep)
            out["runs"][name] = {"wall_seconds": round(wall, 2), "featurizer_options": fopts,
                                 **{k: round(float(v), 2) for k, v in timings.items()
                                    if k.endswith("_seconds")}, "kept": int(keeps[name].sum())}
            say(f"  warm-up run {name}: {wall:.1f} s")
    out["opt_in_vs_measured"] = _agreement(keeps["opt_in"], keeps["measured"])
    out["fast_float32_vs_measured"] = _agreement(keeps["fast_float32"], keeps["measured"])
    return out


def format_device_report(res: JSON) -> str:
    """A few lines per section for the terminal (the JSON holds everything)."""
    dev = res["device"]
    lines = [f"device benchmark on {dev.get('gpu', dev['torch_device'])}{' (tiny)' if res['tiny'] else ''}"]
    r = res.get("roofline", {})
    if "tflops" in r:
        lines.append("  GEMM TFLOP/s: " + ", ".join(f"{k} {v}" for k, v in r["tflops"].items())
                     + f"; copy {r['copy_gb_per_s']} GB/s")
    pr = res.get("profile", {})
    if "phi" in pr:
        ph = pr["phi"]
        lines.append("  Φ profile (serial, s): " + ", ".join(f"{k} {v['seconds']}" for k, v in
                                                          ph["serial"]["steps"].items())
                     + f"; tokenising {ph['tokenise_all']['pairs_per_cpu_s']} pairs per CPU second")
        lines.append(f"  Φ profile: {ph['verdict']}")
    for name, e in pr.get("filter", {}).items():
        lines.append(f"  filter profile {name}: {e['wall_seconds_profiled']} s = device {e['device_seconds']} s "
                     f"+ host {e['host_seconds']} s over {e['phases']} phases")
    p = res.get("phi", {})
    for name, e in p.get("modes", {}).items():
        cos = e.get("cosine_to_float32", {}).get("mean")
        lines.append(f"  Φ {name}: {e['pairs_per_s']} pairs/s" + ("" if cos is None else f", cosine {cos}"))
    if "kept_set" in p:
        lines.append(f"  Φ kept-set Jaccard to float32: {p['kept_set']}")
    for name, e in res.get("filter", {}).get("runs", {}).items():
        lines.append(f"  filter {name}: {e['wall_seconds']} s, {e['phases']} phases"
                     + (f", vs CPU {e['vs_cpu']}" if "vs_cpu" in e else ""))
    for name, e in res.get("warmup", {}).get("runs", {}).items():
        lines.append(f"  warm-up run {name}: {e['wall_seconds']} s")
    for name in SECTIONS:
        if "error" in res.get(name, {}):
            lines.append(f"  {name}: FAILED {res[name]['error']}")
    return "\n".join(lines)
