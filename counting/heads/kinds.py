"""Head kinds: how a training image becomes the AGP's rows, one class per kind behind one protocol.

``train_model`` (counting.train.pipeline) knows only this protocol: it asks the registry for the
kind a config names, lets the kind refuse settings it cannot honour *before any work*, then
asks it for the rows. A new head kind is a class here (or in its own module) with ``check`` and
``rows``, plus one line in :data:`counting.heads.registry.HEADS` (with its model side).

- ``descriptors``: the backbone's descriptors of each image (class scores, pooled features or
  feature-map sums), whole frame or per grid cell: the AGP regresses counts on them.
- ``density``: a density head (ridge, random features or small conv nets) fitted on frozen
  feature maps; the AGP regresses on its out-of-fold region sums (and, for the conv ensemble,
  corrects the head's count instead of replacing it).
- ``class-density``: the VOC per-class density head; the AGP regresses per-class counts on its
  out-of-fold class sums.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from counting.core.errors import TrainingError
from counting.features.layouts import extract_views

__all__ = ["ClassDensityRows", "DensityRows", "DescriptorRows", "HeadKind", "HeadRows", "TrainingInputs"]


@dataclass
class TrainingInputs:
    """What every head kind is given: the train split and how its images are read."""

    config: Any  # counting.train.pipeline.TrainingConfig (read only)
    dataset: Any
    samples: list[Any]
    layout: str
    descriptor: Any  # counting.features.descriptors.Descriptor
    backbone: Any
    preprocessing: Any
    is_sequence: bool
    multi_output: bool
    cache: Any = None  # counting.features.cache.FeatureCache
    progress: bool = False
    log: Callable[[str], None] | None = None
    extract: Callable[..., Any] | None = None  # replaces extract_features (e.g. on a Dask cluster)


@dataclass
class HeadRows:
    """What a head kind gives the AGP: per-image rows (and per-cell rows) of the kept samples."""

    samples: list[Any]
    frame: np.ndarray | None  # (n, D) per image; None for the tiles layout (cells only)
    cells: np.ndarray | None = None  # (n, cells, D) per grid cell
    density_head: Any = None
    class_density_head: Any = None
    # "head_sum": the AGP learns count - the head's count (the conv ensemble), weighted on use.
    count_offset: str = "none"
    correction_weight: float = 1.0

    @property
    def counts(self) -> np.ndarray:
        """(n,) true counts of the kept samples, or (n, K) per class."""
        return np.asarray([sample.count for sample in self.samples], dtype=float)

    @property
    def indices(self) -> np.ndarray:
        """1-based frame / image numbers of the kept samples (what splits and folds use)."""
        return np.array([sample.index for sample in self.samples])


class HeadKind(Protocol):
    name: str
    # Whether its rows come through ``inputs.extract`` (descriptors, which --cluster extracts on a
    # Dask cluster); a density head learns from feature maps made in this process.
    distributes: bool

    def check(self, config: Any, descriptor: Any, root: Any) -> None:
        """Raise TrainingError for settings this kind cannot honour (before any work); ``root``
        is the dataset folder the messages name."""

    def rows(self, inputs: TrainingInputs) -> HeadRows:
        """The AGP's rows for ``inputs.samples`` (read with ``inputs.cache``, ``inputs.extract``)."""


def check_head_choice(config: Any) -> None:
    """Raise TrainingError for density-head options given without ``--density-head``: needs the
    settings alone, so ``train`` says it before the dataset loads."""
    if not config.density_head and (config.density_kind != "ridge" or config.density_layers):
        raise TrainingError("--head-kind and --head-layers choose the density head: add --density-head")


