"""report.html in a real browser: Debian's chromium, headless, driven by Selenium through the system chromedriver
(no browser or driver is downloaded). Skipped, with the reason, only where chromium is not installed."""

from __future__ import annotations

import csv
import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
    pytest.skip("chromium and chromedriver are not installed (apt-get install chromium chromium-driver; .ci/run "
                "does it)", allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the [dev] extra)")

from quick_checks import quick_checks  # noqa: E402
from report_pages import IMG, SCRIPT, make_evaluate_finetuned, make_explain, make_run  # noqa: E402
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402


def new_driver() -> Any:
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("pages")
    run = make_run(tmp)
    explain = make_explain(tmp, run)
    evaluate = tmp / "evaluate"
    evaluate.mkdir()
    from committed import commit

    from aflite.commands.report import write_page

    measured = json.loads((Path(__file__).resolve().parents[1] / "docs/measured/evaluate_snli_devtest_results.json")
                          .read_text(encoding="utf-8"))  # committed as aflite evaluate commits its folder
    commit(evaluate, {k: v for k, v in measured.items() if k not in ("command", "argv", "versions", "seed")},
           command="evaluate")

    write_page(evaluate)
    out = {"run": run, "explain": explain, "evaluate": evaluate, "audit": make_audit(tmp)}
    try:
        import torch  # noqa: F401
    except ImportError:  # the [text] extra: the fine-tuned page is left out (its test says so)
        return out
    return {**out, "evaluate_ft": make_evaluate_finetuned(tmp, run)}


def make_audit(tmp: Path) -> Path:
    """A real audit (n-gram features, 100-point t-SNE maps) of test_report's small planted set, its page written
    by the audit's own writer."""
    from test_report import _dataset

    from aflite import audit as A
    from aflite.report import write_report

    res = A.audit(_dataset(), featurizer="ngram", tra=False, n_clusters=6, n_components=5, tsne_sample=100,
                  cache_dir=str(tmp / "cache"), show_progress=False)
    out = tmp / "audit"
    out.mkdir()
    write_report(out / "report.html", [res])
    return out


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    d = new_driver()
    try:
        yield d
    finally:
        d.quit()


def open_page(driver: Any, folder: Path) -> None:
    driver.get((folder / "report.html").resolve().as_uri())
    wait(driver, lambda: driver.execute_script("return document.body.getAttribute('data-ready')") == "1")
    assert driver.execute_script("return document.body.getAttribute('data-error')") is None


def wait(driver: Any, cond: Any, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for the page")


def shown(driver: Any) -> int:
    return int(driver.execute_script("return document.body.getAttribute('data-shown')"))


def instances(folder: Path) -> list[dict[str, str]]:
    with (folder / "instances.csv").open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def set_select(driver: Any, element_id: str, text: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, element_id)).select_by_visible_text(text)


def search(driver: Any, text: str) -> None:
    box = driver.find_element(By.ID, "f-search")
    box.clear()
    if text:
        box.send_keys(text)
    else:  # clear() sends no input event: fire one so that the table follows
        driver.execute_script("arguments[0].dispatchEvent(new Event('input'))", box)
    time.sleep(0.35)  # the search waits 200 ms after the last key


def test_filters_show_the_right_number_of_rows(driver: Any, pages: dict[str, Path]) -> None:
    run = pages["run"]
    rows = instances(run)
    open_page(driver, run)
    assert shown(driver) == len(rows)
    set_select(driver, "f-label", "neutral")
    assert shown(driver) == sum(r["label"] == "neutral" for r in rows)
    set_select(driver, "f-status", "removed")
    assert shown(driver) == sum(r["label"] == "neutral" and r["kept"] == "0" for r in rows)
    assert shown(driver) > 0
    set_select(driver, "f-label", "all")
    set_select(driver, "f-status", "kept")
    assert shown(driver) == sum(r["kept"] == "1" for r in rows)
    # the rendered page holds at most 200 rows, however many match
    assert len(driver.find_elements(By.CSS_SELECTOR, "#rows-body tr")) == min(200, shown(driver))


