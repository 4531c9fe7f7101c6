"""aflite.commands: each command as a library call writes the same files, and raises the same errors, as the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from aflite.cli import main
from aflite.errors import OutputError


def test_embed_text_from_python_writes_what_the_cli_writes(tmp_path: Path, small_snli: Path) -> None:
    from aflite.commands.embed import embed

    res = embed(small_snli, tmp_path / "lib", featurizer="ngram", view="hypothesis", seed=3, show_progress=False)
    assert main(["embed", str(small_snli), "--out", str(tmp_path / "cli"), "--featurizer", "ngram", "--view",
                 "hypothesis", "--seed", "3", "--quiet"]) == 0
    for name in ("features.npy", "ids.txt", "labels.txt"):
        assert (tmp_path / "lib" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    lib = json.loads((tmp_path / "lib" / "results.json").read_text())
    cli = json.loads((tmp_path / "cli" / "results.json").read_text())
    assert list(lib) == list(cli) and lib["command"] == cli["command"] == "embed" and lib["seed"] == cli["seed"] == 3
    # the manifest lists summary.md, which names each folder's own path (hence the seal differs too)
    assert {k: v for k, v in lib.items() if k not in ("argv", "seconds", "manifest", "sealed")} == \
        {k: v for k, v in cli.items() if k not in ("argv", "seconds", "manifest", "sealed")}
    assert lib["manifest"]["features.npy"] == cli["manifest"]["features.npy"]
    assert res.body.rows == 300 and np.load(tmp_path / "lib" / "features.npy").shape[0] == 300
    assert (tmp_path / "lib" / "summary.md").read_text().startswith("# aflite embed:")


def test_embed_refuses_to_replace_finished_features(tmp_path: Path, small_snli: Path) -> None:
    from aflite.commands.embed import embed

    embed(small_snli, tmp_path / "o", featurizer="ngram", show_progress=False)
    before = (tmp_path / "o" / "features.npy").read_bytes()
    with pytest.raises(OutputError, match="features.npy exists"):
        embed(small_snli, tmp_path / "o", featurizer="ngram", view="hypothesis", show_progress=False)
    assert (tmp_path / "o" / "features.npy").read_bytes() == before


def test_run_takes_the_same_aflite_as_filter_files(tmp_path: Path, small_snli: Path) -> None:
    """run(params=AFLite(...)) and run(params={..., "strategy": ..., "random_state": ...}) are one parameter
    space: the same kept ids; an AFLite with its default sizes resolves to the scaled Table 8 defaults."""
    from aflite import AFLite
    from aflite.commands.run import run
    from aflite.errors import ParameterError

    kw = {"featurizer": "ngram", "probe": False, "show_progress": False}
    sizes = {"slice_size": 10, "train_size": 30, "target_size": 150}
    a = run(small_snli, tmp_path / "a", params={**sizes, "strategy": "greedy", "random_state": 5}, **kw)
    b = run(small_snli, tmp_path / "b", params=AFLite(**sizes, strategy="greedy", random_state=5), **kw)
    assert (tmp_path / "a" / "kept_ids.txt").read_bytes() == (tmp_path / "b" / "kept_ids.txt").read_bytes()
    assert a.summary["parameters"] == b.summary["parameters"]
    c = run(small_snli, tmp_path / "c", **kw)
    d = run(small_snli, tmp_path / "d", params=AFLite(), **kw)
    assert c.summary["parameters"] == d.summary["parameters"] and d.summary["overrides"] == {}
    with pytest.raises(ParameterError, match="params must be a dict of option names to values, not str"):
        run(small_snli, tmp_path / "e", params="slice_size=3", **kw)
    with pytest.raises(ParameterError, match="random_state must be an int seed for run()"):
        run(small_snli, tmp_path / "e", params={"random_state": 1.5}, **kw)
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("n", [60, 300, 9842, 19_666, 550_152])
def test_run_defaults_are_aflites_own_sizes(n: int) -> None:
    """The scaled Table 8 defaults of `aflite run` are AFLite's default sizes resolved by AFLite's own rule."""
    from aflite import AFLite
    from aflite.commands.run import scaled_defaults

    own = AFLite().resolved_params(n)
    assert {k: getattr(own, k) for k in scaled_defaults(n)} == scaled_defaults(n)
    assert scaled_defaults(550_152)["train_size"] == 50_000 and scaled_defaults(550_152)["slice_size"] == 10_000


def test_run_from_python_writes_results_and_the_report_page_as_the_cli(tmp_path: Path, small_snli: Path) -> None:
    """report.html is written by the library after results.json (not by the CLI): a Python caller of run() gets
    the same page rows as ``aflite run``; the CLI only adds its argv to results.json."""
    from aflite.commands.run import run
    from aflite.report.explorer import embedded_data

    run(small_snli, tmp_path / "lib", featurizer="ngram", probe=False, show_progress=False,
        params={"slice_size": 10, "train_size": 30, "target_size": 150, "random_state": 2})
    assert main(["run", str(small_snli), "--out", str(tmp_path / "cli"), "--featurizer", "ngram", "--no-probe",
                 "--quiet", "--seed", "2", "-k", "10", "-t", "30", "-n", "150"]) == 0
    lib = json.loads((tmp_path / "lib" / "results.json").read_text())
    cli = json.loads((tmp_path / "cli" / "results.json").read_text())
    assert lib["command"] == cli["command"] == "run" and lib["seed"] == cli["seed"] == 2
    assert str(small_snli) in cli["argv"] and "--no-probe" in cli["argv"] and lib["argv"] != cli["argv"]
    pages = [embedded_data((tmp_path / d / "report.html").read_text(encoding="utf-8")) for d in ("lib", "cli")]
    assert pages[0]["kind"] == pages[1]["kind"] == "run"
    assert pages[0]["cols"] == pages[1]["cols"] and len(pages[0]["cols"]["id"]) == 300


def test_library_warnings_are_listed_in_results_json_by_the_library(tmp_path: Path, small_snli: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python caller of run() gets the "warnings" list in results.json that the CLI shows (the library writes it,
    before report.html), one summary warning instead of each, and other warnings unchanged."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    import aflite.commands.run
    from aflite.commands.run import run

    real = aflite.commands.run.render_summary

    def noisy(*a, **k):  # type: ignore[no-untyped-def]
        for _ in range(4):
            warnings.warn("lbfgs failed to converge", ConvergenceWarning, stacklevel=1)
        warnings.warn("aflite's own", UserWarning, stacklevel=1)
        return real(*a, **k)

    monkeypatch.setattr(aflite.commands.run, "render_summary", noisy)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run(small_snli, tmp_path / "lib", featurizer="ngram", show_progress=False, probe=False,
            params={"n_partitions": 4})
    messages = [str(w.message) for w in seen]
    assert "aflite's own" in messages and not any(w.category is ConvergenceWarning for w in seen)
    summary = [m for m in messages if "warning(s) from scikit-learn" in m]
    assert len(summary) == 1 and summary[0].startswith("4 warning(s)") and "results.json" in summary[0]
    res = json.loads((tmp_path / "lib" / "results.json").read_text())
    assert res["warnings"] == [{"warning": "ConvergenceWarning: lbfgs failed to converge", "count": 4}]


def test_the_cli_passes_its_argv_and_results_json_is_written_once(tmp_path: Path, small_snli: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI writes no file itself: the library's one results.json carries the CLI's argv (through the claimed
    RunFolder), the envelope first."""
    import aflite.rundir.results as R
    from aflite.cli import main

    writes: list[Path] = []
    real = R.write_text

    def counting(path, text):  # type: ignore[no-untyped-def]
        writes.append(Path(path))
        return real(path, text)

    monkeypatch.setattr(R, "write_text", counting)
    argv = ["run", str(small_snli), "--out", str(tmp_path / "o"), "--featurizer", "ngram", "--quiet", "--no-probe",
            "-m", "4", "--seed", "7"]
    assert main(argv) == 0
    assert writes == [tmp_path / "o" / "results.json"]
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert list(res)[:5] == ["command", "format_version", "argv", "seed", "versions"]
    assert res["argv"] == argv and res["seed"] == 7 and res["command"] == "run"
