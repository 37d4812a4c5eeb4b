"""A photo with the detector's detections drawn: boxes coloured by class, per-class counts in the corner."""

from __future__ import annotations

from collections.abc import Mapping

import cv2
import numpy as np

from counting.data.datasets.voc import VOC_CLASSES
from counting.features.detector.decode import COCO_TO_VOC, Detections

__all__ = ["CLASS_COLOURS", "draw_detections"]


def _palette(n: int) -> np.ndarray:
    """``n`` well-separated BGR colours (evenly spaced hues, full saturation)."""
    hues = (np.arange(n) * 180 // n).astype(np.uint8)
    hsv = np.stack([hues, np.full(n, 220, np.uint8), np.full(n, 255, np.uint8)], axis=1)[None]
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[0]


CLASS_COLOURS = _palette(len(VOC_CLASSES))  # BGR, VOC_CLASSES order


def draw_detections(
    bgr: np.ndarray,
    found: Detections,
    index: int,
    counts: Mapping[str, float],
    threshold: float = 0.3,
) -> np.ndarray:
    """A copy of ``bgr`` (H, W, 3) with detection ``index``'s VOC boxes scoring >= ``threshold``
    (boxes in this picture's pixels) and the ``counts`` (class -> count; zeros left out) listed top left."""
    picture = np.ascontiguousarray(bgr).copy()
    height, width = picture.shape[:2]
    voc_of_coco = np.full(80, -1)
    voc_of_coco[COCO_TO_VOC] = np.arange(len(VOC_CLASSES))
    voc = voc_of_coco[found.classes[index]]
    keep = (voc >= 0) & (found.scores[index] >= threshold)
    thickness = max(1, round(min(height, width) / 300))
    scale = max(0.4, min(height, width) / 900)
    for box, cls, score in zip(found.boxes[index][keep], voc[keep], found.scores[index][keep]):
        x1, y1, x2, y2 = (int(round(v)) for v in np.clip(box, 0, [width - 1, height - 1, width - 1, height - 1]))
        colour = tuple(int(c) for c in CLASS_COLOURS[cls])
        cv2.rectangle(picture, (x1, y1), (x2, y2), colour, thickness)
        cv2.putText(
            picture, f"{VOC_CLASSES[cls]} {score:.2f}", (x1 + 2, max(y1 - 4, 12)),
            cv2.FONT_HERSHEY_SIMPLEX, scale * 0.8, colour, thickness, cv2.LINE_AA,
        )  # fmt: skip
    lines = [(name, value) for name, value in counts.items() if round(value) > 0] or [("nothing", 0.0)]
    line_height = int(28 * scale) + 4
    cv2.rectangle(picture, (0, 0), (int(230 * scale) + 10, line_height * len(lines) + 8), (0, 0, 0), cv2.FILLED)
    for row, (name, value) in enumerate(lines):
        colour = (
            tuple(int(c) for c in CLASS_COLOURS[VOC_CLASSES.index(name)]) if name in VOC_CLASSES else (255, 255, 255)
        )
        cv2.putText(
            picture, f"{name}: {value:.0f}" if name != "nothing" else "no objects", (6, line_height * (row + 1)),
            cv2.FONT_HERSHEY_SIMPLEX, scale, colour, max(1, thickness), cv2.LINE_AA,
        )  # fmt: skip
    return picture
