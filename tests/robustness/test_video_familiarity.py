"""The first frame of an MJPEG clip made of Mall training frames is as familiar as its JPEG.

`counting serve examples/serve.toml` flagged the first frame of every loop "unlike training"
(familiarity 0.002 against 0.992 for the same frame as JPEG, mall-accurate.npz): the clips made
by ``frames_to_video`` (scripts/make_example_videos.py) came from FFmpeg's MJPEG encoder, whose
rate control starts coarse (frame 0 at twice the later frames' quantiser). The clip is now
written at one fixed quality, so every frame is its picture to about one grey level.
"""

from __future__ import annotations

import io
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from counting.apply import count_video, frames_to_video
from counting.model.counting_model import load_model

ROOT = Path(__file__).resolve().parents[2]
FRAMES = 4  # Mall training frames 1-4 (mall-accurate trained on 1-600)


def _clip(mall_root: Path, tmp_path: Path) -> tuple[list[Path], Path]:
    frames = [mall_root / "frames" / f"seq_{k:06d}.jpg" for k in range(1, FRAMES + 1)]
    return frames, frames_to_video(frames, tmp_path / "mall.avi", fps=10.0)


def _jpeg_quantisers(video: Path) -> list[float]:
    """Mean luma quantiser of each frame's JPEG as stored in the .avi."""
    data = video.read_bytes()
    means, start = [], data.find(b"\xff\xd8\xff")
    while start >= 0:
        end = data.find(b"\xff\xd9", start) + 2
        means.append(float(np.mean(Image.open(io.BytesIO(data[start:end])).quantization[0])))
        start = data.find(b"\xff\xd8\xff", end)
    return means


def test_clip_frames_share_one_jpeg_quality(mall_root: Path, tmp_path: Path) -> None:
    _, video = _clip(mall_root, tmp_path)
    quantisers = _jpeg_quantisers(video)
    # Before: 24.4, 16.4, 12.1, 12.1 (the first frames coarser, FFmpeg's rate control).
    assert len(quantisers) == FRAMES and max(quantisers) == min(quantisers)
    first = cv2.VideoCapture(str(video)).read()[1].astype(int)
    assert np.abs(first - cv2.imread(str(mall_root / "frames" / "seq_000001.jpg"))).mean() < 1.5


def test_first_frame_of_a_clip_is_familiar_as_its_jpeg(mall_root: Path, tmp_path: Path) -> None:
    frames, video = _clip(mall_root, tmp_path)
    model = load_model(ROOT / "models" / "mall-accurate.npz")
    as_jpeg = model.count_paths([str(path) for path in frames])
    run = count_video(model, str(video), keep_records=True)
    scores = np.array([record["familiarity"] for record in run.records])
    assert len(scores) == FRAMES
    # Before: 0.002 (marked "unlike training") against 0.992 as JPEG; 0.36-0.46 for the second.
    assert not any(record["unfamiliar"] for record in run.records)
    assert scores[0] > 0.5 and as_jpeg.familiarity[0] > 0.5
    np.testing.assert_allclose(scores, as_jpeg.familiarity, atol=0.1)
    # The counts agree too (before: 29.48 against 29.34, 29.68 against 30.85).
    np.testing.assert_allclose([record["count"] for record in run.records], as_jpeg.counts, atol=0.5)
