"""The library's public shape: AFLite as a scikit-learn estimator, the package exports, one error family, and
the README's Python example (run as written)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from aflite.core.ensemble import FastLogisticEnsemble
from aflite.core.filter import AFLite
from aflite.errors import AfliteError, InputError, ParameterError

ROOT = Path(__file__).resolve().parents[1]

# The scikit-learn checks that do not apply to a filter, and why (passed to check_estimator, which then
# requires them to fail: if one starts passing, the test says so and this list should shrink).
NOT_APPLICABLE = {
    "check_dtype_object": "non-numeric features raise aflite's InputError (a ValueError, reported by the CLI on one "
    "line, exit code 2) rather than the TypeError numpy would raise; numbers held as objects are accepted",
}


def planted(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    X = rng.standard_normal((n, 5))
    biased = rng.random(n) < 0.4
    X[biased, 0] += 4.0 * (y[biased] - 1)
    return X.astype(np.float32), y


KW = dict(target_size=150, n_partitions=8, train_size=60, slice_size=20, device="cpu")


# --------------------------------------------------------------------------------------- scikit-learn estimator
@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_sklearn_check_estimator_passes_the_checks_that_apply() -> None:
    from sklearn.utils.estimator_checks import check_estimator

    # three phases at most: the checks are about the estimator's contract, not about filtering to the end
    est = AFLite(n_partitions=4, max_iterations=3, device="cpu")
    results = check_estimator(est, expected_failed_checks=NOT_APPLICABLE,
                              on_skip=None, on_fail=None)
    by_status: dict[str, list[str]] = {}
    for r in results:
        by_status.setdefault(r["status"], []).append(r["check_name"])
    assert "failed" not in by_status, by_status["failed"]
    assert len(by_status["passed"]) >= 35  # the checks ran (cloning, params, pickling, NaN/inf, sparse, 1 sample)
    assert sorted(set(by_status.get("xfail", []))) == sorted(NOT_APPLICABLE)


def test_clone_gives_an_unfitted_estimator_with_the_same_params() -> None:
    X, y = planted()
    af = AFLite(**KW, random_state=3, threshold=0.7)
    twin = clone(af)
    assert twin is not af and twin.get_params() == af.get_params()
    af.fit(X, y)
    fitted_twin = clone(af)
    assert not hasattr(fitted_twin, "keep_mask_")
    assert np.array_equal(fitted_twin.fit(X, y).get_kept_mask(), af.get_kept_mask())
    assert af.set_params(threshold=0.9) is af and af.get_params()["threshold"] == 0.9


def test_constructor_is_keyword_only_and_does_not_validate() -> None:
    with pytest.raises(TypeError):
        AFLite(100)  # type: ignore[misc]
    bad = AFLite(threshold=5.0, n_partitions=-1, C=0.0, strategy="best")  # accepted here ...
    X, y = planted()
    with pytest.raises(ParameterError):  # ... refused in fit
        bad.fit(X, y)


@pytest.mark.parametrize("kw, match", [
    (dict(C=0.0), "C=0"), (dict(C=-1.0), "C=-1"), (dict(random_state=-1), "random_state"),
    (dict(random_state="x"), "random_state"), (dict(model="svm"), "model"), (dict(max_iterations=-2), "max_iterations"),
])
def test_bad_parameters_are_parameter_errors(kw: dict, match: str) -> None:
    X, y = planted()
    with pytest.raises(ParameterError, match=match):
        AFLite(**{**KW, **kw}).fit(X, y)


def test_random_state_none_int_and_generator_record_the_seed_used() -> None:
    X, y = planted()
    a = AFLite(**KW, random_state=None).fit(X, y)
    b = AFLite(**KW, random_state=None).fit(X, y)
    assert isinstance(a.seed_, int) and a.seed_ != b.seed_  # fresh entropy each time
    again = AFLite(**KW, random_state=a.seed_).fit(X, y)  # the recorded seed repeats the run exactly
    assert np.array_equal(again.removed_at_, a.removed_at_)
    assert a.params_.random_state == a.seed_
    g1 = AFLite(**KW, random_state=np.random.default_rng(7)).fit(X, y)
    g2 = AFLite(**KW, random_state=np.random.default_rng(7)).fit(X, y)
    assert g1.seed_ == g2.seed_ and np.array_equal(g1.removed_at_, g2.removed_at_)
    assert AFLite(**KW, random_state=5).fit(X, y).seed_ == 5


def test_random_state_changes_the_result() -> None:
    X, y = planted()
    one = AFLite(**KW, random_state=1).fit(X, y)
    two = AFLite(**KW, random_state=2).fit(X, y)
    assert not np.array_equal(one.removed_at_, two.removed_at_)


def test_get_kept_mask_and_fitted_attributes() -> None:
    X, y = planted()
    af = AFLite(**KW)
    with pytest.raises(NotFittedError):
        af.get_kept_mask()
    af.fit(X, y)
    mask = af.get_kept_mask()
    assert mask.dtype == bool and mask.shape == (len(y),) and np.array_equal(mask, af.keep_mask_)
    assert np.array_equal(af.get_kept_mask(indices=True), np.flatnonzero(mask))
    assert not hasattr(af, "get_support")  # scikit-learn's get_support masks columns; this estimator masks rows
    mask[:] = False  # a copy: the fitted state is untouched
    assert af.keep_mask_.any()
    assert af.n_features_in_ == X.shape[1]
    assert af.classes_.tolist() == [0, 1, 2]
    assert af.stop_reason_ and af.n_iterations_ == len(af.history_)


def test_a_given_ensemble_is_copied_not_fitted_in_place() -> None:
    X, y = planted()
    ens = FastLogisticEnsemble(block_size=2, max_iter=50)
    first = AFLite(**{**KW, "device": "cpu"}, model=ens).fit(X, y)
    assert ens._store is None and ens._coefs is None and not hasattr(ens, "device_")  # untouched
    second = AFLite(**{**KW, "device": "cpu"}, model=ens).fit(X, y)
    assert np.array_equal(first.removed_at_, second.removed_at_)


def test_a_given_sklearn_classifier_is_not_fitted_in_place() -> None:
    from sklearn.linear_model import LogisticRegression

    X, y = planted(200)
    clf = LogisticRegression(max_iter=200)
    AFLite(target_size=100, n_partitions=3, train_size=40, slice_size=20, model=clf).fit(X, y)
    assert not hasattr(clf, "coef_")


# --------------------------------------------------------------------------------------- package and errors
def test_import_aflite_is_cheap_and_exports_the_main_names() -> None:
    code = ("import sys, aflite; heavy = [m for m in ('torch', 'sklearn', 'scipy', 'transformers') "
            "if m in sys.modules]; print(heavy); "
            "from aflite import AFLite, predictability, run, filter_files, load_dataset, featurize, "
            "audit_dataset, AuditConfig, evaluate_runs, ParameterError, InputError; print(AFLite.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["[]", "aflite.core.filter"]


def test_the_version_has_one_source() -> None:
    """pyproject.toml reads its version from aflite.__version__ (no second copy to keep in step), and
    `aflite --version` prints it."""
    import tomllib

    import aflite

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in meta["project"] and meta["project"]["dynamic"] == ["version"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "aflite.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", aflite.__version__)
    out = subprocess.run([sys.executable, "-m", "aflite", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"aflite {aflite.__version__}"


def test_unknown_attribute_is_an_attribute_error() -> None:
    import aflite

    with pytest.raises(AttributeError, match="no_such_name"):
        aflite.no_such_name  # noqa: B018
    assert "AFLite" in dir(aflite) and "AFLite" in aflite.__all__


def test_one_error_family() -> None:
    assert issubclass(ParameterError, AfliteError) and issubclass(ParameterError, ValueError)
    assert issubclass(InputError, AfliteError) and issubclass(InputError, ValueError)


def test_an_unusable_out_is_a_value_error_like_the_others(tmp_path: Path) -> None:
    """Issue #59, 4: python.md says aflite's errors are ValueErrors, and OutputError was not one. A real refusal:
    ``out`` is a file of the user's, which stays as it was."""
    import aflite

    taken = tmp_path / "notes.txt"
    taken.write_text("mine\n", encoding="utf-8")
    with pytest.raises(ValueError, match="notes.txt") as caught:
        aflite.run(aflite.demo_dataset_path(), out=taken, featurizer="ngram", show_progress=False)
    assert isinstance(caught.value, aflite.OutputError) and "OutputError" in aflite.__all__
    assert taken.read_text(encoding="utf-8") == "mine\n"


