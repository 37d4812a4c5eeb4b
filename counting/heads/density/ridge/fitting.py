"""Fitting a DensityHead: closed-form ridge on Gram matrices accumulated image by image.

Memory stays bounded by the Gram matrix (features x features), whatever the number of pixels.
Gram matrices are kept per fold, so the out-of-fold head of every fold costs one more solve
(total minus that fold), not another pass over the pixels; and since a region's count is
linear in the coefficients, each image's region sums of the features give its out-of-fold
region counts without touching its pixels again. The penalty is chosen on those counts.

The loss has two scales: the per-pixel squared error against the density target, plus
``count_weight`` times the squared error of the region counts (whole ROI and grid cells)
against the dots in them. Both are quadratic in the coefficients, so the second is one more
Gram matrix (of the region sums). The pixel term alone cannot fit dense crowds where a cell
holds several people (ShanghaiTech B: it fits the density's shape but not its level); the count
term alone is a plain regression on summed features. The weight is chosen with the penalty.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from counting.heads.density.regions import region_weights
from counting.heads.density.ridge.head import HEAD_KINDS, DensityHead

__all__ = ["PENALTIES", "HeadFit", "fit_density_head"]

# Ridge penalties relative to the mean diagonal of the Gram matrix (features are standardised).
PENALTIES = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)
# Weights of the region-count term relative to the pixel term (ratio of their Gram traces).
COUNT_WEIGHTS = (0.0, 0.1, 1.0, 10.0)


@dataclass
class HeadFit:
    """A fitted head and what choosing it measured."""

    head: DensityHead
    # (n, 1 + cells) region counts of each image by the head fitted without its fold (NaN
    # without folds): the rows the AGP is trained on, free of the head's in-sample optimism.
    out_of_fold: np.ndarray
    penalty: float
    penalty_mae: dict[str, float]  # out-of-fold count MAE per "penalty/count weight" (relative)
    count_weight: float = 0.0


def channel_statistics(maps: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and standard deviation over every cell of every ``(C, h, w)`` map (float64)."""
    channels = maps[0].shape[0]
    total = np.zeros(channels)
    squares = np.zeros(channels)
    pixels = 0
    for item in maps:
        flat = np.asarray(item).reshape(channels, -1).astype(np.float64)
        total += flat.sum(axis=1)
        squares += np.einsum("ij,ij->i", flat, flat)
        pixels += flat.shape[1]
    mean = total / pixels
    scale = np.sqrt(np.maximum(squares / pixels - mean**2, 0.0))
    # Constant channels (dead ReLUs) would divide by zero; they carry nothing anyway.
    return mean, np.where(scale > 1e-6, scale, 1.0)


def _skeleton(
    maps: Sequence[np.ndarray], layers: Sequence[str], kind: str, n_random: int, bandwidth: float, seed: int
) -> DensityHead:
    mean, scale = channel_statistics(maps)
    projection = phase = None
    if kind == "rff":
        rng = np.random.default_rng(seed)
        # Bandwidth in units of the typical distance between standardised vectors (sqrt(2C)).
        length = bandwidth * np.sqrt(2.0 * len(mean))
        projection = rng.standard_normal((len(mean), n_random)) / length
        phase = rng.uniform(0.0, 2.0 * np.pi, n_random)
    return DensityHead(
        layers=tuple(layers),
        kind=kind,
        x_mean=mean,
        x_scale=scale,
        coef=np.zeros(0),
        intercept=0.0,
        projection=projection,
        phase=phase,
    )


