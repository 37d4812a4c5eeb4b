"""Per-class descriptors from the detector's output (the ``detector`` descriptor kind).

For each of the 20 VOC classes (COCO classes mapped as the coco-voc20 set was made):

- ``n>=T``: how many of the top-100 detections of the class score at least ``T``, for each ``T`` in
  :data:`THRESHOLDS` (the detector's own count at several operating points: the regressor
  picks the mix, and the direct count picks one threshold per class);
- ``soft``: the sum of those detections' scores (a count that does not jump at a threshold);
- ``mass``: the heat map's sum over the class plane, divided by :data:`MASS_SCALE` (objects the
  top-100 missed, e.g. in a crowd, still add heat).

Rows are grouped by quantity, then class: ``[n>=0.1 x 20, n>=0.2 x 20, ..., soft x 20, mass x 20]``.
With a grid every cell gets the same quantities from the detections whose centre falls in it and
the heat inside it.

Every quantity is stored as its square root: the regressors standardise each column, and on the
raw counts a few crowded photos set the scale (measured on coco-voc20 `random:0.25:0`, AGP-50 with
sqrt targets: 0.59 / 0.28 mRMSE / m-relRMSE on raw quantities, 0.52 / 0.24 on square roots).
:func:`threshold_counts` squares them back.
"""

from __future__ import annotations

import numpy as np

from counting.data.datasets.voc import VOC_CLASSES
from counting.features.detector.decode import COCO_TO_VOC, Detections

__all__ = [
    "DESCRIPTOR_DIM",
    "MASS_SCALE",
    "QUANTITIES",
    "THRESHOLDS",
    "count_columns",
    "descriptor_names",
    "detection_descriptors",
    "threshold_counts",
]

THRESHOLDS: tuple[float, ...] = (0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)
QUANTITIES: tuple[str, ...] = (*(f"n>={t:g}" for t in THRESHOLDS), "soft", "mass")
N_CLASSES = len(VOC_CLASSES)
DESCRIPTOR_DIM = len(QUANTITIES) * N_CLASSES
# A centre's Gaussian on the 128x128 map sums to a few tens for a mid-sized object: /16 keeps
# the mass of one object near the scale of one count.
MASS_SCALE = 16.0


def descriptor_names() -> list[str]:
    """``QUANTITY/class`` name of every column, in order."""
    return [f"{quantity}/{name}" for quantity in QUANTITIES for name in VOC_CLASSES]


def count_columns(threshold_index: int) -> slice:
    """Columns of the 20 per-class counts at ``THRESHOLDS[threshold_index]``."""
    return slice(threshold_index * N_CLASSES, (threshold_index + 1) * N_CLASSES)


def threshold_counts(features: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """The detector's direct count ``(n, 20)``: each class counted at its own threshold index."""
    features = np.rint(np.square(np.asarray(features, np.float64)))
    index = np.asarray(thresholds, dtype=int)
    stacked = features[:, : len(THRESHOLDS) * N_CLASSES].reshape(len(features), len(THRESHOLDS), N_CLASSES)
    return np.take_along_axis(stacked, index[None, None, :].repeat(len(features), 0), axis=1)[:, 0]


def _cell_index(rows: np.ndarray, cols: np.ndarray, size: tuple[int, int], grid: tuple[int, int]) -> np.ndarray:
    """Cell (row-major) of heat-map positions; the cells partition the map as region_sums does."""
    height, width = size
    cell_row = np.minimum((rows * grid[0]) // height, grid[0] - 1)
    cell_col = np.minimum((cols * grid[1]) // width, grid[1] - 1)
    return cell_row * grid[1] + cell_col


def detection_descriptors(found: Detections, heat: np.ndarray, grid: tuple[int, int] | None = None) -> np.ndarray:
    """``(B, DESCRIPTOR_DIM)`` descriptors, or ``(B, rows*cols, DESCRIPTOR_DIM)`` with a grid."""
    batch, _, height, width = heat.shape
    cells = 1 if grid is None else grid[0] * grid[1]
    # Where each VOC class sits among the 80 COCO classes (-1: a class the VOC set drops).
    voc_of_coco = np.full(heat.shape[1], -1)
    voc_of_coco[COCO_TO_VOC] = np.arange(N_CLASSES)
    voc = voc_of_coco[found.classes]  # (B, k)
    cell = (
        np.zeros_like(voc)
        if grid is None
        else _cell_index(found.cells[..., 0], found.cells[..., 1], (height, width), grid)
    )
    keep = voc >= 0
    image = np.broadcast_to(np.arange(batch)[:, None], voc.shape)[keep]
    slot = (cell * N_CLASSES + voc)[keep]  # (cell, class) slot of each kept detection
    scores = found.scores[keep].astype(np.float64)
    out = np.zeros((batch, cells, len(QUANTITIES), N_CLASSES), np.float64)
    flat = out
    for q, threshold in enumerate(THRESHOLDS):
        hit = scores >= threshold
        counts = np.zeros((batch, cells * N_CLASSES))
        np.add.at(counts, (image[hit], slot[hit]), 1.0)
        flat[:, :, q] = counts.reshape(batch, cells, N_CLASSES)
    soft = np.zeros((batch, cells * N_CLASSES))
    np.add.at(soft, (image, slot), scores)
    flat[:, :, len(THRESHOLDS)] = soft.reshape(batch, cells, N_CLASSES)
    planes = np.asarray(heat[:, COCO_TO_VOC], np.float64)  # (B, 20, h, w)
    if grid is None:
        mass = planes.sum(axis=(2, 3))[:, None]
    else:
        row_cell = np.minimum((np.arange(height) * grid[0]) // height, grid[0] - 1)
        col_cell = np.minimum((np.arange(width) * grid[1]) // width, grid[1] - 1)
        rows = np.eye(grid[0])[row_cell]  # (h, grid rows) membership
        cols = np.eye(grid[1])[col_cell]
        mass = np.einsum("bchw,hr,wk->brkc", planes, rows, cols).reshape(batch, cells, N_CLASSES)
    flat[:, :, len(THRESHOLDS) + 1] = mass / MASS_SCALE
    result = np.sqrt(out.reshape(batch, cells, DESCRIPTOR_DIM)).astype(np.float32)
    return result[:, 0] if grid is None else result
