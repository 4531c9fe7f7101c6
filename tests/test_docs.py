"""The documentation: generated parts up to date with their sources, measured outputs free of machine paths, a
README short enough to read, with working links (its Python example runs in test_api)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_measured_outputs_hold_no_absolute_paths() -> None:
    assert gen_docs().absolute_paths() == [], "run: python scripts/gen_docs.py --fix-paths"


def test_generated_pages_are_up_to_date() -> None:
    # the guides' option lists only on the CI's Python: argparse lays help out differently in other versions
    options = sys.version_info[:2] == (3, 11)
    stale = [str(path.relative_to(ROOT)) for path, content in gen_docs().generated_files(options=options).items()
             if not path.is_file() or path.read_text(encoding="utf-8") != content]
    assert stale == [], f"stale: {stale}; run: python scripts/gen_docs.py"


def test_benchmarks_page_renders_every_measured_json() -> None:
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for path in (ROOT / "docs" / "measured").glob("*.json"):
        assert f"measured/{path.name}" in page


def test_generic_renderer_takes_any_json(tmp_path: Path) -> None:
    g = gen_docs()
    lines = g.render_generic({"argv": ["run", "x.tsv"], "seconds": 1.5, "per_device": {"cpu": {"s": 2.0},
                                                                                       "cuda": {"s": 0.5}}})
    text = "\n".join(lines)
    assert "Command: `aflite run x.tsv`" in text and "| seconds | 1.5 |" in text and "| cuda | 0.5 |" in text


def test_readme_is_short_and_free_of_internal_notes() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text) <= 10_500  # 10,000 before its claims became generated sentences that name their raw files
    for pattern in (r"\bissue \d", r"\blent\b", r"/work/", r"these machines"):
        assert not re.search(pattern, text, flags=re.I), pattern


@pytest.mark.parametrize("page", ["README.md", "CONTRIBUTING.md", "docs/guide/README.md", "docs/algorithm.md",
                                  "docs/results.md", "docs/benchmarks.md"])
def test_relative_links_resolve(page: str) -> None:
    path = ROOT / page
    text = path.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        assert (path.parent / target).exists(), f"{page}: broken link {target}"


def test_every_command_has_a_guide() -> None:
    from aflite.cli import COMMANDS

    for command in COMMANDS:
        guide = ROOT / "docs" / "guide" / f"{command}.md"
        assert guide.is_file(), f"no guide for aflite {command}"
        assert "<!-- BEGIN generated:options -->" in guide.read_text(encoding="utf-8")


def test_the_guide_index_describes_embed_out_as_the_folder_it_is() -> None:
    """``aflite embed --out`` is a folder like every other command's (features.npy, ids.txt, labels.txt in it)."""
    from aflite.cli import build_parser

    index = (ROOT / "docs" / "guide" / "README.md").read_text(encoding="utf-8")
    row = next(line for line in index.splitlines() if line.startswith("| `--out DIR`"))
    assert "stem" not in row and "`DIR/features.npy`" in row
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    out = next(a for a in sub.choices["embed"]._actions if "--out" in a.option_strings)  # type: ignore[attr-defined]
    assert "output folder" in (out.help or "")


def test_the_readme_names_the_commands_that_write_a_page() -> None:
    """The README's "… also write `report.html`" lists exactly the commands whose folders have a page (their
    declared Result class has one), no more (embed, card, synthetic and report write none)."""
    from aflite.cli import COMMANDS
    from aflite.rundir.commands import result_class

    pages = {c for c in COMMANDS if (cls := result_class(c)) is not None and cls.has_page}
    text = (ROOT / "README.md").read_text(encoding="utf-8").replace("\n", " ")
    sentence = re.search(r"((?:`\w+`, )+`\w+` and `\w+`) also write `report\.html`", text)
    assert sentence, "the README's sentence on which commands write report.html"
    named = set(re.findall(r"`(\w+)`", sentence.group(1)))
    assert named == pages


def test_the_readme_sizes_of_the_bundled_sample_are_the_file_s() -> None:
    """"2,949 pairs" and "1,000 premise groups" in the README are counted from the bundled sample itself."""
    import csv
    import gzip

    with gzip.open(ROOT / "src" / "aflite" / "resources" / "snli_sample.tsv.gz", "rt", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    text = (ROOT / "README.md").read_text(encoding="utf-8").replace("\n", " ")
    pairs = re.findall(r"(?:real SNLI \(|premise groups \(|sample: )([\d,]+) pairs", text)
    assert pairs and set(pairs) == {f"{len(rows):,}"}, pairs
    assert f"{len({r['premise'] for r in rows}):,} premise groups" in text


def test_the_module_paths_the_pages_name_exist() -> None:
    """Issue #59, 5: algorithm.md (and two other pages) named `aflite/kernels.py`, which moved to aflite/core/: every
    `aflite/....py` a page names is a file of the package."""
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "docs" / "guide").glob("*.md"))]
    named = {(page.name, m) for page in pages
             for m in re.findall(r"`(?:src/)?(aflite/[\w/]+\.py)`", page.read_text(encoding="utf-8"))}
    assert len(named) > 5
    assert sorted((page, m) for page, m in named if not (ROOT / "src" / m).is_file()) == []


def test_the_headline_reading_cites_only_figures_of_its_table() -> None:
    """Issue #59, 5: the README's note under the headline table cited "single 43.2", a figure in no column of it
    (the CPU columns had no single-iteration column): every figure the note names is a cell of the table."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- BEGIN generated:headline -->")[1].split("<!-- END generated:headline -->")[0]
    cells = {c.strip().strip("*").split(" ± ")[0] for line in block.splitlines() if line.startswith("| ")
             for c in line.strip("|").split("|")}
    reading = block.strip().splitlines()[-1]
    cited = re.findall(r"(?:single|D\(Φ\)|n-gram|MiniLM) ([+-]?\d+\.\d)\b", reading)
    assert cited and [c for c in cited if c not in cells] == [], reading


def test_the_readme_stays_under_10000_characters() -> None:
    """Issue 56 item 4: the README is the front page; detail belongs to the guides."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert len(text) < 10_000, f"README.md has {len(text):,} characters: move detail to docs/guide/"


def test_the_card_guide_states_the_demo_cards_data_size() -> None:
    """card.md said the demo card's filtered.tsv.gz is "about 60 KB" (72 KB): a size card.md gives for a file of
    docs/card_demo is that file's, to the KB."""
    text = (ROOT / "docs" / "guide" / "card.md").read_text(encoding="utf-8").replace("\n", " ")
    for name, kb in re.findall(r"`([\w./-]+)` \([^()`]*?about (\d+) KB\)", text):
        assert int(kb) == round((ROOT / "docs" / "card_demo" / name).stat().st_size / 1000), name
