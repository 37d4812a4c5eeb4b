"""The conv density head inside ``counting train --density-head --head-kind conv``.

The head is trained on three quarters of the train images and early-stopped on the other
quarter (sequences: the last quarter of the frames, so that near-copies of a validation frame
are not in the fit part; photos: a seeded random quarter, as scripts/conv_density_study.py
splits). The AGP then learns from the validation quarter's region sums only: they are the only
sums the head did not fit, so its errors there are the ones it makes on unseen images. The rows
of the fit part are returned as NaN and left out of the AGP's training.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from counting.density.conv_fitting import ConvSettings, fit_conv_head, stride8_maps
from counting.density.conv_head import ConvDensityHead
from counting.density.data import TargetSettings, density_targets
from counting.errors import DatasetError

__all__ = ["CONV_LAYERS", "DEFAULT_SETTINGS", "fit_conv_descriptors", "validation_part"]

# Chosen on validation inside the train ranges (scripts/conv_density_study.py, docs/density.md).
CONV_LAYERS: tuple[str, ...] = ("block4", "block7", "block10")
# Width, depth and schedule `train` uses (the seed is the run's). Cosine decay of the learning
# rate: validation MAE 15.79 against 18.85 at a constant rate on ShanghaiTech B, 1.61 against
# 1.59 on Mall (scripts/conv_density_study.py, docs/density.md).
DEFAULT_SETTINGS = ConvSettings(schedule="cosine")


def validation_part(indices: np.ndarray, is_sequence: bool, seed: int) -> np.ndarray:
    """Boolean mask of the quarter of the train images the conv head is early-stopped on."""
    indices = np.asarray(indices)
    count = len(indices)
    if is_sequence:
        # The latest quarter of the frames (Mall train 1-600: frames 451-600).
        return indices > np.sort(indices)[count - count // 4 - 1] if count >= 4 else np.zeros(count, bool)
    chosen = np.random.default_rng(seed).choice(count, count // 4, replace=False)
    return np.isin(np.arange(count), chosen)


def fit_conv_descriptors(
    samples: Sequence[Any],
    dataset: Any,
    backbone: Any,
    prep: Any,
    grid: tuple[int, int] | None,
    *,
    is_sequence: bool,
    seed: int,
    cache: Any = None,
    batch_size: int = 8,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    layers: Sequence[str] = CONV_LAYERS,
    targets: TargetSettings | None = None,
    settings: ConvSettings | None = None,
) -> tuple[ConvDensityHead, np.ndarray]:
    """``(trained head, (n, 1 + cells) region sums: the validation quarter's, NaN elsewhere)``."""
    targets = targets or TargetSettings()
    settings = settings or replace(DEFAULT_SETTINGS, seed=seed)
    indices = np.array([sample.index for sample in samples])
    validation = validation_part(indices, is_sequence, seed)
    if validation.sum() < 4 or (~validation).sum() < 4:
        raise DatasetError(f"{dataset.root}: a conv density head needs at least 16 train images ({len(samples)} given)")
    try:
        maps = stride8_maps(
            [str(sample.path) for sample in samples], backbone, prep, layers, cache, batch_size, progress
        )
    except ValueError as error:
        raise DatasetError(str(error)) from None
    density = density_targets(
        samples, [item.shape[1:] for item in maps], targets, dataset.perspective_map, str(dataset.root)
    )
    counts = np.array([float(sample.count) for sample in samples])
    if log is not None:
        log(
            f"training the conv density head ({settings.width} wide, {settings.depth} 3x3 convs) on "
            f"{', '.join(layers)} maps at stride 8: {int((~validation).sum())} images, early-stopped on "
            f"{int(validation.sum())}"
        )
    fit = fit_conv_head(
        maps, density, counts, layers, validation, roi_mask=prep.roi_mask, grid=grid, settings=settings, log=log
    )
    head = fit.head
    head.settings |= {
        "grid": None if grid is None else list(grid),
        "target": targets.record(),
        # Heat maps are drawn from 0 to this many people per map cell (a busy cell in training).
        "display_max": float(np.percentile(np.concatenate([item.ravel() for item in density]), 99.9)),
    }
    rows = np.full((len(samples), fit.validation_sums.shape[1]), np.nan)
    rows[validation] = fit.validation_sums
    if log is not None:
        log(f"conv density head: kept step {fit.best_step}, validation count MAE {head.settings['validation_mae']:.3f}")
    return head, rows
