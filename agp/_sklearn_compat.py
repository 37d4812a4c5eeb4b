"""The scikit-learn names agp uses that are private or version-dependent, each with a fallback.

agp supports scikit-learn from SKLEARN_MINIMUM up to, not including, SKLEARN_UNTESTED, as
pyproject.toml declares (tests/agp/test_sklearn_version_range.py keeps the two in step, and
scripts/check_sklearn_floor.py runs tests/agp on the lowest releases). The floor is 1.7:
``mean="trees"`` hands its validation rows to ``HistGradientBoostingRegressor.fit(X_val=...)``
(new in 1.7), and 1.6 made ``validate_data`` public and introduced ``__sklearn_tags__`` and
``check_estimator``'s ``expected_failed_checks``. Below it, importing agp's estimator fails here
with one line that says so, instead of a missing name deep inside scikit-learn.

The private names below may move or change signature in any release, so each has a local
version used when the import fails:

- ``sklearn.base._fit_context`` and ``sklearn.utils._param_validation`` (the declarative
  ``_parameter_constraints`` checked when ``fit`` starts): the constraint types agp declares and
  the check, raising ``InvalidParameterError`` (a ValueError and a TypeError) with scikit-learn's
  message form ("The 'rank' parameter of AGPRegressor must be an int in the range [1, inf). Got
  0 instead.").
- ``sklearn.utils.validation._check_sample_weight``: shape, finiteness and sign of the weights.

Every other scikit-learn name agp uses is public and imported where it is used.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from numbers import Integral, Number, Real
from typing import Any

import numpy as np
import sklearn
from numpy.typing import ArrayLike

SKLEARN_MINIMUM = (1, 7)
# The first release not tested: pyproject.toml caps scikit-learn below it (see the note there).
SKLEARN_UNTESTED = (1, 10)


def sklearn_release(version: str) -> tuple[int, int]:
    """(major, minor) of a scikit-learn version string such as ``"1.6.1"`` or ``"1.10.dev0"``."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise ImportError(f"agp cannot read scikit-learn's version {version!r}")
    return int(match[1]), int(match[2])


def _release_text(release: tuple[int, int]) -> str:
    return ".".join(map(str, release))


SUPPORTED_RANGE = f">={_release_text(SKLEARN_MINIMUM)},<{_release_text(SKLEARN_UNTESTED)}"

if sklearn_release(sklearn.__version__) < SKLEARN_MINIMUM:
    raise ImportError(
        f"agp needs scikit-learn {SUPPORTED_RANGE} (HistGradientBoostingRegressor.fit(X_val=...)), found "
        f"{sklearn.__version__}: pip install 'scikit-learn{SUPPORTED_RANGE}'"
    )

# Public since 1.6.
from sklearn.utils.validation import validate_data  # noqa: E402


# ------------------------------------------------------------------ parameter validation fallback
class LocalInvalidParameterError(ValueError, TypeError):
    """A parameter outside its declared constraints (scikit-learn's has both bases too: a wrong
    type and a wrong value are reported alike)."""


class LocalRealNotInt(Real):
    """Real numbers that are not integers: float and its subclasses (NumPy's float64)."""


LocalRealNotInt.register(float)


class LocalInterval:
    """Numbers of ``kind`` between ``left`` and ``right`` (None: unbounded); ``closed`` names the
    ends that belong to it: "left", "right", "both" or "neither"."""

    def __init__(self, kind: type, left: float | None, right: float | None, *, closed: str) -> None:
        if closed not in ("left", "right", "both", "neither"):
            raise ValueError(f"closed must be 'left', 'right', 'both' or 'neither', got {closed!r}")
        self.kind, self.left, self.right, self.closed = kind, left, right, closed

    def is_satisfied_by(self, value: Any) -> bool:
        return isinstance(value, self.kind) and self._in_range(value)

    def _in_range(self, value: Any) -> bool:
        if not isinstance(value, Integral) and np.isnan(value):
            return False
        # An open end stays open at infinity: (0, inf) holds no inf.
        left = -np.inf if self.left is None else self.left
        right = np.inf if self.right is None else self.right
        above_left = value >= left if self.closed in ("left", "both") else value > left
        below_right = value <= right if self.closed in ("right", "both") else value < right
        return bool(above_left and below_right)

    def __str__(self) -> str:
        name = "an int" if self.kind is Integral else "a float"
        # A float range shows float bounds even when given as ints, as scikit-learn's does.
        left = "-inf" if self.left is None else self.left if self.kind is Integral else float(self.left)
        right = "inf" if self.right is None else self.right if self.kind is Integral else float(self.right)
        opening = "[" if self.closed in ("left", "both") else "("
        closing = "]" if self.closed in ("right", "both") else ")"
        return f"{name} in the range {opening}{left}, {right}{closing}"