def test_cli_bad_C_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aflite.cli import main

    X, y = planted()
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "y.txt").write_text("".join(f"{v}\n" for v in y))
    out = tmp_path / "run"
    code = main(["filter", "--features", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.txt"),
                 "--out", str(out), "-C", "0", "--quiet", "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "C=0" in err[0]
    assert not (out / "kept_ids.txt").exists()


def test_cli_filter_writes_the_shared_results_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aflite.cli import main

    X, y = planted()
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "y.txt").write_text("".join(f"{v}\n" for v in y))
    out = tmp_path / "run"
    argv = ["filter", "--features", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.txt"), "--out", str(out),
            "-n", "150", "-t", "60", "-k", "20", "-m", "8", "--seed", "4", "--quiet", "--device", "cpu"]
    assert main(argv) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["command"] == "filter" and res["argv"] == argv and res["seed"] == 4
    assert {"aflite", "numpy", "scikit-learn"} <= set(res["versions"])
    assert res["size_after"] == len((out / "kept_ids.txt").read_text().split())
    printed = capsys.readouterr()
    assert printed.out.startswith("kept ") and "results in" in printed.err  # results to stdout, notes to stderr


def test_cli_filter_reads_the_label_column_named_by_label(tmp_path: Path) -> None:
    from aflite.cli import main
    from aflite.commands.filter import filter_files

    X, y = planted()
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "y.csv").write_text("gold\n" + "".join(f"{v}\n" for v in y))
    assert main(["filter", "--features", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.csv"), "--label",
                 "gold", "--out", str(tmp_path / "a"), "-n", "150", "-t", "60", "-k", "20", "-m", "4", "--quiet",
                 "--device", "cpu"]) == 0
    lib = filter_files(tmp_path / "X.npy", tmp_path / "y.csv", tmp_path / "b", label="gold", show_progress=False,
                       aflite=AFLite(target_size=150, train_size=60, slice_size=20, n_partitions=4, device="cpu"))
    assert (tmp_path / "a" / "kept_ids.txt").read_text() == (tmp_path / "b" / "kept_ids.txt").read_text()
    assert lib.summary["size_after"] == len((tmp_path / "a" / "kept_ids.txt").read_text().split())


