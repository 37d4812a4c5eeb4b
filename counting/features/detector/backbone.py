"""The detector behind the backbone protocol, so extraction, caching, training and counting take it as is.

``get_backbone("centernet")`` returns a :class:`DetectorBackbone`: ``prepare`` stretches a picture
to the detector's 512x512 input (the preprocessing's input size does not apply), ``forward``
gives the per-class ``detector`` descriptors (:mod:`counting.features.detector.descriptor`),
``forward_grid`` the same per grid cell. ``detect`` gives the detections themselves (for drawing).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from counting.features.detector.decode import Detections
from counting.features.detector.descriptor import DESCRIPTOR_DIM, MASS_SCALE, QUANTITIES, detection_descriptors
from counting.features.detector.fetch import MODEL_FILES
from counting.features.detector.runner import CONVERTER_VERSION, CenterNet, to_input

__all__ = ["DETECTOR_BACKBONE", "DetectorBackbone"]

DETECTOR_BACKBONE = "centernet"


class DetectorBackbone:
    """MB3-CenterNet as a descriptor source (duck-typed like ``backbones.base.Backbone``)."""

    name = DETECTOR_BACKBONE
    runtime = "onnxruntime"
    feature_dim = DESCRIPTOR_DIM
    pooled_dim = DESCRIPTOR_DIM
    taps: dict[str, str] = {}

    def __init__(self, threads: int = 2) -> None:
        self.detector = CenterNet(threads=threads)
        self.threads = threads
        # What decides the descriptors: the pinned source files, the converter and the descriptor's
        # definition (a change of any gives new cache keys and refuses older model files).
        identity = [sorted(MODEL_FILES.values()), CONVERTER_VERSION, list(QUANTITIES), MASS_SCALE, "sqrt"]
        self.weights_sha256 = hashlib.sha256(repr(identity).encode()).hexdigest()
        self.weights_path = None

    def __repr__(self) -> str:
        return f"DetectorBackbone({self.name}, threads={self.threads})"

    def prepare(self, image: Any, prep: Any = None, source: str | None = None, *, bgr: bool = False) -> Any:
        """``(3, 512, 512)`` float32 tensor, 0-255: the whole picture stretched as human does.

        A torch tensor (sharing the array's memory) because the extraction pipeline batches
        prepared images as tensors, whichever runtime runs them."""
        import torch

        prepared = to_input(image, bgr=bgr)
        if getattr(prep, "flip", False):  # the mirrored view of --flip-average
            prepared = np.ascontiguousarray(prepared[:, :, ::-1])
        return torch.from_numpy(prepared)

    def forward(self, batch: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
        found, heat = self.detector.detect(batch)
        return detection_descriptors(found, heat)

    forward_pooled = forward

    def forward_grid(self, batch: np.ndarray | Sequence[np.ndarray], grid: tuple[int, int]) -> np.ndarray:
        found, heat = self.detector.detect(batch)
        return detection_descriptors(found, heat, grid=grid)

    forward_grid_pooled = forward_grid

    def detect(
        self, batch: np.ndarray | Sequence[np.ndarray], sizes: Sequence[tuple[int, int]] | None = None
    ) -> Detections:
        """Top-100 detections of prepared inputs, boxes in picture pixels when ``sizes`` (H, W) are given."""
        return self.detector.detect(batch, sizes)[0]
