"""The interval as a stage of the count (counting.heads.stage): each count's calibrated interval,
on the route that counted the picture where the model calibrated routes.

Contract. A model with one interval gives every count that interval. A crowd model calibrates
one per route (``ConformalInterval.by_route``): ``"detector"`` where the sparse gate handed the
whole picture to the detector, ``"detector-none"`` where the detector found no one (models that
calibrated it), else the head with the router's largest weight (a specialist's set) or
``"general"``. A disputed count's interval is the union with the detector route's interval about
its other reading (counting.heads.crowd.sparse_gate, "Disputed counts").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from counting.heads.crowd.routing import ROUTE_GENERAL, SetRouter
from counting.heads.crowd.sparse_gate import BY_DETECTOR, DETECTOR_FOUND_NONE, by_detector_alone
from counting.heads.results import CountBatch
from counting.heads.stage import Pictures
from counting.heads.uncertainty import ConformalInterval

__all__ = ["IntervalStage"]


@dataclass(frozen=True)
class IntervalStage:
    """The count's interval stage. Owns the model file's ``interval`` section; reads the density
    head's router and specialists (a crowd model's) to name each picture's route."""

    section: ClassVar[str] = "interval"
    field: ClassVar[str] = "interval"

    interval: ConformalInterval
    router: SetRouter | None = None
    specialists: tuple[str, ...] = ()

    def __call__(self, batch: CountBatch, pictures: Pictures) -> CountBatch:
        people = batch.people if batch.people is not None else [None] * len(batch.counts)
        chosen = self.routes(pictures.rows.probes, people, batch.counts)
        low, high = self.bounds(batch.counts, chosen, batch.readings)
        return replace(batch, low=low, high=high, routes=chosen)

    def routes(
        self, probes: np.ndarray | None, people: Sequence[Any] | None = None, counts: np.ndarray | None = None
    ) -> np.ndarray | None:
        """The route each picture's interval is calibrated on, or None where the model has one
        interval (or no probes were made): ``"detector"`` where the gate handed the picture to the
        detector (``people`` not None there), else the head with the router's largest weight (from
        the familiarity ``probes``: the map statistics the router reads), a specialist's set or
        ``"general"``. With the ``counts``, the detector's route is split by them
        (:meth:`found_none`)."""
        if not self.interval.by_route or probes is None:
            return None
        if self.router is None or not self.specialists:
            chosen = np.full(len(probes), ROUTE_GENERAL, dtype=object)
        else:
            names = list(self.specialists)
            statistics = np.asarray(probes, dtype=float).reshape(len(probes), -1)
            with np.errstate(invalid="ignore"):
                chosen = self.router.routes(self.router.mixture(statistics, names), names)
        if people is not None:
            # A wide picture the detector counted in part keeps the head's route: its crowd is the head's.
            chosen[by_detector_alone(people)] = BY_DETECTOR
        return chosen if counts is None else self.found_none(chosen, counts)

    def bounds(
        self, counts: np.ndarray, routes: np.ndarray | None = None, readings: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(low, high)`` of ``counts``, each on its route's interval where ``routes`` names one;
        where ``readings`` is finite the count is disputed and its interval reaches the detector
        route's interval about that reading."""
        low, high = self.interval.interval(counts, self.found_none(routes, counts))
        disputed = np.zeros(0, dtype=bool) if readings is None else np.isfinite(np.asarray(readings, dtype=float))
        if disputed.any():
            other = np.asarray(readings, dtype=float)[disputed]
            their_routes = None if routes is None else np.full(len(other), BY_DETECTOR, dtype=object)
            their_low, their_high = self.interval.interval(other, self.found_none(their_routes, other))
            low, high = np.array(low, dtype=float), np.array(high, dtype=float)
            low[disputed] = np.minimum(low[disputed], their_low)
            high[disputed] = np.maximum(high[disputed], their_high)
        return low, high

    def found_none(self, routes: np.ndarray | None, counts: np.ndarray) -> np.ndarray | None:
        """``routes`` with the detector's split by ``counts`` where the model calibrated
        ``"detector-none"``: a count of exactly 0 (the detector found no one; a smoothed count is 0
        only where every frame's was) takes it, any other count ``"detector"``."""
        if routes is None or DETECTOR_FOUND_NONE not in self.interval.by_route:
            return routes
        names = np.array(routes, dtype=object)
        values = np.asarray(counts, dtype=float)
        if values.ndim != 1 or values.shape != names.shape:
            return names
        detector = (names == BY_DETECTOR) | (names == DETECTOR_FOUND_NONE)
        names[detector] = np.where(values[detector] == 0, DETECTOR_FOUND_NONE, BY_DETECTOR)
        return names
