"""`counting video` end to end on a short video written from real Mall frames."""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path

import cv2
import numpy as np

from counting.cli.app import app


def test_video_file_to_csv_with_annotated_output(trained, runner, short_video: Path, tmp_path: Path) -> None:
    model_path, _ = trained
    out, annotated = tmp_path / "counts.csv", tmp_path / "annotated.avi"
    result = runner.invoke(
        app,
        [
            "video",
            str(short_video),
            "--model",
            str(model_path),
            "--csv",
            str(out),
            "--annotated",
            str(annotated),
            "--smooth",
            "3",
            "--batch-size",
            "4",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "done: 12 frames" in result.output
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["frame"]) for r in rows] == list(range(12))
    assert [float(r["time_s"]) for r in rows] == [k / 25 for k in range(12)]
    counts = np.array([float(r["count"]) for r in rows])
    smoothed = np.array([float(r["smoothed"]) for r in rows])
    assert ((counts > 5) & (counts < 70)).all()  # Mall frames 1-12 hold 29-35 people
    # the causal filter of span 3 (counting.apply.smoothing), with the smoothed count's own interval
    from counting.apply.smoothing import causal_smooth

    assert np.allclose(smoothed, causal_smooth(counts, 3), atol=2e-3)
    assert all(float(r["low"]) <= float(r["count"]) <= float(r["high"]) for r in rows)
    assert all(float(r["smoothed_low"]) <= float(r["smoothed"]) <= float(r["smoothed_high"]) for r in rows)
    # the console line shows each frame's own count beside its own interval, then the smoothed
    # count beside its own
    last = rows[-1]
    line = next(text for text in result.output.splitlines() if text.startswith("frame     11"))
    assert (
        f"count {float(last['count']):6.1f} [{float(last['low']):.1f}, {float(last['high']):.1f}]"
        f"  smoothed {float(last['smoothed']):6.1f} [{float(last['smoothed_low']):.1f}, "
        f"{float(last['smoothed_high']):.1f}]"
    ) in line
    capture = cv2.VideoCapture(str(annotated))
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 12
    umask = os.umask(0)
    os.umask(umask)
    assert annotated.stat().st_mode & 0o777 == 0o666 & ~umask  # like any new file, not mkstemp's 0600
    ok, first = capture.read()
    capture.release()
    original = cv2.VideoCapture(str(short_video)).read()[1]
    assert ok and first.shape == (480, 640, 3)
    # the count is drawn in the top-left corner, the rest of the frame is untouched
    assert np.abs(first[:20, :80].astype(int) - original[:20, :80]).mean() > 20
    assert np.abs(first[300:, 300:].astype(int) - original[300:, 300:]).mean() < 6


def test_video_stride_to_json_lines(trained, runner, short_video: Path, tmp_path: Path) -> None:
    model_path, _ = trained
    out = tmp_path / "counts.jsonl"
    result = runner.invoke(
        app,
        [
            "video",
            str(short_video),
            "--model",
            str(model_path),
            "--jsonl",
            str(out),
            "--stride",
            "5",
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["frame"] for r in records] == [0, 5, 10]
    assert all(r["count"] > 0 for r in records)


def test_unreachable_stream_fails_fast_with_one_line(trained, runner, one_error_line) -> None:
    model_path, _ = trained
    started = time.monotonic()
    # --retries 0: the first connection is retried within the same budget as a dropped stream.
    result = runner.invoke(
        app, ["video", "http://127.0.0.1:9/stream.mjpg", "--model", str(model_path), "--retries", "0"]
    )
    line = one_error_line(result)
    assert "http://127.0.0.1:9/stream.mjpg: cannot open the stream" in line
    assert time.monotonic() - started < 15


def test_missing_video_file_one_line(runner, tmp_path: Path, one_error_line) -> None:
    result = runner.invoke(app, ["video", str(tmp_path / "none.mp4")])
    assert "video file not found" in one_error_line(result)