def test_one_device_resolver() -> None:
    from aflite.device import resolve_device, torch_device

    assert resolve_device("cpu") == "cpu" and resolve_device("torch-cpu") == "torch-cpu"
    assert torch_device("torch-cpu") == "cpu"
    assert resolve_device(None) == resolve_device("auto") in ("cpu", "cuda")
    with pytest.raises(ParameterError, match="unknown device"):
        resolve_device("tpu")


def test_a_cluster_runs_the_cpu_path_even_where_auto_means_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU machine ``auto`` picked the GPU and left a given cluster idle (its scratch folder empty, the run's
    summary saying cluster and cuda at once): with an executor, ``auto`` is the CPU and a GPU device is refused."""
    from aflite import device as D

    monkeypatch.setattr(D, "resolve_device", lambda device="auto": "cuda" if device in (None, "auto") else device)
    assert D.ensemble_device("auto") == "cuda"  # no cluster: auto is the GPU here
    assert D.ensemble_device("auto", executor="local:2") == D.ensemble_device(None, object()) == "cpu"
    assert D.ensemble_device("cpu", executor="local:2") == "cpu"
    for gpu in ("cuda", "cuda:0", "torch-cpu"):
        with pytest.raises(ParameterError, match="cluster"):
            D.ensemble_device(gpu, executor="local:2")


# --------------------------------------------------------------------------------------- the README's example
def readme_python_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "the README has no ```python block"
    return blocks[0]


def test_readme_python_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    code = readme_python_example()
    namespace: dict[str, object] = {"__name__": "readme_example"}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    printed = capsys.readouterr().out
    assert re.search(r"kept \d+ of 2949", printed), printed


def test_filter_files_is_the_library_side_of_aflite_filter(tmp_path: Path) -> None:
    from aflite import filter_files

    X, y = planted()
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "y.txt").write_text("".join(f"{v}\n" for v in y))
    res = filter_files(tmp_path / "X.npy", tmp_path / "y.txt", tmp_path / "run", aflite=AFLite(**KW),
                       show_progress=False)
    kept = (tmp_path / "run" / "kept_ids.txt").read_text().split()
    assert kept == [str(i) for i in np.flatnonzero(res.keep)]
    assert res.summary["size_after"] == len(kept) == int(AFLite(**KW).fit(X, y).get_kept_mask().sum())


def test_clone_shares_a_cluster_executor_rather_than_copying_it() -> None:
    pytest.importorskip("dask.distributed")
    from aflite.core.backends.dask import DaskExecutor

    handle = DaskExecutor.__new__(DaskExecutor)  # a stand-in: no cluster is started for this check
    assert clone(AFLite(executor=handle)).executor is handle


def test_audit_file_refuses_unusable_sizes_and_runs_before_any_work(tmp_path: Path) -> None:
    from aflite.audit import AuditConfig
    from aflite.commands.audit import audit_file, check_audit_config

    with pytest.raises(ParameterError, match=r"n_folds \(--n-folds\) must be >= 2"):
        check_audit_config(AuditConfig(n_folds=1))
    with pytest.raises(ParameterError, match=r"peco_shuffles"):
        check_audit_config(AuditConfig(peco_shuffles=1))
    out = tmp_path / "audit"
    with pytest.raises(InputError, match="is not an aflite output folder"):  # --compare that is not a run: refused
        # before loading
        audit_file(ROOT / "no-such-file.tsv", out, AuditConfig(), compare=tmp_path)
    assert not out.exists()


@pytest.mark.parametrize("entry,keyword", [
    ("run", "featurizer_options"), ("run", "dataset_options"), ("run", "params"),
    ("explain", "featurizer_options"), ("explain", "dataset_options"), ("audit_file", "featurizer_options"),
    ("audit_file", "image_options"), ("embed", "featurizer_options"), ("embed", "dataset_options"),
    ("evaluate", "featurizer_options"), ("evaluate", "dataset_options"),
])
def test_a_keyword_that_takes_a_dict_refuses_anything_else_in_one_line(tmp_path, entry, keyword):
    """#50: ``run(featurizer_options='lr=1')`` gave a TypeError from deep inside (``argument after ** must be a
    mapping``); every entry point's dict keywords are refused in one line naming the keyword (a "k=v" string is
    shown as the dict to write), before the output folder exists."""
    import aflite
    from aflite.data import demo_dataset_path

    fn = {"run": aflite.run, "explain": aflite.explain_run, "audit_file": aflite.audit_file, "embed": aflite.embed,
          "evaluate": aflite.evaluate_runs}[entry]
    out = tmp_path / "out"
    args = (demo_dataset_path(), tmp_path / "no-run", out) if entry in ("explain", "evaluate") else (
        demo_dataset_path(), out)
    with pytest.raises(ParameterError, match=rf"^{keyword} must be a dict of option names to values, not str "
                                             rf"'lr=1'; write it as a dict: {keyword}=\{{'lr': 1\}}$"):
        fn(*args, **{keyword: "lr=1"})
    assert not out.exists()
    with pytest.raises(ParameterError, match=r"not list \[\('lr', 1\)\]$"):
        fn(*args, **{keyword: [("lr", 1)]})
    with pytest.raises(ParameterError, match=rf"write it as a dict: {keyword}=\{{'model_path': '/x', 'lr': 1e-5\}}$"):
        fn(*args, **{keyword: "model_path=/x, lr=1e-5"})
    assert not out.exists()
