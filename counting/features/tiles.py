"""Per-tile counts from head dots, for localised counting.

A frame is split into a ``rows x cols`` grid of equal cells, row-major, with the nominal
boundaries ``i * H / rows`` and ``j * W / cols``. These are the cells that
``Backbone.forward_grid`` pools: adaptive average pooling over the final feature map takes, for
cell ``i`` of ``k``, the feature rows ``floor(i*h/k) .. ceil((i+1)*h/k)``, which is the nominal
cell (rounded outwards to whole feature-map positions). The nominal cells partition the frame, so
the per-tile counts of a frame sum to its count inside the ROI.

Cells are half-open ``[start, end)``: a dot exactly on a border belongs to the cell below/right
of it, a dot on the last border (``x == W`` or ``y == H``) to the last cell. Dots a little outside
the frame (annotation noise) are clamped into the nearest cell so that no annotated head is lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from counting.core.errors import DatasetError

Grid = tuple[int, int]


# Tiles per side, here and in model files: a 100000x100000 grid would allocate 10^10 per-tile
# descriptors before anything could fail; no camera picture is usefully cut finer than 64x64.
MAX_GRID_SIDE = 64


def parse_grid(grid: int | Sequence[int] | str | None) -> Grid | None:
    """Normalise a grid given as ``3``, ``(2, 3)``, ``"3x3"`` or ``None`` (whole frame)."""
    if grid is None:
        return None
    given = grid
    if isinstance(grid, str):
        text = grid.strip().lower()
        if text in ("", "none", "whole"):
            return None
        parts = text.replace("×", "x").split("x")
        try:
            numbers = [int(part) for part in parts]
        except ValueError:
            raise DatasetError(f"grid {grid!r}: expected ROWSxCOLS, e.g. 3x3") from None
        grid = numbers[0] if len(numbers) == 1 else tuple(numbers)
    given_text = given if isinstance(given, str) else None
    if isinstance(grid, (int, np.integer)):
        rows = cols = int(grid)
    else:
        values = tuple(int(value) for value in grid)
        if len(values) != 2:
            shown = repr(given_text) if given_text is not None else repr(grid)
            raise DatasetError(f"grid {shown}: expected ROWSxCOLS (two numbers), e.g. 3x3")
        rows, cols = values
    if not (1 <= rows <= MAX_GRID_SIDE and 1 <= cols <= MAX_GRID_SIDE):
        raise DatasetError(f"grid {given!r}: rows and cols must be from 1 to {MAX_GRID_SIDE}")
    return rows, cols


def _cell_of(coordinate: np.ndarray, extent: float, n_cells: int) -> np.ndarray:
    """Index of the half-open equal cell holding each coordinate, clamped into the grid."""
    index = np.floor(coordinate * (n_cells / extent)).astype(np.int64)
    return np.clip(index, 0, n_cells - 1)


def inside_roi(dots: np.ndarray, image_size: tuple[int, int], roi_mask: np.ndarray) -> np.ndarray:
    """Which dots (x, y in image pixels) fall on a True pixel of the ROI mask.

    The mask may have a different resolution than the image (e.g. a mask stored at a reduced
    size); dots are mapped onto it proportionally.
    """
    height, width = image_size
    mask = np.asarray(roi_mask, dtype=bool)
    if mask.ndim != 2:
        raise DatasetError(f"roi_mask: expected a 2-D (H, W) mask, got shape {mask.shape}")
    mask_rows = _cell_of(dots[:, 1], height, mask.shape[0])
    mask_cols = _cell_of(dots[:, 0], width, mask.shape[1])
    return mask[mask_rows, mask_cols]


def tile_counts(
    dots: np.ndarray | None,
    image_size: tuple[int, int],
    grid: int | Sequence[int] | str,
    roi_mask: np.ndarray | None = None,
) -> np.ndarray:
    """Count the dots in each cell of a ``rows x cols`` grid, row-major.

    Args:
        dots: ``(k, 2)`` head positions as ``x, y`` pixel coordinates (``None`` or empty: no heads).
        image_size: ``(H, W)`` of the image the dots refer to.
        grid: ``(rows, cols)``, an int for a square grid, or ``"RxC"``.
        roi_mask: optional ``(H, W)`` bool mask; dots on False pixels do not count.

    Returns:
        ``(rows * cols,)`` float array of counts; cell ``r * cols + c`` is row ``r``, column ``c``.
    """
    rows, cols = parse_grid(grid) or (1, 1)
    height, width = (int(side) for side in image_size)
    if height <= 0 or width <= 0:
        raise DatasetError(f"image_size {image_size!r}: height and width must be positive")
    if dots is None:
        return np.zeros(rows * cols)
    points = np.asarray(dots, dtype=float).reshape(-1, 2)
    points = points[np.isfinite(points).all(axis=1)]
    if roi_mask is not None and len(points):
        points = points[inside_roi(points, (height, width), roi_mask)]
    cell_rows = _cell_of(points[:, 1], height, rows)
    cell_cols = _cell_of(points[:, 0], width, cols)
    return np.bincount(cell_rows * cols + cell_cols, minlength=rows * cols).astype(float)


def tile_count_matrix(
    dots_per_image: Sequence[np.ndarray | None],
    image_sizes: Sequence[tuple[int, int]] | tuple[int, int],
    grid: int | Sequence[int] | str,
    roi_mask: np.ndarray | None = None,
) -> np.ndarray:
    """Per-tile counts of many images: ``(n, rows * cols)``.

    ``image_sizes`` is one ``(H, W)`` shared by all images (video frames) or one per image.
    """
    n_images = len(dots_per_image)
    if len(image_sizes) == 2 and all(isinstance(side, (int, np.integer)) for side in image_sizes):
        sizes = [tuple(image_sizes)] * n_images
    else:
        sizes = list(image_sizes)
    if len(sizes) != n_images:
        raise DatasetError(f"image_sizes: {len(sizes)} sizes for {n_images} images")
    rows, cols = parse_grid(grid) or (1, 1)
    if n_images == 0:
        return np.zeros((0, rows * cols))
    return np.stack([tile_counts(dots, size, (rows, cols), roi_mask) for dots, size in zip(dots_per_image, sizes)])


def dot_tile_counts(
    samples: Sequence[Any], grid: Grid, roi_mask: np.ndarray | None = None, where: str = "dataset"
) -> np.ndarray:
    """Per-tile counts ``(n, cells)`` of dataset samples (``.path`` and ``.dots``), each image's
    size read from its header; a sample without head dots is a one-line DatasetError."""
    from counting.data.imaging import image_size

    missing = next((sample for sample in samples if sample.dots is None), None)
    if missing is not None:
        raise DatasetError(f"{missing.path}: no head dots for this image ({where}); a grid needs per-tile counts")
    sizes = [image_size(sample.path) for sample in samples]
    return tile_count_matrix([sample.dots for sample in samples], sizes, grid, roi_mask)
