"""Real headless Chromium for the web pages' tests (Debian's ``chromium`` and
``chromium-driver``, which .ci/run installs), driven by Selenium: a browser at a phone's
size or a desktop's, the requests it sent (from its performance log), and where its
screenshots go (DDZ_TEST_SCREENSHOTS when set, else a temporary directory)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
PHONE = (390, 844)
DESKTOP = (1280, 900)


def headless(window: tuple[int, int]) -> Options:
    """The options of a headless Debian Chromium with a window of ``window`` pixels."""
    assert os.path.exists(CHROMIUM) and os.path.exists(DRIVER), (
        "the browser tests need Debian's chromium and chromium-driver (.ci/run installs them)"
    )
    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument(f"--window-size={window[0]},{window[1]}")
    return options


def started(options: Options) -> webdriver.Chrome:
    """A Chromium started with ``options`` (see :func:`headless`) through its driver."""
    return webdriver.Chrome(service=Service(DRIVER), options=options)


@contextmanager
def chromium(size: tuple[int, int] = DESKTOP) -> Iterator[webdriver.Chrome]:
    """A headless Chromium showing pages at ``size`` (a width under 600 as a phone: a
    touch screen at that size, whatever the smallest window headless Chromium draws)."""
    options = headless((max(size[0], 500), size[1]))
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = started(options)
    try:
        width, height = size
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
        )
        driver.implicitly_wait(0)
        yield driver
    finally:
        driver.quit()


def requested(driver: webdriver.Chrome) -> list[str]:
    """The URLs the browser asked for since the last call (its performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def screenshots() -> Path | None:
    where = os.environ.get("DDZ_TEST_SCREENSHOTS")
    if not where:
        return None
    path = Path(where)
    path.mkdir(parents=True, exist_ok=True)
    return path
