"""The conv density head inside ``counting train --density-head --head-kind conv``.

With ``folds`` = K > 1 (the default), the train images are cut into K parts (sequences:
contiguous blocks of frames, so that near-copies of a validation frame are not fitted; photos: a
seeded random partition) and K heads are trained, each on K-1 parts and validated on the
remaining one; the model's head is their ensemble (densities averaged). Every train image then
has region sums from a head that did not fit it, and the AGP learns from all of them how the
count differs from the head's sum; the model adds CORRECTION_WEIGHT of that to the ensemble's sum.

With ``folds`` = 1, one head is trained on three quarters of the train images and early-stopped
on the other quarter (sequences: the last quarter of the frames); the AGP learns from that
quarter's sums only, and the rows of the fit part are returned as NaN and left out of its training.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from counting.core.errors import DatasetError
from counting.heads.crowd.people_mask import PeopleMask, fit_people_mask, mask_cells
from counting.heads.density.conv.fitting import ConvSettings, fit_conv_heads, stride8_maps
from counting.heads.density.conv.head import ConvDensityHead, ensemble
from counting.heads.density.data import TargetSettings, density_targets
from counting.heads.density.map_store import MapStore

__all__ = [
    "CONV_LAYERS",
    "CORRECTION_WEIGHT",
    "corrected_counts",
    "correction_targets",
    "DEFAULT_SETTINGS",
    "fit_conv_descriptors",
    "validation_part",
    "validation_parts",
]

# Chosen on validation inside the train ranges (scripts/conv_density_study.py, docs/density.md).
CONV_LAYERS: tuple[str, ...] = ("block4", "block7", "block10")
# What `train` uses (the seed is the run's), chosen out of fold on Mall frames 1-600 (4 blocks of
# 150 frames, each head validated on one; scripts/conv_density_study.py, docs/density.md): four
# heads, each trained for 1500 steps at a constant rate with its weights averaged (EMA 0.995) and
# the last average kept. AGP on their sums, out of fold: 2.23 at native input, 2.04 at short side
# 720 (`--input-size 720`), against 2.34 for the earlier single-head setting (cosine decay)
# measured the same way at native input.
# The evaluations only report (the last weights are kept whatever they measure), and each counts
# every validation image: three of them instead of ten take a third off the training time at 720.
DEFAULT_SETTINGS = ConvSettings(ema=0.995, keep="last", folds=4, eval_every=500)
# The model counts with the ensemble's sum plus this much of the AGP's correction (the AGP learns
# the count minus the head's sum from single heads' out-of-fold sums, and the ensemble errs less
# than one head). Chosen by running `train`'s whole procedure nested inside the train ranges
# (scripts/conv_agp_study.py, docs/density.md): held-out MAE at weights 0 / 0.5 / 1 was
# Mall (720) 2.16 / 2.15 / 2.24 and ShanghaiTech B 16.13 / 14.11 / 14.44; the AGP given the
# ensemble's sums directly (up to now) 2.24 and 14.79.
CORRECTION_WEIGHT = 0.5


def copy_kinds(settings: ConvSettings) -> list[tuple[float, dict[str, bool]]]:
    """``(share of the training crops, Preprocessing change)`` of each kind of augmented copy."""
    return [(settings.gray_share, {"grayscale": True}), (settings.degraded_share, {"degraded": True})]


def correction_targets(rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """What the AGP learns from a conv ensemble's rows: each count minus the heads' whole-ROI sum
    (column 0 of the rows). The one definition `train`, the model file and the studies use."""
    return np.asarray(counts, dtype=float) - np.asarray(rows, dtype=float)[:, 0]


def corrected_counts(rows: np.ndarray, correction: np.ndarray, weight: float = CORRECTION_WEIGHT) -> np.ndarray:
    """A conv-ensemble model's count: the heads' whole-ROI sum plus ``weight`` times the AGP's
    prediction of :func:`correction_targets` (not clipped: the caller clips after its transform)."""
    return np.asarray(rows, dtype=float)[:, 0] + weight * np.asarray(correction, dtype=float)


def validation_part(indices: np.ndarray, is_sequence: bool, seed: int) -> np.ndarray:
    """Boolean mask of the quarter of the train images the conv head is early-stopped on."""
    indices = np.asarray(indices)
    count = len(indices)
    if is_sequence:
        # The latest quarter of the frames (Mall train 1-600: frames 451-600).
        return indices > np.sort(indices)[count - count // 4 - 1] if count >= 4 else np.zeros(count, bool)
    chosen = np.random.default_rng(seed).choice(count, count // 4, replace=False)
    return np.isin(np.arange(count), chosen)


def validation_parts(indices: np.ndarray, is_sequence: bool, seed: int, folds: int) -> list[np.ndarray]:
    """Boolean masks of the parts the heads are validated on: :func:`validation_part` for one head,
    else ``folds`` parts covering every train image (sequences: contiguous blocks of frames)."""
    if folds == 1:
        return [validation_part(indices, is_sequence, seed)]
    from counting.data.datasets.splits import cv_folds

    masks = []
    for members in cv_folds(np.asarray(indices), folds, is_sequence, seed, None):
        mask = np.zeros(len(indices), bool)
        mask[members] = True
        masks.append(mask)
    return masks


def _masked_rows(
    maps: Sequence[Any],
    copies: Sequence[Sequence[Any]],
    density: Sequence[np.ndarray],
    fits: Sequence[Any],
    parts: Sequence[np.ndarray],
    rows: np.ndarray,
    roi_mask: np.ndarray | None,
    grid: tuple[int, int] | None,
    seed: int,
    log: Callable[[str], None] | None,
) -> PeopleMask:
    """The heads' people mask, fitted on every picture's cells; ``rows`` (each validated picture's
    region sums by the head validated on it) replaced in place by that head's masked density's, the
    mask it is multiplied by fitted without the picture's fold as well (no leak into the out-of-fold
    counts the gate and intervals learn from). ``copies``: each kind's maps of the same pictures
    (grayscale, degraded), drawn too with their picture's targets and left out with its fold:
    fitted on the pictures alone, the mask let a grayscale texture through that it took off the
    colour photo (docs/density.md, "A people mask for the general heads")."""
    every_map = [*maps, *(item for kind in copies for item in kind)]
    every_target = list(density) * (1 + len(copies))
    owners = np.tile(np.arange(len(maps)), 1 + len(copies))
    cells = mask_cells(every_map, every_target, fits[0].head.x_mean, fits[0].head.x_scale, seed=seed, pictures=owners)
    for fit, part in zip(fits, parts, strict=True):
        part = np.asarray(part, dtype=bool)
        fold_mask = fit_people_mask(cells.of(~part), seed=seed)
        masked = replace(fit.head, people_mask=fold_mask)
        for index in np.flatnonzero(part):
            picture = np.asarray(maps[index], dtype=np.float32)[None]
            rows[index] = ConvDensityHead.sum_regions(masked.density(picture), roi_mask, grid)[0]
    mask = fit_people_mask(cells, seed=seed)
    if log is not None:
        log(
            f"people mask: {mask.settings['cells']} cells of {mask.settings['pictures']} pictures, "
            f"validation accuracy {mask.settings['validation_accuracy']:.3f}"
        )
    return mask


def _check_enough_pictures(samples: Sequence[Any], dataset: Any, settings: ConvSettings) -> None:
    """One clear line where the train part is too small for the heads and their folds."""
    if len(samples) < 16 or settings.folds < 1 or len(samples) < 4 * settings.folds:
        raise DatasetError(
            f"{dataset.root}: a conv density head needs at least 16 train images and 4 per fold "
            f"({len(samples)} given, {settings.folds} folds)"
        )


@dataclass(frozen=True)
class _MapMaking:
    """How the heads' stride-8 maps are made (:func:`stride8_maps`), whatever the preprocessing."""

    backbone: Any
    layers: Sequence[str]
    cache: Any
    batch_size: int
    progress: bool

    def entered(self, stack: contextlib.ExitStack, paths: list[str], prep: Any) -> MapStore:
        """The maps of ``paths`` through ``prep``, their folder removed when ``stack`` closes."""
        store = stride8_maps(paths, self.backbone, prep, self.layers, self.cache, self.batch_size, self.progress)
        return stack.enter_context(store)


