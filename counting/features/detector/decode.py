"""CenterNet's top-100 decode, redone in NumPy (the graph's own TopKV2/Gather part is not converted).

The network gives a centre heat map ``(B, 80, 128, 128)`` (sigmoid scores, one plane per COCO
class) and box sides ``(B, 4, 128, 128)`` (distances left, top, right, bottom from the centre in
input pixels). As in the tfjs graph: a centre is a heat-map value equal to the maximum of its
3x3 neighbourhood (MaxPool, SAME padding); the 100 highest such values over (row, column,
class), in the graph's flattening order, are the detections; a box is the cell's centre times
the stride (4) minus/plus its four distances.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.ndimage import maximum_filter1d

from counting.data.datasets.voc import VOC_CLASSES

__all__ = [
    "COCO_CLASSES",
    "COCO_TO_VOC",
    "STRIDE",
    "TOP_K",
    "Detections",
    "decode_detections",
    "peak_scores",
]

TOP_K = 100
STRIDE = 4  # input pixels per heat-map cell (512 -> 128)

# The 80 COCO classes in the model's output order (human's src/object/labels.ts).
COCO_CLASSES: tuple[str, ...] = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog",
    "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella",
    "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite",
    "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle",
    "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange",
    "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch", "potted plant",
    "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone",
    "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors",
    "teddy bear", "hair drier", "toothbrush",
)  # fmt: skip

# The mapping the shared coco-voc20 set was made with; other COCO classes are dropped.
_RENAMED = {
    "airplane": "aeroplane",
    "motorcycle": "motorbike",
    "couch": "sofa",
    "tv": "tvmonitor",
    "dining table": "diningtable",
    "potted plant": "pottedplant",
}
# COCO index of each VOC class, in VOC_CLASSES order.
COCO_TO_VOC: np.ndarray = np.array(
    [COCO_CLASSES.index(next(c for c in COCO_CLASSES if _RENAMED.get(c, c) == voc)) for voc in VOC_CLASSES]
)


@dataclass
class Detections:
    """Top-k detections of a batch, best first: boxes in input pixels ``(B, k, 4)`` x1 y1 x2 y2."""

    boxes: np.ndarray  # (B, k, 4) float32
    scores: np.ndarray  # (B, k) float32
    classes: np.ndarray  # (B, k) int: COCO class index
    cells: np.ndarray  # (B, k, 2) int: heat-map row, column


def _top_peaks_in_full(heat: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_top_peaks` over every value of a ``(1, C, h, w)`` heat map."""
    # The graph flattens NHWC: index = (row * w + column) * C + class; ties go to the lower index.
    flat = peak_scores(heat).transpose(0, 2, 3, 1).reshape(-1)
    candidates = np.argpartition(-flat, k - 1)[:k]
    values = flat[candidates]
    order = np.lexsort((candidates, -values))
    return candidates[order].astype(np.int64), values[order]


def peak_scores(heat: np.ndarray) -> np.ndarray:
    """The heat map with every value that is not its 3x3 neighbourhood's maximum set to 0."""
    # Separable maximum (rows, then columns) == the 3x3 MaxPool; SAME padding ignores the outside.
    neighbourhood = maximum_filter1d(heat, 3, axis=-1, mode="constant", cval=-np.inf)
    neighbourhood = maximum_filter1d(neighbourhood, 3, axis=-2, mode="constant", cval=-np.inf)
    return np.where(heat == neighbourhood, heat, np.float32(0))


# Heat below this is not looked at first: the 100th best centre of a photo scores 0.045-0.1
# (coco-voc20 and ShanghaiTech photos), so the top 100 lie among the ~1-5 % of values above it;
# a picture with fewer than k peaks above it is decoded in full.
CANDIDATE_FLOOR = np.float32(0.02)


def _top_peaks(heat: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(NHWC flat indices, scores)`` of the k best 3x3 peaks of one ``(C, h, w)`` heat map,
    best first (ties: lower index first), found among the values above CANDIDATE_FLOOR; None
    when fewer than k peaks lie above it. What ``peak_scores`` + a full top-k give, in a few
    per cent of the time (the full decode took ~35 ms a picture, more than the network)."""
    classes, height, width = heat.shape
    cls, row, col = np.nonzero(heat > CANDIDATE_FLOOR)
    values = heat[cls, row, col]
    highest = np.full(values.shape, -np.inf, np.float32)
    for d_row in (-1, 0, 1):
        for d_col in (-1, 0, 1):
            r, c = row + d_row, col + d_col
            inside = (r >= 0) & (r < height) & (c >= 0) & (c < width)
            neighbour = np.full(values.shape, -np.inf, np.float32)
            neighbour[inside] = heat[cls[inside], r[inside], c[inside]]
            np.maximum(highest, neighbour, out=highest)
    peak = values == highest
    if int(peak.sum()) < k:
        return None
    index = ((row[peak] * width + col[peak]) * classes + cls[peak]).astype(np.int64)
    scores = values[peak]
    order = np.lexsort((index, -scores))[:k]
    return index[order], scores[order]


def decode_detections(heat: np.ndarray, sides: np.ndarray, k: int = TOP_K, stride: int = STRIDE) -> Detections:
    """The k best centres of ``heat`` ``(B, C, h, w)`` with their boxes from ``sides`` ``(B, 4, h, w)``."""
    heat = np.asarray(heat, np.float32)
    batch, classes, height, width = heat.shape
    k = min(k, classes * height * width)
    index = np.empty((batch, k), np.int64)
    scores = np.empty((batch, k), np.float32)
    for b in range(batch):  # per picture: the candidates differ in number
        found = _top_peaks(heat[b], k)
        if found is None:
            found = _top_peaks_in_full(heat[b : b + 1], k)
        index[b], scores[b] = found
    cls = index % classes
    cell = index // classes
    column, row = cell % width, cell // width
    side = np.asarray(sides, np.float32).reshape(batch, 4, height * width)
    gathered = np.take_along_axis(side, np.repeat(cell[:, None, :], 4, axis=1), axis=2)  # (B, 4, k)
    cx, cy = (column * stride).astype(np.float32), (row * stride).astype(np.float32)
    boxes = np.stack([cx - gathered[:, 0], cy - gathered[:, 1], cx + gathered[:, 2], cy + gathered[:, 3]], axis=-1)
    return Detections(boxes=boxes, scores=scores, classes=cls, cells=np.stack([row, column], axis=-1))
