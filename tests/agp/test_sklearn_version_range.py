"""The scikit-learn range agp declares, and agp/_sklearn_compat.py's fallbacks for private names."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from numbers import Integral, Real
from pathlib import Path

import numpy as np
import pytest
import sklearn
from packaging.requirements import Requirement
from packaging.version import Version
from sklearn.utils._param_validation import Interval, RealNotInt, StrOptions, make_constraint
from sklearn.utils.validation import _check_sample_weight

from agp import _sklearn_compat as compat

REPO = Path(__file__).resolve().parents[2]


def _declared_scikit_learn() -> Requirement:
    with open(REPO / "pyproject.toml", "rb") as file:
        dependencies = tomllib.load(file)["project"]["dependencies"]
    (requirement,) = [Requirement(line) for line in dependencies if Requirement(line).name == "scikit-learn"]
    return requirement


def test_pyproject_declares_the_range_the_compat_module_supports() -> None:
    specifier = _declared_scikit_learn().specifier
    assert {str(spec) for spec in specifier} == {">=1.7", "<1.10"}
    assert compat.SUPPORTED_RANGE == ">=1.7,<1.10"
    assert compat.SKLEARN_MINIMUM == (1, 7) and compat.SKLEARN_UNTESTED == (1, 10)


def test_installed_scikit_learn_is_inside_the_declared_range() -> None:
    # A run on a release outside the range tests something pyproject.toml does not promise.
    assert Version(sklearn.__version__) in _declared_scikit_learn().specifier, sklearn.__version__


@pytest.mark.parametrize(("version", "release"), [("1.7.0", (1, 7)), ("1.10.dev0", (1, 10)), ("2.0rc1", (2, 0))])
def test_sklearn_release_reads_major_and_minor(version: str, release: tuple[int, int]) -> None:
    assert compat.sklearn_release(version) == release


def _run_python(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter on this repository (imports there cannot leak into this one)."""
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


def test_a_scikit_learn_below_the_floor_is_refused_in_one_line() -> None:
    result = _run_python(
        "import sklearn\nsklearn.__version__ = '1.6.1'\n"
        "try:\n    import agp.estimator\nexcept ImportError as error:\n    print(error)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines() == [
        "agp needs scikit-learn >=1.7,<1.10 (HistGradientBoostingRegressor.fit(X_val=...)), found 1.6.1: "
        "pip install 'scikit-learn>=1.7,<1.10'"
    ]


# Makes the private scikit-learn names unimportable, as a release that moved them would, then fits
# with and without a valid parameter set; prints what happened as JSON.
_WITHOUT_PRIVATE_NAMES = """
import json, sys
import numpy as np
import sklearn.base, sklearn.utils.validation
# What agp fits inside, loaded first: their own imports of the names below must still work.
import sklearn.cluster, sklearn.ensemble, sklearn.linear_model, sklearn.mixture
del sklearn.base._fit_context
del sklearn.utils.validation._check_sample_weight
sys.modules["sklearn.utils._param_validation"] = None
from agp import _sklearn_compat as compat
from agp.estimator import AGPRegressor
rng = np.random.default_rng(0)
X = rng.uniform(-2, 2, (120, 2))
y = np.sin(X[:, 0]) + X[:, 1]
weights = rng.uniform(0.5, 2.0, len(X))
model = AGPRegressor(n_centers=6, max_epochs=2, random_state=0).fit(X, y, sample_weight=weights)
errors = {}
for name, value in [("n_centers", 0), ("kernel", "nope"), ("validation_fraction", 1.5), ("callback", 3)]:
    try:
        AGPRegressor(**{name: value}).fit(X, y)
    except compat.InvalidParameterError as error:
        errors[name] = str(error)
try:
    model.fit(X, y, sample_weight=-weights)
except ValueError as error:
    errors["sample_weight"] = str(error)
print(json.dumps({
    "validation": compat.PARAMETER_VALIDATION,
    "local_weights": compat._SKLEARN_CHECK_SAMPLE_WEIGHT is None,
    "prediction": model.predict(X[:5]).tolist(),
    "errors": errors,
}))
"""


def test_agp_fits_the_same_when_scikit_learn_moves_its_private_names() -> None:
    result = _run_python(_WITHOUT_PRIVATE_NAMES)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["validation"] == "agp" and outcome["local_weights"]
    # The fallbacks check; they do not change the fit.
    from agp import AGPRegressor

    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (120, 2))
    y = np.sin(X[:, 0]) + X[:, 1]
    weights = rng.uniform(0.5, 2.0, len(X))
    model = AGPRegressor(n_centers=6, max_epochs=2, random_state=0).fit(X, y, sample_weight=weights)
    np.testing.assert_allclose(outcome["prediction"], model.predict(X[:5]), rtol=1e-12)
    errors = outcome["errors"]
    assert errors["n_centers"] == (
        "The 'n_centers' parameter of AGPRegressor must be an int in the range [1, inf). Got 0 instead."
    )
    assert errors["kernel"].startswith("The 'kernel' parameter of AGPRegressor must be a str among {")
    assert (
        "'validation_fraction' parameter" in errors["validation_fraction"]
        and "Got 1.5" in errors["validation_fraction"]
    )
    assert errors["callback"] == "The 'callback' parameter of AGPRegressor must be a callable or None. Got 3 instead."
    assert errors["sample_weight"] == "Negative values in data passed to `sample_weight`"


