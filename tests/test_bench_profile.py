"""bench.py --profile (issue #43) on torch-cpu: the Φ steps cover every batch and add up to the serial pass, the
tokeniser is timed per CPU second, and the filter's per-phase split covers every phase without changing the run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from aflitebench.cli import main

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import make_tiny_model

    torch.manual_seed(0)
    return make_tiny_model(tmp_path_factory.mktemp("profile") / "bert")


def _pairs(n: int) -> tuple[list[str], list[str]]:
    from aflite.data import load_dataset
    from aflite.data.text import demo_dataset_path

    ds = load_dataset(demo_dataset_path())
    assert ds.texts_b is not None
    return list(ds.texts_a[:n]), list(ds.texts_b[:n])


def test_phi_profile_times_every_step_of_every_batch(tiny_bert: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aflitebench.bench_profile import PHI_STEPS, phi_profile

    monkeypatch.setenv("AFLITE_NUM_THREADS", "1")
    a, b = _pairs(60)
    p = phi_profile("torch-cpu", a, b, model_path=tiny_bert, token_budget=256)
    steps = p["serial"]["steps"]
    assert list(steps) == list(PHI_STEPS)
    # every step timed in every batch (its per-batch median exists); a step of a few microseconds per batch (h2d and
    # d2h on the CPU) may sum to 0.0 at 4 decimals, so only the forward pass must take measurable time
    assert all(s["median_ms"] is not None and s["seconds"] >= 0 for s in steps.values())
    assert steps["forward"]["seconds"] > 0
    # the steps are inside the pass (each step is rounded to 4 decimals, the pass to 3: their sum may pass it by that)
    assert sum(s["seconds"] for s in steps.values()) <= p["serial"]["seconds"] + 5e-4 + 5e-5 * len(steps)
    assert abs(sum(s["share"] for s in steps.values()) - 1) < 1e-3
    assert p["batches"]["count"] >= 60 * p["tokens_per_pair"]["mean"] / 256  # the budget cut the batches
    assert 0 <= p["batches"]["padding_share"] < 0.5  # sorted by length: little padding
    t = p["tokenise_all"]
    assert t["pairs_per_s"] > 0 and t["pairs_per_cpu_s"] > 0
    w = p["tokenise_workers"]  # the pipelined path's tokenising, shared under a lock and one copy per worker
    assert w["workers"] >= 1 and all(w[k]["pairs_per_s"] > 0 for k in ("shared_lock", "per_worker"))
    assert 0 < p["serial"]["busy_fraction"] <= 1 and p["pipelined"]["pairs_per_s"] > 0
    assert p["cores_to_feed_forward"] == pytest.approx(p["forward_only_pairs_per_s"] / t["pairs_per_cpu_s"], rel=1e-2)
    assert "largest step" in p["verdict"]


def test_filter_profile_splits_every_phase_and_keeps_the_same_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from aflite.core.ensemble import FastLogisticEnsemble
    from aflite.core.filter import AFLite
    from aflitebench.bench_profile import filter_profile
    from aflitebench.shapes import make_snli_like

    monkeypatch.setenv("AFLITE_NUM_THREADS", "1")
    d = make_snli_like(500, 40, random_state=0)
    params = {"n_partitions": 6, "train_size": 200, "slice_size": 40, "target_size": 300, "threshold": 0.6}
    prof = filter_profile("torch-cpu", d.X, d.y, params, seed=0)
    plain = AFLite(**params, random_state=0, device="cpu", model=FastLogisticEnsemble(device="torch-cpu"))
    plain.fit(d.X, d.y)
    assert prof["kept"] == int(np.asarray(plain.keep_mask_).sum())  # profiling changes nothing
    rows = prof["per_phase"]
    assert [r["phase"] for r in rows] == list(range(prof["phases"])) and prof["phases"] == plain.n_iterations_
    assert sum(r["wall_s"] for r in rows) + prof["after_last_phase_s"] == pytest.approx(
        prof["wall_seconds_profiled"], abs=0.01)
    assert 0 <= prof["after_last_phase_s"] < prof["wall_seconds_profiled"]
    assert all(0 < r["device_s"] <= r["wall_s"] * 1.05 for r in rows)  # torch's operators ran in every phase
    assert prof["device_means"] == "self CPU time of torch operators"


def test_bench_profile_flag_runs_the_profile_section_only_by_default(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    from aflitebench import bench_device

    seen: dict[str, object] = {}

    def fake(device: str, **kw: object) -> dict[str, object]:
        seen.update(kw, device=device)
        return {"device": {"torch_device": "cpu"}, "tiny": True}

    monkeypatch.setattr(bench_device, "device_benchmark", fake)
    assert main(["--device", "torch-cpu", "--profile", "--quiet", "--json"]) == 0
    assert seen["sections"] == () and seen["profile"] is True and seen["kept_sets"] is False
    assert main(["--device", "torch-cpu", "--profile", "--sections", "phi", "--kept-sets", "--quiet"]) == 0
    assert seen["sections"] == ("phi",) and seen["kept_sets"] is True
    assert main(["--device", "torch-cpu", "--quiet"]) == 0
    assert seen["sections"] == ("roofline", "phi", "filter", "warmup") and seen["kept_sets"] is True


@pytest.mark.slow
def test_device_bench_profile_section_on_torch_cpu(tiny_bert: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from aflitebench.bench_device import device_benchmark, format_device_report

    monkeypatch.setenv("AFLITE_NUM_THREADS", "1")
    small = {"profile_rows": 40, "filter_n": 500, "filter_d": 40, "profile_filter_modes": ("classic",)}
    res = device_benchmark("torch-cpu", tiny=True, model_path=tiny_bert, sections=(), profile=True, sizes=small,
                           out_json=tmp_path / "b.json")
    assert "error" not in res["profile"], res["profile"]
    assert set(res["profile"]["filter"]) == {"classic"} and res["profile"]["phi"]["pairs"] == 40
    assert json.loads((tmp_path / "b.json").read_text())["profile"]["phi"]["serial"]["steps"]
    assert "filter profile classic" in format_device_report(res)
