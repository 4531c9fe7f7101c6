"""The benchmark harness (benchmarks/aflitebench, ``python benchmarks/bench.py``; aflite's ``bench`` until #58):
the scale benchmark on a tiny ImageNet-shaped problem, the default benchmark's sizes and checks, the device
benchmark on torch-cpu."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from aflitebench.cli import main
from aflitebench.shapes import write_imagenet_like


def test_imagenet_like_features_are_written_without_loading_them(tmp_path):
    path = tmp_path / "f.npy"
    y = write_imagenet_like(str(path), n=3000, d=32, n_classes=40, random_state=1)
    X = np.load(path, mmap_mode="r")
    assert X.shape == (3000, 32) and X.dtype == np.float32 and len(y) == 3000
    assert len(np.unique(y)) == 40
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_scale_benchmark_reports_devices_and_cluster_scaling(tmp_path, capsys):
    pytest.importorskip("dask.distributed")
    code = main(["--shape", "imagenet", "--scale", "0.003", "--dim", "16", "--n-classes", "20",
                 "--measure-partitions", "4", "--devices", "cpu", "--cluster-workers", "1,2",
                 "--workdir", str(tmp_path), "--json"])
    assert code == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n"] == round(1_281_167 * 0.003) and res["parameters"]["n_partitions"] == 64
    cpu = res["phase"]["cpu"]
    assert cpu["phase_seconds_scaled_to_m"] == pytest.approx(cpu["phase_seconds_measured"] * 16)
    assert cpu["peak_anon_gib"] > 0
    assert 0.0 < cpu["heldout_accuracy"] <= 1.0
    for w in ("1", "2"):
        assert res["cluster"][w]["identical_to_one_process"] is True


def test_tiny_shrinks_the_default_benchmark_too(monkeypatch):
    """#49: `bench.py --tiny` (no --device) ran the whole 550,152 x 768 benchmark (7 min here); it now runs the
    default benchmark at TINY_CPU's sizes, and a size given on the command line stays as given."""
    from aflitebench import cli as cli_bench

    seen: list[dict[str, int]] = []

    def fake(**kw):
        seen.append({k: kw[k] for k in ("n", "dim", "reference_partitions")})
        raise SystemExit(0)  # the sizes are what this test is about, not the run

    monkeypatch.setattr("aflitebench.bench.run_benchmark", fake)
    for argv in (["--tiny", "--quiet"], ["--tiny", "--n", "9000", "--quiet"], ["--quiet"]):
        with pytest.raises(SystemExit):
            main(argv)
    assert seen == [cli_bench.TINY_CPU, {**cli_bench.TINY_CPU, "n": 9000},
                    {"n": 550_152, "dim": 768, "reference_partitions": 8}]


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_bench_times_both_solvers_on_the_same_partitions(capsys):
    """`benchmarks/bench.py` on a small SNLI-shaped problem: both solvers, their ratio and agreement, the reference's
    agreement, and where the complete filter's time went."""
    code = main(["--n", "3000", "--dim", "48", "--reference-partitions", "1", "--complete-solvers", "both",
                 "--json"])
    assert code == 0
    res = json.loads(capsys.readouterr().out)
    phase = res["phase"]
    assert set(phase["solvers"]) == {"fast", "previous"} and phase["solver"] == "fast"
    prev = phase["solvers"]["previous"]
    assert prev["ratio_to_fast"] == pytest.approx(prev["seconds"] / phase["solvers"]["fast"]["seconds"])
    assert prev["agreement_with_fast"]["predictions"] > 0.99
    for s in ("fast", "previous"):
        assert 0.9 < phase["solvers"][s]["agreement_with_reference"]["predictions"] <= 1.0
        assert phase["solvers"][s]["thread_seconds"]["passes"] > 0
    assert phase["solvers"]["fast"]["thread_seconds"]["prediction"] > 0  # own-row passes: a final prediction pass
    comp = res["complete"]
    assert comp["parameters"]["train_size"] == round(50_000 * 3000 / 550_152)
    for s in ("fast", "previous"):
        run = comp["solvers"][s]
        assert run["n_iterations"] == len(run["phases"]) >= 1
        first = run["phases"][0]
        assert {"fit", "fit_passes", "fit_line_search", "fit_prediction", "partitions_and_scoring",
                "selection_and_bookkeeping"} <= set(first)
        assert run["phase_totals_seconds"]["fit"] <= run["wall_seconds"]
    assert 0.0 <= comp["solvers"]["previous"]["agreement_with_fast"]["removed_jaccard"] <= 1.0


