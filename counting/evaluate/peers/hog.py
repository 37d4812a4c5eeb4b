"""Dalal–Triggs HOG people detector (OpenCV's default SVM) as a counting baseline.

The count of a frame is the number of detections whose head point lies in the ROI. The head
point is taken at the top centre of the box, 20 % down: OpenCV's 64x128 window leaves about that
much margin above the head, and the ground truth marks heads. ``CalibratedHOGCounter`` maps
detection counts to counts with a line fitted on the training split (detectors miss small,
occluded people at a rate a line absorbs); it is a separate, clearly labelled method.

OpenCV 5 moved the HOG detector out of the main wheel into ``opencv-contrib-python(-headless)``;
with a main-only OpenCV 5 both classes raise ``PeerUnavailable``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
from sklearn.linear_model import LinearRegression

from counting.core.errors import ImageError
from counting.evaluate.peers.errors import PeerUnavailable
from counting.features.tiles import inside_roi

HEAD_OFFSET = 0.2
INSTALL_HINT = (
    f"OpenCV {cv2.__version__} has no HOG people detector (moved to opencv-contrib in OpenCV 5): "
    "pip install opencv-contrib-python-headless"
)


def hog_available() -> bool:
    """True when this OpenCV build ships the HOG people detector."""
    return hasattr(cv2, "HOGDescriptor") and hasattr(cv2, "HOGDescriptor_getDefaultPeopleDetector")


def _read_bgr(image: str | Path | np.ndarray) -> np.ndarray:
    if isinstance(image, np.ndarray):
        return image
    pixels = cv2.imread(str(image), cv2.IMREAD_COLOR)
    if pixels is None:
        raise ImageError(f"{image}: cannot be read as an image")
    return pixels


class HOGPeopleCounter:
    """Count people as HOG detections (OpenCV ``detectMultiScale``) inside an optional ROI.

    ``upscale`` enlarges the frame first so that people smaller than the 64x128 window can be
    found; 1.0 is the detector as shipped.
    """

    label = "HOG people detector (Dalal & Triggs 2005, OpenCV default SVM)"

    def __init__(
        self,
        roi_mask: np.ndarray | None = None,
        upscale: float = 1.0,
        win_stride: tuple[int, int] = (8, 8),
        padding: tuple[int, int] = (8, 8),
        scale: float = 1.05,
        hit_threshold: float = 0.0,
    ) -> None:
        if not hog_available():
            raise PeerUnavailable(INSTALL_HINT)
        self.roi_mask = roi_mask
        self.upscale = upscale
        self.win_stride = win_stride
        self.padding = padding
        self.scale = scale
        self.hit_threshold = hit_threshold
        self._hog = cv2.HOGDescriptor()
        self._hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())

    def detect(self, image: str | Path | np.ndarray) -> np.ndarray:
        """``(k, 4)`` boxes ``x, y, w, h`` in the frame's own pixels, ROI not applied."""
        pixels = _read_bgr(image)
        if self.upscale != 1.0:
            pixels = cv2.resize(pixels, None, fx=self.upscale, fy=self.upscale, interpolation=cv2.INTER_LINEAR)
        boxes, _ = self._hog.detectMultiScale(
            pixels,
            hitThreshold=self.hit_threshold,
            winStride=self.win_stride,
            padding=self.padding,
            scale=self.scale,
        )
        return np.asarray(boxes, dtype=float).reshape(-1, 4) / self.upscale

    def count(self, image: str | Path | np.ndarray) -> int:
        """Detections whose head point lies in the ROI (all detections without one)."""
        pixels = _read_bgr(image)
        boxes = self.detect(pixels)
        if self.roi_mask is None or len(boxes) == 0:
            return int(len(boxes))
        heads = np.stack([boxes[:, 0] + boxes[:, 2] / 2, boxes[:, 1] + HEAD_OFFSET * boxes[:, 3]], axis=1)
        return int(inside_roi(heads, pixels.shape[:2], self.roi_mask).sum())

    def predict(self, images: Sequence[str | Path | np.ndarray]) -> np.ndarray:
        """Counts of many images (one detector run each: OpenCV works per image)."""
        return np.array([self.count(image) for image in images], dtype=float)


class CalibratedHOGCounter:
    """HOG detection counts mapped to people counts by a line fitted on the training split.

    ``max_train_images`` spreads that many frames evenly over the training split to fit the
    line, since each frame costs a detector run.
    """

    label = "HOG detector + linear calibration (fitted on the training split)"

    def __init__(self, roi_mask: np.ndarray | None = None, upscale: float = 1.0, max_train_images: int | None = 150):
        self.detector = HOGPeopleCounter(roi_mask=roi_mask, upscale=upscale)
        self.max_train_images = max_train_images

    def fit(self, images: Sequence[str | Path | np.ndarray], counts: np.ndarray) -> CalibratedHOGCounter:
        counts = np.asarray(counts, dtype=float).ravel()
        if len(images) != len(counts):
            raise ValueError(f"{len(images)} images but {len(counts)} counts")
        chosen = np.arange(len(images))
        if self.max_train_images is not None and len(images) > self.max_train_images:
            chosen = np.unique(np.linspace(0, len(images) - 1, self.max_train_images).round().astype(int))
        detections = self.detector.predict([images[index] for index in chosen])
        self.line_ = LinearRegression().fit(detections[:, None], counts[chosen])
        self.n_train_ = len(chosen)
        return self

    def predict(self, images: Sequence[str | Path | np.ndarray]) -> np.ndarray:
        detections = self.detector.predict(images)
        return np.clip(self.line_.predict(detections[:, None]), 0.0, None)
