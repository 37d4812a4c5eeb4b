"""The detector's person evidence for a crowd model, from the crowd model's own network inputs.

A crowd density model counts textures as crowds on sparse everyday photos, where the detector
counts people well (issue 21: on the coco-voc20 validation photos the detector's count at score
0.2 has RMSE 1.4, the density head's sum 23). The sparse gate (:mod:`counting.heads.sparse_gate`)
reads both. So that every path through a model sees the same evidence (photos from files, video
frames, arrays, served uploads), it is computed from the *prepared* backbone input every path
already makes: the normalised tensor is turned back into pixels and stretched to the detector's
512x512 input. One route, not a second decode of the original file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from counting.features.detector.descriptor import N_CLASSES, QUANTITIES, detection_descriptors
from counting.features.detector.runner import INPUT_SIZE, resize_tf_bilinear

__all__ = ["PERSON_QUANTITIES", "person_evidence", "pixels_of_prepared"]

# What each person row holds (square roots, as the detector descriptor stores them).
PERSON_QUANTITIES: tuple[str, ...] = QUANTITIES
# Pictures per detector pass (its 512x512 inputs are 3 MB each).
DETECTOR_BATCH = 8


def pixels_of_prepared(tensor: Any, normalisation: Any) -> np.ndarray:
    """``(H, W, 3)`` float32 pixels (0-255) of one prepared backbone input ``(3, H, W)``."""
    planes = np.asarray(tensor, dtype=np.float32)
    mean = np.asarray(normalisation.mean, np.float32)[:, None, None]
    std = np.asarray(normalisation.std, np.float32)[:, None, None]
    return np.clip(planes * std + mean, 0.0, 255.0).transpose(1, 2, 0)


def person_evidence(tensors: Sequence[Any], normalisation: Any, detector: Any = None) -> np.ndarray:
    """``(n, len(PERSON_QUANTITIES))`` person rows of the detector descriptor for prepared inputs.

    ``normalisation``: the backbone's (``backbone.normalisation``) that made ``tensors``;
    ``detector``: a :class:`~counting.features.detector.runner.CenterNet` (default: the shared one).
    """
    from counting.features.detector import PERSON, detector_backbone

    net = detector if detector is not None else detector_backbone().detector
    rows = np.zeros((len(tensors), len(PERSON_QUANTITIES)), np.float32)
    for start in range(0, len(tensors), DETECTOR_BATCH):
        part = tensors[start : start + DETECTOR_BATCH]
        batch = [
            np.ascontiguousarray(
                resize_tf_bilinear(pixels_of_prepared(tensor, normalisation), INPUT_SIZE).transpose(2, 0, 1)
            )
            for tensor in part
        ]
        found, heat = net.detect(batch)
        described = detection_descriptors(found, heat).reshape(len(part), len(QUANTITIES), N_CLASSES)
        rows[start : start + len(part)] = described[:, :, PERSON]
    return rows
