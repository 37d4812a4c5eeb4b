"""Cameras on a running server: a video file made of Mall frames and an MJPEG stream served on
loopback, counted at their rate into the API, /metrics and SQLite; a dead camera fails alone;
a dropped stream reconnects; zones of a density model add up to the frame count."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import cv2
import numpy as np
import pytest
from serve_helpers import DENSITY_MODEL, FAST_MODEL, MjpegStream, RunningServer, free_port, wait_for, write_config

from counting.model.counting_model import load_model

pytestmark = pytest.mark.slow  # the server counts real frames for several seconds


def video_counts(path: Path) -> np.ndarray:
    """The fast model's count of every frame of a video, decoded as the service decodes it."""
    capture = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, image = capture.read()
        if not ok:
            break
        frames.append(np.ascontiguousarray(image[:, :, ::-1]))
    capture.release()
    model = load_model(FAST_MODEL)
    # One frame a pass, as the service counts (a batch's size changes the last bits of the fc head).
    return np.concatenate([model.count_images([frame]) for frame in frames])


def metric(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{key}="{value}"' for key, value in labels.items())
    match = re.search(rf"^{name}\{{{re.escape(wanted)}\}} (\S+)$", text, re.MULTILINE)
    assert match, f"{name}{{{wanted}}} not in /metrics"
    return float(match.group(1))


def test_file_and_mjpeg_cameras_are_counted_into_the_api_metrics_and_history(
    tmp_path: Path, mall_video: Path, mjpeg_stream: MjpegStream
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/nothing.mjpg"  # nothing listens there
    config = write_config(
        tmp_path / "serve.toml",
        'database = "history.sqlite"',
        f"""
[[camera]]
name = "file"
source = "{mall_video}"
model = "{FAST_MODEL}"
fps = 4

[[camera]]
name = "stream"
source = "{mjpeg_stream.url}"
model = "{FAST_MODEL}"
fps = 4
reconnect = {{ max_retries = 0, backoff = 0.2, max_backoff = 0.5 }}

[[camera]]
name = "dead"
source = "{dead}"
fps = 4
reconnect = {{ max_retries = 1, backoff = 0.1 }}
""",
    )
    server = RunningServer(config)
    try:
        # the same model file: loaded once, shared by both cameras
        assert server.service.workers["file"].counter.model is server.service.workers["stream"].counter.model
        wait_for(
            lambda: all(camera["frames"] >= 6 for camera in server.client.get("/api/cameras").json()[:2]),
            what="6 frames of each live camera",
        )
        states = wait_for(
            lambda: (
                (s := {c["name"]: c for c in server.client.get("/api/cameras").json()})["dead"]["state"] == "failed"
                and s
            ),
            what="the dead camera to fail",
        )
        assert states["file"]["state"] == "running" and states["stream"]["state"] == "running"
        assert dead in states["dead"]["last_error"] and "gave up after 2 failures" in states["dead"]["last_error"]
        assert states["dead"]["frames"] == 0 and states["dead"]["latest"] is None
        assert metric(server.client.get("/metrics").text, "counting_camera_state", camera="dead", state="failed") == 1.0

        frame = server.client.get("/api/cameras/file/frame.jpg")
        assert frame.status_code == 200 and frame.headers["content-type"] == "image/jpeg"
        assert cv2.imdecode(np.frombuffer(frame.content, np.uint8), cv2.IMREAD_COLOR).shape == (480, 640, 3)

        # The stream drops: the camera reconnects, then counts again once the stream is back.
        reconnects_before = states["stream"]["reconnects"]
        mjpeg_stream.stop()
        wait_for(
            lambda: server.client.get("/api/cameras").json()[1]["state"] == "reconnecting",
            what="the stream camera to reconnect",
        )
        mjpeg_stream.serving.set()
        frames_back = wait_for(
            lambda: (c := server.client.get("/api/cameras").json()[1])["state"] == "running" and c["frames"],
            what="the stream camera to run again",
        )
        wait_for(lambda: server.client.get("/api/cameras").json()[1]["frames"] > frames_back, what="new frames")
        for worker in server.service.workers.values():  # freeze the counts to compare them
            worker.stop()
        server.service.history.flush()
        cameras = {c["name"]: c for c in server.client.get("/api/cameras").json()}
        assert cameras["stream"]["reconnects"] > reconnects_before
        metrics = server.client.get("/metrics").text
        latest = server.client.get("/api/latest").json()
        for name in ("file", "stream"):
            rows = server.client.get("/api/history", params={"camera": name, "zone": ""}).json()["rows"]
            assert len(rows) == cameras[name]["frames"]  # every counted frame is in SQLite
            assert rows[-1]["count"] == pytest.approx(latest[name]["count"], abs=1e-9)
            assert rows[-1]["low"] == pytest.approx(latest[name]["low"], abs=1e-9)
            assert metric(metrics, "counting_count", camera=name, zone="") == pytest.approx(latest[name]["count"])
            assert metric(metrics, "counting_frames_total", camera=name) == cameras[name]["frames"]
            assert 0 <= metric(metrics, "counting_frame_lag_seconds", camera=name) < 5
        assert metric(metrics, "counting_reconnects_total", camera="stream") == cameras["stream"]["reconnects"]
        assert metric(metrics, "counting_camera_state", camera="dead", state="stopped") == 1.0

        # Each count of the file camera is the model's count of one of the video's frames.
        expected = video_counts(mall_video)
        for row in server.client.get("/api/history", params={"camera": "file", "zone": ""}).json()["rows"]:
            assert np.min(np.abs(expected - row["count"])) < 1e-6
    finally:
        server.close()
    connection = sqlite3.connect(tmp_path / "history.sqlite")
    stored = dict(connection.execute("SELECT camera, COUNT(*) FROM counts GROUP BY camera").fetchall())
    assert stored == {"file": cameras["file"]["frames"], "stream": cameras["stream"]["frames"]}


def test_zone_counts_of_a_partition_add_up_to_the_frame_count(tmp_path: Path, mall_video: Path) -> None:
    config = write_config(
        tmp_path / "serve.toml",
        'database = "history.sqlite"',
        f"""
[[camera]]
name = "zoned"
source = "{mall_video}"
model = "{DENSITY_MODEL}"
fps = 2
zones = ["left:0,0,0.4,0,0.4,1,0,1", "middle:0.4,0,0.7,0,0.7,1,0.4,1", {{ name = "right", points = [[448, 0], [640, 0], [640, 480], [448, 480]] }}]
""",
    )
    server = RunningServer(config)
    try:
        wait_for(lambda: server.client.get("/api/cameras").json()[0]["frames"] >= 2, timeout=120, what="2 frames")
        server.service.workers["zoned"].stop()
        server.service.history.flush()
        latest = server.client.get("/api/latest").json()["zoned"]
        assert set(latest["zones"]) == {"left", "middle", "right"}
        assert sum(zone["count"] for zone in latest["zones"].values()) == pytest.approx(latest["count"], abs=1e-6)
        rows = server.client.get("/api/history", params={"camera": "zoned"}).json()["rows"]
        by_time: dict[float, dict[str, float]] = {}
        for row in rows:
            by_time.setdefault(row["time"], {})[row["zone"]] = row["count"]
        assert len(by_time) >= 2
        for zones in by_time.values():
            assert set(zones) == {"", "left", "middle", "right"}
            assert zones["left"] + zones["middle"] + zones["right"] == pytest.approx(zones[""], abs=1e-6)
        plain = cv2.imdecode(np.frombuffer(server.client.get("/api/cameras/zoned/frame.jpg").content, np.uint8), 1)
        assert plain.shape == (480, 640, 3)
    finally:
        server.close()
