"""The density head inside ``counting train --density-head``: fit it on the train part's dots
and give the AGP its descriptors (region sums: whole ROI, then each cell of the grid).

The AGP's training rows are out-of-fold region sums (each image summed by a head fitted
without its fold), so the AGP learns how the head errs on images it has not seen, as at test
time, rather than its smaller in-sample errors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from counting.core.defaults import DENSITY_KINDS
from counting.core.errors import DatasetError, TrainingError
from counting.heads.density.data import TargetSettings, density_targets
from counting.heads.density.map_store import MapStore, maps_in_chunks
from counting.heads.density.maps import extract_maps
from counting.heads.density.ridge.fitting import fit_density_head
from counting.heads.density.ridge.head import DensityHead

__all__ = [
    "DEFAULT_COUNT_WEIGHTS",
    "DEFAULT_KIND",
    "DEFAULT_LAYERS",
    "HEAD_FOLDS",
    "density_choice",
    "fit_head_descriptors",
]

# Chosen on validation inside the train ranges (scripts/density_study.py, docs/density.md).
DEFAULT_LAYERS: tuple[str, ...] = ("block7", "block10")
DEFAULT_KIND = "ridge"
# The pixel loss alone: on Mall's validation block the region-count term chosen by the inner
# folds measured worse (head MAE 1.93 -> 3.44); on ShanghaiTech B it helped (42 -> 30).
DEFAULT_COUNT_WEIGHTS: tuple[float, ...] = (0.0,)
HEAD_FOLDS = 5
# Frames per run dealt to the head's folds on sequences: long runs, so that few of a frame's
# near-copies sit in the other folds and the out-of-fold sums stay honest.
SEQUENCE_RUN = 50


def density_choice(config: Any) -> dict[str, Any]:
    """``kind`` and ``layers`` for :func:`fit_head_descriptors` from a TrainingConfig (the kind's
    default layers when it names none); TrainingError for an unknown kind. An unknown layer is
    the backbone's one-line error when its maps are asked for."""
    kind = config.density_kind
    if kind not in DENSITY_KINDS:
        raise TrainingError(f"--head-kind must be one of {', '.join(DENSITY_KINDS)}, got {kind!r}")
    layers = config.density_layers
    if not layers:
        from counting.heads.density.conv.training import CONV_LAYERS

        layers = CONV_LAYERS if kind == "conv" else DEFAULT_LAYERS
    return {"kind": kind, "layers": tuple(layers)}


def _check_dotted_single_kind(samples: Sequence[Any], dataset: Any) -> None:
    """One clear line where the dataset cannot train a density head: several kinds of object, or no dots."""
    if dataset.class_names is not None:
        raise DatasetError(f"{dataset.root}: --density-head counts one kind of object; {dataset.name} has several")
    if any(sample.dots is None for sample in samples):
        raise DatasetError(f"{dataset.root}: --density-head needs head dots, which {dataset.name} does not have")


def _stored_maps(
    samples: Sequence[Any], backbone: Any, prep: Any, layers: Sequence[str], cache: Any, batch_size: int, progress: bool
) -> MapStore:
    """The samples' maps of ``layers``, on disk and read back one picture at a time by the fit
    (memory flat in the pictures); float32, as the maps are made, so the head is the one fitted
    in memory. A picture that cannot be read is a DatasetError."""

    def make(chunk: list[str], show: bool) -> list[np.ndarray]:
        found = extract_maps(chunk, backbone, prep, layers, cache=cache, batch_size=batch_size, progress=show)
        if found.errors:
            path, message = next(iter(found.errors.items()))
            raise DatasetError(message if path in message else f"{path}: {message}")
        return found.maps  # type: ignore[return-value]

    paths = [str(sample.path) for sample in samples]
    return maps_in_chunks(paths, make, dtype=np.float32, progress=progress, label=f"{backbone.name} maps")


def _head_folds(samples: Sequence[Any], is_sequence: bool, seed: int) -> np.ndarray:
    """Each sample's fold (of :data:`HEAD_FOLDS`): sequences dealt in runs of frames."""
    from counting.data.datasets.splits import cv_folds

    indices = np.array([sample.index for sample in samples])
    fold_of = np.zeros(len(samples), dtype=int)
    # Each fold gets at least two runs, so that on a short sequence no fold is one long stretch.
    run = max(1, min(SEQUENCE_RUN, len(samples) // (2 * HEAD_FOLDS)))
    for number, members in enumerate(cv_folds(indices, HEAD_FOLDS, is_sequence, seed, run if is_sequence else None)):
        fold_of[members] = number
    return fold_of


def fit_head_descriptors(
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
    layers: Sequence[str] = DEFAULT_LAYERS,
    kind: str = DEFAULT_KIND,
    targets: TargetSettings | None = None,
) -> tuple[DensityHead, np.ndarray]:
    """``(head fitted on every sample, (n, 1 + cells) out-of-fold region sums)``.

    ``kind`` ``conv``: :func:`counting.heads.density.conv.training.fit_conv_descriptors` (its rows are
    NaN outside the quarter it was early-stopped on).
    """
    _check_dotted_single_kind(samples, dataset)
    if kind == "conv":
        from counting.heads.density.conv.training import fit_conv_descriptors

        return fit_conv_descriptors(  # type: ignore[return-value]
            samples,
            dataset,
            backbone,
            prep,
            grid,
            is_sequence=is_sequence,
            seed=seed,
            cache=cache,
            batch_size=batch_size,
            progress=progress,
            log=log,
            layers=layers,
            targets=targets,
        )
    # Fixed sigma: on Mall, sigma scaled by pMapN gave the same validation figures (head MAE
    # 1.93 both, AGP 2.35 against 2.29): map cells of 16 px blur the difference away.
    targets = TargetSettings() if targets is None else targets
    with _stored_maps(samples, backbone, prep, layers, cache, batch_size, progress) as maps:
        density = density_targets(
            samples, [item.shape[1:] for item in maps], targets, dataset.perspective_map, str(dataset.root)
        )
        fold_of = _head_folds(samples, is_sequence, seed)
        if log is not None:
            log(f"fitting the {kind} density head on {', '.join(layers)} maps of {len(samples)} images")
        fit = fit_density_head(
            maps,
            density,
            np.array([float(sample.count) for sample in samples]),
            layers,
            roi_mask=prep.roi_mask,
            grid=grid,
            folds=fold_of,
            kind=kind,
            seed=seed,
            count_weights=DEFAULT_COUNT_WEIGHTS,
        )
    fit.head.settings |= {
        "grid": None if grid is None else list(grid),
        "target": targets.record(),
        "out_of_fold_mae": fit.penalty_mae,
        # Heat maps are drawn from 0 to this many people per map cell (a busy cell in training).
        "display_max": float(np.percentile(np.concatenate([item.ravel() for item in density]), 99.9)),
    }
    if log is not None:
        mae = fit.penalty_mae[f"{fit.penalty:g}/{fit.count_weight:g}"]
        log(f"density head: penalty {fit.penalty:g}, out-of-fold count MAE {mae:.3f}")
    return fit.head, fit.out_of_fold
