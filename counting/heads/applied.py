"""Head kinds as a model applies them: one class per kind behind one protocol.

:mod:`counting.heads.kinds` is the training side (a config -> the AGP's rows); this is the model
side. ``CountingModel`` (counting.model) picks its kind once from its fields
(:func:`counting.heads.registry.applied_head_for`) and asks it, never branching on the head itself, for:

- the regressor's rows of image files (memory flat: a density head's maps are made a few
  pictures at a time and reduced before the next ones) and of prepared inputs (video frames,
  arrays), each with the familiarity probe of every picture;
- the familiarity probe alone (what ``familiarize`` fits on), its name and size;
- the check of the head against the backbone loaded, before any picture is read;
- the head's section of the model file (written, read and checked) and its summary line.

A new head kind is a class with these members (here or in the head's own module) and one line
in :data:`counting.heads.registry.HEADS` (with its training side); ``CountingModel`` keeps it in its ``head`` field (the two built-in
heads keep the fields they always had, ``density_head`` and ``class_density_head``).

This package never imports counting.model: the kinds are handed the model and use only what
:class:`ModelParts` names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from counting.core.errors import ModelFileError
from counting.core.memory import release_freed_memory
from counting.heads.familiarity import map_statistics

__all__ = [
    "AppliedHead",
    "Chunking",
    "ClassDensityHeadApplied",
    "DensityHeadApplied",
    "DescriptorHead",
    "ModelParts",
    "PathRows",
    "PreparedRows",
]


class ModelParts(Protocol):
    """What a head kind reads of the model that applies it (counting.model.CountingModel)."""

    name: str
    roi_mask: np.ndarray | None
    grid: tuple[int, int] | None
    layout: str
    descriptor: Any
    flip_average: bool
    familiarity: Any
    needs_probes: bool
    uses_maps: bool
    feature_dim: int
    views_per_image: int

    def get_backbone(self, weights: str | Path | None = None) -> Any: ...

    def preprocessing(self) -> Any: ...


@dataclass(frozen=True)
class Chunking:
    """Pictures whose maps are held at once, and the most run through the network together
    (the model's DENSITY_CHUNK and DENSITY_BATCH, read when it counts)."""

    pictures: int
    per_pass: int


@dataclass
class PathRows:
    """The regressor's rows of image files; rows of unreadable pictures are NaN (``ok`` False)."""

    features: np.ndarray  # (n, D) or (n, views, D)
    ok: np.ndarray  # (n,) bool
    errors: dict[str, str] = field(default_factory=dict)
    probes: np.ndarray | None = None  # (n, familiarity_dim) when asked for, else None
    # (n, 2) each picture's density-map (h, w) for a density head (0 where unread), else None.
    grids: np.ndarray | None = None
    # A density head's maps of the pictures the detector sees in tiles (wider than 2:1), by
    # index: a crowd model's sparse gate reads them tile by tile (counting.heads.crowd.sparse_gate).
    # Few and small (a 3:1 picture's map is ~40x120 cells), so memory stays flat.
    wide_maps: dict[int, np.ndarray] | None = None
    # Their tiles' own familiarity probes (sparse_gate.tile_probes), when probes are asked for.
    wide_probes: dict[int, np.ndarray] | None = None


@dataclass
class PreparedRows:
    """The regressor's rows of prepared inputs of one shape (one forward pass or a few)."""

    features: np.ndarray
    probes: np.ndarray | None = None  # None when the model has no familiarity section
    density: np.ndarray | None = None  # (n, h, w) density maps of a density head
    # The tiles' own familiarity probes of pictures the detector sees in tiles (PathRows.wide_probes).
    wide_probes: dict[int, np.ndarray] | None = None
    # Not kept apart: the batch's maps are all in ``density`` (PathRows keeps the wide pictures').
    wide_maps: dict[int, np.ndarray] | None = None


class AppliedHead(Protocol):
    name: ClassVar[str]
    # The model file's key of the head's section (None: no section), and the CountingModel field
    # that holds the head ("density_head", "class_density_head", or the generic "head").
    section: ClassVar[str | None]
    field: ClassVar[str | None]
    # The familiarity probe's name a familiarity section records ("descriptor", "map-statistics").
    probe: ClassVar[str]
    head: Any

    @classmethod
    def head_of(cls, model: Any) -> Any:
        """The model's head of this kind, or None when the model is not of this kind."""

    @classmethod
    def from_document(cls, record: Any, source: str) -> Any:
        """The head from its section of a model file (ModelFileError naming ``source``)."""

    def document(self) -> dict[str, Any]:
        """``{section: the head's document}`` for the model file, or ``{}``."""

    def summary(self) -> dict[str, Any]:
        """The head's entries of the model's summary (``{}`` for none)."""

    def check_backbone(self, model: ModelParts, backbone: Any) -> None:
        """ModelFileError unless the head fits ``backbone`` and the regressor."""

    def familiarity_dim(self, model: ModelParts) -> int:
        """Numbers per picture the familiarity probe holds."""

    def rows_of_paths(
        self,
        model: ModelParts,
        sources: list[str],
        weights: str | Path | None,
        cache: Any,
        batch_size: int,
        progress: bool,
        chunking: Chunking,
        *,
        extract: Any = None,
        on_density: Callable[[str, np.ndarray], None] | None = None,
        with_probes: bool = False,
    ) -> PathRows:
        """The regressor's rows of image files (unreadable ones skipped, named in ``errors``)."""

    def probes_of_paths(
        self,
        model: ModelParts,
        sources: list[str],
        weights: str | Path | None,
        cache: Any,
        batch_size: int,
        progress: bool,
        chunking: Chunking,
    ) -> PathRows:
        """The familiarity probe of each image file (``features`` holds the probes too)."""

    def rows_of_prepared(
        self, model: ModelParts, tensors: Sequence[Any], weights: str | Path | None, chunking: Chunking
    ) -> PreparedRows:
        """The regressor's rows of prepared inputs of one shape."""


# ---------------------------------------------------------------------------------- descriptors
class DescriptorHead:
    """No head: the regressor reads the backbone's descriptors (class scores, pooled features,
    feature-map sums), whole frame or per grid cell; the probe is those rows."""

    name: ClassVar[str] = "descriptors"
    section: ClassVar[str | None] = None
    field: ClassVar[str | None] = None
    probe: ClassVar[str] = "descriptor"

    def __init__(self, head: Any = None) -> None:
        self.head = head

    @classmethod
    def head_of(cls, model: Any) -> Any:
        return None  # the fallback of applied_head_for: chosen when no head kind claims the model

    @classmethod
    def from_document(cls, record: Any, source: str) -> Any:
        return None

    def document(self) -> dict[str, Any]:
        return {}

    def summary(self) -> dict[str, Any]:
        return {}

    def check_backbone(self, model: ModelParts, backbone: Any) -> None:
        if model.grid is not None:
            return
        from counting.features.descriptors import DescriptorError, as_descriptor

        descriptor = as_descriptor(model.descriptor)
        try:
            dim = descriptor.dim(backbone)
        except DescriptorError as error:
            raise ModelFileError(f"{model.name}: {error}") from None
        if dim != model.feature_dim:
            raise ModelFileError(
                f"{model.name}: descriptor {descriptor.text!r} gives {dim} numbers per image but the "
                f"regressor takes {model.feature_dim} (model file edited or corrupt)"
            )

    def familiarity_dim(self, model: ModelParts) -> int:
        return int(model.views_per_image * model.feature_dim)

    def rows_of_paths(
        self,
        model: ModelParts,
        sources: list[str],
        weights: str | Path | None,
        cache: Any,
        batch_size: int,
        progress: bool,
        chunking: Chunking,
        *,
        extract: Any = None,
        on_density: Callable[[str, np.ndarray], None] | None = None,
        with_probes: bool = False,
    ) -> PathRows:
        # Memory: extract_features keeps only descriptors; count_in_chunks bounds a long list.
        features, ok, errors = self._features(model, sources, weights, cache, batch_size, progress, extract)
        return PathRows(features, ok, errors, _flat(features) if with_probes else None)

    def probes_of_paths(
        self,
        model: ModelParts,
        sources: list[str],
        weights: str | Path | None,
        cache: Any,
        batch_size: int,
        progress: bool,
        chunking: Chunking,
    ) -> PathRows:
        features, ok, errors = self._features(model, sources, weights, cache, batch_size, progress, None)
        return PathRows(_flat(features), ok, errors, _flat(features))

    def rows_of_prepared(
        self, model: ModelParts, tensors: Sequence[Any], weights: str | Path | None, chunking: Chunking
    ) -> PreparedRows:
        features = self._prepared(model, tensors, weights)
        return PreparedRows(features, None if model.familiarity is None else features)

    def _features(
        self,
        model: ModelParts,
        sources: list[str],
        weights: str | Path | None,
        cache: Any,
        batch_size: int,
        progress: bool,
        extract: Any,
    ) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
        from counting.features import extract_features
        from counting.features.layouts import stack_views

        extractor = extract if extract is not None else extract_features
        if model.flip_average:
            from counting.features.flip import flip_averaging

            extractor = flip_averaging(extractor)
        kind = {} if model.descriptor is None else {"descriptor": model.descriptor}
        backbone = model.get_backbone(weights)

        def views(grid: tuple[int, int] | None) -> Any:
            return extractor(
                list(sources),
                backbone,
                model.preprocessing(),
                grid=grid,
                cache=cache,
                batch_size=batch_size,
                progress=progress,
                on_error="skip",
                **kind,
            )

        feature_set = views(model.grid)
        features, ok = feature_set.features, np.asarray(feature_set.ok, dtype=bool)
        errors = dict(feature_set.errors)
        if model.layout == "pyramid":
            whole = views(None)
            features = stack_views(whole.features, features)
            ok &= np.asarray(whole.ok, dtype=bool)
            errors = dict(whole.errors) | errors
        return features, ok, errors

    def _prepared(self, model: ModelParts, tensors: Sequence[Any], weights: str | Path | None) -> np.ndarray:
        from counting.features.layouts import stack_views

        backbone = model.get_backbone(weights)
        batch = list(tensors)  # stacked by the backbone, in the layout its runtime takes
        if model.uses_maps:
            # Sums of feature maps: one pass, no class scores.
            return np.asarray(model.descriptor.compute(backbone, batch, model.preprocessing().roi_mask))
        pooled = model.descriptor is not None and model.descriptor.pooled
        whole = backbone.forward_pooled if pooled else backbone.forward
        if model.grid is None:
            features = np.asarray(whole(batch))
            if model.flip_average:
                # Mirroring the prepared view equals preparing the mirrored frame (flipped after resizing).
                features = (features + np.asarray(whole([view.flip(-1) for view in batch]))) / 2
            return features
        cells = backbone.forward_grid_pooled if pooled else backbone.forward_grid
        features = np.asarray(cells(batch, grid=model.grid))
        if model.layout == "pyramid":
            # Two trunk passes; a pyramid model is a study option, not the video default.
            features = stack_views(np.asarray(whole(batch)), features)
        return features


def _flat(features: np.ndarray) -> np.ndarray:
    """The probe of descriptor rows: each picture's views in one row."""
    return np.reshape(features, (len(features), -1))


# ---------------------------------------------------------------------------------- density
class DensityHeadApplied:
    """A density head (ridge, random features, conv ensemble) on frozen feature maps: the
    regressor reads its region sums; the probe is per-channel statistics of the head's maps."""

    name: ClassVar[str] = "density"
    section: ClassVar[str | None] = "density_head"
    field: ClassVar[str | None] = "density_head"
    probe: ClassVar[str] = "map-statistics"

    def __init__(self, head: Any) -> None:
        self.head = head

    @classmethod
    def head_of(cls, model: Any) -> Any:
        return getattr(model, "density_head", None)

    @classmethod
    def from_document(cls, record: Any, source: str) -> Any:
        from counting.heads.density.persistence import head_from_document

        return head_from_document(record, source)

    def document(self) -> dict[str, Any]:
        from counting.heads.density.persistence import head_to_document

        return {"density_head": head_to_document(self.head)}

    def summary(self) -> dict[str, Any]:
        specialists = getattr(self.head, "specialists", None)
        mask = getattr(self.head, "people_mask", None)
        return (
            {"density_head": ",".join(self.head.layers)}
            | ({"specialists": ",".join(specialists)} if specialists else {})
            | ({"people_mask": f"{mask.low:g}-{mask.high:g}"} if mask is not None else {})
        )

    def check_backbone(self, model: ModelParts, backbone: Any) -> None:
        head = self.head
        known = ["final", *getattr(backbone, "taps", {})]
        unknown = [name for name in head.layers if name not in known]
        if unknown:
            raise ModelFileError(
                f"{model.name}: density head reads {unknown[0]!r}, which {backbone.name} does not have"
            )
        maps = backbone.feature_maps(np.zeros((1, 3, 64, 64), np.float32), tuple(head.layers))
        channels = sum(int(maps[name].shape[1]) for name in head.layers)
        if channels != head.n_channels:
            raise ModelFileError(
                f"{model.name}: density head layers {'+'.join(head.layers)} give {channels} channels "
                f"but the head takes {head.n_channels} (model file edited or corrupt)"
            )
        rows = 1 + (0 if head.grid is None else head.grid[0] * head.grid[1])
        if rows != model.feature_dim:
            raise ModelFileError(
                f"{model.name}: density head grid {head.grid} gives {rows} sums per image but the regressor "
                f"takes {model.feature_dim} (model file edited or corrupt)"
            )

    def familiarity_dim(self, model: ModelParts) -> int:
        return 2 * int(self.head.n_channels)

    def rows_of_paths(
        self,
        model: ModelParts,
        sources: list[str],
        weights: str | Path | None,
        cache: Any,
        batch_size: int,
        progress: bool,
        chunking: Chunking,
        *,
        extract: Any = None,
        on_density: Callable[[str, np.ndarray], None] | None = None,
        with_probes: bool = False,
    ) -> PathRows:
        # ``extract`` (a cluster's extractor) makes descriptors, not maps: maps are made here.
        from counting.features.detector.evidence import map_tiles
        from counting.heads.crowd.sparse_gate import tile_probes

        head = self.head
        features = np.full((len(sources), model.feature_dim), np.nan)
        probes = np.full((len(sources), self.familiarity_dim(model)), np.nan) if with_probes else None
        ok = np.zeros(len(sources), dtype=bool)
        errors: dict[str, str] = {}
        grids = np.zeros((len(sources), 2), dtype=int)
        wide_maps: dict[int, np.ndarray] = {}
        wide_probes: dict[int, np.ndarray] = {}
        stride = head.stride
        maps = self.each_picture_maps(model, sources, weights, cache, batch_size, progress, chunking, ok, errors)
        for k, item in maps:
            density = head.density(item)  # what head.region_counts sums
            features[k] = head.sum_regions(density, model.roi_mask, head.grid)[0]
            grids[k] = density.shape[-2:]
            tiles = map_tiles(grids[k], stride)
            if len(tiles) > 1:
                wide_maps[k] = np.asarray(density[0], dtype=np.float32)
                if probes is not None:
                    wide_probes[k] = tile_probes(item, tiles)
            if on_density is not None:
                on_density(sources[k], density[0])
            if probes is not None:
                probes[k] = map_statistics(item)[0]
        return PathRows(features, ok, errors, probes, grids, wide_maps, wide_probes)

    def probes_of_paths(
        self,
        model: ModelParts,
        sources: list[str],
        weights: str | Path | None,
        cache: Any,
        batch_size: int,
        progress: bool,
        chunking: Chunking,
    ) -> PathRows:
        probes = np.full((len(sources), self.familiarity_dim(model)), np.nan)
        ok = np.zeros(len(sources), dtype=bool)
        errors: dict[str, str] = {}
        maps = self.each_picture_maps(model, sources, weights, cache, batch_size, progress, chunking, ok, errors)
        for k, item in maps:
            probes[k] = map_statistics(item)[0]
        return PathRows(probes, ok, errors, probes)

    def rows_of_prepared(
        self, model: ModelParts, tensors: Sequence[Any], weights: str | Path | None, chunking: Chunking
    ) -> PreparedRows:
        from counting.features.detector.evidence import map_tiles
        from counting.heads.crowd.sparse_gate import tile_probes
        from counting.heads.density.maps import maps_on_grid

        head = self.head
        backbone = model.get_backbone(weights)
        stride = head.stride  # 8 for the conv head
        densities, probes = [], []
        wide_probes: dict[int, np.ndarray] = {}
        # At most ``per_pass`` frames through the network at once, as for files: the runtime's
        # buffers for 8 frames at 720 px took ~1 GB more (video, issue 21 item 4).
        for start in range(0, len(tensors), chunking.per_pass):
            batch = np.stack([np.asarray(tensor) for tensor in tensors[start : start + chunking.per_pass]])
            maps = maps_on_grid(backbone, batch, head.layers, stride)
            densities.append(head.density(maps))
            if model.needs_probes:
                probes.append(map_statistics(maps))
                tiles = map_tiles(maps.shape[-2:], stride)
                if len(tiles) > 1:  # the tiles' own probes, for the sparse gate (PathRows.wide_probes)
                    wide_probes.update({start + j: tile_probes(one, tiles) for j, one in enumerate(maps)})
        density = np.concatenate(densities)
        features = head.sum_regions(density, model.roi_mask, head.grid)
        return PreparedRows(features, np.concatenate(probes) if probes else None, density, wide_probes)

    def each_picture_maps(
        self,
        model: ModelParts,
        sources: list[str],
        weights: str | Path | None,
        cache: Any,
        batch_size: int,
        progress: bool,
        chunking: Chunking,
        ok: np.ndarray,
        errors: dict[str, str],
    ) -> Iterator[tuple[int, Any]]:
        """``(index, maps)`` of each readable picture, the head's layers made ``chunking.pictures``
        pictures at a time (at most ``chunking.per_pass`` per pass) and released before the next
        chunk: memory stays flat in the number of pictures (2000 frames held every map at once,
        11.7 GB). Fills ``ok`` and ``errors`` (unreadable pictures are skipped) as the chunks go."""
        from counting.features.extract import chunk_slices, whole_batches
        from counting.heads.density.maps import extract_maps

        head = self.head
        backbone = model.get_backbone(weights)
        batch_size = max(1, min(batch_size, chunking.per_pass))
        for piece in chunk_slices(len(sources), whole_batches(chunking.pictures, batch_size), progress):
            map_set = extract_maps(
                sources[piece],
                backbone,
                model.preprocessing(),
                head.layers,
                cache,
                batch_size,
                False,
                on_error="skip",
                stride=head.stride,
            )
            for offset, item in enumerate(map_set.maps):
                if item is not None:
                    yield piece.start + offset, item
            ok[piece] = map_set.ok
            errors.update(map_set.errors)
            del map_set  # the next chunk's maps replace these, not join them
            release_freed_memory()


# ---------------------------------------------------------------------------------- class density
class ClassDensityHeadApplied(DescriptorHead):
    """The VOC per-class density head: the regressor reads its per-class sums, which are also
    the familiarity probe (as a descriptor model's rows)."""

    name: ClassVar[str] = "class-density"
    section: ClassVar[str | None] = "class_density_head"
    field: ClassVar[str | None] = "class_density_head"
    probe: ClassVar[str] = "descriptor"

    @classmethod
    def head_of(cls, model: Any) -> Any:
        return getattr(model, "class_density_head", None)

    @classmethod
    def from_document(cls, record: Any, source: str) -> Any:
        from counting.heads.density.classes.head import class_head_from_document

        return class_head_from_document(record, source)

    def document(self) -> dict[str, Any]:
        from counting.heads.density.classes.head import class_head_to_document

        return {"class_density_head": class_head_to_document(self.head)}

    def summary(self) -> dict[str, Any]:
        return {"density_head": "per class: " + ",".join(self.head.layers)}

    def check_backbone(self, model: ModelParts, backbone: Any) -> None:
        from counting.heads.density.classes.head import check_class_head

        check_class_head(self.head, backbone, model.feature_dim, model.name)

    def _features(
        self,
        model: ModelParts,
        sources: list[str],
        weights: str | Path | None,
        cache: Any,
        batch_size: int,
        progress: bool,
        extract: Any,
    ) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
        from counting.heads.density.classes.head import class_head_features

        backbone = model.get_backbone(weights)
        features, ok, errors = class_head_features(
            self.head, sources, backbone, model.preprocessing(), cache, batch_size
        )
        return features, np.asarray(ok, dtype=bool), dict(errors)

    def _prepared(self, model: ModelParts, tensors: Sequence[Any], weights: str | Path | None) -> np.ndarray:
        from counting.heads.density.classes.head import class_head_batch_features

        batch = np.stack([np.asarray(tensor) for tensor in tensors])
        return np.asarray(class_head_batch_features(self.head, model.get_backbone(weights), batch))


# The kinds a model may be of, tried in this order; descriptors (no head) when none claims it.
