"""Calibrated count intervals: split conformal prediction on held-out residuals.

Split conformal (Vovk et al. 2005; Lei et al. 2018) needs no model assumptions: given ``n``
calibration pairs ``(y, ŷ)`` exchangeable with the test pairs, the interval
``ŷ ± q·σ(ŷ)``, where ``q`` is the ``ceil((n+1)·level)``-th smallest calibration score
``|y - ŷ| / σ(ŷ)``, covers the true count with probability at least ``level``.

``σ`` is the *scale*: ``"absolute"`` (σ = 1, constant width), ``"sqrt"`` (σ = sqrt(ŷ + 1),
Poisson-like: dense frames get wider intervals) or ``"linear"`` (σ = ŷ + 1). The guarantee holds
for every scale; the scale only moves width between sparse and dense frames, which shortens the
mean width when errors grow with the count. ``choose_scale`` picks one on the calibration data
alone.

**Per route (Mondrian conformal, Vovk et al. 2005, ch. 4):** a model whose pictures are counted by
different heads (a crowd model's specialists, :mod:`counting.heads.crowd.routing`) errs
differently on each: one interval calibrated on all of them is too wide where a specialist counts
(a Mall frame of 33 people got [8, 59]). ``by_route`` holds one interval per route, each
calibrated on pictures of that route alone; a picture of another route (or one whose route is not
known) gets the interval of the whole. The guarantee then holds within each calibrated route, not
only on average over all pictures. (A crowd model also splits the detector's route by whether the
detector found anyone: ``detector-none``, counting.heads.crowd.sparse_gate.)

**Per class group (multi-class models, VOC):** most photo-class pairs hold no object and are
predicted ~0, so a quantile over all pairs is ~0 and the intervals of the pairs that matter were
zero-width (``sheep 0.6 [0.6-0.6]`` with one sheep; 47.5 % of the pairs with objects covered).
:func:`fit_class_group_interval` calibrates on the pairs *with objects* alone, on a square-root
scale (count noise), one quantile per group of classes ranked by how many photos hold them: 20
classes with a handful of objects each are too few for a quantile per class.

**A floor on the high end** (``min_high``): a route whose calibration pictures were nearly all
counted right (the crowd model's ``detector-none``: the detector found no one, and in 95 % of
those train pictures no one was there) has a zero quantile, and ``0 [0-0]`` claims a certainty no
model has. ``min_high`` is the ``level`` conformal quantile of the true counts of pictures the
route counted 0 that the model never trained on (:func:`miss_floor`): the high end with which
``[0, min_high]`` covers them at the level (on the crowd model's coco-voc20 validation photos 12 of
69 held people, so ``[0, 0]`` covered 83 %; ``[0, 1]`` covers 96 %).

The conformal score quantile is written here because scikit-learn has no conformal predictor and
the method is a sort and an index.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from counting.core.errors import ModelFileError

SCALES = ("absolute", "sqrt", "linear")


def _as_float_array(values: np.ndarray | Sequence[float], name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim not in (1, 2):
        raise ValueError(f"{name}: expected shape (n,) or (n, K), got {array.shape}")
    return array


def _scale_of(y_pred: np.ndarray, scale: str) -> np.ndarray:
    """σ(ŷ) > 0 for each prediction; predicted counts below zero are treated as zero."""
    count = np.clip(y_pred, 0.0, None)
    if scale == "absolute":
        return np.ones_like(count)
    if scale == "sqrt":
        return np.sqrt(count + 1.0)
    if scale == "linear":
        return count + 1.0
    raise ValueError(f"scale {scale!r}: expected one of {', '.join(SCALES)}")


def conformal_rank(n: int, level: float) -> int:
    """1-based rank ``ceil((n+1)·level)`` of the calibration score used as the quantile.

    Ranks above ``n`` mean the calibration set is too small for this level (infinite interval).
    """
    # The small tolerance keeps e.g. (99+1)·0.9 = 90.00000000000001 at rank 90.
    return int(math.ceil((n + 1) * level - 1e-9))


def conformal_quantile(scores: np.ndarray, level: float) -> np.ndarray:
    """Finite-sample conformal quantile of scores along axis 0 (``inf`` if n is too small)."""
    n = scores.shape[0]
    rank = conformal_rank(n, level)
    if rank > n:
        return np.full(scores.shape[1:], np.inf)
    return np.sort(scores, axis=0)[rank - 1]


@dataclass
class ConformalInterval:
    """Split-conformal count interval ``[ŷ - q·σ(ŷ), ŷ + q·σ(ŷ)]``, lower end clipped at 0.

    Build with ``ConformalInterval.fit(y_true, y_pred, level)`` on predictions for samples the
    regressor did not train on (a validation split).
    """

    level: float
    quantile: np.ndarray
    scale: str = "absolute"
    n_calibration: int = 0
    lower_bound: float | None = 0.0
    # route name -> the interval calibrated on that route's pictures alone (module docstring).
    by_route: dict[str, ConformalInterval] = field(default_factory=dict)
    # The high end is at least this (module docstring: a floor where the quantile is 0).
    min_high: float = 0.0
    # Per class (multi-class models): the group each class's quantile was calibrated in, and
    # which pairs calibrated it (fit_class_group_interval); None for one interval over all pairs.
    class_groups: list[int] | None = None
    calibrated_on: str | None = None
    method: str = field(default="split-conformal", init=False)

    @classmethod
    def fit(
        cls,
        y_true: np.ndarray | Sequence[float],
        y_pred: np.ndarray | Sequence[float],
        level: float = 0.9,
        scale: str = "absolute",
        lower_bound: float | None = 0.0,
    ) -> ConformalInterval:
        """Calibrate on held-out pairs; ``level`` is the nominal coverage (e.g. 0.9)."""
        truth = _as_float_array(y_true, "y_true")
        predicted = _as_float_array(y_pred, "y_pred")
        if truth.shape != predicted.shape:
            raise ValueError(f"y_true {truth.shape} and y_pred {predicted.shape} differ in shape")
        if not 0.0 < level < 1.0:
            raise ValueError(f"level {level}: expected a coverage strictly between 0 and 1")
        if truth.shape[0] == 0:
            raise ValueError("y_true: no calibration samples")
        if not (np.isfinite(truth).all() and np.isfinite(predicted).all()):
            raise ValueError("y_true / y_pred: calibration values must be finite")
        scores = np.abs(truth - predicted) / _scale_of(predicted, scale)
        return cls(
            level=float(level),
            quantile=np.asarray(conformal_quantile(scores, level), dtype=float),
            scale=scale,
            n_calibration=int(truth.shape[0]),
            lower_bound=lower_bound,
        )

    def half_width(self, y_pred: np.ndarray | Sequence[float]) -> np.ndarray:
        """Half width ``q·σ(ŷ)`` of each interval, before clipping at the lower bound (the
        interval of the whole: ``by_route`` is read by :meth:`interval` alone)."""
        predicted = np.asarray(y_pred, dtype=float)
        return self.quantile * _scale_of(predicted, self.scale)

    def interval(
        self, y_pred: np.ndarray | Sequence[float], routes: np.ndarray | Sequence[str] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(low, high)`` arrays shaped like ``y_pred``. ``routes`` (one name per sample, along
        the first axis): samples of a route in ``by_route`` get its interval, the rest this one."""
        predicted = np.asarray(y_pred, dtype=float)
        low, high = self._own_interval(predicted)
        if routes is None or not self.by_route:
            return low, high
        names = np.asarray(routes, dtype=object)
        if names.shape != predicted.shape[:1]:
            raise ValueError(f"{names.shape[0] if names.ndim else 0} routes for {len(predicted)} predictions")
        for name, interval in self.by_route.items():
            chosen = names == name
            if chosen.any():
                low[chosen], high[chosen] = interval._own_interval(predicted[chosen])
        return low, high

    def _own_interval(self, predicted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        half = self.half_width(predicted)
        low = predicted - half
        if self.lower_bound is not None:
            # Counts cannot be negative: clipping shortens the interval without losing coverage.
            low = np.maximum(low, self.lower_bound)
        high = predicted + half
        if self.min_high > 0:
            high = np.where(np.isnan(high), high, np.maximum(high, self.min_high))
        return low, high

    def coverage(
        self,
        y_true: np.ndarray | Sequence[float],
        y_pred: np.ndarray | Sequence[float],
        routes: np.ndarray | Sequence[str] | None = None,
    ) -> float:
        """Fraction of true counts inside their interval."""
        return self.figures(y_true, *self.interval(y_pred, routes))["coverage"]

    def mean_width(
        self, y_pred: np.ndarray | Sequence[float], routes: np.ndarray | Sequence[str] | None = None
    ) -> float:
        """Mean interval width (after clipping at the lower bound)."""
        low, high = self.interval(y_pred, routes)
        return float(np.mean(high - low))

    def evaluate(
        self,
        y_true: np.ndarray | Sequence[float],
        y_pred: np.ndarray | Sequence[float],
        routes: np.ndarray | Sequence[str] | None = None,
    ) -> dict:
        """``{"level", "coverage", "mean_width", "scale"}`` on a test split."""
        return self.figures(y_true, *self.interval(y_pred, routes))

    def figures(
        self,
        y_true: np.ndarray | Sequence[float],
        low: np.ndarray | Sequence[float],
        high: np.ndarray | Sequence[float],
    ) -> dict:
        """:meth:`evaluate`'s figures of intervals already made (``(low, high)`` as counting gave them)."""
        truth = np.asarray(y_true, dtype=float)
        low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
        if truth.shape != low.shape:
            raise ValueError(f"y_true {truth.shape} and y_pred {low.shape} differ in shape")
        return {
            "level": self.level,
            "coverage": float(np.mean((truth >= low) & (truth <= high))),
            "mean_width": float(np.mean(high - low)),
            "scale": self.scale,
        }

    def to_dict(self) -> dict:
        """JSON-ready description (an infinite quantile is written as ``null``)."""
        values = np.atleast_1d(self.quantile).astype(float)
        written = [None if not np.isfinite(value) else float(value) for value in values]
        record = {
            "method": self.method,
            "level": self.level,
            "scale": self.scale,
            "quantile": written[0] if np.ndim(self.quantile) == 0 else written,
            "n_calibration": self.n_calibration,
            "lower_bound": self.lower_bound,
        }
        if self.by_route:
            record["by_route"] = {name: interval.to_dict() for name, interval in self.by_route.items()}
        if self.min_high > 0:
            record["min_high"] = float(self.min_high)
        if self.class_groups is not None:
            record["class_groups"] = [int(group) for group in self.class_groups]
        if self.calibrated_on is not None:
            record["calibrated_on"] = self.calibrated_on
        return record

    @classmethod
    def from_dict(cls, data: dict) -> ConformalInterval:
        """Inverse of ``to_dict``."""
        try:
            raw = data["quantile"]
            if isinstance(raw, list):
                quantile = np.array([np.inf if value is None else value for value in raw], dtype=float)
            else:
                quantile = np.asarray(np.inf if raw is None else raw, dtype=float)
            interval = cls(
                level=float(data["level"]),
                quantile=quantile,
                scale=str(data.get("scale", "absolute")),
                n_calibration=int(data.get("n_calibration", 0)),
                lower_bound=data.get("lower_bound", 0.0),
                min_high=float(data.get("min_high", 0.0)),
                class_groups=None if data.get("class_groups") is None else [int(g) for g in data["class_groups"]],
                calibrated_on=None if data.get("calibrated_on") is None else str(data["calibrated_on"]),
            )
            if not (np.isfinite(interval.min_high) and interval.min_high >= 0):
                raise ValueError(f"min_high {interval.min_high} is not a count")
            routes = data.get("by_route") or {}
            if not isinstance(routes, dict):
                raise TypeError(f"by_route is a {type(routes).__name__}, not a mapping")
            for name, record in routes.items():
                if not isinstance(record, dict) or "by_route" in record:
                    raise TypeError(f"by_route[{name!r}] is not one interval")
                if float(record.get("level", interval.level)) != interval.level:
                    raise ValueError(f"by_route[{name!r}] is at level {record.get('level')}, not {interval.level}")
                interval.by_route[str(name)] = cls.from_dict(record)
        except (KeyError, TypeError, ValueError) as error:
            raise ModelFileError(f"interval calibration: malformed record ({error})") from None
        if interval.scale not in SCALES:
            raise ModelFileError(f"interval calibration: unknown scale {interval.scale!r}")
        return interval


def choose_scale(
    y_true: np.ndarray | Sequence[float],
    y_pred: np.ndarray | Sequence[float],
    level: float = 0.9,
    scales: Sequence[str] = SCALES,
    n_splits: int = 50,
    seed: int = 0,
) -> tuple[str, dict[str, float]]:
    """Pick the scale with the narrowest mean interval, judged on the calibration data only.

    Each round calibrates every scale on a random half of the pairs and measures its mean width on
    the other half; the scale with the smallest average wins. Returns the scale and the average
    width of each candidate. Fit the final interval on all pairs with the chosen scale.
    """
    truth = _as_float_array(y_true, "y_true")
    predicted = _as_float_array(y_pred, "y_pred")
    n = truth.shape[0]
    if n < 4:
        return "absolute", {}
    rng = np.random.default_rng(seed)
    widths = {scale: [] for scale in scales}
    for _ in range(n_splits):
        order = rng.permutation(n)
        calibrate, hold_out = order[: n // 2], order[n // 2 :]
        for scale in scales:
            interval = ConformalInterval.fit(truth[calibrate], predicted[calibrate], level, scale)
            widths[scale].append(interval.mean_width(predicted[hold_out]))
    mean_widths = {scale: float(np.mean(values)) for scale, values in widths.items()}
    return min(mean_widths, key=mean_widths.get), mean_widths


# Groups of classes that share a quantile (module docstring): rare, middling and common classes.
CLASS_GROUPS = 3
# What a per-class-group interval is calibrated on.
PAIRS_WITH_OBJECTS = "photo-class pairs with objects"


def class_groups_by_frequency(y_true: np.ndarray, n_groups: int = CLASS_GROUPS) -> np.ndarray:
    """Group of each class ``(K,)``: 0 for the rarest, ``n_groups - 1`` for the most common, the
    classes ranked by how many photos hold them and cut into runs of near-equal size (ties keep
    the class order)."""
    truth = _as_float_array(y_true, "y_true")
    holding = (truth > 0).sum(axis=0)
    order = np.argsort(holding, kind="stable")
    groups = np.empty(truth.shape[1], dtype=int)
    for group, members in enumerate(np.array_split(order, min(n_groups, truth.shape[1]))):
        groups[members] = group
    return groups


def fit_class_group_interval(
    y_true: np.ndarray | Sequence[float],
    y_pred: np.ndarray | Sequence[float],
    level: float = 0.9,
    groups: np.ndarray | Sequence[int] | None = None,
    scale: str = "sqrt",
) -> ConformalInterval:
    """Per-class interval ``(n, K)`` calibrated, per group of classes, on the pairs with objects
    (``y_true > 0``; module docstring): class k's quantile is its group's conformal quantile of
    ``|y - ŷ| / σ(ŷ)`` there. ``groups``: a group per class (default
    :func:`class_groups_by_frequency`). A group without enough pairs for ``level`` takes the
    quantile of all pairs with objects (infinite when they too are too few)."""
    truth = _as_float_array(y_true, "y_true")
    predicted = _as_float_array(y_pred, "y_pred")
    if truth.ndim != 2 or truth.shape != predicted.shape:
        raise ValueError(f"y_true {truth.shape} and y_pred {predicted.shape}: expected one (n, K) shape")
    labels = class_groups_by_frequency(truth) if groups is None else np.asarray(groups, dtype=int)
    scores = np.abs(truth - predicted) / _scale_of(predicted, scale)
    held = truth > 0
    # No pair with objects says nothing of a missed object's reach: infinite, like too few pairs.
    overall = float(conformal_quantile(scores[held], level)) if held.any() else np.inf
    quantile = np.empty(truth.shape[1])
    for group in np.unique(labels):
        members = labels == group
        pairs = scores[:, members][held[:, members]]
        value = conformal_quantile(pairs, level) if len(pairs) else np.inf
        quantile[members] = overall if not np.isfinite(value) else float(value)
    return ConformalInterval(
        level=float(level),
        quantile=quantile,
        scale=scale,
        n_calibration=int(held.sum()),
        class_groups=[int(group) for group in labels],
        calibrated_on=PAIRS_WITH_OBJECTS,
    )


def group_coverage(
    interval: ConformalInterval, y_true: np.ndarray, y_pred: np.ndarray, groups: np.ndarray | Sequence[int]
) -> dict[int, dict[str, float]]:
    """Per group of classes: ``{"pairs", "coverage"}`` of the pairs with objects, and the
    coverage of all its pairs (``"coverage_all"``), of ``interval`` on ``(n, K)`` counts."""
    truth, predicted = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
    low, high = interval.interval(predicted)
    inside = (truth >= low) & (truth <= high)
    labels = np.asarray(groups, dtype=int)
    figures = {}
    for group in np.unique(labels):
        members = labels == group
        held = truth[:, members] > 0
        figures[int(group)] = {
            "pairs": int(held.sum()),
            "coverage": float(inside[:, members][held].mean()) if held.any() else float("nan"),
            "coverage_all": float(inside[:, members].mean()),
        }
    return figures


def miss_floor(y_true: np.ndarray | Sequence[float], level: float = 0.9) -> float:
    """The high end a zero-width route's interval needs (module docstring): the conformal
    ``level`` quantile of the true counts of pictures it counted 0, measured on pictures the model
    never trained on, so that ``[0, floor]`` covers them at the level. Where that quantile is 0 but
    some of them held people, the smallest count among those (the measurement refutes ``[0, 0]``);
    0 when none did; with too few pictures for the level, the largest count."""
    truth = np.asarray(y_true, dtype=float).ravel()
    missed = truth[truth > 0]
    if not len(missed):
        return 0.0
    value = float(conformal_quantile(truth, level))
    if not np.isfinite(value):
        return float(missed.max())
    return value if value > 0 else float(missed.min())