def _picture_and_copy_maps(
    stack: contextlib.ExitStack, paths: list[str], prep: Any, making: _MapMaking, settings: ConvSettings
) -> tuple[MapStore, list[tuple[float, MapStore]]]:
    """The pictures' maps, and ``(share of the crops, maps)`` of each kind of augmented copy
    ``settings`` draws (grayscale, degraded); a picture that cannot be read is a DatasetError."""
    try:
        maps = making.entered(stack, paths, prep)
        kinds = [(share, change) for share, change in copy_kinds(settings) if share]
        copied = [(share, making.entered(stack, paths, replace(prep, **change))) for share, change in kinds]
    except ValueError as error:
        raise DatasetError(str(error)) from None
    return maps, copied


@dataclass(frozen=True)
class _HeadInputs:
    """What the heads train on (:func:`fit_conv_heads`'s arguments): the pictures, then their
    copies of each kind, each copy with its picture's target and count (``copy_of``: its picture;
    None without copies), and every map's chance to be drawn for a crop."""

    maps: list[Any]
    targets: list[np.ndarray]
    counts: np.ndarray
    copy_of: np.ndarray | None
    weights: np.ndarray | None


def _head_inputs(
    maps: Sequence[Any],
    density: Sequence[np.ndarray],
    counts: np.ndarray,
    copied: Sequence[tuple[float, Sequence[Any]]],
    sample_weights: np.ndarray | None,
) -> _HeadInputs:
    """:class:`_HeadInputs`: each kind of copy drawn its share of the time, the pictures the rest
    (each in proportion to ``sample_weights``, uniform without them)."""
    if not copied:
        return _HeadInputs(list(maps), list(density), counts, None, sample_weights)
    base = np.ones(len(maps)) if sample_weights is None else np.asarray(sample_weights, dtype=float)
    every_map, every_target = list(maps), list(density)
    weight_parts = [base * (1.0 - sum(share for share, _ in copied))]
    for share, copy_maps in copied:
        every_map += list(copy_maps)
        every_target += list(density)
        weight_parts.append(base * share)
    copy_of = np.tile(np.arange(len(maps)), len(copied))
    return _HeadInputs(every_map, every_target, np.tile(counts, 1 + len(copied)), copy_of, np.concatenate(weight_parts))


