"""What a counting model file may contain: array shapes, dtypes, finiteness and metadata ranges.

A model file is data from anywhere (a download, a colleague, a damaged disk). Everything in it
is checked when it loads, so that a bad file fails there with one line naming the file and the
field, instead of a traceback, a huge allocation or ``NaN`` counts later on.

Two stages. :func:`check_archive` runs before any array is read: it reads the ``.npy`` header of
every member of the ``.npz`` and the JSON metadata (both bounded), checks every field of the
regressor's metadata against :func:`_agp_fields` and :func:`_hyper_fields` (types, ranges, the
values agp's registries allow), then each member's declared dtype, shape and uncompressed size
against what that metadata says and the total against :data:`MAX_MODEL_BYTES`; so a small file
that inflates to gigabytes is refused at the cost of its headers. Its problems read ``<file>: not a counting model file (<problem>)``,
the words the reader has always used for a regressor part it cannot read. Once loaded,
:func:`check_regressor` checks the arrays' values and :func:`check_metadata` the counting fields.

Field names this version does not know, at the top of the regressor's metadata, of its
``hyper_parameters`` or of the counting metadata, are ignored as they always were (a newer
counting may add an informational field while keeping the oldest format version that reads the
file right), but no longer silently: loading warns once, naming them. Unknown values of known
fields are refused. Members other than the model's arrays are refused: NumPy would read each one
whole.

The regressor's arrays are read through the attributes ``agp.AGPRegressor`` sets after loading;
this module only reads them (the file format itself belongs to ``agp.persistence``).
"""

from __future__ import annotations

import functools
import json
import math
import warnings
import zipfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from tokenize import TokenError
from typing import Any, NamedTuple

import numpy as np
from numpy.lib import format as npy

from agp.kernels import KERNELS
from agp.persistence import FORMAT_NAME, PARAM_PREFIX, READABLE_VERSIONS, npy_problem
from counting.core.errors import ModelFileError
from counting.data.imaging import MAX_SOURCE_PIXELS
from counting.features.tiles import MAX_GRID_SIDE  # the same bound as --grid

__all__ = [
    "MAX_CENTERS",
    "MAX_FEATURES",
    "MAX_GRID_SIDE",
    "MAX_METADATA_BYTES",
    "MAX_MODEL_BYTES",
    "check_archive",
    "check_metadata",
    "check_regressor",
]

MAX_FEATURES = 1 << 20  # descriptor dimensions (the backbones give 1000 or 1280-2048)
MAX_CENTERS = 1 << 20
MAX_OUTPUTS = 10_000
# All arrays of a model together, uncompressed. The shipped models hold under 1 MB of them; a
# full kernel on 2048-d descriptors with 25 centres takes 840 MB. Past this a file is refused
# before it is read rather than loaded into memory.
MAX_MODEL_BYTES = 1 << 30
# The JSON metadata entry, stored as UTF-32 (4 bytes a character): the largest shipped one (a conv
# density head's weights in base64) takes 6 MB.
MAX_METADATA_BYTES = 64 << 20


