"""What counting gives, one type for each way it is asked: :class:`CountResult` for picture files
(failed ones kept as NaN rows with their reasons), :class:`CountBatch` for a batch of prepared
pictures (frames, uploads, arrays). Their fields do not change with what the caller asked for:
an item a model cannot give is None."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["CountBatch", "CountResult"]


@dataclass
class CountResult:
    """Counts for a list of images; rows of failed images are NaN and listed in ``errors``."""

    sources: list[str]
    counts: np.ndarray  # (n,) or (n, K)
    low: np.ndarray | None
    high: np.ndarray | None
    ok: np.ndarray  # (n,) bool
    errors: dict[str, str] = field(default_factory=dict)
    # (n,) familiarity in (0, 1] (counting.heads.familiarity), NaN for failed pictures; None when
    # the model file has no familiarity section (an older model: "unknown").
    familiarity: np.ndarray | None = None
    # (n,) what counted each picture, for a crowd model with a sparse gate: "detector" (a sparse
    # photo) or "density" (the head); None for other models.
    counted_by: np.ndarray | None = None
    # (n,) bool, for a crowd model with a sparse gate: True where the gate's inputs said sparse but
    # the heads' count, above its limit, stood (counting.heads.crowd.sparse_gate, "Disputed counts": the
    # count is unreliable, its interval reaches the detector's reading too); None for other models.
    disputed: np.ndarray | None = None


@dataclass
class CountBatch:
    """Counts of a batch of prepared pictures of one shape, from one forward pass
    (``CountingModel.count_batch``); every field is there whatever the model, None where the
    model has no such thing."""

    counts: np.ndarray  # (n,) or (n, K)
    # The interval of each count, on its route and reaching a disputed count's other reading
    # (counting.heads.crowd.intervals); None for a model without calibration.
    low: np.ndarray | None
    high: np.ndarray | None
    familiarity: np.ndarray | None = None  # (n,) in (0, 1], None for a file without the section
    # (n, h, w) density maps, asked for with ``with_density`` of a density-head model (zones, the
    # heat map); where the crowd model's detector counted a picture, the map of its people.
    density: np.ndarray | None = None
    # A crowd model with a sparse gate: per picture the (m, 5) person boxes (fractions of the
    # picture, then the score) its detector's count took, or None where the head counted it.
    people: list[Any] | None = None
    # The same model: where the gate disputes a count, the count with the head limit lifted
    # (NaN elsewhere): the interval reaches it (counting.heads.crowd.sparse_gate, "Disputed counts").
    readings: np.ndarray | None = None
    # The interval route of each picture (counting.heads.crowd.intervals), None with one interval.
    routes: np.ndarray | None = None
    # (n,) what counted each picture ("detector", "density", "density+detector") for a gated
    # crowd model (counting.heads.crowd.sparse_gate.routes), else None.
    counted_by: np.ndarray | None = None

    @property
    def disputed(self) -> np.ndarray | None:
        """(n,) bool, where the gate disputes the count (a gated crowd model), else None."""
        return None if self.readings is None else np.isfinite(self.readings)