def _trained_record(
    rows: np.ndarray,
    density: Sequence[np.ndarray],
    counts: np.ndarray,
    grid: tuple[int, int] | None,
    targets: TargetSettings,
    members: int,
) -> dict[str, Any]:
    """What the ensemble's settings record of its training beside each member's."""
    validated = ~np.isnan(rows[:, 0])
    return {
        "grid": None if grid is None else list(grid),
        "target": targets.record(),
        # Heat maps are drawn from 0 to this many people per map cell (a busy cell in training).
        "display_max": float(np.percentile(np.concatenate([item.ravel() for item in density]), 99.9)),
        # Out of fold over every validated image (one head: its validation part).
        "validation_mae": float(np.mean(np.abs(np.clip(rows[validated, 0], 0, None) - counts[validated]))),
        "members": members,
    }


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
    sample_weights: np.ndarray | None = None,
) -> tuple[ConvDensityHead, np.ndarray]:
    """``(trained head, (n, 1 + cells) region sums)``: each image's sums by the head validated on it
    (``folds`` > 1: every image; one head: its validation quarter, NaN elsewhere).
    ``sample_weights``: relative chance of each sample to be drawn for a training crop."""
    targets = targets or TargetSettings()
    settings = settings or replace(DEFAULT_SETTINGS, seed=seed)
    _check_enough_pictures(samples, dataset, settings)
    parts = validation_parts(np.array([sample.index for sample in samples]), is_sequence, seed, settings.folds)
    paths = [str(sample.path) for sample in samples]
    making = _MapMaking(backbone, layers, cache, batch_size, progress)
    # The maps live in temporary folders (conv_fitting.stride8_maps): removed once trained.
    with contextlib.ExitStack() as stack:
        maps, copied = _picture_and_copy_maps(stack, paths, prep, making, settings)
        density = density_targets(
            samples, [item.shape[1:] for item in maps], targets, dataset.perspective_map, str(dataset.root)
        )
        counts = np.array([float(sample.count) for sample in samples])
        inputs = _head_inputs(maps, density, counts, copied, sample_weights)
        fits, rows = fit_conv_heads(
            inputs.maps,
            inputs.targets,
            inputs.counts,
            layers,
            parts,
            roi_mask=prep.roi_mask,
            grid=grid,
            settings=settings,
            log=log,
            sample_weights=inputs.weights,
            copy_of=inputs.copy_of,
        )
        # Inside the maps' folders: the mask reads them, the pictures' and their copies'.
        people_mask = (
            _masked_rows(
                maps,
                [copy_maps for _, copy_maps in copied],
                density,
                fits,
                parts,
                rows,
                prep.roi_mask,
                grid,
                settings.seed,
                log,
            )
            if settings.people_mask
            else None
        )
    head = ensemble([fit.head for fit in fits])
    head.people_mask = people_mask
    head.settings |= _trained_record(rows, density, counts, grid, targets, len(fits))
    if log is not None and len(fits) > 1:
        log(f"conv density head: {len(fits)} heads, out-of-fold count MAE {head.settings['validation_mae']:.3f}")
    return head, rows
