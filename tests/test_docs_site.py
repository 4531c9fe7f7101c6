"""The documentation site (docs/conf.py) built with warnings as errors and opened in headless chromium: Sphinx's
search (JavaScript over searchindex.js) finds ``fit_resample``, and the API page of ``aflite.AFLite`` renders with
its methods. Skipped where the [docs] extra, selenium or chromium is missing (.ci/run installs them)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

pytest.importorskip("sphinx", reason="sphinx is not installed (the [docs] extra)")
pytest.importorskip("pydata_sphinx_theme", reason="pydata-sphinx-theme is not installed (the [docs] extra)")
pytest.importorskip("myst_nb", reason="myst-nb is not installed (the [docs] extra)")
pytest.importorskip("sphinxarg", reason="sphinx-argparse is not installed (the [docs] extra)")
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
from aflite_docs import GLOSSARY  # noqa: E402  (the terms docs/glossary.md defines, and their anchors)


def build(out: Path, *extra: str, docs: Path = ROOT / "docs") -> subprocess.CompletedProcess[str]:
    """``sphinx-build -W --keep-going`` of docs/ into ``out`` (doctrees beside it); the notebook is not executed
    here (CI's docs step executes it), so that the test takes the site's time, not the notebook's."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d", str(out / "doctrees"),
           "-D", "nb_execution_mode=off", *extra, str(docs), str(out / "html")]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = build(out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out / "html"


def new_driver(width: int = 1280) -> Any:
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the [dev] extra)")
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", f"--window-size={width},1000", "--no-first-run",
                "--disable-extensions"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, for the pages' JavaScript errors
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)


def wait_for(driver: Any, script: str, timeout: float = 60) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for: {script}")


@pytest.mark.slow  # about a minute on 2 busy cores: the whole site, then a browser
def test_the_site_searches_and_shows_the_api_in_a_browser(site: Path) -> None:
    assert (site / "index.html").is_file() and (site / "cli.html").is_file()
    cli = (site / "cli.html").read_text(encoding="utf-8")
    assert "--cache-dir" in cli and "aflite evaluate" in cli  # the reference is the parser's
    driver = new_driver()
    try:
        driver.get((site / "search.html").as_uri() + "?q=fit_resample")
        hits = wait_for(driver, "const r = document.querySelectorAll('#search-results ul.search li a');"
                                "return r.length ? Array.from(r).map(a => a.getAttribute('href')) : null;")
        assert any("api/aflite.AFLite.html" in h for h in hits), hits
        driver.save_screenshot(str(site.parent / "search.png"))

        driver.get((site / "api" / "aflite.AFLite.html").as_uri())
        shown = wait_for(driver, "const d = document.getElementById('aflite.AFLite.fit_resample');"
                                 "const c = document.getElementById('aflite.AFLite');"
                                 "return d && c ? [c.innerText, d.innerText, document.title,"
                                 " c.getBoundingClientRect().height] : null;")
        signature, method, title, height = shown
        assert "AFLite" in title and signature.startswith("class aflite.AFLite") and height > 0
        assert method.startswith("fit_resample(")
        body = driver.execute_script("return document.querySelector('article').innerText")
        assert "Adversarial filtering of dataset biases" in body and "target_size" in body
        driver.save_screenshot(str(site.parent / "aflite_api.png"))
    finally:
        driver.quit()