_VALUES = [0, 1, 2, 5, -1, 0.0, 0.5, 1.0, 1.5, np.float64(0.25), np.int64(3), np.nan, np.inf, True, None, "a", [1]]


@pytest.mark.parametrize(
    "bounds",
    [
        (Integral, 1, None, "left"),
        (Integral, 0, None, "left"),
        (Real, 0, 1, "left"),
        (Real, 0, None, "neither"),
        (RealNotInt, 0, 1, "left"),
        (Real, -1, 1, "both"),
        (Integral, None, 2, "right"),
    ],
)
def test_local_interval_accepts_what_scikit_learns_does(bounds) -> None:
    kind, left, right, closed = bounds
    local_kind = compat.LocalRealNotInt if kind is RealNotInt else kind
    theirs, ours = (
        Interval(kind, left, right, closed=closed),
        compat.LocalInterval(local_kind, left, right, closed=closed),
    )
    for value in _VALUES:
        assert ours.is_satisfied_by(value) == theirs.is_satisfied_by(value), (bounds, value)
    assert str(ours) == str(theirs)


@pytest.mark.parametrize("constraint", ["array-like", "random_state", "verbose", None, callable])
def test_local_named_constraints_accept_what_scikit_learns_do(constraint) -> None:
    theirs = make_constraint(constraint)
    for value in [*_VALUES, np.zeros(3), (1.0, 2.0), np.random.RandomState(0), 2**32, len, np.bool_(True)]:
        assert compat._satisfies(constraint, value) == theirs.is_satisfied_by(value), (constraint, value)


def test_local_str_options_accept_what_scikit_learns_do() -> None:
    theirs, ours = StrOptions({"adam", "sgd"}), compat.LocalStrOptions({"adam", "sgd"})
    for value in ["adam", "sgd", "Adam", "", 1, None]:
        assert ours.is_satisfied_by(value) == theirs.is_satisfied_by(value), value
    assert str(ours) == str(theirs)


def test_local_check_names_the_first_parameter_out_of_range() -> None:
    constraints = {"rank": [compat.LocalInterval(Integral, 1, None, closed="left")], "mean": [None, "array-like"]}
    compat.local_validate_parameters(constraints, {"rank": 3, "mean": None, "unchecked": object()}, "Est")
    with pytest.raises(compat.LocalInvalidParameterError, match=r"^The 'mean' parameter of Est must be None or an"):
        compat.local_validate_parameters(constraints, {"rank": 3, "mean": "x"}, "Est")
    assert issubclass(compat.LocalInvalidParameterError, ValueError)
    assert issubclass(compat.LocalInvalidParameterError, TypeError)


@pytest.mark.parametrize("weights", [[1.0, 2.0, 0.0], np.array([1, 2, 3]), 2.5, np.float32([0.5, 0.5, 4.0]), (0, 1, 0)])
def test_local_sample_weight_check_returns_what_scikit_learns_does(weights) -> None:
    X = np.zeros((3, 2))
    expected = _check_sample_weight(weights, X, dtype=np.float64, ensure_non_negative=True)
    found = compat.local_check_sample_weight(weights, 3)
    assert found.dtype == np.float64 and found.flags.c_contiguous
    np.testing.assert_array_equal(found, expected)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([1.0, -2.0, 0.0], "Negative values in data passed to `sample_weight`"),
        ([1.0, np.nan, 0.0], "Input sample_weight contains NaN or infinity."),
        ([1.0, np.inf, 0.0], "Input sample_weight contains NaN or infinity."),
        ([1.0, 2.0], "sample_weight.shape == (2,), expected (3,)!"),
        ([[1.0, 2.0, 3.0]], "Sample weights must be 1D array or scalar"),
        (["a", "b", "c"], "sample_weight must hold numbers: could not convert string to float: 'a'"),
    ],
)
def test_local_sample_weight_check_refuses_what_scikit_learns_does(weights, message: str) -> None:
    X = np.zeros((3, 2))
    with pytest.raises(ValueError):
        _check_sample_weight(weights, X, dtype=np.float64, ensure_non_negative=True)
    with pytest.raises(ValueError) as error:
        compat.local_check_sample_weight(weights, 3)
    assert str(error.value) == message


@pytest.mark.parametrize("local", [False, True])
def test_all_zero_weights_are_refused_on_every_supported_release(monkeypatch, local: bool) -> None:
    # scikit-learn 1.9 refuses them in _check_sample_weight, 1.7 does not: agp says it either way.
    if local:
        monkeypatch.setattr(compat, "_SKLEARN_CHECK_SAMPLE_WEIGHT", None)
    X = np.zeros((4, 2))
    with pytest.raises(ValueError, match="^Sample weights must contain at least one non-zero number.$"):
        compat.check_sample_weight(np.zeros(4), X)
    np.testing.assert_array_equal(compat.check_sample_weight([0, 1, 0, 2], X), [0.0, 1.0, 0.0, 2.0])
