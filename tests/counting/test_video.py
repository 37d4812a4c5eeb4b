"""Video pipeline: end of file, stride, reconnection with back-off, Ctrl-C keeps what was written."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from counting.apply.video import VideoSource, annotate, count_video
from counting.core.errors import StreamError
from counting.data.datasets import load_dataset
from counting.features import FeatureCache
from counting.train.pipeline import TrainingConfig, train_model

N_FRAMES = 10


@pytest.fixture(scope="module")
def model(mall_root: Path, session_cache_dir: Path):
    dataset = load_dataset("mall", mall_root, split="train=1-70,test=71-80")
    config = TrainingConfig(input_size=64, use_roi=False, n_centers=5, max_epochs=2, calibration="none")
    return train_model(dataset, config, cache=FeatureCache(session_cache_dir))


@pytest.fixture(scope="module")
def video(tmp_path_factory, mall_root: Path) -> Path:
    path = tmp_path_factory.mktemp("v") / "mall.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (640, 480))
    for frame in sorted((mall_root / "frames").glob("*.jpg"))[:N_FRAMES]:
        writer.write(cv2.imread(str(frame)))
    writer.release()
    return path


def test_file_ends_cleanly_and_counts_match_images(model, video: Path, tmp_path: Path, mall_root: Path) -> None:
    out = tmp_path / "c.csv"
    run = count_video(model, str(video), records_path=out, batch_size=4, keep_records=True)
    assert run.frames == N_FRAMES and not run.interrupted and run.source_fps == pytest.approx(25.0)
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["frame"]) for r in rows] == list(range(N_FRAMES))
    assert "low" not in rows[0]  # uncalibrated model: no interval columns
    counts = np.array([float(r["count"]) for r in rows])
    # the same counts as the model gives for the decoded frames one by one
    capture = cv2.VideoCapture(str(video))
    decoded = [cv2.cvtColor(capture.read()[1], cv2.COLOR_BGR2RGB) for _ in range(N_FRAMES)]
    capture.release()
    one_by_one = np.concatenate([model.count_images([frame]) for frame in decoded])
    assert np.abs(counts - one_by_one).max() < 2e-3
    # and close to the counts of the original JPEG files (MJPG re-encoding changes pixels slightly)
    from_files = model.count_paths(sorted((mall_root / "frames").glob("*.jpg"))[:N_FRAMES]).counts
    assert np.abs(counts - from_files).max() < 3.0


def test_live_stream_reconnects_with_backoff(model, video: Path) -> None:
    # Declared a live source, the file "drops" at its end; each reconnection reopens it.
    source = VideoSource(str(video), "url", live=True)
    retries: list[tuple[int, float]] = []
    run = count_video(
        model,
        source,
        max_frames=N_FRAMES * 2 + 3,
        max_retries=3,
        backoff=0.01,
        on_retry=lambda attempt, delay: retries.append((attempt, delay)),
        keep_records=True,
    )
    assert run.frames == N_FRAMES * 2 + 3 and run.retries == 2
    assert [r["frame"] for r in run.records][:N_FRAMES] == list(range(N_FRAMES))
    # one retry budget for the whole run (attempts 1, 2 of 3); each drop starts its back-off afresh
    assert retries == [(1, 0.01), (2, 0.01)]


def test_lost_stream_keeps_what_was_written(model, video: Path, tmp_path: Path, monkeypatch) -> None:
    source = VideoSource(str(video), "url", live=True)
    opened = {"n": 0}
    real_open = VideoSource.open

    def open_once(self):
        opened["n"] += 1
        if opened["n"] > 1:
            raise StreamError(f"{self.spec}: cannot open the stream")
        return real_open(self)

    monkeypatch.setattr(VideoSource, "open", open_once)
    out = tmp_path / "c.jsonl"
    delays: list[float] = []
    started = time.monotonic()
    with pytest.raises(StreamError, match="stream lost and 3 reconnection attempts failed"):
        count_video(
            model,
            source,
            records_path=out,
            max_retries=3,
            backoff=0.01,
            on_retry=lambda attempt, delay: delays.append(delay),
        )
    assert delays == [0.01, 0.02, 0.04]  # exponential back-off
    assert time.monotonic() - started < 30
    assert len(out.read_text().splitlines()) == N_FRAMES


def test_ctrl_c_keeps_what_was_written(model, video: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.csv"
    seen: list[dict] = []

    def interrupt_after_three(record: dict) -> None:
        seen.append(record)
        if len(seen) == 3:
            raise KeyboardInterrupt

    run = count_video(model, str(video), records_path=out, batch_size=2, on_record=interrupt_after_three)
    assert run.interrupted and run.frames == 3  # Ctrl-C came after the third record was written
    lines = out.read_text().splitlines()
    assert lines[0].startswith("frame,time_s,count") and len(lines) == 1 + 3


def test_sources_are_told_apart() -> None:
    assert VideoSource.parse("0").kind == "webcam"
    assert VideoSource.parse("rtsp://camera.local/stream").kind == "url"
    assert VideoSource.parse("HTTP://127.0.0.1:8080/video").kind == "url"
    with pytest.raises(StreamError, match="nowhere.mp4: video file not found"):
        VideoSource.parse("nowhere.mp4")


def test_annotate_draws_in_the_corner() -> None:
    frame = np.full((480, 640, 3), 200, dtype=np.uint8)
    annotate(frame, "count 31.2 [27-35]")
    assert (frame[:10, :10] == 0).all() and (frame[400:, 400:] == 200).all()
    assert (frame[:60, :300] == (0, 255, 255)).all(axis=2).any()
