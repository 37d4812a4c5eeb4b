"""The model file: what a counting model holds (schema, load, save, metadata), apart from how it
counts (counting.model.counting_model).

A model file is one ``.npz`` written by ``AGPRegressor.save`` with the counting metadata
(backbone, preprocessing, ROI mask, grid, layout, head, the stages' sections, dataset, split,
metrics) in its JSON metadata, so later commands need nothing else. Each head kind
(counting.heads.registry) and each stage (counting.model.stages) reads and writes its own section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import numpy as np

from counting.core import defaults
from counting.core.errors import ModelFileError
from counting.core.files import atomic_path
from counting.core.version import __version__
from counting.features.layouts import LAYOUTS
from counting.heads.applied import AppliedHead
from counting.heads.registry import applied_head_for, read_head_sections
from counting.model.schema import check_archive, check_metadata, check_regressor
from counting.model.sections import COUNT_OFFSETS, check_offset_record, check_readable, decode_mask, encode_mask
from counting.model.stages import STAGES

__all__ = ["FORMAT_VERSION", "MODEL_KIND", "ModelFile"]

MODEL_KIND = "counting-model"
# Version 2 adds the descriptor record (feature-map sums); class-score models are still written
# as version 1, byte for byte as before, so older readers keep reading them. Version 3: the
# count offset (readers before it would ignore it).
FORMAT_VERSION = 3


@dataclass
class ModelFile:
    """A fitted ``agp.AGPRegressor`` and everything a model file records beside it."""

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
    # counting.heads.uncertainty.ConformalInterval: the interval stage's calibration.
    interval: Any = None
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
        self._check_offset()
        if self.sparse_gate is not None and (
            self.density_head is None or self.familiarity is None or self.class_names is not None
        ):
            raise ModelFileError("a sparse gate needs a one-class density head and a familiarity section")
        self._applied = applied_head_for(self)

    def _check_offset(self) -> None:
        if self.count_offset not in COUNT_OFFSETS:
            raise ModelFileError(f"count offset {self.count_offset!r:.60} is not one of {', '.join(COUNT_OFFSETS)}")
        if self.count_offset == "head_sum" and (self.density_head is None or self.target_transform != "none"):
            raise ModelFileError("count offset 'head_sum' needs a density head and no target transform")
        weight = self.correction_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= weight <= 2.0:
            raise ModelFileError(f"correction weight must be a number from 0 to 2, got {weight!r:.60}")
        if weight != 1.0 and self.count_offset == "none":
            raise ModelFileError("a correction weight other than 1 needs the count offset 'head_sum'")

    @property
    def applied_head(self) -> AppliedHead:
        """The model's head kind (counting.heads.applied): how pictures become the regressor's rows."""
        return self._applied

    @property
    def uses_maps(self) -> bool:
        """Descriptors are feature-map sums (one pass, no class scores)."""
        return self.descriptor is not None and self.descriptor.uses_maps

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

    def metadata(self) -> dict[str, Any]:
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
            "interval": None,  # the interval stage's section (below), here in the file as before
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
        for stage in STAGES:
            state = getattr(self, stage.field)  # each stage's own field, named by the registry
            if state is not None:
                record[stage.section] = stage.write(state)
        return record

    def save(self, path: str | Path) -> Path:
        """Write the model as one ``.npz`` file (no pickle), atomically.

        The regressor writes to a temporary file beside ``path`` which then replaces it, so a
        failed save (full disk, Ctrl-C) leaves a model already at ``path`` untouched.
        """
        target = Path(path)
        # OutputError (a CountingError naming the file) on a full disk or a folder not writable.
        with atomic_path(target) as temporary:
            self.regressor.save(temporary, metadata=self.metadata())
        self.path = target
        return target

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Read a model written by :meth:`save` (an instance of ``cls``); anything else ->
        ModelFileError naming the file."""
        source = Path(path)
        regressor, metadata = _read_regressor(source)
        try:
            model = cls(regressor=regressor, path=source, **_fields_of(metadata, str(source)))
            model.check_familiarity()
        except ModelFileError as error:
            raise ModelFileError(f"{source}: {error}") from None
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise ModelFileError(f"{source}: malformed counting metadata ({error})") from None
        check_offset_record(metadata, metadata["format_version"], str(source))
        return model

    def check_familiarity(self) -> None:
        """ModelFileError when a familiarity section does not fit the model's probe."""
        section = self.familiarity
        if section is None:
            return
        wanted = self._applied.probe
        if section.probe != wanted:
            raise ModelFileError(f"familiarity probe {section.probe!r} does not fit this model (it needs {wanted!r})")
        dim = self._applied.familiarity_dim(self)
        if section.dim != dim:
            raise ModelFileError(f"familiarity takes {section.dim} numbers per picture, this model's probe has {dim}")


def _read_regressor(source: Path) -> tuple[Any, dict[str, Any]]:
    """The regressor and the counting metadata of a model file, both checked (counting.model.schema)."""
    from agp import AGPRegressor

    check_readable(source)
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
    # Only a whole number can be newer: anything else is the schema's to refuse (below), saying what it is.
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise ModelFileError(
            f"{source}: counting model format version {version!r} is newer than this "
            f"version of counting reads ({FORMAT_VERSION}); upgrade counting"
        )
    _, n_outputs = check_regressor(regressor, str(source))
    check_metadata(metadata, n_outputs, str(source))
    return regressor, metadata


def _fields_of(metadata: dict[str, Any], source: str) -> dict[str, Any]:
    """The ModelFile fields a model file's checked metadata holds."""
    heads = read_head_sections(metadata, source)
    preprocessing = metadata["preprocessing"]
    mask_code = preprocessing.get("roi_mask")
    grid = metadata.get("grid")
    descriptor = metadata.get("descriptor")
    multiclass = metadata.get("multiclass") or {}
    if descriptor is not None:
        # Imported only for a file with a descriptor record: it brings OpenCV (~0.1 s of start-up).
        from counting.features.descriptors import Descriptor

        descriptor = Descriptor.from_dict(descriptor)
    stages = {
        stage.field: stage.read(metadata[stage.section]) for stage in STAGES if metadata.get(stage.section) is not None
    }
    return {
        "backbone": metadata["backbone"]["name"],
        "backbone_weights_sha256": metadata["backbone"].get("weights_sha256"),
        "runtime": metadata["backbone"].get("runtime"),
        "input_size": preprocessing.get("input_size"),
        "roi_mask": None if mask_code is None else decode_mask(mask_code),
        "flip_average": bool(preprocessing.get("flip_average", False)),
        "grid": None if grid is None else (int(grid[0]), int(grid[1])),
        "layout": metadata.get("layout"),
        "class_names": metadata.get("class_names"),
        "target_transform": multiclass.get("target_transform") or "none",
        "gate": multiclass.get("gate"),
        "dataset": metadata.get("dataset") or {},
        "training": metadata.get("training") or {},
        "history": metadata.get("history") or {},
        "validation_metrics": metadata.get("validation_metrics") or {},
        "test_metrics": metadata.get("test_metrics") or {},
        "descriptor": descriptor,
        **heads,
        "count_offset": metadata.get("count_offset", "none"),
        "correction_weight": metadata.get("correction_weight", 1.0),
        **stages,
    }