def test_search_narrows_the_table(driver: Any, pages: dict[str, Path]) -> None:
    open_page(driver, pages["run"])
    data = (pages["run"].parent / "pairs.tsv").read_text(encoding="utf-8").splitlines()[1:]
    want = sum("gravel3" in line.lower() for line in data)
    search(driver, "gravel3")
    assert 0 < shown(driver) == want < len(data)
    search(driver, "")
    assert shown(driver) == len(data)


def test_sorting_orders_by_the_column(driver: Any, pages: dict[str, Path]) -> None:
    open_page(driver, pages["run"])
    driver.find_element(By.CSS_SELECTOR, "th[data-col='p']").click()
    cells = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "#rows-body tr td:nth-child(5)")]
    values = [float(c) for c in cells if c]
    assert values == sorted(values) and len(values) > 10


def test_clicking_the_data_map_filters_the_table(driver: Any, pages: dict[str, Path]) -> None:
    explain = pages["explain"]
    open_page(driver, explain)
    wait(driver, lambda: driver.execute_script("return document.body.getAttribute('data-plots')") == "1")
    points = driver.find_elements(By.CSS_SELECTOR, "#plot-datamap .scatterlayer .trace:first-child .point")
    assert len(points) > 10
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", points[len(points) // 2])
    ActionChains(driver).move_to_element(points[len(points) // 2]).pause(0.3).click().perform()
    wait(driver, lambda: "data-map cell" in driver.find_element(By.ID, "row-count").text, timeout=10)
    label = driver.find_element(By.ID, "row-count").text
    m = re.search(r"confidence ([\d.]+)–([\d.]+), variability ([\d.]+)–([\d.]+)", label)
    assert m, label
    c0, v0 = float(m.group(1)), float(m.group(3))
    rows = instances(explain)
    want = sum(int(round(1000 * float(r["confidence"]))) // 50 == round(c0 / 0.05)
               and int(round(1000 * float(r["variability"]))) // 25 == round(v0 / 0.025) for r in rows)
    assert 0 < shown(driver) == want < len(rows)
    driver.find_element(By.ID, "clear-point").click()
    assert shown(driver) == len(rows)


def test_injected_markup_renders_as_text(driver: Any, pages: dict[str, Path]) -> None:
    run = pages["run"]
    open_page(driver, run)
    title = driver.title
    assert "pwned" not in title
    search(driver, "markup row")
    assert shown(driver) == 2
    cells = " ".join(td.text for td in driver.find_elements(By.CSS_SELECTOR, "#rows-body td"))
    assert IMG in cells and SCRIPT in cells  # shown, character for character
    assert driver.title == title
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018 - raises when no dialog is open
    assert not driver.find_elements(By.CSS_SELECTOR, "#rows-body img")  # no element made from the text
    verdict = driver.find_element(By.ID, "verdict").text
    assert "<b>not bold</b>" in verdict  # the verdict is text too


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_the_page_makes_no_network_request(pages: dict[str, Path]) -> None:
    d = new_driver()
    try:
        for name, folder in pages.items():
            if name == "audit":  # no rows table: wait for its maps
                d.get((folder / "report.html").resolve().as_uri())
                wait(d, lambda drv=d: len(drv.find_elements(By.CSS_SELECTOR, "div[data-tsne] .point")) > 0)
                continue
            open_page(d, folder)
            wait(d, lambda drv=d: drv.execute_script("return document.body.getAttribute('data-plots')") == "1")
        urls = []
        for entry in d.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            if msg["method"] == "Network.requestWillBeSent":
                urls.append(msg["params"]["request"]["url"])
        assert urls and all(u.startswith(("file:", "data:")) for u in urls), urls
        errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors  # a blocked fetch or a CSP violation is logged here
    finally:
        d.quit()


def test_a_packed_page_shows_the_same_rows(driver: Any, pages: dict[str, Path], tmp_path: Path) -> None:
    from aflite.commands.report import write_page

    folder = tmp_path / "packed"
    shutil.copytree(pages["explain"], folder)
    html = write_page(folder, pack=True).read_text(encoding="utf-8")
    assert '"packed"' in html
    open_page(driver, folder)
    assert shown(driver) == len(instances(folder))
    set_select(driver, "f-region", "hard")
    assert shown(driver) == sum(r["region"] == "hard" for r in instances(folder))


def test_the_audit_tsne_and_the_evaluate_bars_are_drawn(driver: Any, pages: dict[str, Path]) -> None:
    driver.get((pages["audit"] / "report.html").resolve().as_uri())
    maps = driver.find_elements(By.CSS_SELECTOR, "div[data-tsne]")
    assert len(maps) == 2  # one per condition (hypothesis, premise)
    wait(driver, lambda: len(driver.find_elements(By.CSS_SELECTOR, "div[data-tsne] .scatterlayer .point")) == 200)
    open_page(driver, pages["evaluate"])
    wait(driver, lambda: driver.execute_script("return document.body.getAttribute('data-plots')") == "1")
    res = json.loads((pages["evaluate"] / "results.json").read_text(encoding="utf-8"))
    n_bars = sum(1 for m in res["aggregate"].values() for e in m.values() if e.get("own_heldout"))
    assert len(driver.find_elements(By.CSS_SELECTOR, "#plot-accuracy .bars .point")) == n_bars
    assert len(driver.find_elements(By.CSS_SELECTOR, "#plot-accuracy .shapelayer path")) == 1  # the chance line


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_the_demo_page_of_the_quick_start_install_draws_its_plots(driver: Any, tmp_path: Path) -> None:
    """The README's quick start is `pip install -e ".[text]"` then `aflite demo`: plotly is a dependency of the base
    install, so the demo's report.html inlines plotly.js and draws its plots (no "pip install" notice instead).
    The n-gram Φ keeps this fast; the page is the same kind whatever Φ made the run."""
    import tomllib

    from aflite.cli import main

    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    assert [d for d in pyproject["project"]["dependencies"] if re.match(r"plotly\b", d)]
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--featurizer", "ngram", "--quiet", "-m", "8"]) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="aflite-plotly"' in html and "Interactive plots need" not in html
    open_page(driver, out)
    wait(driver, lambda: driver.execute_script("return document.body.getAttribute('data-plots')") == "1")
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert res["n_iterations"] > 1
    phases = driver.find_elements(By.CSS_SELECTOR, "#plot-phases .scatterlayer .trace:first-child .point")
    assert len(phases) == res["n_iterations"]  # |S| before each phase
    bars = driver.find_elements(By.CSS_SELECTOR, "#plot-labels .bars .point")
    assert len(bars) == 2 * len(res["label_counts_before"])  # before and after, per label
    assert driver.find_element(By.ID, "plot-phases").size["height"] > 100


def click(driver: Any, element: Any) -> None:
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    ActionChains(driver).move_to_element(element).pause(0.3).click().perform()


def test_clicking_a_phase_and_a_token_filters_the_table(driver: Any, pages: dict[str, Path]) -> None:
    run = pages["run"]
    open_page(driver, run)
    wait(driver, lambda: driver.execute_script("return document.body.getAttribute('data-plots')") == "1")
    click(driver, driver.find_elements(By.CSS_SELECTOR, "#plot-phases .scatterlayer .trace:first-child .point")[0])
    wait(driver, lambda: "removed in phase 0" in driver.find_element(By.ID, "row-count").text, timeout=10)
    assert 0 < shown(driver) == sum(r["removed_at"] == "0" for r in instances(run))

    explain = pages["explain"]
    open_page(driver, explain)
    wait(driver, lambda: driver.execute_script("return document.body.getAttribute('data-plots')") == "1")
    click(driver, driver.find_elements(By.CSS_SELECTOR, "#plot-comp-full .scatterlayer .trace:first-child .point")[0])
    wait(driver, lambda: driver.find_element(By.ID, "f-search").get_attribute("value") != "", timeout=10)
    token = driver.find_element(By.ID, "f-search").get_attribute("value").lower()
    from aflite.report.explorer import embedded_data

    cols = embedded_data((explain / "report.html").read_text(encoding="utf-8"))["cols"]
    want = sum(token in "\x01".join([cols["id"][r], cols["ta"][r], cols["tb"][r], cols["top"][r]]).lower()
               for r in range(len(cols["id"])))
    assert shown(driver) == want and want > 0


def test_an_image_run_shows_thumbnails(driver: Any, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from test_images import FILTER, _run, square_images, tiny_vit

    square_images(tmp_path / "d", n_per_class=8)
    out = tmp_path / "out"
    assert _run(["run", str(tmp_path / "d"), "--out", str(out), "--featurizer", "hf-image", "--model-path",
                 str(tiny_vit(tmp_path / "vit")), *FILTER]) == 0
    open_page(driver, out)
    imgs = driver.find_elements(By.CSS_SELECTOR, "#rows-body img")
    assert len(imgs) == 16
    assert all(img.get_attribute("src").startswith("data:image/jpeg;base64,") for img in imgs)
    assert all(0 < driver.execute_script("return arguments[0].naturalWidth", img) <= 48 for img in imgs)  # decoded
    # the page the run wrote from its images in memory is the page aflite report rebuilds from kept.csv/removed.csv
    from aflite.report.explorer import embedded_data

    written = embedded_data((out / "report.html").read_text(encoding="utf-8"))
    assert _run(["report", str(out)]) == 0
    assert embedded_data((out / "report.html").read_text(encoding="utf-8")) == written and written["cols"]["thumb"]


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_a_column_added_to_explains_table_shows_on_its_page(driver: Any, pages: dict[str, Path],
                                                            tmp_path: Path) -> None:
    """Every per-row column the page does not draw itself (a check's, here one added by hand to a real explain
    result's table) is shown as it is: a number column sorts as numbers, a text column is searchable and set as
    text (markup in it stays text); nothing in report/ names it. The page aflite report rebuilds shows it too."""
    from aflite.check import CheckResult
    from aflite.commands.explain import explain
    from aflite.report.explorer import embedded_data
    from aflite.rundir.folder import RunFolder

    run = pages["run"]
    res = explain(run.parent / "pairs.tsv", run, tmp_path / "first", checks=quick_checks(neighbours=3),
                  show_progress=False)
    assert res.checks is not None and res.data is not None
    n = len(res.data.ids)
    notes = [IMG if k == 7 else f"note{k:03d}" for k in range(n)]
    res.checks["by_hand"] = CheckResult("by_hand", columns={"hand_score": [f"{(k * 37) % 101 / 100:g}"
                                                                          for k in range(n)], "hand_note": notes})
    out = tmp_path / "explain"
    with RunFolder.claim(out, "explain") as folder:
        folder.finish(res)
    data = embedded_data((out / "report.html").read_text(encoding="utf-8"))
    assert [(m["name"], m["num"]) for m in data["cols"]["more"]] == [("hand_score", True), ("hand_note", False)]
    open_page(driver, out)
    heads = [th.get_attribute("data-col") for th in driver.find_elements(By.CSS_SELECTOR, "#rows-head th")]
    assert heads[-2:] == ["more-0", "more-1"]
    driver.find_element(By.CSS_SELECTOR, "th[data-col='more-0']").click()
    column = f"#rows-body tr td:nth-child({len(heads) - 1})"
    cells = [float(c.text) for c in driver.find_elements(By.CSS_SELECTOR, column)]
    assert cells == sorted((k * 37) % 101 / 100 for k in range(n))[:200]
    search(driver, "note042")
    assert shown(driver) == 1
    search(driver, "onerror=alert")
    assert shown(driver) == 1 and not driver.find_elements(By.CSS_SELECTOR, "#rows-body img")
    last = driver.find_elements(By.CSS_SELECTOR, f"#rows-body tr td:nth-child({len(heads)})")
    assert [c.text for c in last] == [IMG]
    from aflite.commands.report import write_page

    write_page(out)
    assert embedded_data((out / "report.html").read_text(encoding="utf-8")) == data


HOVER = "#plot-datamap .hoverlayer .hovertext"


def test_hovering_a_markup_row_on_the_data_map_shows_it_as_text(driver: Any, pages: dict[str, Path]) -> None:
    open_page(driver, pages["explain"])
    wait(driver, lambda: driver.execute_script("return document.body.getAttribute('data-plots')") == "1")
    title = driver.title
    for pid, markup in (("p7", IMG), ("p8", SCRIPT)):
        found = driver.execute_script("""
            var div = document.getElementById('plot-datamap'), want = arguments[0];
            for (var c = 0; c < div.data.length; c++) {
              var cd = div.data[c].customdata || [];
              for (var k = 0; k < cd.length; k++) {
                if (div.data[c].text[k].indexOf('id ' + want + ' ') === 0) {
                  window.Plotly.Fx.hover(div, [{curveNumber: c, pointNumber: k}]); return true; }
              }
            }
            return false;""", pid)
        assert found
        wait(driver, lambda pid=pid: any(f"id {pid} " in e.text for e in driver.find_elements(By.CSS_SELECTOR, HOVER)))
        hover = driver.find_element(By.CSS_SELECTOR, HOVER).text
        assert markup[:20] in hover.replace("\n", " ")  # the markup, as characters
        assert not driver.find_elements(By.CSS_SELECTOR, "#plot-datamap img, #plot-datamap script")
    assert driver.title == title
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018 - raises when no dialog is open


def test_the_competency_plot_labels_its_log_axis_in_full(driver: Any, pages: dict[str, Path], tmp_path: Path) -> None:
    """Plotly's own labels on a log axis over decades read "2 5 100 2 5 1000": every tick is now a full number,
    rising. The fixture's tokens are spread over 20 to 14,580 texts."""
    explain = tmp_path / "explain"
    shutil.copytree(pages["explain"], explain)
    with (explain / "tokens.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        k = (int(r["count"]) - 20) // 7  # the fixture's k-th token: 20 + 7k texts
        r["count"], r["label_count"] = str(20 * 3 ** k), str(round(float(r["p_label"]) * 20 * 3 ** k))
    with (explain / "tokens.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    from committed import commit

    from aflite.commands.report import write_page

    res = json.loads((explain / "results.json").read_text(encoding="utf-8"))  # committed again, with this tokens.csv
    commit(explain, {k: v for k, v in res.items() if k not in ("command", "format_version", "argv", "versions",
                                                                "manifest", "sealed", "seed")},
           command="explain", argv=res["argv"])
    write_page(explain)
    open_page(driver, explain)
    wait(driver, lambda: driver.execute_script("return document.querySelectorAll('#plot-comp-full .xtick').length"))
    ticks = driver.execute_script(
        "return Array.from(document.querySelectorAll('#plot-comp-full .xtick text')).map(t => t.textContent)")
    values = [int(t.replace(",", "")) for t in ticks]
    assert len(values) >= 3 and values == sorted(values), ticks
    assert all(str(v)[0] in "125" and set(str(v)[1:]) <= {"0"} for v in values), ticks
    assert values[-1] >= 10 * values[0], ticks  # whole decades, each labelled with its number


def test_the_evaluate_page_draws_each_training_loss_curve_and_the_learning_rate_check(
        driver: Any, pages: dict[str, Path]) -> None:
    if "evaluate_ft" not in pages:
        pytest.skip("torch is not installed (the [text] extra): no fine-tuned evaluate folder")
    folder = pages["evaluate_ft"]
    res = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    open_page(driver, folder)
    wait(driver, lambda: driver.execute_script("return document.body.getAttribute('data-plots')") == "1")
    runs = [r for r in res["runs"] if r.get("loss_curve")]
    assert len(runs) == 3  # D, D_random, D(Φ)
    lines = driver.find_elements(By.CSS_SELECTOR, "#plot-loss .scatterlayer .trace")
    assert len(lines) == len(runs) and all(ln.is_displayed() for ln in lines)
    drawn = driver.execute_script("return document.getElementById('plot-loss').data.map("
                                  "function (t) { return [t.name, t.y]; })")
    for r, (name, ys) in zip(runs, drawn, strict=True):  # each curve is its model's logged loss, per step
        assert r["train_set"] in name and ys == pytest.approx(r["loss_curve"]["loss"], rel=1e-6)
        assert len(ys) == r["steps"] == 6
    check = res["config"]["finetune"]["lr_check"]
    names = driver.execute_script("return document.getElementById('plot-lrcheck').data.map("
                                  "function (t) { return t.name; })")
    assert len(names) == len(check["candidates"]) == 2
    chosen = [n for n in names if n.endswith("(chosen)")]
    assert len(chosen) == 1 and float(chosen[0].split()[1].rstrip(":")) == check["chosen"]
    summary = driver.find_element(By.CSS_SELECTOR, "table").text
    assert "fine-tuning learning rate" in summary and "chosen by the learning-rate check" in summary


@pytest.mark.slow  # a run with its probe on the 2,949-pair sample: about 25 s on two busy cores
def test_a_demo_page_says_what_its_terminal_said(driver: Any, tmp_path: Path) -> None:
    """Issue #49 item 4: the demo's page was titled "aflite run", had no probe table and no examples, and its
    hovers showed p̃ quantiles such as 0.5689655."""
    from committed import commit

    import aflite
    from aflite.commands.report import write_page

    out = tmp_path / "demo"
    res = aflite.run(aflite.demo_dataset_path(), out, featurizer_options={"n_components": 64}, show_progress=False,
                     params={"n_partitions": 8, "target_size": 0.8}, title="the <b>bundled</b> sample")
    commit(out, res.summary, command="demo", argv=["demo", "--out", str(out)])  # as `aflite demo` commits it
    write_page(out)
    open_page(driver, out)
    wait(driver, lambda: driver.execute_script("return document.body.getAttribute('data-plots')") == "1")
    assert driver.title == "aflite demo: the <b>bundled</b> sample"  # escaped: shown as text
    heads = [h.text for h in driver.find_elements(By.TAG_NAME, "h2")]
    assert heads[:3] == ["Partial-input probe", "Removed by AFLite (most predictable, per label)",
                         "Retained by AFLite (least predictable, per label)"]
    body = driver.find_element(By.TAG_NAME, "body").text
    summary = (out / "summary.md").read_text(encoding="utf-8")
    for row in summary.split("## Removed by AFLite")[1].splitlines()[4:6]:  # the terminal's first examples
        assert row.split(" | ")[1].strip() in body
    for name in ("D(Φ)", "random subset (mean of 3)"):
        assert name in body
    quantiles = driver.execute_script("var d = document.getElementById('plot-phases').data;"
                                      "return d.filter(function (t) { return t.yaxis === 'y2'; })"
                                      ".map(function (t) { return t.y; });")
    assert quantiles and all(v is None or round(v, 3) == v for ys in quantiles for v in ys)
    assert driver.execute_script("return document.getElementById('plot-phases').layout.yaxis2.hoverformat") == ".3f"
