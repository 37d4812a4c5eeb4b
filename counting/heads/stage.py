"""The stages after the head, one interface: each takes the batch counted so far and the pictures
it came from, and gives the batch with its own part done.

A model counts in one order (docs/architecture.md, "The count"): the head turns pictures into
rows (:mod:`counting.heads.applied`), the regressor and its correction turn rows into counts
(:mod:`counting.model.regression`), then the stages a model file holds run in turn:
familiarity (:mod:`counting.heads.familiarity`), the crowd model's sparse gate
(:mod:`counting.heads.crowd.gate_stage`) and the calibrated interval on each picture's route
(:mod:`counting.heads.crowd.intervals`). Each stage owns one section of the model file and is
registered once (:data:`counting.model.stages.STAGES`), as the head kinds are.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

import numpy as np

from counting.heads.results import CountBatch

__all__ = ["Pictures", "Stage"]


class Pictures(Protocol):
    """What a stage may ask of the pictures being counted (:mod:`counting.model.pictures`: files,
    or prepared inputs of one batch)."""

    # The head's rows of them (counting.heads.applied.PathRows / PreparedRows): probes, wide maps.
    rows: Any

    @property
    def ok(self) -> np.ndarray:
        """(n,) bool: the pictures counted (a file that could not be read is not)."""
        ...

    def evidence(self, wanted: np.ndarray) -> tuple[np.ndarray, list, list]:
        """The COCO detector's ``(person rows, boxes, tiles)`` of the pictures in the mask ``wanted``
        (NaN rows and None elsewhere; counting.features.detector.evidence.person_evidence)."""
        ...

    def show_people(self, index: int, density: np.ndarray) -> None:
        """Where the detector counted picture ``index``: the map of its people replaces the head's
        (zones and heat maps are drawn from it)."""
        ...

    def map_grid(self, index: int) -> tuple[int, int] | None:
        """``(h, w)`` of picture ``index``'s density map where someone reads the maps, else None."""
        ...


class Stage(Protocol):
    """One stage of the count after the head (a model file section and what it does)."""

    # The model file's key of the stage's section, and the CountingModel field that holds it.
    section: ClassVar[str]
    field: ClassVar[str]

    def __call__(self, batch: CountBatch, pictures: Pictures) -> CountBatch: ...
