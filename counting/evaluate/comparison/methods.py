"""Fitting and scoring each method: feature methods on every layout, HOG on the images."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from counting.core import defaults
from counting.core.metrics import crowd_metrics
from counting.evaluate.comparison.data import ComparisonData
from counting.evaluate.evaluation import smooth_sequence
from counting.evaluate.peers import (
    IMAGE_PEERS,
    CalibratedHOGCounter,
    HOGPeopleCounter,
    make_peer,
    peer_label,
)
from counting.evaluate.peers.errors import PeerUnavailable
from counting.evaluate.peers.registry import DEFAULT_METHODS, DEFAULT_TILED_METHODS, check_methods
from counting.features.layouts import frame_counts, predict_rows, training_rows

# Exact GPs cost O(rows³): one row per tile is out of reach, so they run on the pyramid layout
# (one row per frame) only.
FRAME_ROW_ONLY: tuple[str, ...] = ("gp",)


# What a fit or prediction may raise on bad data (singular systems, too few rows): the
# method's row says so and the comparison goes on.
FIT_ERRORS = (ValueError, np.linalg.LinAlgError, RuntimeError)


@dataclass
class MethodResult:
    """One row of the comparison table."""

    method: str
    label: str
    features: str
    status: str = "ok"  # ok | unavailable | failed
    note: str = ""
    metrics: dict = field(default_factory=dict)  # mae, mse, rmse (+ smoothed_* for sequences)
    fit_seconds: float | None = None
    predict_seconds: float | None = None
    n_train: int = 0
    n_test: int = 0
    predictions: np.ndarray | None = None

    def mark_failed(self, error: BaseException) -> MethodResult:
        """Record why the method gave no predictions: ``unavailable`` (an optional package is
        missing) or ``failed`` (a fit or prediction error, with its first line)."""
        if isinstance(error, PeerUnavailable):
            self.status, self.note = "unavailable", str(error)
        else:
            self.status, self.note = "failed", f"{type(error).__name__}: {str(error).splitlines()[0]}"
        return self

    def row(self) -> dict:
        """Flat JSON/CSV-ready record (no per-frame predictions)."""
        record = {
            "method": self.method,
            "label": self.label,
            "features": self.features,
            "status": self.status,
            "note": self.note,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "fit_seconds": _round(self.fit_seconds),
            "predict_seconds": _round(self.predict_seconds),
        }
        for name in ("mae", "mse", "rmse", "smoothed_mae", "smoothed_mse", "smoothed_rmse"):
            record[name] = _round(self.metrics.get(name))
        return record


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def score(y_true: np.ndarray, y_pred: np.ndarray, indices: np.ndarray | None = None, window: int = 0) -> dict:
    """MAE / MSE / RMSE, plus the same after centred temporal smoothing when ``window`` > 1."""
    figures = {key: value for key, value in crowd_metrics(y_true, y_pred).items() if key != "n"}
    if window > 1 and indices is not None:
        smoothed = crowd_metrics(y_true, smooth_sequence(np.asarray(y_pred, float), indices, window))
        figures |= {f"smoothed_{key}": value for key, value in smoothed.items() if key != "n"}
    return figures


def _timed(action: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = action()
    return value, time.perf_counter() - started


def feature_rows(data: ComparisonData, layout: str) -> tuple[np.ndarray, np.ndarray, Callable[[Any], np.ndarray]]:
    """Training rows, targets and a test-frame count predictor for one layout of ``data``
    (the rows are ``counting.features.layouts``', the same ``counting train`` fits)."""
    X, y = training_rows(
        layout, data.train_features, data.train_tile_features, data.train_counts, data.train_tile_counts
    )
    X_test = predict_rows(layout, data.test_features, data.test_tile_features)
    n_test = len(data.test_counts)

    def predict(model: Any) -> np.ndarray:
        return frame_counts(model.predict(X_test), n_test)

    return X, y, predict


def layout_label(layout: str, grid: tuple[int, int] | None) -> str:
    grid_text = "" if grid is None else f"{grid[0]}x{grid[1]}"
    return {
        "frame": "whole frame",
        "tiles": f"tiles {grid_text}",
        "tiles+frame": f"tiles {grid_text} + frame",
        "pyramid": f"frame + {grid_text} cells concatenated",
    }[layout]


def run_feature_method(
    data: ComparisonData,
    name: str,
    layout: str = "frame",
    n_centers: int = defaults.N_CENTERS,
    seed: int = defaults.SEED,
    window: int = 0,
) -> MethodResult:
    """Fit and score one feature method on one layout (see ``counting.features.layouts``)."""
    result = MethodResult(
        method=name, label=peer_label(name), features=layout_label(layout, data.grid), n_test=len(data.test_counts)
    )
    X, y, predict = feature_rows(data, layout)
    result.n_train = int(len(X))
    try:
        model = make_peer(name, n_centers=n_centers, seed=seed, n_features=X.shape[1], n_rows=len(X))
        _, result.fit_seconds = _timed(lambda: model.fit(X, y))
        predictions, result.predict_seconds = _timed(lambda: predict(model))
    except (PeerUnavailable, *FIT_ERRORS) as error:
        return result.mark_failed(error)
    result.predictions = np.asarray(predictions, dtype=float).ravel()
    result.metrics = score(data.test_counts, result.predictions, data.test_indices, window)
    return result


def run_descriptor_method(
    data: ComparisonData, spec: str, name: str, n_centers: int = defaults.N_CENTERS, seed: int = 0, window: int = 0
) -> MethodResult:
    """One feature method on the whole-frame rows of an extra descriptor (``data.descriptor_features``)."""
    train, test = data.descriptor_features[spec]
    frames = replace(
        data,
        train_features=train,
        test_features=test,
        grid=None,
        train_tile_features=None,
        test_tile_features=None,
        train_tile_counts=None,
    )
    result = run_feature_method(frames, name, "frame", n_centers, seed, window)
    result.features = spec
    return result


def run_image_method(
    data: ComparisonData, name: str, window: int = 0, max_train_images: int | None = 150
) -> MethodResult:
    """The HOG detector, plain or linearly calibrated on (a spread of) the training images."""
    result = MethodResult(method=name, label=IMAGE_PEERS[name], features="images", n_test=len(data.test_counts))
    try:
        if name == "hog":
            model = HOGPeopleCounter(roi_mask=data.roi_mask)
            result.fit_seconds, result.n_train = 0.0, 0
        else:
            model = CalibratedHOGCounter(roi_mask=data.roi_mask, max_train_images=max_train_images)
            _, result.fit_seconds = _timed(lambda: model.fit(data.train_paths, data.train_counts))
            result.n_train = model.n_train_
        predictions, result.predict_seconds = _timed(lambda: model.predict(data.test_paths))
    except PeerUnavailable as reason:
        return result.mark_failed(reason)
    result.predictions = predictions
    result.metrics = score(data.test_counts, predictions, data.test_indices, window)
    return result


def run_comparison(
    data: ComparisonData,
    methods: Sequence[str] = DEFAULT_METHODS,
    tiled_methods: Sequence[str] = DEFAULT_TILED_METHODS,
    n_centers: int = defaults.N_CENTERS,
    seed: int = defaults.SEED,
    smoothing_window: int | None = None,
    max_hog_train_images: int | None = 150,
    on_result: Callable[[MethodResult], None] | None = None,
) -> list[MethodResult]:
    """Every requested method on ``data``; tiled rows follow when the data has a grid."""
    check_methods(methods, tiled_methods)
    window = (defaults.SMOOTHING_WINDOW if smoothing_window is None else smoothing_window) if data.is_sequence else 0
    jobs: list[Callable[[], MethodResult]] = []
    for name in methods:
        if name in IMAGE_PEERS:
            jobs.append(lambda name=name: run_image_method(data, name, window, max_hog_train_images))
        else:
            jobs.append(lambda name=name: run_feature_method(data, name, "frame", n_centers, seed, window))
    if data.grid is not None:
        for name in tiled_methods:
            layouts = ("pyramid",) if name in FRAME_ROW_ONLY else ("tiles", "tiles+frame", "pyramid")
            for layout in layouts:
                jobs.append(
                    lambda name=name, layout=layout: run_feature_method(data, name, layout, n_centers, seed, window)
                )
    for spec in data.descriptor_features:
        for name in methods:
            if name not in IMAGE_PEERS:
                jobs.append(
                    lambda name=name, spec=spec: run_descriptor_method(data, spec, name, n_centers, seed, window)
                )
    results = []
    for job in jobs:
        result = job()
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results
