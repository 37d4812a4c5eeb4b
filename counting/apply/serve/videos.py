"""Small video files made of still frames (Mall), for the example config (its two committed
videos, by scripts/make_example_videos.py) and the tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cv2

from counting.core.errors import ImageError, StreamError

# JPEG quality of every frame (OpenCV's scale, 0-100): a decoded frame is its picture to ~1 grey level.
MJPEG_QUALITY = 95


def frames_to_video(frames: Sequence[str | Path], out: str | Path, fps: float = 10.0) -> Path:
    """Write ``frames`` (image files of one size) as an MJPEG ``.avi`` at ``fps``; the video."""
    if not frames:
        raise ImageError(f"{out}: no frames to write")
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    first = cv2.imread(str(frames[0]))
    if first is None:
        raise ImageError(f"{frames[0]}: cannot be read as an image")
    height, width = first.shape[:2]
    partial = target.with_name(f".{target.name}.partial.avi")
    # OpenCV's own MJPEG encoder at a fixed quality: FFmpeg's (the default backend) starts its
    # rate control coarse, so the first frames came out blurrier than the rest (quantiser 2x the
    # later frames' on Mall) and a model's familiarity marked frame 0 of every loop "unlike
    # training" (0.002 against 0.99 for the same frame as JPEG; tests/robustness/test_video_familiarity.py).
    writer = cv2.VideoWriter(
        str(partial),
        cv2.CAP_OPENCV_MJPEG,
        cv2.VideoWriter_fourcc(*"MJPG"),
        fps,
        (width, height),
        [cv2.VIDEOWRITER_PROP_QUALITY, MJPEG_QUALITY],
    )
    if not writer.isOpened():
        raise StreamError(f"{target}: cannot write a video here")
    try:
        for path in frames:
            image = cv2.imread(str(path))
            if image is None or image.shape[:2] != (height, width):
                raise ImageError(f"{path}: not a {width}x{height} image like the first frame")
            writer.write(image)
    finally:
        writer.release()
    partial.replace(target)
    return target