class _Problem(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")


class _Line(_Problem):
    """A problem stated as a whole line (the field is named inside it)."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)


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
        unknown = _check_metadata(metadata, n_outputs)
    except _Problem as problem:
        raise ModelFileError(f"{source}: {problem}") from None
    _warn_unknown(unknown, source)


def _mapping(value: Any, field: str, optional: bool = True) -> Mapping[str, Any]:
    if value is None and optional:
        return {}
    if not isinstance(value, Mapping):
        raise _Problem(field, f"expected an object, found {type(value).__name__}")
    return value


# The counting metadata's top-level fields (CountingModel.metadata writes them); others are ignored, with a warning.
# The head sections ("density_head", ...) are each registered head kind's (counting.heads.registry.head_sections),
# added where the fields are checked: a new kind's section needs no line here.
_COUNTING_FIELDS = (
    "kind",
    "format_version",
    "counting_version",
    "backbone",
    "preprocessing",
    "grid",
    "layout",
    "class_names",
    "multiclass",
    "interval",
    "dataset",
    "training",
    "history",
    "validation_metrics",
    "test_metrics",
    "descriptor",
    "count_offset",
    "correction_weight",
    # counting.heads.familiarity (checked where it is read, Familiarity.from_document)
    "familiarity",
    # counting.heads.crowd.sparse_gate (checked where it is read, SparseGate.from_document)
    "sparse_gate",
)


def _check_metadata(metadata: Mapping[str, Any], n_outputs: int) -> list[str]:
    """Raises _Problem; returns the top-level field names this version does not know."""
    from counting.features.backbones import BACKBONES, RUNTIMES
    from counting.features.backbones.limits import MAX_INPUT_SIZE
    from counting.features.layouts import LAYOUTS

    # A bool or a version below 1 would pass the reader's "not newer" test and each per-version rule.
    _integer(metadata.get("format_version"), "format_version", 1, 1 << 20)
    # Fields no other check covers (the count offset's and the heads' are checked where they are read).
    _check_fields(metadata, {"counting_version": _TEXT, "layout": _or_null(_one_of(LAYOUTS))}, "")
    backbone = _mapping(metadata.get("backbone"), "backbone", optional=False)
    _check_fields(backbone, {"runtime": _or_null(_one_of(RUNTIMES))}, "backbone.")
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
    _check_fields(preprocessing, {"roi": _BOOL}, "preprocessing.")
    masked = preprocessing.get("roi_mask") is not None
    if preprocessing.get("roi", masked) != masked:
        # Counting over the whole frame while the file says "ROI" (or the reverse) would mislead.
        raise _Problem("preprocessing.roi", f"{preprocessing['roi']} does not match the ROI mask recorded")

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
        _check_interval(interval, n_outputs, "interval.")
        routes = interval.get("by_route")
        if routes is not None:
            for name, record in _mapping(routes, "interval.by_route").items():
                route = _mapping(record, f"interval.by_route.{name}")
                if "by_route" in route:
                    raise _Problem(f"interval.by_route.{name}", "a route's interval has routes of its own")
                _check_interval(route, n_outputs, f"interval.by_route.{name}.")
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
    from counting.heads.registry import head_sections

    known = (*_COUNTING_FIELDS, *head_sections())
    return [name for name in metadata if name not in known]


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
    """Target transform and per-class gate thresholds (counting.heads.multiclass)."""
    from counting.heads.multiclass import TARGET_TRANSFORMS

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


# ------------------------------------------------------------------ the archive, before any array is read
# A field's rule: a test of its JSON value, and what the one-line error says it should be.
Rule = tuple[Callable[[Any], bool], str]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integers(low: int, high: int | None = None) -> Rule:
    top = "" if high is None else f" to {high}"
    return (
        lambda value: _is_int(value) and low <= value and (high is None or value <= high)
    ), f"an integer from {low}{top}"


def _numbers(test: Callable[[float], bool], text: str) -> Rule:
    return (lambda value: _is_number(value) and test(value)), text


def _one_of(choices: Sequence[Any]) -> Rule:
    # By type too: JSON's true is not 1, and 1.0 is not the format version 1.
    return (
        lambda value: any(type(value) is type(choice) and value == choice for choice in choices),
        "one of " + ", ".join(map(str, choices)),
    )


def _or_null(rule: Rule) -> Rule:
    return (lambda value: value is None or rule[0](value)), f"{rule[1]} or null"


def _list_of(rule: Rule, text: str) -> Rule:
    return (lambda value: isinstance(value, list) and bool(value) and all(map(rule[0], value))), text


_OBJECT: Rule = (lambda value: isinstance(value, dict), "an object")
_TEXT: Rule = (lambda value: isinstance(value, str), "a string")
_BOOL: Rule = (lambda value: isinstance(value, bool), "true or false")
_AT_LEAST_0 = _numbers(lambda value: value >= 0, "a number from 0")
_ABOVE_0 = _numbers(lambda value: value > 0, "a number above 0")
_HISTORY: Rule = (
    lambda value: (
        isinstance(value, dict)
        and all(
            isinstance(values, list)
            and all(isinstance(item, (int, float)) and not isinstance(item, bool) for item in values)
            for values in value.values()
        )
    ),
    "an object of lists of numbers",
)
# What AGPRegressor.from_state reads without a default (the format's name and version: agp's reader).
_AGP_REQUIRED = (
    "format",
    "format_version",
    "hyper_parameters",
    "n_features_in",
    "y_ndim",
    "lengthscale",
    "noise",
    "best_epoch",
    "history",
)


@functools.cache
def _agp_fields() -> dict[str, Rule]:
    """The regressor's metadata (``agp.persistence``'s document), field by field, in the order checked."""
    return {
        "format": _one_of((FORMAT_NAME,)),
        "format_version": _one_of(READABLE_VERSIONS),
        "kernel": _one_of(KERNELS),
        "hyper_parameters": _OBJECT,
        "n_features_in": _integers(1, MAX_FEATURES),
        "n_outputs": _integers(1, MAX_OUTPUTS),
        "y_ndim": _one_of((1, 2)),
        "standardisation": _OBJECT,
        "lengthscale": _AT_LEAST_0,
        "noise": _AT_LEAST_0,
        "mean_penalty": _or_null(_AT_LEAST_0),
        "best_epoch": _integers(0),
        "history": _HISTORY,
        "user_metadata": _OBJECT,
    }


@functools.cache
def _hyper_fields() -> dict[str, Rule]:
    """``hyper_parameters``: what ``AGPRegressor``'s own parameter constraints allow."""
    from agp.centers import CENTER_METHODS
    from agp.estimator import KERNEL_ALIASES
    from agp.mean import MEAN_FUNCTIONS
    from agp.optimizers import DEFAULT_LEARNING_RATES, LR_SCHEDULES

    validation = (
        lambda value: value is None or _integers(0)[0](value) or (_is_number(value) and 0 <= value < 1),
        "null, a count of rows from 0 or a fraction below 1",
    )
    return {
        "n_centers": _integers(1, MAX_CENTERS),
        "kernel": _one_of((*KERNELS, *KERNEL_ALIASES)),
        "rank": _integers(1, MAX_FEATURES),
        "center_method": _one_of(CENTER_METHODS),
        "optimizer": _one_of(tuple(DEFAULT_LEARNING_RATES)),
        "learning_rate": _or_null(_ABOVE_0),
        "warmup_steps": _integers(0),
        "lr_schedule": _one_of(LR_SCHEDULES),  # written only when not "constant"
        "batch_size": _integers(1),
        "momentum": _numbers(lambda value: 0 <= value < 1, "a number from 0 to below 1"),
        "max_epochs": _integers(0),
        "reg": _AT_LEAST_0,
        "noise": _or_null(_AT_LEAST_0),
        "noise_grid": _list_of(_AT_LEAST_0, "a list of numbers from 0"),
        "lengthscale_grid": _or_null(_list_of(_ABOVE_0, "a list of numbers above 0")),
        "mean": _one_of(MEAN_FUNCTIONS),
        "validation_fraction": validation,
        "n_validation": validation,  # its name in format versions 1 and 2
        "validation_loss": _one_of(("mse", "huber")),
        "random_state": _or_null(_integers(0, 2**32 - 1)),
        "verbose": (lambda value: isinstance(value, bool) or (_is_int(value) and value >= 0), "true, false or a level"),
    }


