"""CountingModel: a trained regressor plus everything needed to apply it to new images.

The model file is one ``.npz`` written by ``AGPRegressor.save`` with the counting metadata
(backbone, preprocessing, ROI mask, grid, layout, dataset, split, metrics, interval calibration) in
its JSON metadata, so later commands need nothing else.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from counting.core import defaults
from counting.core.errors import BackboneError, CountingError, ModelFileError
from counting.core.version import __version__
from counting.features.layouts import LAYOUTS, frame_counts, predict_rows, split_views
from counting.heads.applied import AppliedHead, Chunking, DensityHeadApplied
from counting.heads.crowd.routing import ROUTE_GENERAL
from counting.heads.crowd.sparse_gate import BY_DETECTOR, DETECTOR_FOUND_NONE, by_detector_alone, person_density, routes
from counting.heads.multiclass import apply_gate, inverse_transform
from counting.heads.registry import applied_head_for, read_head_sections
from counting.heads.uncertainty import ConformalInterval
from counting.model.default_path import default_model_path
from counting.model.results import CountBatch, CountResult

MODEL_KIND = "counting-model"
# Pictures whose density maps are held at once when a density-head model counts files, and the
# most it runs through the network together. Measured with models/mall-accurate.npz (720 px) on
# 48 Mall frames, 2 cores: batch 8 peaks at 2.19 GB RSS, 4 at 1.49 GB, 2 at 1.14 GB, all at the
# same speed (4.8-5.2 s); chunks of 64 held 1.7 GB more maps than chunks of 8.
# Chunks of 8 (issue 21 item 4): a chunk's maps (~10 MB a frame at 720 px) were held twice while
# joined, ~320 MB at 16; now once, ~80 MB, and the freed pages go back to the system per chunk.
DENSITY_CHUNK = 8
DENSITY_BATCH = 2
# Version 2 adds the descriptor record (feature-map sums); class-score models are still written
# as version 1, byte for byte as before, so older readers keep reading them.
FORMAT_VERSION = 3
# What the regressor's output is added to: nothing, or the density head's whole-ROI sum (the
# regressor then learns the count minus the head's sum: a correction of the head that, away
# from its training rows, leaves the head's count alone; scripts/conv_agp_study.py).
COUNT_OFFSETS = ("none", "head_sum")


def _check_offset_record(metadata: dict, version: int, source: str) -> None:
    """The count offset's record, beyond its values (checked by the model): a file that lost
    or changed part of it would count silently wrong (the regressor learnt a correction)."""
    if "count_offset" not in metadata and version >= 3:
        raise ModelFileError(f"{source}: format version {version} records a count_offset, this file has none")
    offset = metadata.get("count_offset", "none")
    if not isinstance(offset, str) or offset not in COUNT_OFFSETS:
        return  # the model refuses it, saying why
    if offset != "none":
        if version < 3:
            raise ModelFileError(f"{source}: count offset {offset!r} needs format version 3, the file says {version}")
        if "correction_weight" not in metadata:
            raise ModelFileError(f"{source}: count offset {offset!r} without its correction_weight")
    training = metadata.get("training") or {}
    trained = training.get("count_offset", offset)
    if trained != offset:
        raise ModelFileError(
            f"{source}: count offset {offset!r:.40} differs from the one it was trained with ({trained!r:.40})"
        )


class FeatureDimensionError(CountingError, ValueError):
    """Features do not have the dimension the model was trained on."""


def encode_mask(mask: np.ndarray) -> dict:
    """Run-length code of a bool mask, small enough for the JSON metadata (ROIs are few runs)."""
    flat = np.asarray(mask, dtype=bool).ravel()
    change = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    bounds = np.concatenate([[0], change, [flat.size]])
    return {
        "shape": [int(side) for side in np.shape(mask)],
        "first": bool(flat[0]) if flat.size else False,
        "runs": np.diff(bounds).astype(int).tolist(),
    }


def decode_mask(code: dict) -> np.ndarray:
    """Inverse of :func:`encode_mask`."""
    runs = np.asarray(code["runs"], dtype=np.int64)
    first = bool(code["first"])
    values = np.where(np.arange(runs.size) % 2 == 0, first, not first)
    mask = np.repeat(values, runs)
    shape = tuple(int(side) for side in code["shape"])
    if mask.size != int(np.prod(shape)):
        raise ValueError(f"ROI mask runs cover {mask.size} pixels, shape {shape} needs {np.prod(shape)}")
    return mask.reshape(shape)


@dataclass
class CountingModel:
    """A fitted ``agp.AGPRegressor`` and how to turn images into its inputs."""

    regressor: Any
    backbone: str = defaults.BACKBONE
    backbone_weights_sha256: str | None = None
    # The runtime the training descriptors came from (information: any runtime predicts).
    runtime: str | None = None
    input_size: int | None = defaults.INPUT_SIZE
    roi_mask: np.ndarray | None = None
    # Whole-frame descriptors averaged with the left-right mirror's (counting.features.flip).
    flip_average: bool = False
    grid: tuple[int, int] | None = None
    layout: str | None = None  # one of counting.features.layouts.LAYOUTS; None: frame, or tiles with a grid
    class_names: list[str] | None = None
    # Per-class counts (counting.heads.multiclass): the regressor fits transformed counts; a class
    # below its gate threshold counts 0.
    target_transform: str = "none"
    gate: list[float] | None = None
    interval: ConformalInterval | None = None
    dataset: dict = field(default_factory=dict)
    training: dict = field(default_factory=dict)
    history: dict = field(default_factory=dict)
    validation_metrics: dict = field(default_factory=dict)
    test_metrics: dict = field(default_factory=dict)
    path: Path | None = None
    # What an image becomes before the regressor (counting.features.descriptors); None: class scores.
    descriptor: Any = None
    # counting.heads.density.DensityHead: the regressor's rows are its density sums (whole ROI, cells).
    density_head: Any = None
    # counting.heads.density.classes.head.ClassDensityHead (VOC): the regressor's rows are its per-class sums.
    class_density_head: Any = None
    # One of COUNT_OFFSETS; "head_sum" needs a density head and no target transform. With it, the
    # count is the head's sum plus ``correction_weight`` times the regressor's correction.
    count_offset: str = "none"
    correction_weight: float = 1.0
    # counting.heads.familiarity.Familiarity: how much a picture resembles the training pictures.
    familiarity: Any = None
    # counting.heads.crowd.sparse_gate.SparseGate (crowd density models): sparse photos are counted by
    # the detector's person count instead of the density head's sum.
    sparse_gate: Any = None
    # A head of a kind registered in counting.heads.applied that has no field of its own above.
    head: Any = None
    _backbone_cache: dict = field(default_factory=dict, repr=False, compare=False)
    # The head's kind (counting.heads.applied), chosen once from the fields above.
    _applied: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.layout is None:
            self.layout = "frame" if self.grid is None else "tiles"
        if self.layout not in LAYOUTS or (self.layout != "frame") != (self.grid is not None):
            raise ModelFileError(f"layout {self.layout!r} does not fit grid {self.grid!r}")
        if self.descriptor is not None and self.descriptor.spec.kind == "scores":
            self.descriptor = None  # class scores are what a model without a descriptor record uses
        if self.uses_maps and self.grid is not None:
            raise ModelFileError(f"descriptor {self.descriptor.text!r} does not take a grid (it has levels=...)")
        if self.count_offset not in COUNT_OFFSETS:
            raise ModelFileError(f"count offset {self.count_offset!r:.60} is not one of {', '.join(COUNT_OFFSETS)}")
        if self.count_offset == "head_sum" and (self.density_head is None or self.target_transform != "none"):
            raise ModelFileError("count offset 'head_sum' needs a density head and no target transform")
        weight = self.correction_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= weight <= 2.0:
            raise ModelFileError(f"correction weight must be a number from 0 to 2, got {weight!r:.60}")
        if weight != 1.0 and self.count_offset == "none":
            raise ModelFileError("a correction weight other than 1 needs the count offset 'head_sum'")
        if self.sparse_gate is not None and (
            self.density_head is None or self.familiarity is None or self.class_names is not None
        ):
            raise ModelFileError("a sparse gate needs a one-class density head and a familiarity section")
        self._applied = applied_head_for(self)

    @property
    def applied_head(self) -> AppliedHead:
        """The model's head kind (counting.heads.applied): how pictures become the regressor's rows."""
        return self._applied

    @property
    def uses_maps(self) -> bool:
        """Descriptors are feature-map sums (one pass, no class scores)."""
        return self.descriptor is not None and self.descriptor.uses_maps
        if self.flip_average and self.grid is not None:
            raise ModelFileError("flip-averaged descriptors are whole-frame only (no grid)")

    # ------------------------------------------------------------------ file format
    @property
    def needs_probes(self) -> bool:
        """Whether counting needs each picture's familiarity probe: for its familiarity, or for
        the route of its interval (:meth:`interval_routes`)."""
        return self.familiarity is not None or (self.interval is not None and bool(self.interval.by_route))

    @property
    def feature_dim(self) -> int:
        """Dimension of one descriptor (a pyramid row concatenates the frame's and its cells')."""
        rows = int(self.regressor.n_features_in_)
        return rows // (1 + self.n_cells) if self.layout == "pyramid" else rows

    @property
    def views_per_image(self) -> int:
        """Descriptors per image in the features the model takes: 1, the cells, or 1 + cells."""
        if self.layout == "frame":
            return 1
        return self.n_cells + (1 if self.layout == "pyramid" else 0)

    @property
    def n_cells(self) -> int:
        return 1 if self.grid is None else int(self.grid[0] * self.grid[1])

    @property
    def is_multi_output(self) -> bool:
        return self.class_names is not None

    @property
    def name(self) -> str:
        return str(self.path) if self.path is not None else "model"

    def metadata(self) -> dict:
        """JSON-ready metadata stored in the model file."""
        record = self._applied.document() | {
            "kind": MODEL_KIND,
            # The oldest version that reads the file right: readers before 3 would ignore the offset.
            "format_version": 3 if self.count_offset != "none" else 1 if self.descriptor is None else 2,
            "counting_version": __version__,
            "backbone": {
                "name": self.backbone,
                "weights_sha256": self.backbone_weights_sha256,
                "runtime": self.runtime,
            },
            "preprocessing": {
                "input_size": self.input_size,
                "roi": self.roi_mask is not None,
                "roi_mask": None if self.roi_mask is None else encode_mask(self.roi_mask),
                "flip_average": self.flip_average,
            },
            "grid": None if self.grid is None else list(self.grid),
            "layout": self.layout,
            "class_names": self.class_names,
            "multiclass": {"target_transform": self.target_transform, "gate": self.gate},
            "interval": None if self.interval is None else self.interval.to_dict(),
            "dataset": self.dataset,
            "training": self.training,
            "history": self.history,
            "validation_metrics": self.validation_metrics,
            "test_metrics": self.test_metrics,
        }
        if self.descriptor is not None:
            record["descriptor"] = self.descriptor.to_dict()
        if self.count_offset != "none":
            record["count_offset"] = self.count_offset
            record["correction_weight"] = float(self.correction_weight)
        if self.familiarity is not None:
            record["familiarity"] = self.familiarity.to_document()
        if self.sparse_gate is not None:
            record["sparse_gate"] = self.sparse_gate.to_document()
        return record

    def save(self, path: str | Path) -> Path:
        """Write the model as one ``.npz`` file (no pickle), atomically.

        The regressor writes to a temporary file beside ``path`` which then replaces it, so a
        failed save (full disk, Ctrl-C) leaves a model already at ``path`` untouched.
        """
        from counting.core.files import atomic_path

        target = Path(path)
        # OutputError (a CountingError naming the file) on a full disk or a folder not writable.
        with atomic_path(target) as temporary:
            self.regressor.save(temporary, metadata=self.metadata())
        self.path = target
        return target

    @classmethod
    def load(cls, path: str | Path) -> CountingModel:
        """Read a model written by :meth:`save`; anything else -> ModelFileError naming the file."""
        from agp import AGPRegressor
        from counting.model.schema import check_archive, check_metadata, check_regressor

        source = Path(path)
        if source.is_dir():
            raise ModelFileError(f"{source}: is a folder, not a model file")
        if not source.exists():
            raise ModelFileError(f"{source}: model file not found")
        if not source.is_file():
            raise ModelFileError(f"{source}: not a regular file (a device, pipe or socket), not a model file")
        try:
            with open(source, "rb"):
                pass
        except PermissionError:
            raise ModelFileError(f"{source}: permission denied") from None
        except OSError as error:
            raise ModelFileError(f"{source}: cannot read the model file ({error.strerror or error})") from None
        # Every member's header and size against the metadata first: agp's reader loads every member whole.
        check_archive(source)
        try:
            regressor = AGPRegressor.load(source)
        except Exception as error:  # noqa: BLE001 - any failure to parse means "not a model file"
            detail = str(error).splitlines()[0] if str(error) else type(error).__name__
            detail = detail.removeprefix(f"{source}: ")  # agp's errors already name the file
            raise ModelFileError(f"{source}: not a counting model file ({detail})") from None
        metadata = regressor.metadata_ or {}
        if not isinstance(metadata, dict) or metadata.get("kind") != MODEL_KIND:
            raise ModelFileError(f"{source}: an AGP regressor file without counting metadata, not a counting model")
        version = metadata.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise ModelFileError(
                f"{source}: counting model format version {version!r} is newer than this "
                f"version of counting reads ({FORMAT_VERSION}); upgrade counting"
            )
        _, n_outputs = check_regressor(regressor, str(source))
        check_metadata(metadata, n_outputs, str(source))
        heads = read_head_sections(metadata, str(source))
        try:
            preprocessing = metadata["preprocessing"]
            mask_code = preprocessing.get("roi_mask")
            interval = metadata.get("interval")
            grid = metadata.get("grid")
            descriptor_record = metadata.get("descriptor")
            descriptor = None
            if descriptor_record is not None:
                from counting.features.descriptors import Descriptor

                descriptor = Descriptor.from_dict(descriptor_record)
            multiclass = metadata.get("multiclass") or {}
            model = cls(
                regressor=regressor,
                backbone=metadata["backbone"]["name"],
                backbone_weights_sha256=metadata["backbone"].get("weights_sha256"),
                runtime=metadata["backbone"].get("runtime"),
                input_size=preprocessing.get("input_size"),
                roi_mask=None if mask_code is None else decode_mask(mask_code),
                flip_average=bool(preprocessing.get("flip_average", False)),
                grid=None if grid is None else (int(grid[0]), int(grid[1])),
                layout=metadata.get("layout"),
                class_names=metadata.get("class_names"),
                target_transform=multiclass.get("target_transform") or "none",
                gate=multiclass.get("gate"),
                interval=None if interval is None else ConformalInterval.from_dict(interval),
                dataset=metadata.get("dataset") or {},
                training=metadata.get("training") or {},
                history=metadata.get("history") or {},
                validation_metrics=metadata.get("validation_metrics") or {},
                test_metrics=metadata.get("test_metrics") or {},
                path=source,
                descriptor=descriptor,
                **heads,
                count_offset=metadata.get("count_offset", "none"),
                correction_weight=metadata.get("correction_weight", 1.0),
                familiarity=_read_familiarity(metadata.get("familiarity")),
                sparse_gate=_read_sparse_gate(metadata.get("sparse_gate")),
            )
            model.check_familiarity()
        except ModelFileError as error:
            raise ModelFileError(f"{source}: {error}") from None
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise ModelFileError(f"{source}: malformed counting metadata ({error})") from None
        _check_offset_record(metadata, version, str(source))
        return model

    # ------------------------------------------------------------------ features -> counts
    def check_features(self, features: np.ndarray, source: str = "features") -> np.ndarray:
        """Validate features against the model; returns a float array.

        ``frame``: ``(n, D)``; ``tiles``: ``(n, cells, D)``; ``pyramid``: ``(n, 1 + cells, D)``
        (the whole-frame descriptor first, see :func:`counting.features.layouts.stack_views`).
        """
        array = np.asarray(features, dtype=float)
        if array.ndim not in (2, 3):
            raise FeatureDimensionError(
                f"{source}: expected features shaped (n, {self.feature_dim}), got {array.shape}"
            )
        if array.shape[-1] != self.feature_dim:
            raise FeatureDimensionError(
                f"{source}: features have {array.shape[-1]} dimensions but {self.name} expects "
                f"{self.feature_dim} ({self.backbone} descriptors)"
            )
        if self.grid is None:
            if array.ndim == 3:
                raise FeatureDimensionError(
                    f"{source}: features have {array.shape[1]} tiles per image but {self.name} counts whole frames"
                )
            return array
        grid_text = f"{self.grid[0]}x{self.grid[1]}"
        if array.ndim == 2:
            raise FeatureDimensionError(
                f"{source}: whole-frame features, but {self.name} counts on a "
                f"{grid_text} grid of tiles (extract them with --grid)"
            )
        if array.shape[1] != self.views_per_image:
            wanted = str(self.views_per_image)
            if self.layout == "pyramid":  # say what the 1 + cells views are and in which order
                wanted += f" (shape (n, {self.views_per_image}, {self.feature_dim}): the whole frame, then its cells)"
            raise FeatureDimensionError(
                f"{source}: features have {array.shape[1]} descriptors per image but {self.name} "
                f"({self.layout} layout on a {grid_text} grid) takes {wanted}"
            )
        return array

    def predict_features(self, features: np.ndarray, source: str = "features") -> np.ndarray:
        """Counts from descriptors: each frame's rows predicted and summed, clipped at 0.

        Rows containing NaN (images that failed to load) give NaN counts.
        """
        array = self.check_features(features, source)
        n_images = array.shape[0]
        if self.layout == "pyramid":
            rows = predict_rows("pyramid", *split_views(array))
        else:
            rows = predict_rows(self.layout, array if array.ndim == 2 else None, array if array.ndim == 3 else None)
        finite = np.isfinite(rows).all(axis=1)
        n_outputs = len(self.class_names) if self.class_names else 1
        predicted = np.full((rows.shape[0], n_outputs), np.nan)
        if finite.any():
            values = np.asarray(self.regressor.predict(rows[finite]), dtype=float)
            predicted[finite] = values.reshape(-1, n_outputs)
        # Sum first, clip after: clipping each tile would bias sparse tiles upwards.
        summed = frame_counts(predicted, n_images)
        if self.count_offset == "head_sum":
            # The regressor predicted the count minus the head's sum.
            from counting.heads.density.conv.training import corrected_counts

            summed = corrected_counts(array, summed[:, 0], self.correction_weight)[:, None]
        counts = inverse_transform(summed, self.target_transform)
        if not self.is_multi_output:
            return counts[:, 0]
        return apply_gate(counts, self.gate)

    def intervals(
        self, counts: np.ndarray, routes: np.ndarray | None = None, readings: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
        """Calibrated ``(low, high)`` for predicted counts, or ``(None, None)`` when uncalibrated.
        ``routes`` (:meth:`interval_routes`): each picture's own route's interval where the model
        has one (a crowd model's specialists, general heads, detector), the model's interval
        elsewhere and without them. ``readings`` (a crowd model's, :meth:`count_batch`'s
        ``readings``): where finite, the picture's count is disputed and its interval is the
        union with the detector's route's interval about that reading (counting.heads.crowd.sparse_gate,
        "Disputed counts")."""
        if self.interval is None:
            return None, None
        low, high = self.interval.interval(counts, self._found_none(routes, counts))
        disputed = np.zeros(0, dtype=bool) if readings is None else np.isfinite(np.asarray(readings, dtype=float))
        if disputed.any():
            other = np.asarray(readings, dtype=float)[disputed]
            their_routes = None if routes is None else np.full(len(other), BY_DETECTOR, dtype=object)
            their_low, their_high = self.interval.interval(other, self._found_none(their_routes, other))
            low, high = np.array(low, dtype=float), np.array(high, dtype=float)
            low[disputed] = np.minimum(low[disputed], their_low)
            high[disputed] = np.maximum(high[disputed], their_high)
        return low, high

    def _found_none(self, routes: np.ndarray | None, counts: np.ndarray) -> np.ndarray | None:
        """``routes`` with the detector's split by ``counts`` where the model calibrated
        ``"detector-none"``: a count of exactly 0 (the detector found no one; a smoothed count is 0
        only where every frame's was) takes it, any other count ``"detector"``."""
        if routes is None or self.interval is None or DETECTOR_FOUND_NONE not in self.interval.by_route:
            return routes
        names = np.array(routes, dtype=object)
        values = np.asarray(counts, dtype=float)
        if values.ndim != 1 or values.shape != names.shape:
            return names
        detector = (names == BY_DETECTOR) | (names == DETECTOR_FOUND_NONE)
        names[detector] = np.where(values[detector] == 0, DETECTOR_FOUND_NONE, BY_DETECTOR)
        return names

    def interval_routes(
        self,
        probes: np.ndarray | None,
        people: Sequence[Any] | None = None,
        counts: np.ndarray | None = None,
    ) -> np.ndarray | None:
        """The route each picture's interval is calibrated on, or None where the model has one
        interval: ``"detector"`` where the sparse gate handed the picture to the detector
        (``people``, :meth:`_gated`: not None there), else the head with the router's largest
        weight (from the familiarity ``probes``: the same map statistics the router reads), a
        specialist's set or ``"general"`` (every picture, for a model without specialists).
        With the pictures' ``counts``, a picture the detector found no one in takes
        ``"detector-none"`` where the model calibrated that route (models before it keep
        ``"detector"``; :meth:`intervals` splits the detector's route by the counts it is given)."""
        head = self.density_head
        if self.interval is None or not self.interval.by_route or probes is None:
            return None
        if getattr(head, "router", None) is None or not getattr(head, "specialists", None):
            chosen = np.full(len(probes), ROUTE_GENERAL, dtype=object)
        else:
            names = list(head.specialists)
            statistics = np.asarray(probes, dtype=float).reshape(len(probes), -1)
            with np.errstate(invalid="ignore"):
                chosen = head.router.routes(head.router.mixture(statistics, names), names)
        if people is not None:
            # A wide picture the detector counted in part keeps the head's route: its crowd is the head's.
            chosen[by_detector_alone(people)] = BY_DETECTOR
        return chosen if counts is None else self._found_none(chosen, counts)

    # ------------------------------------------------------------------ images -> counts
    def preprocessing(self) -> Any:
        """The model's Preprocessing (one object per model: it caches the resized ROI masks)."""
        if "preprocessing" not in self._backbone_cache:
            from counting.features.backbones import Preprocessing

            self._backbone_cache["preprocessing"] = Preprocessing(input_size=self.input_size, roi_mask=self.roi_mask)
        return self._backbone_cache["preprocessing"]

    def seeing_grayscale(self) -> CountingModel:
        """A copy of the model whose backbone sees every picture as its grayscale copy (what
        training's grayscale augmentation measures and fits the router on); counts, not files,
        change. Only the backbone's input: a detector (the sparse gate's person count, the
        multi-class model) still sees the colour picture."""
        return self.seeing(grayscale=True)

    def seeing_degraded(self) -> CountingModel:
        """As :meth:`seeing_grayscale`, the backbone seeing each picture's degraded copy
        (counting.data.copies.degraded_pixels: the soft and recompressed copies heads train on)."""
        return self.seeing(degraded=True)

    def seeing(self, **changes: bool) -> CountingModel:
        """A copy of the model whose backbone's preprocessing has ``changes`` (``grayscale``,
        ``degraded``: the copy kinds training draws, counting.heads.density.conv.training.copy_kinds)."""
        from dataclasses import replace as copied

        # Its own cache dict (replace() would share this one): the backbone is shared, the
        # preprocessing is not.
        view = copied(self, _backbone_cache=dict(self._backbone_cache))
        view._backbone_cache["preprocessing"] = copied(self.preprocessing(), **changes)
        return view

    def get_backbone(self, weights: str | Path | None = None) -> Any:
        """The backbone the model was trained with (loaded once per model object and runtime),
        on the runtime configured now (:func:`counting.features.backbones.configure_runtime`), whichever
        runtime the model was trained with: both give the same descriptors to 1e-4."""
        from counting.features.backbones import default_runtime, get_backbone

        key = f"{weights}|{default_runtime()}"
        if key not in self._backbone_cache:
            backbone = get_backbone(self.backbone, weights=weights)
            expected = self.backbone_weights_sha256
            actual = backbone.weights_sha256
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
        """Load every network counting runs now (the backbone; a sparse gate's detector, fetched
        and converted on first use), so the first picture does not pay for it. A detector that
        cannot be had is left to the first count, which warns and counts by the head alone."""
        self.get_backbone(weights)
        if self.sparse_gate is not None:
            from counting.features.detector import detector_backbone

            try:
                detector_backbone()
            except BackboneError:
                pass  # the first count says so in its one warning

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
        :func:`counting.apply.distributed.cluster_extractor` to run on a Dask cluster.
        ``on_density(source, density)``: called with each counted picture's ``(h, w)`` density
        map (density-head models; zones are counted from it, counting.apply.zones).
        """
        backbone = self.get_backbone(weights)
        sources = [str(path) for path in paths]
        rows = self._applied.rows_of_paths(
            self,
            sources,
            weights,
            cache,
            batch_size,
            progress,
            Chunking(DENSITY_CHUNK, DENSITY_BATCH),  # read now: tests and benches change them
            extract=extract,
            on_density=on_density,
            with_probes=self.needs_probes,
        )
        counts = self.predict_features(rows.features)
        familiarity = self.familiarity_scores(rows.probes)
        counted_by, people, disputed, readings = None, None, None, None
        if self.sparse_gate is not None:
            grids: dict[int, tuple[int, int]] = {}

            def evidence(wanted: np.ndarray) -> tuple[np.ndarray, list, list]:
                asked = rows.ok & wanted
                readable = asked.copy()
                found = self.person_rows(sources, readable, rows.errors, backbone, grids=grids, with_tiles=True)
                rows.ok[asked & ~readable] = False  # could not be read a second time
                return found

            counts, people, mixed, readings = self._gated(
                counts, familiarity, rows.probes, evidence, rows.wide_maps or {}, rows.wide_probes
            )
            counts[~rows.ok] = np.nan
            readings[~rows.ok] = np.nan
            disputed = np.isfinite(readings)
            counted_by = routes(people)
            if on_density is not None:
                # Zones of a picture the detector counted: shares of its people, not of the head's map
                # (of a wide picture it counted in part, the head's map in the other tiles).
                for k, found in enumerate(people):
                    if found is not None and rows.ok[k]:
                        on_density(sources[k], mixed[k] if k in mixed else person_density(found, grids[k]))
        low, high = self.intervals(counts, self.interval_routes(rows.probes, people, counts), readings)
        return CountResult(
            sources=sources,
            counts=counts,
            low=low,
            high=high,
            ok=rows.ok,
            errors=rows.errors,
            familiarity=familiarity,
            counted_by=counted_by,
            disputed=disputed,
        )

    def _gated(
        self,
        counts: np.ndarray,
        familiarity: np.ndarray | None,
        probes: np.ndarray | None,
        evidence: Any,
        wide_maps: Mapping[int, np.ndarray],
        wide_probes: Mapping[int, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, list, dict[int, np.ndarray], np.ndarray]:
        """``(counts, people, mixed, readings)``: the sparse gate's counts (counting.heads.crowd.sparse_gate) and,
        per picture, the person boxes the detector's count took where the gate handed it over
        (``SparseGate.counted_boxes``), None where the head counted it, ``PartPeople`` where it
        handed over some tiles of a wide picture (``mixed``: the maps of those,
        ``sparse_gate.tiled_density``), and, where the gate's count is disputed (a tile it hands
        over only with its head limit lifted), the count it gives with the limit lifted (NaN
        elsewhere, and where the detector did not run: :meth:`intervals`' ``readings``). ``evidence(wanted)`` gives the detector's ``(person rows,
        boxes, tiled)`` (``person_evidence``'s ``with_tiles``) of the pictures in the mask
        ``wanted`` (NaN rows and None elsewhere); it is asked only for those the gate's screen lets
        through. ``wide_maps``: the head's density map of each picture wider than the detector's
        tiles allow (the gate reads it tile by tile, "Wide pictures" in sparse_gate), and
        ``wide_probes`` their tiles' own familiarity probes (``sparse_gate.tile_probes``)."""
        from counting.features.detector.evidence import PERSON_QUANTITIES
        from counting.heads.crowd.sparse_gate import PartPeople, boxes_in_tiles, tile_shares, tiled_density

        gate = self.sparse_gate
        people: list = [None] * len(counts)
        mixed: dict[int, np.ndarray] = {}
        undisputed = np.full(len(counts), np.nan)
        projected = self.familiarity.project(probes)
        shares = [np.ones(1)] * len(counts)
        for k, density in wide_maps.items():
            shares[k] = tile_shares(density, self._map_tiles(np.shape(density)))
        # Each tile's own familiarity and axes: a crowd beside an empty photo is, whole, half unlike a crowd.
        seen = {
            k: (self.familiarity.scores(probes_of_tiles), self.familiarity.project(probes_of_tiles))
            for k, probes_of_tiles in (wide_probes or {}).items()
        }
        wanted = gate.needs_detector_tiles(counts, shares, familiarity, projected, seen)
        if not wanted.any():
            return counts, people, mixed, undisputed
        found = _without_detector(evidence, wanted)
        if found is None:
            return counts, people, mixed, undisputed
        _, boxes, tiled = found
        rows = [np.full((len(part), len(PERSON_QUANTITIES)), np.nan) for part in shares]
        for k, picture in enumerate(tiled):
            if picture is None:  # not asked (its head count stands) or unreadable
                continue
            tiles, rows[k] = picture
            # The detector's own tiles of the picture (its prepared input's), the head's map shared by them.
            shares[k] = tile_shares(wide_maps.get(k), tiles)
        gated, handed = gate.apply_tiles(counts, shares, rows, familiarity, projected, seen)
        lifted, handed_if_lifted = gate.apply_tiles(counts, shares, rows, familiarity, projected, seen, limited=False)
        disputed = np.array([(free & ~taken).any() for free, taken in zip(handed_if_lifted, handed, strict=True)])
        readings = np.where(disputed, lifted, np.nan) if len(disputed) else undisputed
        for k, taken in enumerate(handed):
            if not taken.any():
                continue
            tiles = tiled[k][0]
            chosen = gate.counted_boxes(boxes_in_tiles(boxes[k], tiles, taken))
            if taken.all():
                people[k] = chosen
                continue
            people[k] = PartPeople.of(chosen)
            if k in wide_maps:
                mixed[k] = tiled_density(wide_maps[k], float(counts[k]), chosen, tiles, taken)
        return gated, people, mixed, readings

    def _map_tiles(self, shape: tuple[int, ...]) -> list:
        """The detector's tiles of the prepared input behind a density map of ``shape`` ``(h, w)``
        (``evidence.map_tiles``)."""
        from counting.features.detector.evidence import map_tiles
        from counting.heads.density.maps import HEAD_STRIDE

        return map_tiles(shape[-2:], getattr(self.density_head, "stride", HEAD_STRIDE))

    def person_rows(
        self,
        sources: Sequence[str],
        ok: np.ndarray,
        errors: dict[str, str],
        backbone: Any = None,
        grids: dict[int, tuple[int, int]] | None = None,
        with_tiles: bool = False,
    ) -> tuple:
        """``(rows, boxes)``: the detector's person rows of the pictures marked in ``ok`` (NaN
        elsewhere) and their person boxes (``person_boxes``; None elsewhere), from the same
        prepared inputs as frames and arrays (counting.features.detector.evidence). A picture
        that cannot be read again is dropped from ``ok`` and named in ``errors``. ``grids``, when
        given, gets each detected picture's density-map ``(h, w)``. ``with_tiles`` adds, last,
        each picture's tiles and their rows (``person_evidence``'s; None elsewhere)."""
        from counting.core.errors import ImageError
        from counting.features.detector.evidence import DETECTOR_BATCH, PERSON_QUANTITIES, person_evidence
        from counting.features.extract import prepare_path

        backbone = backbone if backbone is not None else self.get_backbone()
        sources = [str(source) for source in sources]
        persons = np.full((len(sources), len(PERSON_QUANTITIES)), np.nan)
        boxes: list = [None] * len(sources)
        tiled: list = [None] * len(sources)
        prep = self.preprocessing()
        readable = np.flatnonzero(ok)
        for start in range(0, len(readable), DETECTOR_BATCH):
            indices, tensors = [], []
            for k in readable[start : start + DETECTOR_BATCH]:
                # The extraction pipeline's own decode route and message (the maps came from it,
                # and its tiny-picture warning: not a second one).
                prepared = prepare_path(sources[k], backbone, prep, warn=False)
                if isinstance(prepared, ImageError):
                    ok[k] = False
                    errors[sources[k]] = str(prepared)
                    continue
                tensors.append(prepared)
                indices.append(k)
                if grids is not None:
                    grids[int(k)] = self.density_grid(prepared)
            if tensors:
                persons[indices], found, tiles = person_evidence(
                    tensors, backbone.normalisation, with_boxes=True, with_tiles=True
                )
                for k, picture, pieces in zip(indices, found, tiles, strict=True):
                    boxes[k], tiled[k] = picture, pieces
        return (persons, boxes, tiled) if with_tiles else (persons, boxes)

    def _wide_maps(self, density: np.ndarray | None) -> dict[int, np.ndarray]:
        """The density maps, by picture, of those ``(n, h, w)`` maps whose pictures the detector
        sees in more than one tile (the gate reads them tile by tile)."""
        if density is None or len(density) == 0 or len(self._map_tiles(np.shape(density)[-2:])) == 1:
            return {}
        return {k: np.asarray(density[k]) for k in range(len(density))}

    def gate_photos(self, grids: np.ndarray | Sequence[tuple[int, int]] | None) -> np.ndarray | None:
        """How many photos the sparse gate reads each picture as (``sparse_gate.photos_in``: the
        detector's tiles of a picture wider than 2:1), from its density map's ``(h, w)``; 1 where
        no map was made. None without ``grids``."""
        if grids is None:
            return None
        return np.array([len(self._map_tiles((h, w))) if h and w else 1 for h, w in np.asarray(grids, dtype=int)])

    def density_grid(self, tensor: Any) -> tuple[int, int]:
        """``(h, w)`` of the density head's map of one prepared input."""
        from counting.heads.density.maps import HEAD_STRIDE, head_grid

        height, width = (int(side) for side in tuple(np.shape(tensor))[-2:])
        return head_grid((height, width), getattr(self.density_head, "stride", HEAD_STRIDE))

    def probe_paths(
        self,
        paths: Sequence[str | Path],
        cache: Any = None,
        weights: str | Path | None = None,
        batch_size: int = defaults.BATCH_SIZE,
        progress: bool = False,
    ) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
        """``(probes, ok, errors)``: the familiarity probe of each image file (what
        :mod:`counting.heads.familiarity` fits on): the regressor's input rows of a descriptor
        model, the per-channel statistics of the head's maps of a density-head model."""
        rows = self._applied.probes_of_paths(
            self,
            [str(path) for path in paths],
            weights,
            cache,
            batch_size,
            progress,
            Chunking(DENSITY_CHUNK, DENSITY_BATCH),
        )
        return rows.features, rows.ok, rows.errors

    def head_maps(
        self,
        paths: Sequence[str | Path],
        cache: Any = None,
        weights: str | Path | None = None,
        batch_size: int = defaults.BATCH_SIZE,
    ) -> Iterator[tuple[int, np.ndarray]]:
        """``(index, maps)`` of each readable image file, its ``(C, h, w)`` maps as the model's
        density head reads them (its layers, on its stride's grid; through ``cache``), a few
        pictures' maps held at a time; unreadable files are skipped. For studies of the head."""
        if not isinstance(self._applied, DensityHeadApplied):
            raise ValueError(f"{self.name}: its head reads no feature maps of its own (no density head)")
        yield from self._applied.each_picture_maps(
            self,
            [str(path) for path in paths],
            weights,
            cache,
            batch_size,
            False,
            Chunking(DENSITY_CHUNK, DENSITY_BATCH),
            np.zeros(len(paths), dtype=bool),
            {},
        )

    # ------------------------------------------------------------------ familiarity
    def familiarity_scores(self, probes: np.ndarray | None) -> np.ndarray | None:
        """Familiarity of each picture from its probes (the regressor's input rows for a
        descriptor model), or None when the model has no familiarity section."""
        if self.familiarity is None or probes is None:
            return None
        array = np.asarray(probes, dtype=float)
        return self.familiarity.scores(array.reshape(len(array), -1))

    def familiarity_dim(self) -> int:
        """Numbers per picture the familiarity probe holds for this model."""
        return self._applied.familiarity_dim(self)

    def check_familiarity(self) -> None:
        """ModelFileError when a familiarity section does not fit the model's probe."""
        section = self.familiarity
        if section is None:
            return
        wanted = self._applied.probe
        if section.probe != wanted:
            raise ModelFileError(f"familiarity probe {section.probe!r} does not fit this model (it needs {wanted!r})")
        if section.dim != self.familiarity_dim():
            raise ModelFileError(
                f"familiarity takes {section.dim} numbers per picture, this model's probe has {self.familiarity_dim()}"
            )

    def density_maps(self, tensors: Sequence[Any], weights: str | Path | None = None) -> np.ndarray:
        """``(n, h, w)`` density maps (people per head-grid cell) of prepared inputs of one shape."""
        from counting.heads.density.maps import HEAD_STRIDE, maps_on_grid

        head = self.density_head
        if head is None:
            raise ModelFileError(f"{self.name}: has no density head (train it with --density-head)")
        batch = np.stack([np.asarray(tensor) for tensor in tensors])
        stride = getattr(head, "stride", HEAD_STRIDE)  # 8 for the conv head
        return head.density(maps_on_grid(self.get_backbone(weights), batch, head.layers, stride))

    def count_density(self, density: np.ndarray) -> np.ndarray:
        """Counts from density maps of :meth:`density_maps` (the head's sums through the regressor)."""
        head = self.density_head
        return self.predict_features(head.sum_regions(density, self.roi_mask, head.grid), source="frames")

    def prepare_image(
        self, image: Any, weights: str | Path | None = None, source: str | None = None, *, bgr: bool = False
    ) -> Any:
        """Network input ``(3, H, W)`` for one in-memory image (PIL or RGB array; a BGR array,
        as OpenCV decodes frames, with ``bgr=True``).

        Separate from :meth:`count_prepared` so a video reader thread can prepare the next
        frames while the current batch runs through the network.
        """
        return self.get_backbone(weights).prepare(image, self.preprocessing(), source, bgr=bgr)

    def count_prepared(self, tensors: Sequence[Any], weights: str | Path | None = None) -> np.ndarray:
        """Counts for prepared inputs of one shape: one forward pass for the batch."""
        return self.count_batch(tensors, weights).counts

    def count_batch(
        self, tensors: Sequence[Any], weights: str | Path | None = None, with_density: bool = False
    ) -> CountBatch:
        """The :class:`CountBatch` of prepared inputs of one shape, from one forward pass: counts,
        intervals (on each picture's route), familiarity and, for a crowd model with a sparse
        gate, the people its detector counted and the disputed counts' readings; the density
        maps too with ``with_density`` (a density-head model: zones, the heat map)."""
        rows = self._applied.rows_of_prepared(self, tensors, weights, Chunking(DENSITY_CHUNK, DENSITY_BATCH))
        counts = self.predict_features(rows.features, source="frames")
        familiarity = self.familiarity_scores(rows.probes)
        density = rows.density if with_density else None
        people: list | None = None
        readings = None
        if self.sparse_gate is not None:
            counts, people, readings, density = self._gated_batch(tensors, weights, rows, counts, familiarity, density)
        routes = self.interval_routes(rows.probes, people or [None] * len(tensors), counts)
        low, high = self.intervals(counts, routes, readings)
        return CountBatch(counts, low, high, familiarity, density, people, readings, routes)

    def _gated_batch(
        self,
        tensors: Sequence[Any],
        weights: str | Path | None,
        rows: Any,
        counts: np.ndarray,
        familiarity: np.ndarray | None,
        density: np.ndarray | None,
    ) -> tuple[np.ndarray, list, np.ndarray, np.ndarray | None]:
        """The sparse gate on a batch: ``(counts, people, readings, density)``, the density maps
        of the pictures the detector counted replaced by its people's (:meth:`_gated`)."""
        from counting.features.detector.evidence import PERSON_QUANTITIES, person_evidence

        normalisation = self.get_backbone(weights).normalisation

        def evidence(wanted: np.ndarray) -> tuple[np.ndarray, list, list]:
            persons = np.full((len(tensors), len(PERSON_QUANTITIES)), np.nan)
            boxes: list = [None] * len(tensors)
            tiled: list = [None] * len(tensors)
            chosen = np.flatnonzero(wanted)
            persons[chosen], found, tiles = person_evidence(
                [tensors[k] for k in chosen], normalisation, with_boxes=True, with_tiles=True
            )
            for k, picture, pieces in zip(chosen, found, tiles, strict=True):
                boxes[k], tiled[k] = picture, pieces
            return persons, boxes, tiled

        wide = self._wide_maps(rows.density)
        counts, people, mixed, readings = self._gated(
            counts, familiarity, rows.probes, evidence, wide, rows.wide_probes
        )
        if density is not None and any(found is not None for found in people):
            # A picture the detector counted shows its people, not the head's reading of it
            # (a wide picture it counted in part, the head's map in the other tiles).
            density = np.array(density, dtype=float)
            for k, found in enumerate(people):
                if found is not None:
                    density[k] = mixed[k] if k in mixed else person_density(found, density.shape[1:])
        return counts, people, readings, density

    def count_images(self, images: Sequence[Any], weights: str | Path | None = None) -> np.ndarray:
        """Counts for in-memory images (PIL images or RGB arrays of one size, e.g. video frames)."""
        if len(images) == 0:
            return np.zeros((0, len(self.class_names))) if self.class_names else np.zeros(0)
        return self.count_prepared([self.prepare_image(image, weights) for image in images], weights)

    def summary(self) -> dict:
        """Short description for the CLI."""
        head = self._applied.summary()
        return head | {
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


def _read_familiarity(record: Any) -> Any:
    """The model file's familiarity section, or None (files written before it: "unknown")."""
    if record is None:
        return None
    from counting.heads.familiarity import Familiarity, FamiliarityError

    try:
        return Familiarity.from_document(record)
    except FamiliarityError as error:
        raise ModelFileError(str(error)) from None


def _without_detector(compute: Any, *args: Any) -> np.ndarray | None:
    """``compute(*args)`` (the detector's person rows), or None with one warning when the detector
    cannot be had (no npm, no $COUNTING_DETECTOR_SOURCE, a broken conversion): the model then
    counts by its density head alone, which over-counts some sparse photos, instead of failing."""
    try:
        return compute(*args)
    except BackboneError as error:
        warnings.warn(
            f"{str(error).splitlines()[0]}; counting by the density head alone (sparse photos may be over-counted)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def _read_sparse_gate(record: Any) -> Any:
    """The model file's sparse-gate section, or None (models without one count by the head alone)."""
    if record is None:
        return None
    from counting.heads.crowd.sparse_gate import SparseGate, SparseGateError

    try:
        return SparseGate.from_document(record)
    except SparseGateError as error:
        raise ModelFileError(str(error)) from None


def load_model(path: str | Path | None = None) -> CountingModel:
    """Load ``path``, or the shipped default model when ``path`` is None."""
    return CountingModel.load(default_model_path() if path is None else path)
