"""What users feed a counter, drawn at random for each training crop: photos saved again (JPEG,
WebP, smaller), grayscale, out of focus, and frames of compressed video.

The still-photo degradations are :func:`counting.data.copies.everyday_copy` (Pillow's codecs, as
the tools that save photos use). The video ones go through OpenCV's writer and reader, as a clip a
user records does: MJPG (every frame a JPEG) and MPEG-4 part 2 (``mp4v``: later frames predicted
from earlier ones). H.264 is not among them: the OpenCV wheel on PyPI opens no H.264 writer
(``avc1``, ``H264`` and ``X264`` all refuse on this machine), so a user's H.264 clip is read but
its codec cannot be trained on; ``mp4v`` is the nearest predicted-frame codec it writes.
A predicted frame needs a frame before it: the crop is written twice, the second time shifted by
a pixel or two (a camera's jitter, a walker's step), and the second frame read back.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from counting.data.copies import CODECS, CopyRecipe, everyday_copy

__all__ = ["DegradeShares", "degrade", "video_frame"]

VIDEO_CODECS = (("MJPG", ".avi"), ("mp4v", ".mp4"))


class DegradeShares:
    """The share of crops degraded each way (the rest are left as they are)."""

    def __init__(self, photo: float = 0.35, video: float = 0.1, gray: float = 0.1) -> None:
        if min(photo, video, gray) < 0 or photo + video + gray > 1:
            raise ValueError(f"degrade shares must be >= 0 and sum to at most 1, got {photo}, {video}, {gray}")
        self.photo, self.video, self.gray = photo, video, gray

    def as_dict(self) -> dict[str, float]:
        return {"photo": self.photo, "video": self.video, "gray": self.gray}


def degrade(pixels: np.ndarray, rng: np.random.Generator, shares: DegradeShares) -> np.ndarray:
    """``(H, W, 3)`` uint8 RGB crop -> a copy degraded one way drawn from ``shares``, same size."""
    draw = rng.random()
    if draw < shares.photo:
        return _photo_copy(pixels, rng)
    if draw < shares.photo + shares.video:
        codec, suffix = VIDEO_CODECS[int(rng.integers(len(VIDEO_CODECS)))]
        return video_frame(pixels, codec, suffix, shift=int(rng.integers(1, 3)))
    if draw < shares.photo + shares.video + shares.gray:
        gray = np.asarray(Image.fromarray(pixels).convert("L"))
        return np.repeat(gray[:, :, None], 3, axis=2)
    return pixels


def _photo_copy(pixels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    recipe = CopyRecipe(
        codec=CODECS[int(rng.integers(len(CODECS)))],
        quality=int(rng.integers(30, 96)),
        scale=float(rng.uniform(0.4, 0.9)) if rng.random() < 0.5 else 1.0,
        blur=float(rng.uniform(0.4, 1.6)) if rng.random() < 0.4 else 0.0,
        gray=bool(rng.random() < 0.15),
    )
    image = Image.fromarray(pixels)
    copy = everyday_copy(image, recipe)
    if copy.size != image.size:
        copy = copy.resize(image.size, Image.Resampling.BILINEAR)
    return np.asarray(copy, dtype=np.uint8)


def video_frame(pixels: np.ndarray, codec: str, suffix: str, shift: int = 1) -> np.ndarray:
    """The crop as the second frame of a two-frame ``codec`` clip (the first shifted by ``shift``
    pixels), read back through OpenCV. Video codecs need even sides: odd ones are padded and cut."""
    height, width = pixels.shape[:2]
    even = np.pad(pixels, ((0, height % 2), (0, width % 2), (0, 0)), mode="edge")
    bgr = np.ascontiguousarray(even[:, :, ::-1])
    before = np.roll(bgr, shift, axis=1)
    with tempfile.TemporaryDirectory(prefix="counting-codec-") as folder:
        path = str(Path(folder) / f"clip{suffix}")
        writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*codec), 25.0, (bgr.shape[1], bgr.shape[0]))
        if not writer.isOpened():
            raise RuntimeError(f"OpenCV opens no {codec} writer for {suffix} files")
        writer.write(before)
        writer.write(bgr)
        writer.release()
        reader = cv2.VideoCapture(path)
        frame = None
        for _ in range(2):
            ok, read = reader.read()
            if ok:
                frame = read
        reader.release()
    if frame is None:
        raise RuntimeError(f"OpenCV read no frame back from its own {codec} clip")
    return np.ascontiguousarray(frame[:height, :width, ::-1])