class LocalStrOptions:
    """One of a set of strings."""

    def __init__(self, options: set[str]) -> None:
        self.options = options

    def is_satisfied_by(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.options

    def __str__(self) -> str:
        return "a str among {" + ", ".join(map(repr, self.options)) + "}"


_RANDOM_SEED = LocalInterval(Integral, 0, 2**32 - 1, closed="both")
_VERBOSITY = LocalInterval(Integral, 0, None, closed="left")


def _satisfies(constraint: Any, value: Any) -> bool:
    """Whether ``value`` meets one entry of a ``_parameter_constraints`` list."""
    if constraint is None:
        return value is None
    if constraint is callable:
        return callable(value)
    if constraint == "array-like":
        has_length = hasattr(value, "__len__") or hasattr(value, "shape") or hasattr(value, "__array__")
        return has_length and not np.isscalar(value)
    if constraint == "random_state":
        return value is None or isinstance(value, np.random.RandomState) or _RANDOM_SEED.is_satisfied_by(value)
    if constraint == "verbose":
        return isinstance(value, (bool, np.bool_)) or _VERBOSITY.is_satisfied_by(value)
    if hasattr(constraint, "is_satisfied_by"):
        return bool(constraint.is_satisfied_by(value))
    raise ValueError(f"agp's parameter check does not know the constraint {constraint!r}")


def _describe(constraint: Any) -> str:
    descriptions = {"array-like": "an array-like", "random_state": "an int, a RandomState instance or None"}
    if constraint is None:
        return "None"
    if constraint is callable:
        return "a callable"
    if constraint == "verbose":
        return "an int >= 0 or a bool"
    return descriptions.get(constraint, str(constraint)) if isinstance(constraint, str) else str(constraint)


def local_validate_parameters(constraints: dict[str, list[Any]], params: dict[str, Any], caller: str) -> None:
    """Raise LocalInvalidParameterError for the first parameter that meets none of its constraints."""
    for name, value in params.items():
        allowed = constraints.get(name)
        if allowed is None or any(_satisfies(constraint, value) for constraint in allowed):
            continue
        texts = [_describe(constraint) for constraint in allowed]
        expected = texts[0] if len(texts) == 1 else f"{', '.join(texts[:-1])} or {texts[-1]}"
        raise LocalInvalidParameterError(
            f"The {name!r} parameter of {caller} must be {expected}. Got {value!r} instead."
        )


def local_fit_context(*, prefer_skip_nested_validation: bool) -> Callable[[Callable], Callable]:
    """Check the estimator's ``_parameter_constraints`` before ``fit`` runs.

    ``prefer_skip_nested_validation`` is accepted and not used: skipping the checks of the
    scikit-learn estimators that agp fits inside is a private setting, and they cost little.
    """

    def decorator(fit_method: Callable) -> Callable:
        @functools.wraps(fit_method)
        def wrapper(estimator: Any, *args: Any, **kwargs: Any) -> Any:
            if not sklearn.get_config().get("skip_parameter_validation", False):
                local_validate_parameters(
                    estimator._parameter_constraints, estimator.get_params(deep=False), type(estimator).__name__
                )
            return fit_method(estimator, *args, **kwargs)

        return wrapper

    return decorator


try:
    from sklearn.base import _fit_context
    from sklearn.utils._param_validation import Interval, InvalidParameterError, RealNotInt, StrOptions

    PARAMETER_VALIDATION = "scikit-learn"
except ImportError:  # moved in a release after the ones tested
    _fit_context = local_fit_context
    InvalidParameterError = LocalInvalidParameterError
    Interval = LocalInterval
    RealNotInt = LocalRealNotInt
    StrOptions = LocalStrOptions
    PARAMETER_VALIDATION = "agp"

fit_context = _fit_context


# ------------------------------------------------------------------ sample weights
def local_check_sample_weight(sample_weight: ArrayLike, n_samples: int) -> np.ndarray:
    """``sample_weight`` as a new float64 array of ``n_samples`` finite, non-negative weights
    (a number: the same weight for every row); a one-line ValueError naming it otherwise."""
    if isinstance(sample_weight, Number):
        weights = np.full(n_samples, sample_weight, dtype=np.float64)
    else:
        try:
            weights = np.array(sample_weight, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(f"sample_weight must hold numbers: {error}") from None
        if weights.ndim != 1:
            raise ValueError("Sample weights must be 1D array or scalar")
        if weights.shape != (n_samples,):
            raise ValueError(f"sample_weight.shape == {weights.shape}, expected {(n_samples,)}!")
    if not np.all(np.isfinite(weights)):
        raise ValueError("Input sample_weight contains NaN or infinity.")
    if np.any(weights < 0):
        raise ValueError("Negative values in data passed to `sample_weight`")
    return weights


def _sklearn_sample_weight_check() -> Callable[..., np.ndarray] | None:
    """scikit-learn's ``_check_sample_weight`` where it exists and takes the keywords agp passes."""
    try:
        from sklearn.utils.validation import _check_sample_weight
    except ImportError:
        return None
    keywords = inspect.signature(_check_sample_weight).parameters
    return _check_sample_weight if {"dtype", "ensure_non_negative"} <= keywords.keys() else None


_SKLEARN_CHECK_SAMPLE_WEIGHT = _sklearn_sample_weight_check()


def check_sample_weight(sample_weight: ArrayLike, X: np.ndarray) -> np.ndarray:
    """Finite, non-negative float64 weights, one per row of ``X``, not all zero; ValueError otherwise."""
    if _SKLEARN_CHECK_SAMPLE_WEIGHT is None:
        weights = local_check_sample_weight(sample_weight, len(X))
    else:
        weights = _SKLEARN_CHECK_SAMPLE_WEIGHT(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
    # Recent scikit-learn (1.9) refuses all-zero weights itself with this message, 1.7 does not:
    # the same answer on every supported release.
    if not np.any(weights):
        raise ValueError("Sample weights must contain at least one non-zero number.")
    return weights


__all__ = [
    "SKLEARN_MINIMUM",
    "SKLEARN_UNTESTED",
    "SUPPORTED_RANGE",
    "PARAMETER_VALIDATION",
    "InvalidParameterError",
    "Interval",
    "RealNotInt",
    "StrOptions",
    "check_sample_weight",
    "fit_context",
    "validate_data",
]
