"""Per-class counts of everyday objects: target transform, presence gate, per-class fits.

Most entries of a multi-class count matrix are zero (a photo holds two or three of the 20 VOC
classes), and the VOC metrics round predictions to whole objects. Two cheap levers follow:

- a *target transform* (``sqrt`` or ``log`` = log1p) fitted in place of the raw counts, so the
  few large counts (a crowd of people) do not drag every other prediction up; the regressor's
  output is mapped back (and clipped at 0) before anything else;
- a per-class *presence gate*: a class whose predicted count is below its threshold counts 0.
  Predicting 1 where the truth is 0 costs twice what predicting 0 for a single object costs in
  relRMSE (the error is divided by true + 1), so the best threshold is often above the 0.5 of
  plain rounding. Thresholds are chosen on out-of-fold predictions of the train images.

``PerClassRegressor`` fits one single-output regressor per class (the comparison beside the one
multi-output fit whose centres are shared by every class).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

TARGET_TRANSFORMS: tuple[str, ...] = ("none", "sqrt", "log")
# Gate thresholds tried per class; 0.5 is plain rounding (no gate).
GATE_CANDIDATES: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.5)
# What the gate minimises per class: relRMSE + RMSE, both as the VOC metrics define them.
GATE_OBJECTIVE = "rmse + rel_rmse"


def check_transform(name: str) -> str:
    if name not in TARGET_TRANSFORMS:
        raise ValueError(f"target transform {name!r}: expected one of {', '.join(TARGET_TRANSFORMS)}")
    return name


def forward_transform(counts: np.ndarray, name: str) -> np.ndarray:
    """Counts -> the regressor's targets."""
    counts = np.asarray(counts, dtype=float)
    if check_transform(name) == "sqrt":
        return np.sqrt(np.clip(counts, 0.0, None))
    if name == "log":
        return np.log1p(np.clip(counts, 0.0, None))
    return counts


def inverse_transform(values: np.ndarray, name: str) -> np.ndarray:
    """The regressor's outputs -> counts (>= 0; NaN stays NaN)."""
    values = np.asarray(values, dtype=float)
    if check_transform(name) == "sqrt":
        return np.clip(values, 0.0, None) ** 2
    if name == "log":
        return np.expm1(np.clip(values, 0.0, None))
    return np.clip(values, 0.0, None)


def apply_gate(counts: np.ndarray, thresholds: np.ndarray | list[float] | None) -> np.ndarray:
    """Counts ``(n, K)`` with each class below its threshold set to 0 (NaN rows stay NaN)."""
    counts = np.asarray(counts, dtype=float)
    if thresholds is None:
        return counts
    limits = np.asarray(thresholds, dtype=float)
    return np.where(counts < limits, 0.0, counts)


def class_losses(y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
    """Per class RMSE + relRMSE of rounded predictions (the gate's objective), ``(K,)``."""
    truth = np.asarray(y_true, dtype=float)
    squared = (np.round(np.clip(np.asarray(y_pred, dtype=float), 0.0, None)) - truth) ** 2
    return np.sqrt(squared.mean(axis=0)) + np.sqrt((squared / (truth + 1.0)).mean(axis=0))


def choose_gate(y_true: np.ndarray, y_pred: np.ndarray, candidates: tuple[float, ...] = GATE_CANDIDATES) -> np.ndarray:
    """Per-class thresholds minimising RMSE + relRMSE on held-out predictions ``(n, K)``.

    Ties keep the smallest threshold (the least change from plain rounding).
    """
    truth = np.asarray(y_true, dtype=float)
    predicted = np.asarray(y_pred, dtype=float)
    losses = np.stack([class_losses(truth, apply_gate(predicted, np.full(truth.shape[1], t))) for t in candidates])
    return np.asarray(candidates, dtype=float)[np.argmin(losses, axis=0)]


class PerClassRegressor:
    """One single-output regressor per class, built by ``make()``: the per-class comparison."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make

    def fit(self, X: np.ndarray, y: np.ndarray) -> PerClassRegressor:
        targets = np.asarray(y, dtype=float)
        self.estimators_ = [self.make().fit(X, targets[:, k]) for k in range(targets.shape[1])]
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.stack([np.asarray(model.predict(X), dtype=float).ravel() for model in self.estimators_], axis=1)


class TransformedRegressor:
    """A regressor fitted on transformed counts, predicting counts (for the comparison rows)."""

    def __init__(self, regressor: Any, transform: str = "none") -> None:
        self.regressor = regressor
        self.transform = check_transform(transform)

    def fit(self, X: np.ndarray, y: np.ndarray) -> TransformedRegressor:
        self.regressor.fit(X, forward_transform(y, self.transform))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return inverse_transform(self.regressor.predict(X), self.transform)
