"""The detector behind the backbone protocol, so extraction, caching, training and counting take it as is.

``get_backbone("centernet")`` returns a :class:`DetectorBackbone`: ``prepare`` stretches a picture
to the detector's 512x512 input (the preprocessing's input size does not apply), ``forward``
gives the per-class ``detector`` descriptors (:mod:`counting.features.detector.descriptor`),
``forward_grid`` the same per grid cell. ``detect`` gives the detections themselves (for drawing).

``get_backbone("centernet-letterbox")`` is the same network fed the picture with its aspect kept
(:mod:`counting.features.detector.letterbox`): the ``detector-letterbox`` descriptor, the same
columns, whole picture only (a grid of the canvas would cut the grey border, not the picture).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from counting.features.detector.decode import Detections
from counting.features.detector.descriptor import DESCRIPTOR_DIM, MASS_SCALE, QUANTITIES, detection_descriptors
from counting.features.detector.fetch import MODEL_FILES
from counting.features.detector.letterbox import CONTENT_SIDE, PAD_VALUE, letterbox_input, to_picture_pixels
from counting.features.detector.runner import CONVERTER_VERSION, CenterNet, to_input

__all__ = ["DETECTOR_BACKBONE", "DETECTOR_BACKBONES", "LETTERBOX_BACKBONE", "DetectorBackbone", "descriptor_identity"]

DETECTOR_BACKBONE = "centernet"
LETTERBOX_BACKBONE = "centernet-letterbox"
# Every backbone name that is this detector (model files record one of them).
DETECTOR_BACKBONES = (DETECTOR_BACKBONE, LETTERBOX_BACKBONE)


def descriptor_identity(letterbox: bool = False) -> str:
    """SHA-256 of what decides the descriptors: the pinned source files, the converter, the
    descriptor's definition and the input (a change of any gives new cache keys and refuses older
    model files)."""
    identity: list = [sorted(MODEL_FILES.values()), CONVERTER_VERSION, list(QUANTITIES), MASS_SCALE, "sqrt"]
    if letterbox:  # appended: the stretched input's identity (and its cache keys) stay as they were
        identity.append(["letterbox", CONTENT_SIDE, PAD_VALUE, "PIL bilinear"])
    return hashlib.sha256(repr(identity).encode()).hexdigest()


class DetectorBackbone:
    """MB3-CenterNet as a descriptor source (duck-typed like ``backbones.base.Backbone``)."""

    runtime = "onnxruntime"
    feature_dim = DESCRIPTOR_DIM
    pooled_dim = DESCRIPTOR_DIM
    taps: dict[str, str] = {}

    def __init__(self, threads: int = 2, letterbox: bool = False) -> None:
        self.detector = CenterNet(threads=threads)
        self.threads = threads
        self.letterbox = bool(letterbox)
        self.name = LETTERBOX_BACKBONE if self.letterbox else DETECTOR_BACKBONE
        self.weights_sha256 = descriptor_identity(self.letterbox)
        self.weights_path = None

    def __repr__(self) -> str:
        return f"DetectorBackbone({self.name}, threads={self.threads})"

    def prepare(
        self, image: Any, prep: Any = None, source: str | None = None, *, bgr: bool = False, warn: bool = True
    ) -> Any:
        """``(3, 512, 512)`` float32 tensor, 0-255: the whole picture stretched as human does (or
        letterboxed, aspect kept). ``warn``: as the ImageNet backbones' (it warns of nothing).

        A torch tensor (sharing the array's memory) because the extraction pipeline batches
        prepared images as tensors, whichever runtime runs them."""
        import torch

        prepared = self.to_input(image, bgr=bgr)
        if getattr(prep, "flip", False):  # the mirrored view of --flip-average
            prepared = np.ascontiguousarray(prepared[:, :, ::-1])
        return torch.from_numpy(prepared)

    def forward(self, batch: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
        found, heat = self.detector.detect(batch)
        return detection_descriptors(found, heat)

    forward_pooled = forward

    def to_input(self, image: Any, *, bgr: bool = False) -> np.ndarray:
        """A picture -> the network's ``(3, 512, 512)`` input, 0-255 (stretched or letterboxed)."""
        return letterbox_input(image, bgr=bgr) if self.letterbox else to_input(image, bgr=bgr)

    def forward_grid(self, batch: np.ndarray | Sequence[np.ndarray], grid: tuple[int, int]) -> np.ndarray:
        if self.letterbox:
            from counting.core.errors import BackboneError

            raise BackboneError(f"{self.name}: the letterboxed detector descriptor is whole-picture only (no grid)")
        found, heat = self.detector.detect(batch)
        return detection_descriptors(found, heat, grid=grid)

    forward_grid_pooled = forward_grid

    def detect(
        self, batch: np.ndarray | Sequence[np.ndarray], sizes: Sequence[tuple[int, int]] | None = None
    ) -> Detections:
        """Top-100 detections of prepared inputs, boxes in picture pixels when ``sizes`` (H, W) are given."""
        if not self.letterbox:
            return self.detector.detect(batch, sizes)[0]
        found = self.detector.detect(batch)[0]
        return found if sizes is None else to_picture_pixels(found, list(sizes))

    def detect_pictures(self, pictures: Sequence[np.ndarray]) -> Detections:
        """Top-100 detections of RGB pictures ``(H, W, 3)``, boxes in each picture's pixels."""
        return self.detect([self.to_input(p) for p in pictures], sizes=[p.shape[:2] for p in pictures])