def _check_interval(interval: Mapping[str, Any], n_outputs: int, prefix: str) -> None:
    """One interval record (the model's, or one route's of its ``by_route``)."""
    from counting.heads.uncertainty import SCALES, ConformalInterval

    _number(interval.get("level"), prefix + "level", 0.0, 1.0)
    if not 0.0 < float(interval["level"]) < 1.0:
        raise _Problem(prefix + "level", f"{interval['level']} must lie strictly between 0 and 1")
    quantile = interval.get("quantile")
    values = quantile if isinstance(quantile, list) else [quantile]
    if isinstance(quantile, list) and len(quantile) not in (1, n_outputs):
        raise _Problem(prefix + "quantile", f"{len(quantile)} values for {n_outputs} outputs")
    for value in values:
        if value is not None:  # null: an infinite quantile (too few calibration samples)
            _number(value, prefix + "quantile", 0.0)
    if interval.get("lower_bound") is not None:
        # A floor under the low ends (counts are not negative): above 0 it would lift a low end
        # over its count and its high end.
        _number(interval["lower_bound"], prefix + "lower_bound", high=0.0)
    if "n_calibration" in interval:
        _integer(interval["n_calibration"], prefix + "n_calibration", 0, 1 << 40)
    rules = {
        "method": _one_of((ConformalInterval.method,)),
        "scale": _one_of(SCALES),
        "by_route": _OBJECT,
        "min_high": _AT_LEAST_0,
        "class_groups": _list_of(_integers(0), "a list of class group numbers"),
        "calibrated_on": _TEXT,
    }
    _check_fields(interval, rules, prefix)


def _check_fields(
    section: Mapping[str, Any], rules: Mapping[str, Rule], prefix: str, required: Sequence[str] = ()
) -> list[str]:
    """Each field of ``section`` against its rule; returns the names no rule knows (prefixed)."""
    for name, (valid, expected) in rules.items():
        if name not in section:
            if name in required:
                raise _Line(f"metadata field {prefix + name!r} is missing")
        elif not valid(section[name]):
            raise _Line(f"metadata field {prefix + name!r} is {section[name]!r:.60}; expected {expected}")
    return [prefix + name for name in section if name not in rules]


