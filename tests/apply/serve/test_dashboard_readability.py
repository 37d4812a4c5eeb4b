"""The dashboard read at the widths people use (800 and 1280 pixels), in headless Chromium: the
zone labels drawn on a camera's frame stay readable once the page has shrunk the frame into its
card, and the zone table's text is a readable size. Screenshots of both widths are written to
the test's folder (COUNTING_DASHBOARD_SCREENSHOTS=DIR copies them there, to look at).

Before the fix a 640x480 frame's zone labels were 16 px boxes of 8-px capitals, and the cards
(360 px at least, three to a 1280-px row) shrank them to about 5 px."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
from serve_helpers import DENSITY_MODEL, FAST_MODEL, RunningServer, wait_for, write_config
from test_serve_browser import browser  # noqa: F401 - the fixture: Chromium through Selenium

pytestmark = pytest.mark.slow

WIDTHS = (800, 1280)
# A label box (dark, padded) on the page at least this high: capitals of about 12 px.
MIN_RENDERED_BOX_PX = 20


def zone_label_heights(jpeg: bytes) -> dict[str, int]:
    """Height in frame pixels of each half's zone label on an annotated frame: its tallest wide
    dark region, mostly filled, away from the corner's count label (which touches the edges)."""
    frame = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    dark = (frame.max(axis=2) < 45).astype(np.uint8)
    count, _, stats, _ = cv2.connectedComponentsWithStats(dark, connectivity=8)
    heights: dict[str, int] = {}
    for x, y, w, h, area in stats[1:count]:
        if x > 0 and y > 0 and w > 2.5 * h and h >= 6 and area > 0.5 * w * h:
            half = "left" if x + w / 2 < frame.shape[1] / 2 else "right"
            heights[half] = max(heights.get(half, 0), int(h))
    return heights


def test_zone_labels_read_at_800_and_1280_pixels_wide(
    browser,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    mall_video: Path,
) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

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
source = "{mall_video}"
model = "{FAST_MODEL}"
fps = 1
""",
    )
    server = RunningServer(config)
    try:
        wait_for(lambda: server.client.get("/api/cameras").json()[0]["frames"] >= 1, timeout=120, what="a frame")
        heights = zone_label_heights(server.client.get("/api/cameras/entrance/frame.jpg").content)
        assert set(heights) == {"left", "right"}, heights  # a label in each zone
        browser.get(server.url + "/")
        card = 'article.camera[data-camera="entrance"]'
        for width in WIDTHS:
            browser.set_window_size(width, 1100)
            image = wait_for(
                lambda: next(
                    (
                        found
                        for found in browser.find_elements(By.CSS_SELECTOR, f"{card} img.frame")
                        if browser.execute_script("return arguments[0].naturalWidth", found) == 640
                    ),
                    None,
                ),
                what="the entrance frame",
            )
            # The frame's scale on the page: the shown box is 4:3 like the frame (object-fit: contain).
            shown = browser.execute_script("return arguments[0].getBoundingClientRect().width", image)
            scale = shown / 640
            rendered = [height * scale for height in heights.values()]
            assert min(rendered) >= MIN_RENDERED_BOX_PX, (width, shown, rendered)
            zone_cell = browser.find_element(By.CSS_SELECTOR, f"{card} table.zones td")
            font = browser.execute_script("return parseFloat(getComputedStyle(arguments[0]).fontSize)", zone_cell)
            assert font >= 13, font
            browser.save_screenshot(str(tmp_path / f"dashboard-{width}.png"))
        # A click gives the frame the whole row, a second click gives the row back.
        browser.execute_script("arguments[0].click()", image)
        wide = browser.execute_script("return arguments[0].getBoundingClientRect().width", image)
        assert wide > shown * 1.5
        browser.execute_script("arguments[0].click()", image)
        assert browser.execute_script("return arguments[0].getBoundingClientRect().width", image) == shown
    finally:
        server.close()
    keep = os.environ.get("COUNTING_DASHBOARD_SCREENSHOTS")
    if keep:
        for width in WIDTHS:
            shutil.copyfile(tmp_path / f"dashboard-{width}.png", Path(keep) / f"dashboard-{width}.png")
