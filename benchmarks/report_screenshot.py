"""A screenshot of a report.html in headless chromium, 1280 px wide (for the README). Not a test::

    python benchmarks/report_screenshot.py RUN_DIR docs/report_demo.png [--height 1500]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from report_page_timing import driver


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("png", type=Path)
    ap.add_argument("--height", type=int, default=1500)
    ap.add_argument("--search", default="", help="type this into the table's search box first")
    args = ap.parse_args()
    d = driver()
    try:
        d.set_window_size(1280, args.height)
        d.get((args.folder / "report.html").resolve().as_uri())
        end = time.monotonic() + 60
        while time.monotonic() < end and d.execute_script("return document.body.getAttribute('data-plots')") != "1":
            time.sleep(0.1)
        if args.search:
            from selenium.webdriver.common.by import By

            d.find_element(By.ID, "f-search").send_keys(args.search)
        time.sleep(1.0)
        d.save_screenshot(str(args.png))
    finally:
        d.quit()


if __name__ == "__main__":
    main()
