"""Density targets from head dots, at the resolution of a feature map.

Each dot becomes a Gaussian integrated exactly over the map's cells (separable, with ``erf``),
so a dot much smaller than a cell still puts its mass in the right cells instead of being
missed by point sampling. Each dot's Gaussian is renormalised over the image, so every dot
carries mass exactly 1 inside it and the map sums to the dot count. Dots published outside the
image (ShanghaiTech B has a few) are moved onto its border: they still count.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erf

__all__ = ["density_map", "dot_sigmas"]

# Smallest sigma in map cells: narrower Gaussians put all the mass in one cell anyway, and a
# floor keeps erf differences away from 0/0 for dots on cell borders.
_MIN_SIGMA_CELLS = 0.05


def dot_sigmas(
    dots: np.ndarray, sigma: float, perspective_map: np.ndarray | None = None, reference: float = 1.0
) -> np.ndarray:
    """Sigma in image pixels for each dot: ``sigma``, or scaled by the perspective at the dot.

    Mall's ``pMapN`` is larger where people are far (smaller), as a density weight per pixel:
    a head's side shrinks with the square root of that weight, so the sigma of a dot at a pixel
    of weight ``p`` is ``sigma * sqrt(reference / p)``.
    """
    points = np.asarray(dots, dtype=float).reshape(-1, 2)
    if perspective_map is None or not len(points):
        return np.full(len(points), float(sigma))
    height, width = perspective_map.shape
    columns = np.clip(np.round(points[:, 0]).astype(int), 0, width - 1)
    rows = np.clip(np.round(points[:, 1]).astype(int), 0, height - 1)
    weight = np.asarray(perspective_map, dtype=float)[rows, columns]
    return float(sigma) * np.sqrt(reference / np.maximum(weight, 1e-6))


def _cell_masses(centres: np.ndarray, sigmas: np.ndarray, length: float, cells: int) -> np.ndarray:
    """``(k, cells)``: the share of each 1-D Gaussian in each cell of ``[0, length]``, rows sum to 1."""
    edges = np.linspace(0.0, length, cells + 1)
    scale = np.maximum(sigmas, _MIN_SIGMA_CELLS * length / cells) * np.sqrt(2.0)
    cumulative = erf((edges[None, :] - centres[:, None]) / scale[:, None])
    masses = np.diff(cumulative, axis=1)
    totals = masses.sum(axis=1, keepdims=True)
    # Renormalised inside the image: a dot at the border keeps its whole mass.
    return masses / np.where(totals > 0, totals, 1.0)


def density_map(
    dots: np.ndarray | None,
    image_size: tuple[int, int],
    map_size: tuple[int, int],
    sigmas: np.ndarray | float = 4.0,
) -> np.ndarray:
    """``(h, w)`` float64 density of the dots of an ``(H, W)`` image on an ``(h, w)`` map.

    ``dots`` are ``(k, 2)`` x, y pixel coordinates; ``sigmas`` the Gaussian width of each dot
    (or one for all) in image pixels. The map sums to ``k``.
    """
    height, width = (int(side) for side in image_size)
    rows, cols = (int(side) for side in map_size)
    if height < 1 or width < 1 or rows < 1 or cols < 1:
        raise ValueError(f"image size {image_size} and map size {map_size} must be positive")
    points = np.zeros((0, 2)) if dots is None else np.asarray(dots, dtype=float).reshape(-1, 2)
    if not len(points):
        return np.zeros((rows, cols))
    x = np.clip(points[:, 0], 0.0, width)
    y = np.clip(points[:, 1], 0.0, height)
    widths = np.broadcast_to(np.asarray(sigmas, dtype=float), (len(points),))
    along_x = _cell_masses(x, widths, width, cols)
    along_y = _cell_masses(y, widths, height, rows)
    return along_y.T @ along_x
