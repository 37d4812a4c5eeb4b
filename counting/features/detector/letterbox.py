"""The aspect-preserving detector input of the ``detector-letterbox`` descriptor.

The ``detector`` descriptor feeds the network the whole picture *stretched* to 512x512, as
``human`` does (a 4:3 photo's objects squeezed by a third). Here the picture keeps its shape: it
is scaled so that its longer side is :data:`CONTENT_SIDE` (PIL's bilinear resize, which
averages over the source pixels when it shrinks) and centred on a 512x512 grey canvas
(:data:`PAD_VALUE`, the usual letterbox grey). Measured on the 419 train photos of coco-voc20
``random:0.25:0`` (5-fold CV, univariate AGP 50 on sqrt targets): 0.459 / 0.206 mRMSE /
m-relRMSE against 0.491 / 0.218 stretched; the same network and the same cost (docs/voc.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

from counting.features.detector.decode import Detections
from counting.features.detector.runner import rgb_pixels

__all__ = ["CONTENT_SIDE", "PAD_VALUE", "letterbox_geometry", "letterbox_input", "to_picture_pixels"]

INPUT_SIDE = 512  # the converted graph's input (its Resize sizes are constants)
CONTENT_SIDE = 512  # the picture's longer side on the canvas
PAD_VALUE = 114.0  # grey of the canvas around the picture (0-255)


def letterbox_geometry(height: int, width: int) -> tuple[float, int, int, int, int]:
    """Scale (canvas px per picture px), top, left, rows and columns of the picture on the canvas."""
    scale = CONTENT_SIDE / max(height, width)
    rows, cols = max(1, round(height * scale)), max(1, round(width * scale))
    return scale, (INPUT_SIDE - rows) // 2, (INPUT_SIDE - cols) // 2, rows, cols


def _rgb_pixels(image: Any, bgr: bool) -> np.ndarray:
    """``(H, W, 3)`` uint8 RGB (PIL resizes it) of a picture :func:`rgb_pixels` takes."""
    pixels = rgb_pixels(image, bgr=bgr)
    if pixels.dtype != np.uint8:
        pixels = np.clip(np.rint(pixels), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(pixels)


def letterbox_input(image: Any, *, bgr: bool = False) -> np.ndarray:
    """A picture -> ``(3, 512, 512)`` float32, 0-255: the picture scaled whole, centred on grey."""
    pixels = _rgb_pixels(image, bgr)
    height, width = pixels.shape[:2]
    _, top, left, rows, cols = letterbox_geometry(height, width)
    small = np.asarray(Image.fromarray(pixels).resize((cols, rows), Image.BILINEAR), np.float32)
    canvas = np.full((INPUT_SIDE, INPUT_SIDE, 3), PAD_VALUE, np.float32)
    canvas[top : top + rows, left : left + cols] = small
    return np.ascontiguousarray(canvas.transpose(2, 0, 1))


def to_picture_pixels(found: Detections, sizes: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> Detections:
    """Detections on letterboxed inputs with their boxes moved to each picture's pixels ``(H, W)``."""
    offsets, scales = [], []
    for height, width in sizes:
        scale, top, left, _, _ = letterbox_geometry(height, width)
        offsets.append([left, top, left, top])
        scales.append(scale)
    shift = np.asarray(offsets, np.float32)[:, None, :]
    factor = np.asarray(scales, np.float32)[:, None, None]
    return Detections(
        boxes=(found.boxes - shift) / factor, scores=found.scores, classes=found.classes, cells=found.cells
    )
