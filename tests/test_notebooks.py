"""The notebooks of docs/notebooks: kept in git without outputs, executed top to bottom with nbclient, rendered to
HTML by nbconvert and opened in headless chromium, where the inline result must draw its plots; their Markdown
pages (scripts/render_notebooks.py) must be what a fresh execution gives."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.ipynb"))
sys.path.insert(0, str(ROOT / "scripts"))

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (the [dev] extra)")


def test_there_is_a_notebook_and_it_is_stored_without_outputs() -> None:
    assert [p.name for p in NOTEBOOKS] == ["quickstart.ipynb"]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code and all(not c.outputs and c.execution_count is None for c in code), \
            f"{path.name}: outputs in git; run python scripts/render_notebooks.py --strip"


def test_the_guide_links_the_notebook_and_its_page() -> None:
    guide = (ROOT / "docs" / "guide" / "python.md").read_text(encoding="utf-8")
    assert "../notebooks/quickstart.ipynb" in guide and "../notebooks/quickstart.md" in guide


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("nbclient", reason="nbclient is not installed (the [dev] extra)")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (the [dev] extra)")
    pytest.importorskip("pandas")
    import render_notebooks as R

    work = tmp_path_factory.mktemp("notebook")
    return R.execute(ROOT / "docs" / "notebooks" / "quickstart.ipynb", work), work


@pytest.mark.slow  # the executed notebook of the test below
def test_the_executed_notebook_has_no_stderr_block(executed: Any) -> None:
    """Issue #49 item 4: without ipywidgets, tqdm.auto's TqdmWarning and ~30 text frames of its bars filled a pink
    stderr block; aflite.progress shows no bar there instead."""
    nb, _ = executed
    stderr = [o.text for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "stream" and o.name == "stderr"]
    assert stderr == [], stderr


@pytest.mark.slow  # about 70 s on two busy cores: a run, an explain and a card of the 2,949-pair sample
def test_quickstart_runs_top_to_bottom_and_shows_the_result_inline(executed: Any) -> None:
    import render_notebooks as R

    nb, work = executed
    assert R.errors_of(nb) == []
    outputs = {c.source.splitlines()[-1]: c.outputs for c in nb.cells if c.cell_type == "code"}
    shown = next(o for o in outputs["res"] if o.output_type == "execute_result")
    assert shown.data["text/plain"].startswith("<aflite run: |D| 2,949 → |D(Φ)| ")
    assert 'class="aflite-inline"' in shown.data["text/html"] and "Label shift" in shown.data["text/html"]
    card = next(o for o in outputs["card"] if o.output_type == "execute_result")
    assert (work / "quickstart-card" / "README.md").is_file() and "license cc-by-sa-4.0" in card.data["text/plain"]
    assert (work / "quickstart-explain" / "results.json").is_file()


@pytest.mark.slow
def test_quickstart_page_is_what_the_notebook_prints(executed: Any) -> None:
    import render_notebooks as R

    page = ROOT / "docs" / "notebooks" / "quickstart.md"
    assert page.read_text(encoding="utf-8") == R.to_markdown(executed[0], "quickstart"), \
        "docs/notebooks/quickstart.md is stale: run python scripts/render_notebooks.py"


@pytest.mark.slow
def test_the_rendered_notebook_draws_the_plots_in_a_browser(executed: Any, tmp_path: Path) -> None:
    """nbconvert's HTML of the executed notebook, opened in headless chromium: the run's inline view draws its
    per-phase and label-mix plots (plotly's svg elements present), offline, from the bundle in the output."""
    pytest.importorskip("nbconvert", reason="nbconvert is not installed (the [dev] extra)")
    import render_notebooks as R
    from test_report_inline import plots_drawn

    page = tmp_path / "quickstart.html"
    page.write_text(R.to_html(executed[0]), encoding="utf-8")
    blocks = [b for b in plots_drawn(page) if b["divs"]]
    assert len(blocks) == 2, blocks  # the run's view and explain's; the card's has no plots
    assert all(b["error"] is None and b["plots"] == "1" for b in blocks), blocks
    assert [[d["id"].rsplit("-", 1)[1] for d in b["divs"]] for b in blocks] == [["phases", "labels"], ["tokens"]]
    assert all(d["svgs"] > 0 for b in blocks for d in b["divs"]), blocks


@pytest.mark.slow  # two executions of the notebook and a build of the site
def test_the_notebook_reruns_in_place_and_the_site_still_builds(tmp_path: Path) -> None:
    """Issue 56 item 4: executed twice in its own folder (as a user reruns it in Jupyter), the notebook runs
    without error both times, and the strict site build of that docs tree (``-W``) still passes with the folders
    it left beside itself."""
    pytest.importorskip("nbclient", reason="nbclient is not installed (the [dev] extra)")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (the [dev] extra)")
    pytest.importorskip("pandas")
    pytest.importorskip("sphinx", reason="sphinx is not installed (the [docs] extra)")
    import shutil

    import render_notebooks as R
    from test_docs_site import build

    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", repo / "docs", ignore=shutil.ignore_patterns("_build", "api"))
    for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "src", "scripts", "pyproject.toml"):
        (repo / name).symlink_to(ROOT / name)
    book = repo / "docs" / "notebooks" / "quickstart.ipynb"
    for _ in range(2):
        assert R.errors_of(R.execute(book, book.parent)) == []
    assert (book.parent / "quickstart-run" / "results.json").is_file()
    assert (book.parent / "quickstart-card" / "README.md").is_file()
    proc = build(tmp_path / "site", docs=repo / "docs")
    assert proc.returncode == 0, proc.stderr[-3000:]
