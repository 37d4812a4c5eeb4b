"""What a counting model file may contain: array shapes, dtypes, finiteness and metadata ranges.

A model file is data from anywhere (a download, a colleague, a damaged disk). Everything in it
is checked when it loads, so that a bad file fails there with one line naming the file and the
field, instead of a traceback, a huge allocation or ``NaN`` counts later on.

The regressor's arrays are read through the attributes ``agp.AGPRegressor`` sets after loading;
this module only reads them (the file format itself belongs to ``agp.persistence``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from agp.persistence import PARAM_PREFIX
from counting.errors import ModelFileError
from counting.imaging import MAX_SOURCE_PIXELS

__all__ = [
    "MAX_CENTERS",
    "MAX_FEATURES",
    "MAX_GRID_SIDE",
    "check_metadata",
    "check_regressor",
]

MAX_FEATURES = 1 << 20  # descriptor dimensions (the backbones give 1000 or 1280-2048)
MAX_CENTERS = 1 << 20
MAX_GRID_SIDE = 64  # tiles per side; a 10^6 x 10^6 grid would allocate per-tile descriptors
MAX_OUTPUTS = 10_000


class _Problem(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")


def _integer(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise _Problem(field, f"expected an integer, found {type(value).__name__} {value!r:.40}")
    if not low <= int(value) <= high:
        raise _Problem(field, f"{value} is outside the allowed range {low}..{high}")
    return int(value)


def _number(value: Any, field: str, low: float = -math.inf, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _Problem(field, f"expected a number, found {type(value).__name__} {value!r:.40}")
    number = float(value)
    if not math.isfinite(number):
        raise _Problem(field, f"{value} is not a finite number")
    if not low <= number <= high:
        raise _Problem(field, f"{value} is outside the allowed range {low:g}..{high:g}")
    return number


def _array(value: Any, field: str, shape: tuple[int | None, ...]) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise _Problem(field, f"missing or not an array ({type(value).__name__})")
    if value.dtype.kind not in "fiu":
        raise _Problem(field, f"expected numbers, found dtype {value.dtype}")
    if value.ndim != len(shape) or any(want is not None and got != want for got, want in zip(value.shape, shape)):
        wanted = "x".join("?" if side is None else str(side) for side in shape) or "scalar"
        raise _Problem(field, f"shape {value.shape} does not match the model ({wanted})")
    if not np.isfinite(value).all():
        raise _Problem(field, "contains NaN or infinite values")
    return value


def check_regressor(regressor: Any, source: str) -> tuple[int, int]:
    """Validate a loaded regressor's arrays; returns ``(n_features, n_outputs)``."""
    try:
        return _check_regressor(regressor)
    except _Problem as problem:
        raise ModelFileError(f"{source}: {problem}") from None


def _check_regressor(regressor: Any) -> tuple[int, int]:
    # The estimator's own state export (public API) is what is checked, not its private fields.
    try:
        arrays, document = regressor.get_state()
    except ValueError:
        raise _Problem("kernel", f"unknown kernel {getattr(regressor, 'kernel', None)!r}") from None
    n_features = _integer(document.get("n_features_in"), "n_features_in", 1, MAX_FEATURES)
    alpha = arrays.get("alpha")
    if not isinstance(alpha, np.ndarray) or alpha.ndim != 2:
        raise _Problem(
            "alpha",
            f"expected an (n_centers, n_outputs) array, found {getattr(alpha, 'shape', alpha)!r}",
        )
    n_centers, n_outputs = alpha.shape
    _integer(n_centers, "alpha rows (centres)", 1, MAX_CENTERS)
    _integer(n_outputs, "alpha columns (outputs)", 1, MAX_OUTPUTS)
    _array(alpha, "alpha", (None, None))
    _array(arrays.get("centers_standardised"), "centers_standardised", (n_centers, n_features))
    _array(arrays.get("centers"), "centers", (n_centers, n_features))
    _array(arrays.get("center_targets"), "center_targets", (n_centers, None))
    _array(arrays.get("x_mean"), "x_mean", (n_features,))
    scale = _array(arrays.get("x_scale"), "x_scale", (n_features,))
    if (scale <= 0).any():
        raise _Problem("x_scale", "feature scales must be positive (a zero scale divides by zero)")
    y_mean = arrays.get("y_mean")
    if not isinstance(y_mean, np.ndarray) or y_mean.size != n_outputs:
        raise _Problem("y_mean", f"expected {n_outputs} value(s), found {getattr(y_mean, 'shape', y_mean)!r}")
    _array(y_mean.reshape(-1), "y_mean", (n_outputs,))
    _array(arrays.get("mean_coef"), "mean_coef", (n_features, n_outputs))
    params = {key.removeprefix(PARAM_PREFIX): value for key, value in arrays.items() if key.startswith(PARAM_PREFIX)}
    if not params:
        raise _Problem("kernel parameters", "missing")
    for name, value in params.items():
        array = _array(value, f"kernel parameter {name}", (None,) * np.ndim(value))
        if array.ndim == 0 or array.shape[0] not in (1, n_centers):
            raise _Problem(f"kernel parameter {name}", f"shape {array.shape} does not match {n_centers} centres")
        if "lengthscale" in name and not name.startswith("log") and (array == 0).any():
            raise _Problem(f"kernel parameter {name}", "a lengthscale of zero divides by zero")
    _number(document.get("lengthscale"), "lengthscale", 0.0)
    _number(document.get("noise"), "noise", 0.0)
    # The checks above cover what the format stores; one prediction at the feature means
    # catches any combination that still overflows (e.g. lengthscales of 1e-300).
    with np.errstate(all="ignore"):
        try:
            probe = np.asarray(
                regressor.predict(np.asarray(regressor.x_mean_, dtype=float)[None, :]),
                dtype=float,
            )
        except (ValueError, TypeError, ArithmeticError, IndexError) as error:
            raise _Problem(
                "arrays",
                f"the model cannot predict ({str(error).splitlines()[0]:.120})",
            ) from None
    if not np.isfinite(probe).all():
        raise _Problem(
            "kernel parameters",
            "the model predicts NaN or infinity (degenerate lengthscale or scale)",
        )
    return n_features, n_outputs


