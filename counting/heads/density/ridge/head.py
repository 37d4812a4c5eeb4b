"""DensityHead: a per-pixel regressor on frozen feature maps whose output sums to the count.

Each cell of the head grid has the channels of the chosen layers as its features, standardised.
``ridge`` maps them linearly to the density; ``rff`` adds random Fourier features of them
(``sqrt(2/R) cos(z W + b)``, W ~ N(0, 1/bandwidth^2)): a kernel ridge regression in primal form,
so the fit stays a closed-form solve on a Gram matrix however many pixels there are.
The count of a region is the density summed over it (:mod:`counting.heads.density.regions`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from counting.heads.density.maps import HEAD_STRIDE
from counting.heads.density.regions import region_weights

__all__ = ["HEAD_KINDS", "DensityHead"]

HEAD_KINDS = ("ridge", "rff")
# Pixels per matrix product: bounds the temporary (pixels x features) array to ~100 MB.
_CHUNK_PIXELS = 16_384


class MapHead:
    """What every density head derives from its channel standardisation and its settings."""

    x_mean: np.ndarray  # (C,)
    settings: dict[str, Any]

    @property
    def n_channels(self) -> int:
        return int(self.x_mean.shape[0])

    @property
    def grid(self) -> tuple[int, int] | None:
        """The grid whose cells' sums follow the whole ROI's among the AGP's descriptors."""
        grid = self.settings.get("grid")
        return None if grid is None else (int(grid[0]), int(grid[1]))

    def check_maps(self, maps: np.ndarray) -> np.ndarray:
        array = np.asarray(maps)
        if array.ndim == 3:
            array = array[None]
        if array.ndim != 4 or array.shape[1] != self.n_channels:
            raise ValueError(f"expected (n, {self.n_channels}, h, w) feature maps, got shape {np.shape(maps)}")
        return array

    def density(self, maps: np.ndarray) -> np.ndarray:
        """``(n, C, h, w)`` feature maps -> ``(n, h, w)`` people per cell: each kind's own."""
        raise NotImplementedError

    def region_counts(
        self, maps: np.ndarray, roi_mask: np.ndarray | None = None, grid: tuple[int, int] | None = None
    ) -> np.ndarray:
        """``(n, 1 + cells)``: density summed over the ROI, then over each grid cell's part of it."""
        return self.sum_regions(self.density(maps), roi_mask, grid)

    @staticmethod
    def sum_regions(
        density: np.ndarray, roi_mask: np.ndarray | None = None, grid: tuple[int, int] | None = None
    ) -> np.ndarray:
        """``(n, h, w)`` density maps -> ``(n, 1 + cells)`` region sums (see :meth:`region_counts`)."""
        weights = region_weights(roi_mask, density.shape[1:], grid)
        return density.reshape(len(density), -1) @ weights.T


@dataclass
class DensityHead(MapHead):
    """A fitted per-pixel density regressor (see module docstring).

    ``layers`` are the backbone maps it reads (concatenated in this order on the head grid of
    :mod:`counting.heads.density.maps`); ``settings`` records how it was made (backbone, input size,
    density target, penalty) for the model file and the report.
    """

    layers: tuple[str, ...]
    kind: str
    x_mean: np.ndarray
    x_scale: np.ndarray
    coef: np.ndarray
    intercept: float
    projection: np.ndarray | None = None
    phase: np.ndarray | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    # What every density head tells the count (the conv head's differ): the stride of the grid it
    # reads, and no router or specialists of its own.
    stride: ClassVar[int] = HEAD_STRIDE
    router: ClassVar[None] = None

    @property
    def specialists(self) -> dict[str, Any]:
        return {}

    @property
    def n_features(self) -> int:
        extra = 0 if self.projection is None else int(self.projection.shape[1])
        return self.n_channels + extra

    def pixel_features(self, pixels: np.ndarray) -> np.ndarray:
        """``(N, C)`` channel vectors -> ``(N, n_features)`` float32 regression features."""
        standardised = (np.asarray(pixels, dtype=np.float32) - self.x_mean.astype(np.float32)) / self.x_scale.astype(
            np.float32
        )
        if self.projection is None:
            return standardised
        assert self.phase is not None
        angles = standardised @ self.projection.astype(np.float32) + self.phase.astype(np.float32)
        waves = np.cos(angles, out=angles)
        waves *= np.float32(np.sqrt(2.0 / self.projection.shape[1]))
        return np.concatenate([standardised, waves], axis=1)

    def density(self, maps: np.ndarray) -> np.ndarray:
        """``(n, C, h, w)`` feature maps -> ``(n, h, w)`` density maps (people per map cell)."""
        array = self.check_maps(maps)
        count, channels, rows, cols = array.shape
        pixels = array.transpose(0, 2, 3, 1).reshape(-1, channels)
        out = np.empty(len(pixels), dtype=np.float64)
        coef = self.coef.astype(np.float32)
        for start in range(0, len(pixels), _CHUNK_PIXELS):
            chunk = pixels[start : start + _CHUNK_PIXELS]
            out[start : start + len(chunk)] = self.pixel_features(chunk) @ coef
        return (out + self.intercept).reshape(count, rows, cols)
