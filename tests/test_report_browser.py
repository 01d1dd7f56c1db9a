"""report.html in a real headless Chromium: loads offline, clean console, verdict on top.

Skipped when Chromium, chromedriver or selenium is missing, except under CI=true, where it
fails instead: CI must really run it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dpwise.report.files import write_reports
from dpwise.results.document import Results

SAMPLE = Path(__file__).parent / "fixtures" / "results_sample.json"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHROME_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1200,900",
)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI=true, so the browser test must run, not skip")
    pytest.skip(reason)


def _new_driver(profile: Path) -> Any:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("selenium is not installed")
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.is_file()]
    if missing:
        _unavailable(
            f"headless browser test needs {' and '.join(missing)} "
            "(Debian packages chromium and chromium-driver)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (*CHROME_ARGS, f"--user-data-dir={profile}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """The sample's report.html opened from a file:// URL; the console log read right after."""
    out = tmp_path_factory.mktemp("report")
    results = json.loads(SAMPLE.read_text())
    _, paths = write_reports(Results.from_json(results), out)
    driver = _new_driver(tmp_path_factory.mktemp("chromium-profile"))
    try:
        driver.get(paths["html"].resolve().as_uri())
        logs = driver.get_log("browser")
        yield SimpleNamespace(driver=driver, logs=logs, results=results, out=out)
    finally:
        driver.quit()


def test_console_has_no_errors(page):
    severe = [entry for entry in page.logs if entry.get("level") == "SEVERE"]
    assert not severe, severe
    assert page.driver.title == "dpwise compare report"


def test_every_image_loads(page):
    images = page.driver.execute_script(
        "return Array.from(document.images).map("
        "  img => ({alt: img.alt, complete: img.complete, width: img.naturalWidth}))"
    )
    referenced = {c["plot"] for c in page.results["checks"] if c["plot"]}
    assert len(images) == len(referenced) == 4
    for image in images:
        assert image["complete"] is True and image["width"] > 0, image


def test_verdict_is_visible_and_above_the_checks(page):
    from selenium.webdriver.common.by import By

    verdict = page.driver.find_element(By.ID, "verdict")
    assert verdict.is_displayed()
    assert verdict.size["width"] > 0 and verdict.size["height"] > 0
    assert page.results["recommendation"]["headline"] in verdict.text
    first_check = page.driver.find_element(By.CSS_SELECTOR, "section[id^='check-']")
    assert verdict.location["y"] + verdict.size["height"] <= first_check.location["y"]


def test_screenshot_is_a_png(page, tmp_path):
    shot = tmp_path / "report.png"
    assert page.driver.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000


def _wide_results() -> dict[str, Any]:
    """The sample with today's widest check tables: speed and communication with ddp × 1 and × 2
    and fsdp × 2 (its collectives add a column)."""
    from compare_fakes import comm, context, fsdp_comm, run
    from dpwise.compare import checks

    one = comm(0.0)
    for key in ("step_ms", "step_ms_without_sync", "exposed_ms", "exposed_share"):
        del one[key]
    runs = [
        run("single", 1000),
        run("dp", 990),
        run("ddp-1", 980, comm=one),
        run("ddp-2", 1500, comm=comm(0.123)),
        run("fsdp-2", 1400, comm=fsdp_comm(0.123)),
    ]
    results = json.loads(SAMPLE.read_text())
    ctx = context(runs, repeats=12)
    results["checks"] = [c(ctx).to_dict() for c in (checks.SPEED, checks.COMMUNICATION)]
    return results


def test_every_table_fits_its_card_at_1200_px(tmp_path):
    _, paths = write_reports(Results.from_json(_wide_results()), tmp_path / "report")
    driver = _new_driver(tmp_path / "profile")
    try:
        driver.get(paths["html"].resolve().as_uri())
        widths = driver.execute_script(
            "return [...document.querySelectorAll('.table-wrap')].map("
            "w => [w.closest('section').id, w.scrollWidth, w.clientWidth]);"
        )
    finally:
        driver.quit()
    assert any(section == "check-communication" for section, _, _ in widths)
    overflowing = [(s, inner, card) for s, inner, card in widths if inner > card]
    assert not overflowing, overflowing
