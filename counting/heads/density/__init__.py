"""Frozen-feature density head: density targets from head dots, a per-pixel regressor on
intermediate feature maps, and the region counts (whole ROI, grid cells) it gives."""

from counting.heads.density.maps import HEAD_STRIDE, MapSet, extract_maps, head_grid, maps_on_grid
from counting.heads.density.regions import region_weights, roi_weights
from counting.heads.density.ridge.fitting import HeadFit, fit_density_head
from counting.heads.density.ridge.head import HEAD_KINDS, DensityHead
from counting.heads.density.targets import density_map, dot_sigmas

__all__ = [
    "HEAD_KINDS",
    "HEAD_STRIDE",
    "DensityHead",
    "HeadFit",
    "MapSet",
    "density_map",
    "dot_sigmas",
    "extract_maps",
    "fit_density_head",
    "head_grid",
    "maps_on_grid",
    "region_weights",
    "roi_weights",
]
