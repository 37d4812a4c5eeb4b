"""A dataset's samples as the head's training material: maps, density targets and counts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from counting.core.errors import DatasetError
from counting.data.imaging import image_size
from counting.heads.density.targets import density_map, dot_sigmas

__all__ = ["DEFAULT_SIGMA", "TargetSettings", "density_targets"]

# Gaussian sigma of a head dot in image pixels (about half a Mall head at mid-depth). The map
# cells are 16 input pixels or more, so the target changes little with it.
DEFAULT_SIGMA = 4.0


@dataclass(frozen=True)
class TargetSettings:
    """How dots become density: sigma in image pixels, scaled by the perspective map if given."""

    sigma: float = DEFAULT_SIGMA
    perspective: bool = False

    def record(self) -> dict[str, Any]:
        return {"sigma": self.sigma, "perspective": self.perspective}


def density_targets(
    samples: Sequence[Any],
    map_sizes: Sequence[tuple[int, int]],
    settings: TargetSettings = TargetSettings(),
    perspective_map: np.ndarray | None = None,
    where: str = "dataset",
) -> list[np.ndarray]:
    """One ``(h, w)`` density target per sample (its dots on its map's grid)."""
    perspective = perspective_map if settings.perspective else None
    reference = float(np.median(perspective)) if perspective is not None else 1.0
    targets = []
    for sample, size in zip(samples, map_sizes, strict=True):
        if sample.dots is None:
            raise DatasetError(f"{where}: {sample.path} has no head dots; a density head needs them")
        height, width = image_size(sample.path)
        sigmas = dot_sigmas(sample.dots, settings.sigma, perspective, reference)
        targets.append(density_map(sample.dots, (height, width), size, sigmas))
    return targets
