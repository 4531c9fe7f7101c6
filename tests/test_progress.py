"""aflite.progress: the one progress-bar factory (issue #49 item 4). In a Jupyter kernel without ipywidgets
``tqdm.auto`` warned (TqdmWarning: IProgress not found) and wrote a text frame to stderr per update, a pink block in
the executed notebook; aflite's bars now stay silent there. tests/test_notebooks.py executes the real notebook."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from aflite import progress


@pytest.fixture()
def kernel_without_widgets(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """What a Jupyter kernel without ipywidgets looks like to aflite.progress."""
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setattr(progress, "widgets_available", lambda: False)
    yield


def _drive(bar: Any) -> None:
    for _ in range(30):
        bar.update(1)
    bar.close()


def test_in_a_kernel_without_widgets_a_bar_writes_nothing(kernel_without_widgets: None,
                                                          capfd: pytest.CaptureFixture[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a TqdmWarning would fail here
        _drive(progress.tqdm(total=30, desc="phase"))
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_in_a_terminal_the_bar_goes_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    assert not progress.in_notebook()  # pytest is no Jupyter kernel
    _drive(progress.tqdm(total=30, desc="phase"))
    out, err = capfd.readouterr()
    assert out == "" and "phase" in err and "30/30" in err


def test_a_whole_run_in_a_kernel_without_widgets_is_quiet(kernel_without_widgets: None,
                                                           capfd: pytest.CaptureFixture[str]) -> None:
    """Every bar of a run (features, filter, probe) comes from aflite.progress: nothing on stderr but notes."""
    import aflite

    pd = pytest.importorskip("pandas")
    ds = aflite.load_dataset(aflite.demo_dataset_path())
    frame = pd.DataFrame({"premise": ds.texts_a[:300], "hypothesis": ds.texts_b[:300], "label": ds.labels[:300]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=Warning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", module="sklearn")
        aflite.run(frame, params={"target_size": 0.6, "n_partitions": 8}, show_progress=True)
    _, err = capfd.readouterr()
    assert "%|" not in err and "it/s" not in err and "IProgress" not in err, err[:500]


def test_the_old_factory_is_gone_from_the_package() -> None:
    """No module imports tqdm.auto (whose fallback writes to stderr in a kernel without ipywidgets)."""
    from pathlib import Path

    src = Path(progress.__file__).resolve().parent
    users = [p.name for p in src.rglob("*.py") if "tqdm.auto" in p.read_text(encoding="utf-8")
             and p.name != "progress.py"]
    assert users == []
