"""The dashboard in a real headless browser (Chromium from the Debian package, driven by
Selenium through the Debian chromedriver): the page loads with its token, shows the counts the
API reports for each camera and zone, shows the annotated frame, and its chart updates. The
screenshot it takes is the README's (COUNTING_UPDATE_SCREENSHOT=1 writes docs/serve.png)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from serve_helpers import DENSITY_MODEL, FAST_MODEL, REPO, MjpegStream, RunningServer, wait_for, write_config

pytestmark = pytest.mark.slow

TOKEN = "browser-test-token"
SCREENSHOT = REPO / "docs" / "serve.png"


def browser_paths() -> tuple[str, str]:
    """(chromium, chromedriver); in CI a missing browser fails, elsewhere it skips."""
    chromium = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver = shutil.which("chromedriver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        chromium = None
    if chromium is None or driver is None:
        message = "the browser test needs chromium, chromedriver and selenium (apt-get install chromium chromium-driver; pip install selenium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return chromium, driver


@pytest.fixture
def browser():  # type: ignore[no-untyped-def]
    chromium, driver_path = browser_paths()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1250",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=DriverService(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _disputing_camera(shared_data: Path, folder: Path) -> tuple[Path, Path]:
    """(video, model): the coco-voc20 placemat (0 people) as a 2-frame video, and the shipped crowd
    model with its gate's head limit lowered to 300, which disputes its count (the heads read ~528
    people in its texture; tests/counting/test_disputed_counts.py)."""
    from dataclasses import replace

    from counting.apply.serve.videos import frames_to_video
    from counting.model.counting_model import CountingModel

    placemat = shared_data / "coco-voc20" / "VOCdevkit" / "VOC2007" / "JPEGImages" / "000000567982.jpg"
    shipped = CountingModel.load(REPO / "models" / "crowd.npz")
    strict = replace(shipped, sparse_gate=replace(shipped.sparse_gate, head_limit=300.0))
    return frames_to_video([placemat, placemat], folder / "placemat.avi", 2.0), strict.save(folder / "strict.npz")


def test_the_dashboard_shows_the_api_counts_and_its_chart_updates(
    browser, tmp_path: Path, mall_video: Path, mjpeg_stream: MjpegStream, shared_data: Path
) -> None:  # type: ignore[no-untyped-def]
    from counting.apply.video import UNRELIABLE_MARKS

    placemat_video, strict_model = _disputing_camera(shared_data, tmp_path)
    config = write_config(
        tmp_path / "serve.toml",
        'database = "history.sqlite"',
        f"""
[[camera]]
name = "entrance"
source = "{mall_video}"
model = "{DENSITY_MODEL}"
fps = 1
zones = ["left:0,0,0.5,0,0.5,1,0,1", "right:0.5,0,1,0,1,1,0.5,1"]

[[camera]]
name = "corridor"
source = "{mjpeg_stream.url}"
model = "{FAST_MODEL}"
fps = 2

[[camera]]
name = "placemat"
source = "{placemat_video}"
model = "{strict_model}"
fps = 1
""",
    )
    server = RunningServer(config, token=TOKEN)
    try:
        from selenium.webdriver.common.by import By

        browser.get(server.url + "/?token=" + TOKEN)
        assert browser.title.startswith("counting")
        wait_for(
            lambda: (
                len(browser.find_elements(By.CSS_SELECTOR, "article.camera .count[data-count]:not([data-count=''])"))
                == 3
            ),
            what="the three cameras' counts on the page",
        )
        chart = browser.find_element(By.ID, "chart")
        first_end, first_points = float(chart.get_attribute("data-end") or 0), int(chart.get_attribute("data-points"))
        wait_for(
            lambda: (
                float(chart.get_attribute("data-end")) > first_end
                and int(chart.get_attribute("data-points")) > first_points
            ),
            timeout=30,
            what="the chart to redraw with more points",
        )
        assert len(browser.find_elements(By.CSS_SELECTOR, "#chart polyline")) == 3
        wait_for(
            lambda: server.client.get("/api/cameras").json()[0]["frames"] >= 8, timeout=90, what="8 frames of entrance"
        )
        time.sleep(5.5)  # one more chart poll, so the screenshot's chart holds them
        browser.save_screenshot(str(tmp_path / "serve.png"))
        assert (tmp_path / "serve.png").stat().st_size > 20_000
        if os.environ.get("COUNTING_UPDATE_SCREENSHOT"):
            shutil.copyfile(tmp_path / "serve.png", SCREENSHOT)

        for worker in server.service.workers.values():  # freeze the counts, then compare page and API
            worker.stop()
        api = {camera["name"]: camera for camera in server.client.get("/api/cameras").json()}

        def page_matches_api() -> bool:
            for name, camera in api.items():
                card = browser.find_element(By.CSS_SELECTOR, f'article.camera[data-camera="{name}"]')
                count = card.find_element(By.CSS_SELECTOR, ".count")
                if count.get_attribute("data-count") in ("", None):
                    return False
                if float(count.get_attribute("data-count")) != camera["latest"]["count"]:
                    return False
            return True

        wait_for(page_matches_api, timeout=15, what="the page to show the API's latest counts")
        for name, camera in api.items():
            card = browser.find_element(By.CSS_SELECTOR, f'article.camera[data-camera="{name}"]')
            latest = camera["latest"]
            assert card.find_element(By.CSS_SELECTOR, ".count").text == f"{latest['count']:.1f}"
            assert (
                card.find_element(By.CSS_SELECTOR, ".interval").text == f"[{latest['low']:.1f} – {latest['high']:.1f}]"
            )
            assert card.find_element(By.CSS_SELECTOR, ".state").text.lower() == "stopped"
            # An unreliable count is marked beside it, as count's table and the drawn frame mark it.
            marks = ", ".join(words for key, words in UNRELIABLE_MARKS if latest.get(key))
            assert card.find_element(By.CSS_SELECTOR, ".marks").text == marks
            zone_rows = card.find_elements(By.CSS_SELECTOR, "table.zones tr[data-zone]")
            shown = {
                row.get_attribute("data-zone"): row.find_element(By.CSS_SELECTOR, ".zone-count").text
                for row in zone_rows
            }
            assert shown == {zone: f"{entry['count']:.1f}" for zone, entry in latest["zones"].items()}
            image = card.find_element(By.CSS_SELECTOR, "img.frame")
            width = 500 if name == "placemat" else 640  # the photo's width; Mall frames are 640 wide
            wait_for(
                lambda image=image, width=width: (
                    browser.execute_script("return arguments[0].naturalWidth", image) == width
                ),
                what="the frame",
            )
        assert set(api["entrance"]["latest"]["zones"]) == {"left", "right"}
        assert api["placemat"]["latest"]["disputed"] and not api["entrance"]["latest"].get("disputed")
        # The history keeps the marks: every placemat frame disputed, no Mall frame (nor its zones).
        server.service.history.flush()
        placemat_rows = server.service.history.query(camera="placemat")
        assert placemat_rows and all(row["disputed"] for row in placemat_rows)
        assert not any(row["disputed"] for row in server.service.history.query(camera="entrance"))
    finally:
        server.close()
