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

from counting.features.detector.descriptor import N_CLASSES, QUANTITIES, THRESHOLDS, detection_descriptors
from counting.features.detector.runner import INPUT_SIZE, resize_planes_tf_bilinear

__all__ = ["PERSON_QUANTITIES", "person_boxes", "person_evidence"]

# What each person row holds (square roots, as the detector descriptor stores them).
PERSON_QUANTITIES: tuple[str, ...] = QUANTITIES
# Pictures per detector pass (its 512x512 inputs are 3 MB each).
DETECTOR_BATCH = 8


def _detector_input(tensor: Any, normalisation: Any) -> np.ndarray:
    """``(3, 512, 512)`` detector input (0-255) of one prepared backbone input. Resized first and
    turned back into pixels after: both steps are linear, so the order changes the result only by
    float rounding (< 1e-4 grey levels), and the second step then touches 512x512 values, not the
    input's 576x768 (a third of the time)."""
    resized = resize_planes_tf_bilinear(np.asarray(tensor, dtype=np.float32), INPUT_SIZE)
    mean = np.asarray(normalisation.mean, np.float32)[:, None, None]
    std = np.asarray(normalisation.std, np.float32)[:, None, None]
    return np.clip(resized * std + mean, 0.0, 255.0)


def person_evidence(tensors: Sequence[Any], normalisation: Any, detector: Any = None, with_boxes: bool = False) -> Any:
    """``(n, len(PERSON_QUANTITIES))`` person rows of the detector descriptor for prepared inputs;
    with ``with_boxes``, ``(rows, boxes)``: each picture's person boxes of :func:`person_boxes`.

    ``normalisation``: the backbone's (``backbone.normalisation``) that made ``tensors``;
    ``detector``: a :class:`~counting.features.detector.runner.CenterNet` (default: the shared one).
    """
    from counting.features.detector import PERSON, detector_backbone

    net = detector if detector is not None else detector_backbone().detector
    rows = np.zeros((len(tensors), len(PERSON_QUANTITIES)), np.float32)
    boxes: list[np.ndarray] = []
    for start in range(0, len(tensors), DETECTOR_BATCH):
        part = tensors[start : start + DETECTOR_BATCH]
        batch = [_detector_input(tensor, normalisation) for tensor in part]
        found, heat = net.detect(batch)
        described = detection_descriptors(found, heat).reshape(len(part), len(QUANTITIES), N_CLASSES)
        rows[start : start + len(part)] = described[:, :, PERSON]
        if with_boxes:
            boxes.extend(person_boxes(found, k) for k in range(len(part)))
    return (rows, boxes) if with_boxes else rows


def person_boxes(found: Any, k: int) -> np.ndarray:
    """``(m, 5)`` person detections of picture ``k`` that the descriptor counts (score at least
    its lowest threshold), best first: ``x1 y1 x2 y2`` as fractions of the picture's width and
    height (the detector's input is the whole picture, stretched), then the score."""
    from counting.features.detector import PERSON
    from counting.features.detector.decode import COCO_TO_VOC

    coco_person = int(np.asarray(COCO_TO_VOC)[PERSON])
    keep = (found.classes[k] == coco_person) & (found.scores[k] >= min(THRESHOLDS))
    corners = np.asarray(found.boxes[k][keep], np.float64) / INPUT_SIZE
    return np.column_stack([np.clip(corners, 0.0, 1.0), found.scores[k][keep].astype(np.float64)])
