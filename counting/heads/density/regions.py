"""Where a density map is summed: the ROI as per-cell weights, and the cells of a grid."""

from __future__ import annotations

import cv2
import numpy as np

__all__ = ["cell_index", "region_weights", "roi_weights"]


def roi_weights(roi_mask: np.ndarray | None, map_size: tuple[int, int]) -> np.ndarray:
    """``(h, w)`` share of each map cell inside the ROI (all ones without a ROI)."""
    rows, cols = map_size
    if roi_mask is None:
        return np.ones((rows, cols))
    mask = np.asarray(roi_mask, dtype=np.float32)
    # INTER_AREA averages the pixels under each cell: the cell's fraction inside the ROI.
    return cv2.resize(mask, (cols, rows), interpolation=cv2.INTER_AREA).astype(float)


def cell_index(map_size: tuple[int, int], grid: tuple[int, int] | None) -> np.ndarray:
    """``(h, w)`` row-major grid cell of each map cell (by its centre); all 0 without a grid."""
    rows, cols = map_size
    if grid is None:
        return np.zeros((rows, cols), dtype=int)
    grid_rows, grid_cols = grid
    row_cell = ((np.arange(rows) + 0.5) * grid_rows / rows).astype(int)
    col_cell = ((np.arange(cols) + 0.5) * grid_cols / cols).astype(int)
    return row_cell[:, None] * grid_cols + col_cell[None, :]


def region_weights(roi_mask: np.ndarray | None, map_size: tuple[int, int], grid: tuple[int, int] | None) -> np.ndarray:
    """``(regions, h*w)``: the whole ROI first, then each grid cell's part of it (row-major).

    A density map flattened to ``(h*w,)`` times this matrix's transpose gives the region counts.
    """
    weights = roi_weights(roi_mask, map_size).ravel()
    regions = [weights]
    if grid is not None:
        cells = cell_index(map_size, grid).ravel()
        regions += [weights * (cells == cell) for cell in range(grid[0] * grid[1])]
    return np.stack(regions)