def check_metadata(metadata: Mapping[str, Any], n_outputs: int, source: str) -> None:
    """Validate the counting metadata's fields and ranges (one line naming file and field)."""
    try:
        _check_metadata(metadata, n_outputs)
    except _Problem as problem:
        raise ModelFileError(f"{source}: {problem}") from None


def _mapping(value: Any, field: str, optional: bool = True) -> Mapping[str, Any]:
    if value is None and optional:
        return {}
    if not isinstance(value, Mapping):
        raise _Problem(field, f"expected an object, found {type(value).__name__}")
    return value


def _check_metadata(metadata: Mapping[str, Any], n_outputs: int) -> None:
    from counting.backbones import BACKBONES
    from counting.backbones.preprocessing import MAX_INPUT_SIZE

    # A bool or a version below 1 would pass the reader's "not newer" test and each per-version rule.
    _integer(metadata.get("format_version"), "format_version", 1, 1 << 20)
    backbone = _mapping(metadata.get("backbone"), "backbone", optional=False)
    name = backbone.get("name")
    if name not in BACKBONES:
        raise _Problem(
            "backbone.name",
            f"unknown backbone {name!r:.60} (known: {', '.join(BACKBONES)})",
        )
    if not isinstance(backbone.get("weights_sha256"), (str, type(None))):
        raise _Problem("backbone.weights_sha256", "expected a hex string or null")

    preprocessing = _mapping(metadata.get("preprocessing"), "preprocessing", optional=False)
    if preprocessing.get("input_size") is not None:
        _integer(preprocessing["input_size"], "preprocessing.input_size", 8, MAX_INPUT_SIZE)
    if preprocessing.get("roi_mask") is not None:
        _check_mask_code(preprocessing["roi_mask"])
    if not isinstance(preprocessing.get("flip_average", False), bool):
        raise _Problem("preprocessing.flip_average", "expected true or false")

    grid = metadata.get("grid")
    if grid is not None:
        if not isinstance(grid, list) or len(grid) != 2:
            raise _Problem("grid", f"expected [rows, cols], found {grid!r:.60}")
        _integer(grid[0], "grid rows", 1, MAX_GRID_SIDE)
        _integer(grid[1], "grid cols", 1, MAX_GRID_SIDE)

    names = metadata.get("class_names")
    if names is None:
        if n_outputs != 1:
            raise _Problem("class_names", f"missing, but the regressor has {n_outputs} outputs")
    elif not isinstance(names, list) or not all(isinstance(item, str) for item in names):
        raise _Problem("class_names", "expected a list of strings")
    elif len(names) != n_outputs:
        raise _Problem(
            "class_names",
            f"{len(names)} names for a regressor with {n_outputs} outputs",
        )
    elif any(not name.strip() for name in names):
        raise _Problem("class_names", "an empty class name")
    elif len(set(names)) != len(names):
        # One CSV column and one JSON key per class: a repeated name would merge two classes' counts.
        twice = next(name for name in names if names.count(name) > 1)
        raise _Problem("class_names", f"{twice!r:.60} is named twice")

    interval = metadata.get("interval")
    if interval is not None:
        interval = _mapping(interval, "interval")
        _number(interval.get("level"), "interval.level", 0.0, 1.0)
        if not 0.0 < float(interval["level"]) < 1.0:
            raise _Problem(
                "interval.level",
                f"{interval['level']} must lie strictly between 0 and 1",
            )
        quantile = interval.get("quantile")
        values = quantile if isinstance(quantile, list) else [quantile]
        if isinstance(quantile, list) and len(quantile) not in (1, n_outputs):
            raise _Problem("interval.quantile", f"{len(quantile)} values for {n_outputs} outputs")
        for value in values:
            if value is not None:  # null: an infinite quantile (too few calibration samples)
                _number(value, "interval.quantile", 0.0)
        if interval.get("lower_bound") is not None:
            _number(interval["lower_bound"], "interval.lower_bound")
        if "n_calibration" in interval:
            _integer(interval["n_calibration"], "interval.n_calibration", 0, 1 << 40)
    descriptor = metadata.get("descriptor")
    if descriptor is not None:
        _check_descriptor(_mapping(descriptor, "descriptor"))
    _check_multiclass(metadata.get("multiclass"), n_outputs)
    for section in (
        "dataset",
        "training",
        "history",
        "validation_metrics",
        "test_metrics",
    ):
        _mapping(metadata.get(section), section)


