"""The colour of each VOC class in drawings of the detector's boxes (counting.apply.detection_drawing draws them)."""

from __future__ import annotations

import cv2
import numpy as np

from counting.data.datasets.voc import VOC_CLASSES

__all__ = ["CLASS_COLOURS"]


def _palette(n: int) -> np.ndarray:
    """``n`` well-separated BGR colours (evenly spaced hues, full saturation)."""
    hues = (np.arange(n) * 180 // n).astype(np.uint8)
    hsv = np.stack([hues, np.full(n, 220, np.uint8), np.full(n, 255, np.uint8)], axis=1)[None]
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[0]


CLASS_COLOURS = _palette(len(VOC_CLASSES))  # BGR, VOC_CLASSES order
