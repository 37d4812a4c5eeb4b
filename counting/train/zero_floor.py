"""A high end for a model's zero-width interval routes, measured on pictures it never trained on.

The crowd model's ``detector-none`` route (a photo the sparse gate sent to the detector, which
found no one) was calibrated with a quantile of 0: more than 90 % of its calibration photos held
no one, so every such photo got ``0 [0-0]``, a certainty no model has. :func:`calibrate_zero_floor`
counts the validation part of some crowd sets with the model, keeps the pictures counted 0 on a
zero-width route, and sets that route's ``min_high`` to the level conformal quantile of their true
counts (counting.heads.uncertainty.miss_floor). The train parts are counted too (in-sample: the
gate was fitted on them). Counts are unchanged; what was measured goes into the model's
``training.zero_interval_floor``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from counting.core.errors import TrainingError
from counting.heads.uncertainty import miss_floor
from counting.model.counting_model import CountingModel

__all__ = ["ZeroFloor", "calibrate_zero_floor", "without_floor", "zero_width_routes"]

# The model's own interval (not a route's) in a list of routes.
OWN_INTERVAL = ""


@dataclass(frozen=True)
class ZeroFloor:
    """The floored model, and the true counts and zero-width flags of each part it counted."""

    model: CountingModel
    floor: float
    parts: dict[str, tuple[np.ndarray, np.ndarray]]

    def covered(self, part: str, high: float) -> float:
        truth, zero = self.parts[part]
        return float(np.mean(truth[zero] <= high))


def zero_width_routes(interval: Any) -> list[str]:
    """Routes (``""``: the model's own interval) whose quantile is 0: a count of 0 gets ``[0, 0]``."""
    found = [OWN_INTERVAL] if not np.any(np.asarray(interval.quantile) > 0) else []
    return found + [name for name, route in interval.by_route.items() if not np.any(np.asarray(route.quantile) > 0)]


def without_floor(interval: Any) -> Any:
    """``interval`` with no ``min_high``, on itself or on any route."""
    routes = {name: replace(route, min_high=0.0) for name, route in interval.by_route.items()}
    return replace(interval, min_high=0.0, by_route=routes)


def counted_zero(model: CountingModel, paths: list[str], cache: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(counts, zero_width)``: each picture's count, and whether its interval is ``[0, 0]``."""
    result = model.count_paths(paths, cache=cache)
    if not result.ok.all():
        source, problem = next(iter(result.errors.items()))
        raise TrainingError(f"{source}: {problem}")
    return result.counts, (result.counts == 0) & (result.high <= 0)


def calibrate_zero_floor(
    model: CountingModel,
    dataset: Any,
    sets: tuple[str, ...],
    *,
    cache: Any = None,
    command: str,
    log: Callable[[str], None] | None = None,
) -> ZeroFloor | None:
    """The model with a floor on its zero-width routes, measured on ``dataset``'s validation
    part (a :func:`counting.data.read_crowd` of ``sets``); None when no route has a zero
    quantile. ``command`` is recorded as the way the floor was measured."""
    routes = zero_width_routes(model.interval) if model.interval is not None else []  # the quantile, not min_high
    if not routes:
        return None
    # Measured without any floor already set: running it again measures the same.
    measuring = replace(model, interval=without_floor(model.interval))
    parts = {part: _zero_counted(measuring, dataset, part, sets, cache, log) for part in ("test", "train")}
    truth, zero = parts["test"]
    floor = miss_floor(truth[zero], model.interval.level)
    found = ZeroFloor(model, floor, parts)
    record = _floor_record(found, routes, sets, command)
    floored = replace(
        model,
        interval=_floored(model.interval, routes, floor),
        training=dict(model.training) | {"zero_interval_floor": record},
    )
    return replace(found, model=floored)


def _zero_counted(
    model: CountingModel, dataset: Any, part: str, sets: tuple[str, ...], cache: Any, log: Callable[[str], None] | None
) -> tuple[np.ndarray, np.ndarray]:
    samples = dataset.subset(part).samples
    truth = np.array([float(sample.count) for sample in samples])
    _, zero = counted_zero(model, [str(sample.path) for sample in samples], cache)
    if log is not None:
        missed = truth[zero] > 0
        log(
            f"{'validation' if part == 'test' else 'train'} part ({', '.join(sets)}): {len(truth)} pictures, "
            f"{int(zero.sum())} counted 0 [0-0], {int(missed.sum())} of them hold people "
            f"(true counts {sorted(truth[zero][missed].astype(int).tolist())})"
        )
    return truth, zero


def _floor_record(found: ZeroFloor, routes: list[str], sets: tuple[str, ...], command: str) -> dict:
    truth, zero = found.parts["test"]
    covered = {part: found.covered(part, found.floor) for part in found.parts}
    before = {part: found.covered(part, 0) for part in found.parts}
    return {
        "min_high": found.floor,
        "routes": routes or ["(the model's own)"],
        "measured_on": f"validation parts of {', '.join(sets)} (never trained on): the pictures counted 0 [0-0]",
        "pictures_counted_zero": int(zero.sum()),
        "holding_people": int((truth[zero] > 0).sum()),
        "their_true_counts": sorted(truth[zero][truth[zero] > 0].astype(int).tolist()),
        "covered": {"validation": round(covered["test"], 4), "train (in-sample)": round(covered["train"], 4)},
        "covered_before": {"validation": round(before["test"], 4), "train (in-sample)": round(before["train"], 4)},
        "command": command,
    }


def _floored(interval: Any, routes: list[str], floor: float) -> Any:
    if OWN_INTERVAL in routes:
        interval = replace(interval, min_high=floor)
    return replace(
        interval,
        by_route={
            name: replace(route, min_high=floor) if name in routes else route
            for name, route in interval.by_route.items()
        },
    )