def _check_descriptor(descriptor: Mapping[str, Any]) -> None:
    """The descriptor record (feature-map sums): its spec, and a perspective map of bounded size."""
    if not isinstance(descriptor.get("spec"), str):
        raise _Problem("descriptor.spec", "expected a descriptor spec string")
    code = descriptor.get("perspective_map")
    if code is None:
        return
    code = _mapping(code, "descriptor.perspective_map")
    shape = code.get("shape")
    if not isinstance(shape, list) or len(shape) != 2:
        raise _Problem("descriptor.perspective_map.shape", f"expected [height, width], found {shape!r:.60}")
    height = _integer(shape[0], "descriptor.perspective_map height", 1, MAX_SOURCE_PIXELS)
    width = _integer(shape[1], "descriptor.perspective_map width", 1, MAX_SOURCE_PIXELS)
    if height * width > MAX_SOURCE_PIXELS:
        raise _Problem("descriptor.perspective_map.shape", f"{width}x{height} is larger than the largest image read")
    values = code.get("values")
    if not isinstance(values, list) or not values or len(values) > height:
        raise _Problem("descriptor.perspective_map.values", "expected a list of rows")


def _check_multiclass(section: Any, n_outputs: int) -> None:
    """Target transform and per-class gate thresholds (counting.multiclass)."""
    from counting.multiclass import TARGET_TRANSFORMS

    section = _mapping(section, "multiclass")
    transform = section.get("target_transform")
    if transform is not None and transform not in TARGET_TRANSFORMS:
        raise _Problem(
            "multiclass.target_transform",
            f"unknown transform {transform!r:.40} (known: {', '.join(TARGET_TRANSFORMS)})",
        )
    gate = section.get("gate")
    if gate is not None:
        if not isinstance(gate, list) or len(gate) != n_outputs:
            raise _Problem("multiclass.gate", f"expected a list of {n_outputs} thresholds")
        for value in gate:
            _number(value, "multiclass.gate", 0.0, 1e6)


def _check_mask_code(code: Any) -> None:
    """The run-length ROI mask, checked before anything of its size is allocated."""
    code = _mapping(code, "preprocessing.roi_mask", optional=False)
    shape = code.get("shape")
    if not isinstance(shape, list) or len(shape) != 2:
        raise _Problem(
            "preprocessing.roi_mask.shape",
            f"expected [height, width], found {shape!r:.60}",
        )
    height = _integer(shape[0], "preprocessing.roi_mask height", 1, MAX_SOURCE_PIXELS)
    width = _integer(shape[1], "preprocessing.roi_mask width", 1, MAX_SOURCE_PIXELS)
    if height * width > MAX_SOURCE_PIXELS:
        raise _Problem(
            "preprocessing.roi_mask.shape",
            f"{width}x{height} is larger than the largest image read ({MAX_SOURCE_PIXELS // 1_000_000} megapixels)",
        )
    runs = code.get("runs")
    if not isinstance(runs, list) or not all(isinstance(run, int) and not isinstance(run, bool) for run in runs):
        raise _Problem("preprocessing.roi_mask.runs", "expected a list of integers")
    if any(run < 0 for run in runs):
        raise _Problem("preprocessing.roi_mask.runs", "run lengths must not be negative")
    if sum(runs) != height * width:
        raise _Problem(
            "preprocessing.roi_mask.runs",
            f"runs cover {sum(runs)} pixels, the {width}x{height} mask has {height * width}",
        )
    if not isinstance(code.get("first"), bool):
        raise _Problem("preprocessing.roi_mask.first", "expected true or false")
