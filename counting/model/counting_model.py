"""CountingModel: a model file (counting.model.file) and how it counts.

One way to count, whatever the model: the head turns pictures into rows
(counting.heads.applied), the regression stage turns rows into counts
(counting.model.regression), then the stages the file holds run in order
(counting.model.stages: familiarity, the sparse gate, the interval). Files and prepared batches
differ only in how the stages see the pictures (counting.model.pictures).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from counting.core import defaults
from counting.core.errors import BackboneError, ModelFileError
from counting.heads.applied import Chunking, DensityHeadApplied, PathRows, PreparedRows
from counting.heads.crowd.gate_stage import photos_in_grids
from counting.heads.familiarity import FamiliarityStage
from counting.heads.results import CountBatch, CountResult
from counting.heads.stage import Pictures
from counting.model.default_path import default_model_path
from counting.model.file import ModelFile
from counting.model.pictures import PathPictures, PreparedPictures
from counting.model.regression import check_features, predict_features
from counting.model.stages import interval_stage, stages_of

__all__ = ["CountResult", "CountingModel", "default_model_path", "load_model"]

# Pictures whose density maps are held at once when a density-head model counts files, and the
# most it runs through the network together. Measured with models/mall-accurate.npz (720 px) on
# 48 Mall frames, 2 cores: batch 8 peaks at 2.19 GB RSS, 4 at 1.49 GB, 2 at 1.14 GB, all at the
# same speed (4.8-5.2 s); chunks of 8 hold a chunk's maps (~10 MB a frame at 720 px) once.
DENSITY_CHUNK = 8
DENSITY_BATCH = 2


@dataclass
class CountingModel(ModelFile):
    """A model file that counts: pictures -> head -> regression -> stages -> a CountBatch."""

    _backbone_cache: dict = field(default_factory=dict, repr=False, compare=False)

    # ------------------------------------------------------------------ the count
    def count_paths(
        self,
        paths: Sequence[str | Path],
        cache: Any = None,
        weights: str | Path | None = None,
        batch_size: int = defaults.BATCH_SIZE,
        progress: bool = False,
        extract: Any = None,
        on_density: Any = None,
    ) -> CountResult:
        """Count image files; unreadable images are skipped and reported in ``errors``.

        ``extract`` replaces :func:`~counting.features.extract_features` (same signature), e.g.
        a Dask cluster's. ``on_density(source, density)`` gets each counted picture's ``(h, w)``
        density map (density-head models; zones are counted from it, counting.apply.zones).
        """
        backbone = self.get_backbone(weights)
        sources = [str(path) for path in paths]
        rows = self._applied.rows_of_paths(
            self, sources, weights, cache, batch_size, progress, self._chunking(),
            extract=extract, on_density=on_density, with_probes=self.needs_probes,
        )  # fmt: skip
        pictures = PathPictures(sources, rows, backbone, self.preprocessing(), on_density)
        batch = self._run_stages(rows, pictures, "features", density=None)
        return CountResult(
            sources, batch.counts, batch.low, batch.high, rows.ok, rows.errors,
            batch.familiarity, batch.counted_by, batch.disputed,
        )  # fmt: skip

    def count_batch(
        self, tensors: Sequence[Any], weights: str | Path | None = None, with_density: bool = False
    ) -> CountBatch:
        """The :class:`CountBatch` of prepared inputs of one shape, from one forward pass; the
        density maps too with ``with_density`` (a density-head model: zones, the heat map)."""
        rows = self._applied.rows_of_prepared(self, tensors, weights, self._chunking())
        pictures = PreparedPictures(tensors, self.get_backbone(weights), rows)
        return self._run_stages(rows, pictures, "frames", density=rows.density if with_density else None)

    def _run_stages(
        self, rows: PathRows | PreparedRows, pictures: Pictures, source: str, density: np.ndarray | None
    ) -> CountBatch:
        batch = CountBatch(predict_features(self, rows.features, source), None, None, density=density)
        for stage in stages_of(self):
            batch = stage(batch, pictures)
        return batch

    def _chunking(self) -> Chunking:
        # Read when counting, not at import: tests and benchmarks change them.
        return Chunking(DENSITY_CHUNK, DENSITY_BATCH)

    def count_prepared(self, tensors: Sequence[Any], weights: str | Path | None = None) -> np.ndarray:
        """Counts for prepared inputs of one shape: one forward pass for the batch."""
        return self.count_batch(tensors, weights).counts

    def count_images(self, images: Sequence[Any], weights: str | Path | None = None) -> np.ndarray:
        """Counts for in-memory images (PIL images or RGB arrays of one size, e.g. video frames)."""
        if len(images) == 0:
            return np.zeros((0, len(self.class_names))) if self.class_names else np.zeros(0)
        return self.count_prepared([self.prepare_image(image, weights) for image in images], weights)

    def prepare_image(
        self, image: Any, weights: str | Path | None = None, source: str | None = None, *, bgr: bool = False
    ) -> Any:
        """Network input ``(3, H, W)`` for one in-memory image (PIL or RGB array; a BGR array, as
        OpenCV decodes frames, with ``bgr=True``); apart from counting, so a reader thread can
        prepare the next frames while a batch runs."""
        return self.get_backbone(weights).prepare(image, self.preprocessing(), source, bgr=bgr)

    # ------------------------------------------------------------------ the stages, one at a time
    def check_features(self, features: np.ndarray, source: str = "features") -> np.ndarray:
        """Features validated against the model (counting.model.regression.check_features)."""
        return check_features(self, features, source)

    def predict_features(self, features: np.ndarray, source: str = "features") -> np.ndarray:
        """Counts from descriptors (the regression stage); NaN rows give NaN counts."""
        return predict_features(self, features, source)

    def intervals(
        self, counts: np.ndarray, routes: np.ndarray | None = None, readings: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
        """Calibrated ``(low, high)`` of ``counts`` on each picture's route, reaching a disputed
        count's ``readings`` (counting.heads.crowd.intervals), or ``(None, None)`` uncalibrated."""
        stage = interval_stage(self)
        return (None, None) if stage is None else stage.bounds(counts, routes, readings)

    def interval_routes(
        self, probes: np.ndarray | None, people: Sequence[Any] | None = None, counts: np.ndarray | None = None
    ) -> np.ndarray | None:
        """The route of each picture's interval, None with one interval (IntervalStage.routes)."""
        stage = interval_stage(self)
        return None if stage is None else stage.routes(probes, people, counts)

    @property
    def needs_probes(self) -> bool:
        """Whether counting needs each picture's familiarity probe (familiarity, interval routes)."""
        return self.familiarity is not None or (self.interval is not None and bool(self.interval.by_route))

    def familiarity_scores(self, probes: np.ndarray | None) -> np.ndarray | None:
        """Familiarity of each picture from its probes, or None without a familiarity section."""
        if self.familiarity is None or probes is None:
            return None
        return FamiliarityStage(self.familiarity).scores(probes)

    def familiarity_dim(self) -> int:
        """Numbers per picture the familiarity probe holds for this model."""
        return self._applied.familiarity_dim(self)

    def gate_photos(self, grids: np.ndarray | Sequence[tuple[int, int]] | None) -> np.ndarray | None:
        """How many photos the sparse gate reads each picture as, from its map's ``(h, w)``."""
        return None if grids is None else photos_in_grids(grids, self.density_head.stride)

    # ------------------------------------------------------------------ maps and probes, for studies
    def probe_paths(
        self,
        paths: Sequence[str | Path],
        cache: Any = None,
        weights: str | Path | None = None,
        batch_size: int = defaults.BATCH_SIZE,
        progress: bool = False,
    ) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
        """``(probes, ok, errors)``: the familiarity probe of each image file (the regressor's
        rows of a descriptor model, the statistics of the head's maps of a density-head model)."""
        sources = [str(path) for path in paths]
        rows = self._applied.probes_of_paths(self, sources, weights, cache, batch_size, progress, self._chunking())
        return rows.features, rows.ok, rows.errors

    def head_maps(
        self,
        paths: Sequence[str | Path],
        cache: Any = None,
        weights: str | Path | None = None,
        batch_size: int = defaults.BATCH_SIZE,
    ) -> Iterator[tuple[int, np.ndarray]]:
        """``(index, maps)`` of each readable image file, its ``(C, h, w)`` maps as the density
        head reads them, a few pictures' maps held at a time; unreadable files are skipped."""
        if not isinstance(self._applied, DensityHeadApplied):
            raise ValueError(f"{self.name}: its head reads no feature maps of its own (no density head)")
        sources = [str(path) for path in paths]
        unread = np.zeros(len(sources), dtype=bool)
        yield from self._applied.each_picture_maps(
            self, sources, weights, cache, batch_size, False, self._chunking(), unread, {}
        )

    def density_maps(self, tensors: Sequence[Any], weights: str | Path | None = None) -> np.ndarray:
        """``(n, h, w)`` density maps (people per head-grid cell) of prepared inputs of one shape."""
        from counting.heads.density.maps import maps_on_grid  # brings torch: only where maps are made

        head = self.density_head
        if head is None:
            raise ModelFileError(f"{self.name}: has no density head (train it with --density-head)")
        batch = np.stack([np.asarray(tensor) for tensor in tensors])
        return head.density(maps_on_grid(self.get_backbone(weights), batch, head.layers, head.stride))

    def count_density(self, density: np.ndarray) -> np.ndarray:
        """Counts from density maps of :meth:`density_maps` (the head's sums through the regressor)."""
        head = self.density_head
        return self.predict_features(head.sum_regions(density, self.roi_mask, head.grid), source="frames")

    def density_grid(self, tensor: Any) -> tuple[int, int]:
        """``(h, w)`` of the density head's map of one prepared input."""
        from counting.heads.density.maps import head_grid

        height, width = (int(side) for side in tuple(np.shape(tensor))[-2:])
        return head_grid((height, width), self.density_head.stride)

    # ------------------------------------------------------------------ networks and views
    def preprocessing(self) -> Any:
        """The model's Preprocessing (one object per model: it caches the resized ROI masks)."""
        if "preprocessing" not in self._backbone_cache:
            from counting.features.backbones import Preprocessing

            self._backbone_cache["preprocessing"] = Preprocessing(input_size=self.input_size, roi_mask=self.roi_mask)
        return self._backbone_cache["preprocessing"]

    def seeing_grayscale(self) -> CountingModel:
        """A copy whose backbone sees each picture's grayscale copy (training's grayscale
        augmentation); a detector still sees the colour picture."""
        return self.seeing(grayscale=True)

    def seeing_degraded(self) -> CountingModel:
        """A copy whose backbone sees each picture's degraded copy (counting.data.copies)."""
        return self.seeing(degraded=True)

    def seeing(self, **changes: bool) -> CountingModel:
        """A copy whose backbone's preprocessing has ``changes`` (``grayscale``, ``degraded``)."""
        # Its own cache dict (replace() would share this one): the backbone is shared, the preprocessing is not.
        view = replace(self, _backbone_cache=dict(self._backbone_cache))
        view._backbone_cache["preprocessing"] = replace(self.preprocessing(), **changes)
        return view

    def get_backbone(self, weights: str | Path | None = None) -> Any:
        """The backbone the model was trained with (loaded once per model object and runtime), on
        the runtime configured now: both runtimes give the same descriptors to 1e-4."""
        from counting.features.backbones import default_runtime, get_backbone

        key = f"{weights}|{default_runtime()}"
        if key not in self._backbone_cache:
            backbone = get_backbone(self.backbone, weights=weights)
            expected, actual = self.backbone_weights_sha256, backbone.weights_sha256
            if expected and actual and expected != actual:
                raise ModelFileError(
                    f"{self.name}: trained with {self.backbone} weights {expected[:12]}…, "
                    f"but the weights loaded are {actual[:12]}…; pass the original weights file"
                )
            # Before any picture is read: an edited head or descriptor record would fail on each.
            self._applied.check_backbone(self, backbone)
            self._backbone_cache[key] = backbone
        return self._backbone_cache[key]

    def load_networks(self, weights: str | Path | None = None) -> None:
        """Load every network counting runs now (the backbone; a sparse gate's detector), so the
        first picture does not pay for it. A detector that cannot be had is left to the first
        count, which warns and counts by the head alone."""
        self.get_backbone(weights)
        if self.sparse_gate is not None:
            from counting.features.detector import detector_backbone

            try:
                detector_backbone()
            except BackboneError:
                pass  # the first count says so in its one warning

    def summary(self) -> dict:
        """Short description for the CLI."""
        return self._applied.summary() | {
            "backbone": self.backbone,
            "input_size": self.input_size,
            "roi": self.roi_mask is not None,
            "flip_average": self.flip_average,
            "grid": None if self.grid is None else f"{self.grid[0]}x{self.grid[1]}",
            "layout": self.layout,
            "kernel": self.training.get("kernel"),
            "n_centers": self.training.get("n_centers"),
            "dataset": self.dataset.get("name"),
            "split": self.dataset.get("split"),
            "interval": None if self.interval is None else self.interval.level,
            "descriptor": "scores" if self.descriptor is None else self.descriptor.text,
        }


def load_model(path: str | Path | None = None) -> CountingModel:
    """Load ``path``, or the shipped default model when ``path`` is None."""
    return CountingModel.load(default_model_path() if path is None else path)