def fit_density_head(
    maps: Sequence[np.ndarray],
    targets: Sequence[np.ndarray],
    counts: np.ndarray,
    layers: Sequence[str],
    *,
    roi_mask: np.ndarray | None = None,
    grid: tuple[int, int] | None = None,
    folds: np.ndarray | None = None,
    kind: str = "ridge",
    penalties: Sequence[float] = PENALTIES,
    count_weights: Sequence[float] = COUNT_WEIGHTS,
    n_random: int = 1024,
    bandwidth: float = 1.0,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> HeadFit:
    """Fit a head on ``(C, h, w)`` maps and their ``(h, w)`` density targets.

    ``counts`` are the true counts the penalty is chosen against (on out-of-fold predictions;
    ``folds`` gives each image's fold, or None to take the first penalty). ``progress`` is
    called with the number of images done.
    """
    if kind not in HEAD_KINDS:
        raise ValueError(f"kind must be one of {', '.join(HEAD_KINDS)}, got {kind!r}")
    if not len(maps) or len(maps) != len(targets) or len(maps) != len(counts):
        raise ValueError(f"need as many maps ({len(maps)}), targets ({len(targets)}) and counts ({len(counts)}), > 0")
    head = _skeleton(maps, layers, kind, n_random, bandwidth, seed)
    fold_of = np.zeros(len(maps), dtype=int) if folds is None else np.asarray(folds, dtype=int)
    n_folds = int(fold_of.max()) + 1
    dim = head.n_features + 1  # the last column is the intercept
    gram = np.zeros((n_folds, dim, dim))
    cross = np.zeros((n_folds, dim))
    region_gram = np.zeros((n_folds, dim, dim))
    region_cross = np.zeros((n_folds, dim))
    region_sums: list[np.ndarray] = []
    for position, (item, target) in enumerate(zip(maps, targets, strict=True)):
        channels, rows, cols = item.shape
        if target.shape != (rows, cols):
            raise ValueError(f"image {position}: target {target.shape} does not match its map ({rows}, {cols})")
        features = head.pixel_features(item.reshape(channels, -1).T)
        design = np.concatenate([features, np.ones((len(features), 1), np.float32)], axis=1)
        fold = fold_of[position]
        gram[fold] += design.T @ design
        cross[fold] += design.T @ target.ravel().astype(np.float32)
        regions = region_weights(roi_mask, (rows, cols), grid)
        summed = regions @ design.astype(np.float64)  # (regions, dim)
        region_sums.append(summed)
        region_gram[fold] += summed.T @ summed
        region_cross[fold] += summed.T @ (regions @ target.ravel())
        if progress is not None:
            progress(position + 1)
    sums = np.stack(region_sums)  # (n, regions, dim)
    total_gram, total_cross = gram.sum(axis=0), cross.sum(axis=0)
    total_region_gram, total_region_cross = region_gram.sum(axis=0), region_cross.sum(axis=0)
    scale = float(np.trace(total_gram)) / dim
    region_scale = float(np.trace(total_gram)) / max(float(np.trace(total_region_gram)), 1e-300)

    def solve(held: int | None, relative: float, count_weight: float) -> np.ndarray:
        matrix = total_gram - (0 if held is None else gram[held])
        vector = total_cross - (0 if held is None else cross[held])
        if count_weight:
            weight = count_weight * region_scale
            matrix = matrix + weight * (total_region_gram - (0 if held is None else region_gram[held]))
            vector = vector + weight * (total_region_cross - (0 if held is None else region_cross[held]))
        ridge = np.full(dim, relative * scale)
        ridge[-1] = 0.0  # the intercept is not shrunk
        return scipy.linalg.solve(matrix + np.diag(ridge), vector, assume_a="pos", check_finite=False)

    truth = np.asarray(counts, dtype=float)
    out_of_fold: dict[tuple[float, float], np.ndarray] = {}
    errors: dict[str, float] = {}
    if n_folds > 1:
        for count_weight in count_weights:
            for relative in penalties:
                predicted = np.zeros(sums.shape[:2])
                for fold in range(n_folds):
                    members = fold_of == fold
                    if members.any():
                        predicted[members] = sums[members] @ solve(fold, relative, count_weight)
                out_of_fold[(relative, count_weight)] = predicted
                errors[f"{relative:g}/{count_weight:g}"] = float(np.mean(np.abs(predicted[:, 0] - truth)))
        chosen = min(out_of_fold, key=lambda key: errors[f"{key[0]:g}/{key[1]:g}"])
    else:
        chosen = (float(penalties[0]), float(count_weights[0]))
        out_of_fold[chosen] = np.full(sums.shape[:2], np.nan)
    weights = solve(None, *chosen)
    head.coef = weights[:-1]
    head.intercept = float(weights[-1])
    head.settings = {
        "penalty": chosen[0],
        "count_weight": chosen[1],
        "n_random": n_random if kind == "rff" else 0,
        "bandwidth": bandwidth,
    }
    return HeadFit(
        head=head, out_of_fold=out_of_fold[chosen], penalty=chosen[0], penalty_mae=errors, count_weight=chosen[1]
    )