class DescriptorRows:
    name = "descriptors"
    distributes = True

    def check(self, config: Any, descriptor: Any, root: Any) -> None:
        check_head_choice(config)
        if config.flip_average:
            if config.resolved_layout() != "frame":
                raise TrainingError(f"{root}: --flip-average works on whole frames (no --grid)")
            if descriptor.uses_maps:
                raise TrainingError(
                    f"descriptor {descriptor.text!r}: --flip-average works on class scores or pooled features"
                )

    def rows(self, inputs: TrainingInputs) -> HeadRows:
        config, descriptor, extract = inputs.config, inputs.descriptor, inputs.extract
        if config.flip_average:
            from counting.features.flip import flip_averaging

            extract = flip_averaging(extract)
        frame, cells = extract_views(
            [sample.path for sample in inputs.samples],
            inputs.backbone,
            inputs.preprocessing,
            inputs.layout,
            config.grid,
            cache=inputs.cache,
            batch_size=config.batch_size,
            progress=inputs.progress,
            extract=extract,
            descriptor=None if descriptor.spec.kind == "scores" else descriptor,
        )
        return HeadRows(samples=inputs.samples, frame=frame, cells=cells)


def _check_density_settings(config: Any, descriptor: Any) -> None:
    """What every density head shares: it makes its own descriptors, one row per image."""
    if descriptor.spec.kind != "scores" or config.flip_average:
        raise TrainingError(
            "--density-head makes its own descriptors (the head's density sums): leave out --descriptor and --flip-average"
        )
    if config.layout not in (None, "frame") or config.whole_frame_rows:
        # Was silently ignored: the model file said layout 'frame' whatever was asked for.
        raise TrainingError(
            "--density-head trains one row per image (sums over the ROI and each --grid cell): "
            "leave out --layout and --whole-frame-rows"
        )


class DensityRows:
    name = "density"
    distributes = False

    def check(self, config: Any, descriptor: Any, root: Any) -> None:
        _check_density_settings(config, descriptor)
        if config.density_kind == "conv" and config.target_transform != "none":
            raise TrainingError(
                "--target-transform does not apply to the conv density head: its AGP corrects the head's count"
            )

    def rows(self, inputs: TrainingInputs) -> HeadRows:
        from counting.heads.density.training import density_choice, fit_head_descriptors

        config = inputs.config
        head, frame = fit_head_descriptors(
            inputs.samples,
            inputs.dataset,
            inputs.backbone,
            inputs.preprocessing,
            config.grid,
            is_sequence=inputs.is_sequence,
            seed=config.seed,
            cache=inputs.cache,
            progress=inputs.progress,
            log=inputs.log,
            **density_choice(config),
        )
        # A conv head: the AGP learns from the sums of the images it was early-stopped on only.
        kept = ~np.isnan(frame).any(axis=1)
        samples = [sample for sample, keep in zip(inputs.samples, kept, strict=True) if keep]
        rows = HeadRows(samples=samples, frame=frame[kept], density_head=head)
        if config.density_kind == "conv":
            # The AGP corrects the ensemble's count rather than replacing it (chosen on `train`'s
            # procedure nested inside the train ranges, scripts/conv_agp_study.py).
            from counting.heads.density.conv.training import CORRECTION_WEIGHT

            rows.count_offset, rows.correction_weight = "head_sum", CORRECTION_WEIGHT
        return rows


class ClassDensityRows:
    name = "class-density"
    distributes = False

    def check(self, config: Any, descriptor: Any, root: Any) -> None:
        _check_density_settings(config, descriptor)
        if config.density_kind != "ridge" or config.density_layers:
            raise TrainingError(
                "--head-kind and --head-layers are for one-count density heads; the VOC per-class head "
                "has its own (final+block14, ridge)"
            )

    def rows(self, inputs: TrainingInputs) -> HeadRows:
        from counting.heads.density.classes.training import fit_class_head_descriptors

        config = inputs.config
        head, frame = fit_class_head_descriptors(
            inputs.samples,
            inputs.dataset,
            inputs.backbone,
            inputs.preprocessing,
            config.grid,
            seed=config.seed,
            cache=inputs.cache,
            batch_size=config.batch_size,
            log=inputs.log,
        )
        return HeadRows(samples=inputs.samples, frame=frame, class_density_head=head)
