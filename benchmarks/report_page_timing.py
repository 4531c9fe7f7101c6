"""Size and time to usable of report.html pages, in headless chromium (Debian's, through its chromedriver).

For each page, a fresh browser opens it ``--repeats`` times; per load it records the load event (navigation start
to loadEventEnd), the moment the page's script has rendered the first 200 rows of the table (``afliteUsableMs``,
performance.now() at that point, which the page sets), the time to usable = the later of the two, and when the
plots were drawn (``aflitePlotsMs``). The machine's load average is read before and after. Not a test: run it by
hand from the repository root::

    python benchmarks/report_page_timing.py demo=/path/to/demo snli100k=/path/to/run --out docs/measured/x.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def driver() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=opts)


# in-page timings of three interactions, each synchronous (filter + sort + render of the first 200 rows): a label
# filter, a text search (the box is read by the same filter), and a sort by the p̃ column
_INTERACT = """
var out = {}, t, lab = document.getElementById('f-label');
t = performance.now(); lab.value = '0'; lab.dispatchEvent(new Event('change'));
out.label_filter_ms = performance.now() - t; out.label_filter_rows = +document.body.getAttribute('data-shown');
lab.value = ''; document.getElementById('f-search').value = arguments[0];
t = performance.now(); lab.dispatchEvent(new Event('change'));
out.search_ms = performance.now() - t; out.search_rows = +document.body.getAttribute('data-shown');
document.getElementById('f-search').value = ''; lab.dispatchEvent(new Event('change'));
var th = document.querySelector("th[data-col='p']");
t = performance.now(); if (th) th.click(); out.sort_p_ms = performance.now() - t;
return out;
"""


def measure(page: Path, repeats: int, query: str = "the") -> dict[str, Any]:
    loads = []
    for _ in range(repeats):  # a fresh browser each time: the first (cold) load of the file, as a user opens it
        d = driver()
        try:
            d.set_page_load_timeout(120)
            d.get(page.resolve().as_uri())
            end = time.monotonic() + 120
            while time.monotonic() < end:
                done = d.execute_script("return [document.body && document.body.getAttribute('data-ready'), "
                                        "document.body && document.body.getAttribute('data-plots'), "
                                        "document.body && document.body.getAttribute('data-error')]")
                if done[2]:
                    raise RuntimeError(f"{page}: the page failed: {done[2]}")
                if done[0] == "1" and done[1] == "1":
                    break
                time.sleep(0.05)
            t = d.execute_script(
                "var n=performance.getEntriesByType('navigation')[0];"
                "return {load: n.loadEventEnd, usable: window.afliteUsableMs, plots: window.aflitePlotsMs || null,"
                " shown: +document.body.getAttribute('data-shown')};")
            t["time_to_usable"] = max(t["load"], t["usable"])
            t.update(d.execute_script(_INTERACT, query))
            loads.append({k: (round(v, 1) if isinstance(v, float) else v) for k, v in t.items()})
        finally:
            d.quit()
    return {
        "loads_ms": loads,
        "median_time_to_usable_ms": round(statistics.median(x["time_to_usable"] for x in loads), 1),
        "median_plots_drawn_ms": (round(statistics.median(x["plots"] for x in loads), 1)
                                  if all(x["plots"] is not None for x in loads) else None),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="+", help="NAME=FOLDER (a folder holding report.html)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--note", default="", help="how the folders were made (recorded)")
    ap.add_argument("--query", default="dog", help="the text searched for in the search timing")
    args = ap.parse_args()
    import subprocess

    version = subprocess.run(["/usr/bin/chromium", "--version"], capture_output=True, text=True).stdout.strip()
    results: dict[str, Any] = {"browser": f"{version}, headless, 1280x1000, via selenium + chromedriver",
                               "cpu_count": os.cpu_count(), "note": args.note, "query": args.query, "pages": {}}
    for spec in args.pages:
        name, _, folder = spec.partition("=")
        page = Path(folder) / "report.html"
        load_before = os.getloadavg()
        r = measure(page, args.repeats, args.query)
        r["bytes"] = page.stat().st_size
        r["load_average_before"] = [round(x, 2) for x in load_before]
        r["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
        results["pages"][name] = r
        print(name, r["bytes"], r["median_time_to_usable_ms"], r["median_plots_drawn_ms"], r["load_average_before"])
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