def _warn_unknown(names: Sequence[str], source: str) -> None:
    if names:
        listed = ", ".join(repr(name) for name in names[:5]) + (", ..." if len(names) > 5 else "")
        warnings.warn(
            f"{source}: ignored metadata field{'s' * (len(names) > 1)} {listed:.200}, unknown to this version of counting",
            UserWarning,
            stacklevel=3,
        )


class _Member(NamedTuple):
    """A member's name in the archive and what its ``.npy`` header declares."""

    file: str
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def check_archive(path: str | Path) -> None:
    """Refuse a model file whose members are not what its metadata says, before reading any array.

    Reads the ``.npy`` headers and the JSON metadata only (at most :data:`MAX_METADATA_BYTES`);
    a file that is not an ``.npz`` at all is left to agp's reader, which says so.
    """
    source = str(path)
    if not zipfile.is_zipfile(path):
        return
    try:
        with zipfile.ZipFile(path) as archive:
            members = _read_headers(archive)
            document = _read_document(archive, members.pop("metadata", None))
            unknown = _check_fields(document, _agp_fields(), "", _AGP_REQUIRED)
            unknown += _check_fields(
                document["hyper_parameters"], _hyper_fields(), "hyper_parameters.", ("noise_grid",)
            )
            _check_members(document, members)
    except _Problem as problem:
        raise ModelFileError(f"{source}: not a counting model file ({problem})") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as error:
        # A damaged zip, an unsupported compression, an encrypted member.
        raise ModelFileError(f"{source}: not a counting model file (damaged archive: {_first_line(error)})") from None
    _warn_unknown(unknown, source)


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _read_headers(archive: zipfile.ZipFile) -> dict[str, _Member]:
    """Every member's ``.npy`` header, checked against its uncompressed size; no array data is read."""
    members: dict[str, _Member] = {}
    for info in archive.infolist():
        name = info.filename.removesuffix(".npy")
        if name == info.filename or name in members:
            # np.load would hand back a non-.npy member as its whole bytes; a repeated name is ambiguous.
            raise _Line(
                f"member {info.filename!r:.80} is {'not an .npy array' if name == info.filename else 'stored twice'}"
            )
        try:
            with archive.open(info) as stream:
                version = npy.read_magic(stream)
                if version not in ((1, 0), (2, 0)):  # 3.0 only adds non-Latin-1 field names: never a model's
                    raise _Line(
                        f"member {info.filename} is .npy version {version[0]}.{version[1]}; expected 1.0 or 2.0"
                    )
                read_header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
                shape, _, dtype = read_header(stream)
                header_size = stream.tell()
        except (ValueError, SyntaxError, TokenError) as error:
            raise _Line(f"member {info.filename} has no valid .npy header ({npy_problem(error)})") from None
        if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
            raise _Line(f"member {info.filename} declares dtype {dtype} (Python objects or records), never read")
        member = _Member(info.filename, shape, dtype)
        # What numpy would allocate and read is the header's shape: a header that lies about the
        # data behind it (either way) is refused here, so the size checks below bound the reading.
        if info.file_size - header_size != member.nbytes:
            raise _Line(
                f"member {info.filename} declares shape {shape} of {dtype} ({member.nbytes} bytes) but holds "
                f"{info.file_size - header_size} bytes"
            )
        members[name] = member
    return members


def _read_document(archive: zipfile.ZipFile, member: _Member | None) -> dict[str, Any]:
    """The JSON metadata entry (bounded), parsed."""
    if member is None:
        raise _Line("no metadata entry")
    if member.dtype.kind != "U" or member.shape != ():
        raise _Line(f"member metadata.npy declares {member.dtype} of shape {member.shape}; expected one JSON string")
    if member.nbytes > MAX_METADATA_BYTES:
        raise _Line(
            f"member metadata.npy holds {member.nbytes:,} bytes, more than the {MAX_METADATA_BYTES:,} "
            "of metadata a model file may have"
        )
    try:
        with archive.open(member.file) as stream:
            text = str(npy.read_array(stream, allow_pickle=False))
    except ValueError as error:
        raise _Line(f"member metadata.npy is damaged ({_first_line(error)})") from None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:  # RecursionError: nested beyond Python's stack
        raise _Line(f"metadata is not valid JSON ({_first_line(error)})") from None
    if not isinstance(document, dict):
        raise _Line(f"metadata is a JSON {type(document).__name__}, not an object")
    return document


