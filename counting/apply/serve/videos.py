"""Small video files made of still frames (Mall), for the example config and the tests:
there are no video files in the repository."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cv2

from counting.core.errors import ImageError, StreamError


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
    writer = cv2.VideoWriter(str(partial), cv2.VideoWriter_fourcc(*"MJPG"), fps, (width, height))
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