def test_bench_rejects_a_dimension_too_small_for_the_synthetic_data(capsys):
    assert main(["--n", "3000", "--dim", "8", "--no-complete"]) == 2
    err = capsys.readouterr().err
    assert "--dim 8" in err and "Traceback" not in err


@pytest.mark.parametrize("case", ["truncated", "misaligned", "missing"])
def test_bench_checks_real_features_before_any_work(tmp_path, capsys, monkeypatch, case):
    import aflitebench.bench

    ran: list[str] = []
    monkeypatch.setattr(aflitebench.bench, "make_snli_like", lambda *a, **k: ran.append("synthetic"))
    X = tmp_path / "X.npy"
    np.save(X, np.zeros((50, 4), np.float32))
    labels = tmp_path / "y.csv"
    labels.write_text("label\n" + "".join(f"{'ab'[i % 2]}\n" for i in range(50 if case != "misaligned" else 40)))
    if case == "truncated":
        X.write_bytes(X.read_bytes()[:100])
    if case == "missing":
        X.unlink()
    code = main(["--real-features", str(X), "--real-labels", str(labels), "--quiet"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith("bench: error: "), err
    assert str(X) in err[0]
    if case == "misaligned":
        assert str(labels) in err[0]
    assert ran == []


# --------------------------------------------------------------------- bench --device (issue #31), on torch-cpu
@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_device_bench_runs_every_section_on_torch_cpu(tmp_path, monkeypatch, minilm_model_path):
    """The GPU benchmark's code, end to end on the CPU with a tiny BERT and tiny sizes: every section present and
    error-free, the resident filter keeps the classic set (bit for bit on one device), the JSON kept up to date."""
    from tiny_models import make_tiny_model

    monkeypatch.setenv("AFLITE_NUM_THREADS", "1")  # tiny problems: torch's intra-op threads only wait on each other

    from aflitebench.bench_device import device_benchmark

    model = make_tiny_model(tmp_path / "bert")
    small = {"gemm": 64, "phi_rows": 40, "filter_n": 700, "filter_d": 40, "warmup_rows": 80,
             "filter_modes": ("classic", "resident", "device_lbfgs_bfloat16", "device_onepass"),
             "phi_modes": None, "filter_max_phases": None}  # every Φ mode and whole filters (a tiny BERT is fast)
    res = device_benchmark("torch-cpu", tiny=True, model_path=model, sizes=small, out_json=tmp_path / "b.json")
    assert json.loads((tmp_path / "b.json").read_text())["filter"]["runs"].keys() == res["filter"]["runs"].keys()
    for section in ("roofline", "phi", "filter", "warmup"):
        assert "error" not in res[section], res[section]
    assert set(res["roofline"]["tflops"]) == {"float32", "bfloat16", "float16"}
    modes = res["phi"]["modes"]
    assert set(modes) == {"float32", "float32_pipelined", "bfloat16_pipelined", "float16_pipelined",
                          "bfloat16_pipelined_budget4x", "float32_pipelined_budget4x", "tf32_pipelined_budget4x",
                          "bfloat16_weights_pipelined_budget4x"}
    assert modes["bfloat16_weights_pipelined_budget4x"]["cosine_to_float32"]["mean"] > 0.99
    assert modes["float32_pipelined"]["cosine_to_float32"]["min"] > 0.99999
    assert modes["bfloat16_pipelined"]["cosine_to_float32"]["mean"] > 0.99
    runs = res["filter"]["runs"]
    assert set(runs) == {"cpu", "cpu_other_seed", "classic", "resident", "device_lbfgs_bfloat16", "device_onepass"}
    assert runs["resident"]["vs_classic"] == {"kept_jaccard": 1.0, "removed_jaccard": 1.0}
    assert 0 < runs["device_lbfgs_bfloat16"]["vs_cpu"]["kept_jaccard"] <= 1
    bar = res["filter"]["agreement_bar"]["kept_jaccard"]
    assert all(r["agrees"] == (r["vs_cpu"]["kept_jaccard"] >= bar) for k, r in runs.items() if k != "cpu")
    w = res["warmup"]
    assert set(w["runs"]) == {"measured", "opt_in", "fast_float32"}
    assert w["runs"]["opt_in"]["featurizer_options"]["precision"] == "bfloat16"
    assert w["runs"]["fast_float32"]["featurizer_options"]["pipelined"] is True
    assert 0 <= w["fast_float32_vs_measured"]["kept_jaccard"] <= 1
    assert all(r["kept"] > 0 and r["featurize_seconds"] > 0 for r in w["runs"].values())


def test_device_bench_cli_refuses_the_numpy_cpu_and_unknown_sections(capsys):
    assert main(["--device", "cpu"]) == 2
    assert "torch-cpu" in capsys.readouterr().err
    assert main(["--device", "torch-cpu", "--sections", "roofline,speed"]) == 2
    assert "speed" in capsys.readouterr().err


def test_device_bench_cli_roofline(tmp_path, capsys):
    pytest.importorskip("torch")
    assert main(["--device", "torch-cpu", "--tiny", "--sections", "roofline", "--json", "--quiet",
                 "--out", str(tmp_path / "o")]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["roofline"]["tflops"]["float32"] > 0 and res["device"]["torch_device"] == "cpu"
    assert (tmp_path / "o" / "device_bench.json").is_file() and (tmp_path / "o" / "results.json").is_file()


def test_bench_checks_and_files_are_library_calls(tmp_path: Path) -> None:
    """The benchmark refuses unusable sizes itself (not only the CLI), and save_bench writes what --out gets
    (moved here from tests/test_commands_library.py with the harness, issue #58)."""
    from aflite.errors import ParameterError
    from aflitebench.bench import run_benchmark
    from aflitebench.cli import save_bench

    with pytest.raises(ParameterError, match="at least 100 rows"):
        run_benchmark(n=50, dim=64)
    with pytest.raises(ParameterError, match="at least 40 dimensions"):
        run_benchmark(n=1000, dim=8)
    with pytest.raises(ParameterError, match="go together"):
        run_benchmark(n=1000, dim=64, features="f.npy")
    save_bench({"seed": 4, "phase": {"x": 1}}, "report text\n", tmp_path)
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["command"] == "bench" and res["seed"] == 4 and res["phase"] == {"x": 1}
    assert "report text" in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize("where", ["a_file", "a_file/sub", "full"])
def test_out_is_checked_before_any_work(tmp_path, capsys, monkeypatch, where):
    """--out that is a file, lies under a file or is a non-empty folder (without --overwrite) is refused with one
    line and exit 2 before the benchmark starts; nothing is touched."""
    ran: list[str] = []
    monkeypatch.setattr("aflitebench.bench.run_benchmark", lambda **kw: ran.append("run"))
    (tmp_path / "a_file").write_text("precious\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine\n")
    code = main(["--tiny", "--quiet", "--out", str(tmp_path / where)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith("bench: error: "), err
    assert ran == [] and (tmp_path / "a_file").read_text() == "precious\n"
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == ["keep.txt"]
    assert not (tmp_path / "a_file").is_dir()


ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide" / "bench.md"


def _guide_commands() -> list[list[str]]:
    """Every ``python benchmarks/bench.py …`` line of the bench guide's shell blocks, as argv after the script."""
    from docs_blocks import SHELLS, blocks, shell_commands

    return [c.argv[2:] for b in blocks(GUIDE) if b.lang in SHELLS for c in shell_commands(b)
            if c.argv[:2] == ["python", "benchmarks/bench.py"]]


def test_every_command_of_the_bench_guide_parses_with_the_harness() -> None:
    """The guide's commands are the harness's (no abbreviations: argparse's prefix matching off), as
    tests/test_docs_exec.py holds aflite's."""
    from aflitebench.cli import build_parser

    parser = build_parser()
    parser.allow_abbrev = False
    commands = _guide_commands()
    assert len(commands) >= 8 and ["--tiny", "--out", "bench-tiny"] in commands
    for argv in commands:
        parser.parse_args(argv)  # a usage error exits 2 and fails the test


@pytest.mark.slow  # a few seconds of benchmark plus a fresh interpreter
def test_the_guides_tiny_run_writes_its_folder(tmp_path: Path) -> None:
    """The guide's runnable line, as a user runs it: the script by path from the checkout's root, the files in
    its --out."""
    import os
    import subprocess
    import sys

    argv = ["--tiny", "--out", str(tmp_path / "bench-tiny")]  # the guide's line, its folder in tmp_path
    proc = subprocess.run([sys.executable, "benchmarks/bench.py", *argv, "--quiet"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads((tmp_path / "bench-tiny" / "results.json").read_text())
    assert res["command"] == "bench" and res["argv"] == [*argv, "--quiet"]
    assert (res["phase"]["n"], res["phase"]["d"]) == (6000, 64)  # --tiny's sizes, not the 550,152 x 768 default
    assert res["phase"]["fast_phase_seconds"] > 0 and res["complete"]["wall_seconds"] > 0
    assert "one filtering phase" in (tmp_path / "bench-tiny" / "summary.md").read_text()