def _kernel_shapes(kind: str, log_scale: bool, rank: int, n_centers: int, n_features: int) -> dict[str, tuple]:
    """The parameter arrays each kernel kind stores (the table of ``agp.kernels``' docstring)."""
    return {
        "center": {"log_lengthscale": (1,)},
        "univariate": {("log_lengthscale" if log_scale else "lengthscale"): (n_centers,)},
        "diagonal": {"log_precision": (n_centers, n_features)},
        "lowrank": {"log_precision": (n_centers, n_features), "factor": (n_centers, n_features, rank)},
        "full": {"precision": (n_centers, n_features, n_features)},
    }[kind]


def _check_members(document: Mapping[str, Any], members: Mapping[str, _Member]) -> None:
    """Each array's declared dtype and shape against the metadata (centres: alpha's rows), then the total size."""
    from agp import AGPRegressor
    from agp.estimator import KERNEL_ALIASES, MAX_VALIDATION_ROWS

    given = document["hyper_parameters"]
    hyper = AGPRegressor().get_params() | dict(given)  # AGPRegressor.from_state's defaults for what is not given
    named = hyper["kernel"]
    # The kernel the estimator rebuilds (from_state): "multivariate" meant diagonal up to version 2.
    kind = (
        "diagonal" if named == "multivariate" and document["format_version"] <= 2 else KERNEL_ALIASES.get(named, named)
    )
    if document.get("kernel", kind) != kind:
        raise _Line(f"metadata field 'kernel' is {document['kernel']!r} but hyper_parameters.kernel makes it {kind!r}")
    alpha = members.get("alpha")
    if alpha is None:
        raise _Line("member alpha.npy is missing")
    if len(alpha.shape) != 2 or not 1 <= alpha.shape[0] <= MAX_CENTERS:
        raise _Line(
            f"member alpha.npy declares shape {alpha.shape}; expected (n_centers, n_outputs), 1 to {MAX_CENTERS} centres"
        )
    n_centers = alpha.shape[0]
    n_outputs = document.get("n_outputs", alpha.shape[1])
    n_features = document["n_features_in"]
    validation = given["n_validation"] if "n_validation" in given else hyper["validation_fraction"]  # as from_state
    expected = {
        "alpha": (n_centers, n_outputs),
        "centers_standardised": (n_centers, n_features),
        "centers": (n_centers, n_features),
        "center_targets": (n_centers, n_outputs),
        "x_mean": (n_features,),
        "x_scale": (n_features,),
        "y_mean": (n_outputs,),
        "mean_coef": (n_features, n_outputs),
        # A count of rows is exact; a fraction gives at most MAX_VALIDATION_ROWS (None below).
        "validation_indices": None if isinstance(validation, float) else (validation or 0,),
    }
    log_scale = hyper["optimizer"] != "sgd"  # AGPRegressor._make_kernel: SGD trains plain lengthscales
    for name, shape in _kernel_shapes(kind, log_scale, hyper["rank"], n_centers, n_features).items():
        expected[PARAM_PREFIX + name] = shape
    for name, shape in expected.items():
        member = members.get(name)
        if member is None:
            continue  # a missing array: AGPRegressor.from_state names it, having read the others
        dtype = member.dtype
        if name == "validation_indices" and dtype.kind not in "iu":
            raise _Line(f"{name}: expected integers, member {member.file} declares {dtype}")
        if name != "validation_indices" and (dtype.kind != "f" or dtype.itemsize != 8):
            raise _Line(f"{name}: expected numbers (float64), member {member.file} declares {dtype}")
        if shape is None:  # validation rows of a fraction
            if len(member.shape) != 1 or member.shape[0] > MAX_VALIDATION_ROWS:
                raise _Line(
                    f"member {member.file} declares shape {member.shape}; expected at most {MAX_VALIDATION_ROWS} rows"
                )
        elif member.shape != shape:
            basis = " (n_centers from alpha.npy)" if name != "alpha" and n_centers in shape else ""
            raise _Line(f"member {member.file} declares shape {member.shape} but the metadata says {shape}{basis}")
    extra = sorted(set(members) - set(expected))
    if extra:
        raise _Line(f"member {members[extra[0]].file} is not an array of a {kind}-kernel model")
    total = sum(member.nbytes for member in members.values())
    if total > MAX_MODEL_BYTES:
        raise _Line(
            f"its arrays take {total:,} bytes uncompressed, more than the {MAX_MODEL_BYTES:,} a model file may hold"
        )