@pytest.mark.slow
def test_a_broken_cross_reference_fails_the_build(tmp_path: Path) -> None:
    """-W makes a link to a page that does not exist an error (a reference to aflite.NoSuchThing too): a copy of
    the sources with one such page added."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs", ignore=shutil.ignore_patterns("_build", "api"))
    for name in ("README.md", "CONTRIBUTING.md"):
        shutil.copy(ROOT / name, copy / name)
    (copy / "src").symlink_to(ROOT / "src")
    (copy / "docs" / "guide" / "broken.md").write_text(
        "---\norphan: true\n---\n# x\n\n[gone](no-such-page.md) and {py:class}`aflite.NoSuchThing`\n",
        encoding="utf-8")
    proc = build(tmp_path, docs=copy / "docs")
    assert proc.returncode != 0
    assert "no-such-page" in proc.stderr and "aflite.NoSuchThing" in proc.stderr


# ------------------------------------------------------------------------- every page in the browser (issue #59)
@dataclass
class Page:
    """What one built page showed in chromium: its console errors, its primary sidebar's links, its links and
    resource addresses (resolved by the browser) and the ids it holds (for links to #anchors)."""

    errors: list[str]
    sidebar_visible: bool
    sidebar_links: list[str]
    sidebar_captions: list[str]
    header_links: list[str]  # the top bar's links, those under its "More" menu included
    addresses: list[str]
    ids: set[str]
    first_terms: dict[str, str | None]  # per glossary term used in the page's prose: the link of its first use


_COLLECT = """
const side = document.querySelector('#pst-primary-sidebar');
const nav = side ? side.querySelector('nav.bd-docs-nav') : null;
const text = (sel, root) => root ? Array.from(root.querySelectorAll(sel)).map(e => e.textContent.trim()) : [];
const addr = [...Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
              ...Array.from(document.querySelectorAll('img[src], script[src]')).map(e => e.src),
              ...Array.from(document.querySelectorAll('link[href]')).map(e => e.href)];
return [side !== null && side.offsetWidth > 0 && side.offsetHeight > 0, text('a[href]', nav),
        text('p.caption', nav), text('.bd-header .navbar-header-items__center a.nav-link, '
                                     + '.bd-header .navbar-header-items__center a.dropdown-item', document),
        addr, Array.from(document.querySelectorAll('[id]')).map(e => e.id), firstTerms(arguments[0])];

function firstTerms(terms) {  // the first use of each term in prose: not code, a heading or another link
  const first = {};
  const article = document.querySelector('article.bd-article');
  if (!article) return first;
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const el = walker.currentNode.parentElement;
    const link = el.closest('a');
    if (el.closest('pre, code, h1, h2, h3, h4, h5, h6, script, style')
        || (link && !link.classList.contains('glossary-term'))) continue;
    for (const pattern of terms) {
      if (!(pattern in first) && new RegExp(pattern).test(walker.currentNode.textContent)) {
        first[pattern] = link ? link.getAttribute('href') : null;
      }
    }
  }
  return first;
}
"""


def visit_every_page(site: Path) -> dict[str, Page]:
    """Each HTML page of the site (the theme's _static and the _sources excepted), loaded in headless chromium."""
    driver = new_driver(1366)
    pages: dict[str, Page] = {}
    try:
        for path in sorted(site.rglob("*.html")):
            rel = path.relative_to(site).as_posix()
            if rel.startswith(("_static/", "_sources/")):
                continue
            driver.get(path.as_uri())
            # two animation frames and a task: the theme's scripts ran (the scroll-spy threw at load)
            driver.execute_async_script("const done = arguments[0]; requestAnimationFrame(() => "
                                        "requestAnimationFrame(() => setTimeout(done, 0)));")
            visible, links, captions, header, addresses, ids, terms = driver.execute_script(
                _COLLECT, [pattern for pattern, _ in GLOSSARY])
            errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            pages[rel] = Page(errors, bool(visible), links, captions, header, addresses, set(ids), terms)
    finally:
        driver.quit()
    return pages


@pytest.fixture(scope="module")
def every_page(site: Path) -> dict[str, Page]:
    return visit_every_page(site)


def dead_addresses(site: Path, pages: dict[str, Page]) -> dict[str, list[str]]:
    """Per page, the addresses that lead nowhere: a local file that does not exist, an #anchor its page does not
    hold, or a scheme a browser cannot open (``tcp://host:8786``); http(s) and mailto are not followed (no network
    here)."""
    dead: dict[str, list[str]] = {}
    for rel, page in pages.items():
        for address in page.addresses:
            url = urlsplit(address)
            if url.scheme in ("http", "https", "mailto"):
                continue
            if url.scheme != "file":
                dead.setdefault(rel, []).append(address)
                continue
            target = Path(unquote(url.path))
            ok = target.is_file()
            if ok and url.fragment and target.suffix == ".html":
                held = pages.get(target.relative_to(site).as_posix()) if site in target.parents else None
                ok = held is not None and unquote(url.fragment) in held.ids
            if not ok:
                dead.setdefault(rel, []).append(address)
    return dead


@pytest.mark.slow  # the whole site (~25 s+), then each of its ~90 pages in chromium
def test_no_page_throws_in_the_browser_or_links_to_nothing(site: Path, every_page: dict[str, Page]) -> None:
    """Issue #59, 3: the theme's scroll-spy threw on cli.html and 7 guide pages (sphinx-argparse's section ids, such
    as ``columns-(generic-tables)``, are no CSS selectors) and the --cluster help became 8 links to tcp://host:8786."""
    assert len(every_page) > 40 and "cli.html" in every_page and "guide/run.html" in every_page
    thrown = {rel: page.errors for rel, page in every_page.items() if page.errors}
    assert not thrown
    assert not dead_addresses(site, every_page)
    assert "tcp://host:8786" in (site / "cli.html").read_text(encoding="utf-8")  # still said, as code


# ------------------------------------------------------------------------------ the API reference (issue #59, 4)
def test_the_api_page_lists_every_public_name() -> None:
    """docs/api.rst's autosummary tables hold every class and function of ``aflite.__all__`` (``aflite.Columns``
    and ``aflite.OutputError`` were missing); the two data names are described in its text."""
    import aflite

    text = (ROOT / "docs" / "api.rst").read_text(encoding="utf-8")
    listed = set(re.findall(r"^   (\w+)$", text, flags=re.M))
    assert set(aflite.__all__) - listed == {"__version__", "SNLI_DEFAULTS"}
    assert "aflite.SNLI_DEFAULTS" in text


@pytest.mark.slow
def test_the_api_pages_show_what_a_result_offers(site: Path) -> None:
    """RunResult's verdict, scores, to_json() and summary_md() come from the classes it extends and were left off
    its page; Columns' keywords and OutputError had no page."""
    def ids(page: str) -> set[str]:
        return set(re.findall(r'id="([^"]+)"', (site / "api" / page).read_text(encoding="utf-8")))

    run = ids("aflite.RunResult.html")
    assert {f"aflite.RunResult.{m}" for m in ("verdict", "scores", "to_json", "summary_md", "filtered")} <= run
    assert {f"aflite.Columns.{k}" for k in ("text_a", "text_b", "label", "id_column", "label_map")} <= ids(
        "aflite.Columns.html")
    assert "aflite.OutputError" in ids("aflite.OutputError.html")


# -------------------------------------------------------------------------------- navigation (issue #59, 2)
@pytest.mark.slow
def test_every_page_has_a_sidebar_and_the_commands_their_section(site: Path, every_page: dict[str, Page]) -> None:
    """The sidebar was empty on every guide page and the notebook, the command pages were only under the top bar's
    "More" (the user guide listed twice) and no "Commands" caption was shown."""
    from aflite.rundir.commands import declarations

    bare = {rel for rel, page in every_page.items() if not (page.sidebar_visible and page.sidebar_links)}
    assert not bare
    commands = [f"aflite {name}" for name in declarations()]
    for rel, page in every_page.items():
        assert len(page.header_links) == len(set(page.header_links)), (rel, page.header_links)
        assert page.header_links.count("User guide") == 1 and not any(h.startswith("aflite ") for h in
                                                                       page.header_links), (rel, page.header_links)
        if rel.startswith("guide/"):
            assert page.sidebar_captions[:1] == ["Commands"], rel
            assert [h for h in page.sidebar_links if h in commands] == commands, rel  # in aflite --help order
    assert "Notebook" in every_page["notebooks/quickstart.html"].sidebar_links


@pytest.mark.slow
def test_the_top_bar_menu_fits_a_1366_px_screen(site: Path) -> None:
    """The "More" menu ran past the right edge of a 1366 px wide window."""
    driver = new_driver(1366)
    try:
        driver.get((site / "guide" / "run.html").as_uri())
        toggle = driver.execute_script("return document.querySelector('.bd-header .navbar-header-items__center "
                                       ".dropdown-toggle')")
        assert toggle is not None
        toggle.click()
        box = wait_for(driver, "const m = document.querySelector('.bd-header .dropdown-menu.show');"
                               "if (!m) return null; const r = m.getBoundingClientRect();"
                               "return [r.left, r.right, r.bottom, window.innerWidth, window.innerHeight,"
                               " document.querySelector('.bd-header').scrollWidth,"
                               " document.querySelector('.bd-header').clientWidth];")
        left, right, bottom, width, height, scroll_width, client_width = box
        assert 0 <= left and right <= width and bottom <= height and scroll_width <= client_width, box
    finally:
        driver.quit()


# ------------------------------------------------------------------------------------ the glossary (issue #59, 7)
def test_the_glossary_defines_every_term_the_site_links() -> None:
    """Each term of aflite_docs.GLOSSARY has its entry (an anchor) in docs/glossary.md, which the site lists."""
    text = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    anchors = set(re.findall(r'<a id="([a-z0-9-]+)"></a>\*\*', text))
    assert {anchor for _, anchor in GLOSSARY} <= anchors
    assert "Glossary <glossary>" in (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for term in ("NBA", "NBR", "TRA", "PECO", "%R_R", "Δmaj", "D(Φ)", "Table 8", "single-iteration"):
        assert any(re.search(pattern, term) for pattern, _ in GLOSSARY), term


@pytest.mark.slow
def test_each_terms_first_use_on_a_page_links_to_the_glossary(every_page: dict[str, Page]) -> None:
    """NBA/NBR, TRA, PECO, %R_R, Δmaj, D(Φ), "Table 8" and "single-iteration" were used with no definition
    anywhere: on every page, the first use of each in prose is a link to its glossary entry."""
    anchors = dict(GLOSSARY)
    wrong = {}
    for rel, page in every_page.items():
        if rel == "glossary.html":
            continue
        up = "../" * rel.count("/")
        bad = {p: href for p, href in page.first_terms.items() if href != f"{up}glossary.html#{anchors[p]}"}
        if bad:
            wrong[rel] = bad
    assert not wrong
    assert len(every_page["guide/audit.html"].first_terms) >= 6 and every_page["index.html"].first_terms
