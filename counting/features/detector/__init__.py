"""A COCO detector (MB3-CenterNet, from the npm package ``@vladmandic/human@3.3.6``) as a descriptor source.

```python
from counting.features.detector import detect_counts, PERSON
counts = detect_counts(["a.jpg", rgb_array])   # (n, 20) per-VOC-class counts, VOC_CLASSES order
people = counts[:, PERSON]
```

- ``fetch``: the two model files, by npm or ``$COUNTING_DETECTOR_SOURCE``, checked against pinned hashes;
- ``convert``: tfjs graph model -> ONNX (``onnx.helper``; no TensorFlow, no node at run time);
- ``decode``: the top-100 decode of the heat map and box sides in NumPy;
- ``runner``: the converted model on ONNX Runtime (picture -> 512x512 stretched input);
- ``letterbox``: the aspect-preserving input of the ``detector-letterbox`` descriptor;
- ``descriptor``: per-class counts at several thresholds, soft counts, heat mass (the
  ``detector`` and ``detector-letterbox`` descriptor kinds), whole frame or per grid cell;
- ``backbone``: all of it behind the backbone protocol (``get_backbone("centernet")``,
  ``get_backbone("centernet-letterbox")``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from counting.data.datasets.voc import VOC_CLASSES

__all__ = ["DEFAULT_THRESHOLD", "PERSON", "VOC_CLASSES", "detect_counts", "detector_backbone"]

PERSON = VOC_CLASSES.index("person")
# Score threshold of the direct count, chosen on the 419 train photos of coco-voc20
# `random:0.25:0` (lowest mRMSE + m-relRMSE of their counts among 0.15..0.5: 0.746 at 0.25, 0.762
# at 0.3; docs/voc.md). One threshold per class was measured worse on the test photos (rare
# classes' thresholds fit a handful of photos).
DEFAULT_THRESHOLD = 0.25

_backbones: dict[tuple[int, bool], Any] = {}


def detector_backbone(threads: int | None = None, letterbox: bool = False) -> Any:
    """The detector behind the backbone protocol (built once per thread count and input kind);
    ``letterbox``: the picture's aspect kept (the ``detector-letterbox`` descriptor)."""
    from counting.features.detector.backbone import DetectorBackbone

    key = (int(threads) if threads else 2, bool(letterbox))
    if key not in _backbones:
        _backbones[key] = DetectorBackbone(threads=key[0], letterbox=key[1])
    return _backbones[key]


def detect_counts(
    images: Sequence[str | Path | np.ndarray],
    thresholds: float | Sequence[float] = DEFAULT_THRESHOLD,
    *,
    batch_size: int = 8,
    threads: int | None = None,
) -> np.ndarray:
    """Per-class detector counts ``(n, 20)`` (VOC_CLASSES order; ``[:, PERSON]`` is people).

    ``images``: file paths or RGB uint8 arrays ``(H, W, 3)``. A class counts the top-100
    detections scoring at least its threshold (one number for all classes, or 20).
    Unreadable files raise :class:`counting.core.errors.ImageError` naming the file.
    """
    from counting.data.imaging import load_image
    from counting.features.detector.runner import to_input

    limits = np.broadcast_to(np.asarray(thresholds, np.float32), (len(VOC_CLASSES),))
    backbone = detector_backbone(threads)
    counts = np.zeros((len(images), len(VOC_CLASSES)), np.int64)
    from counting.features.detector.decode import COCO_TO_VOC

    voc_of_coco = np.full(80, -1)
    voc_of_coco[COCO_TO_VOC] = np.arange(len(VOC_CLASSES))
    for start in range(0, len(images), batch_size):
        chunk = images[start : start + batch_size]
        batch = [to_input(item if isinstance(item, np.ndarray) else load_image(item)) for item in chunk]
        found = backbone.detect(batch)
        voc = voc_of_coco[found.classes]
        hit = (voc >= 0) & (found.scores >= limits[np.maximum(voc, 0)])
        rows = np.broadcast_to(np.arange(len(chunk))[:, None], voc.shape)
        np.add.at(counts, (start + rows[hit], voc[hit]), 1)
    return counts
