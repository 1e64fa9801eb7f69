"""Headless Chromium for the site's tests: Debian's chromium and chromedriver, driven by selenium.

`SKIP` is the one line a test prints when they are missing; `start()` gives a driver that records console messages.
"""

from __future__ import annotations

import shutil
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
SKIP = ("browser tests need Chromium and chromedriver: `sudo apt-get install chromium chromium-driver` "
        "(Debian/Ubuntu; `make browser-deps` as root), then make test")


def start() -> Any:
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,1300"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # an explicit driver path: selenium's own driver manager would try to download one
    return webdriver.Chrome(service=webdriver.ChromeService(CHROMEDRIVER), options=options)


def console_errors(driver: Any) -> list[dict[str, Any]]:
    """The SEVERE console messages since the last call (uncaught errors, failed loads)."""
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
