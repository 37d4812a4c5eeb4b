"""scikit-learn estimator contract."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.preprocessing import StandardScaler, scale
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import check_estimator

from agp import AGPRegressor
from agp.estimator import EXPECTED_FAILED_CHECKS


def _check_results(estimator: AGPRegressor) -> list[dict]:
    """Every scikit-learn estimator check, with the failures the estimator declares."""
    return check_estimator(estimator, on_fail=None, expected_failed_checks=EXPECTED_FAILED_CHECKS)


def _failures(results: list[dict]) -> list[str]:
    return [f"{result['check_name']}: {result['exception']!r}" for result in results if result["status"] == "failed"]


@pytest.mark.filterwarnings("ignore:n_centers=25 is more than")
def test_check_estimator_passes_with_default_parameters() -> None:
    """Every scikit-learn estimator check, on ``AGPRegressor()`` as a user would construct it.

    Some checks fit 10-20 samples: the validation fraction then turns itself off and the 25
    default centers are reduced to the rows available (with a warning).
    """
    results = _check_results(AGPRegressor())
    assert not _failures(results), "\n".join(_failures(results))
    # Each declared failure ran and failed ("xfail"): one that began to pass would be "passed".
    status = {result["check_name"]: result["status"] for result in results}
    assert {name: status.get(name) for name in EXPECTED_FAILED_CHECKS} == dict.fromkeys(EXPECTED_FAILED_CHECKS, "xfail")


@pytest.mark.filterwarnings("ignore:n_centers=25 is more than")
def test_declared_failures_have_a_reason_and_really_fail() -> None:
    """The expected failures are real: each names a check this scikit-learn has, gives its
    reason, and that check, run alone on ``AGPRegressor()`` without the declaration, fails."""
    assert EXPECTED_FAILED_CHECKS, "nothing declared"
    for name, reason in EXPECTED_FAILED_CHECKS.items():
        assert isinstance(reason, str) and "sample_weight" in reason and len(reason) > 40, (name, reason)
        check = getattr(estimator_checks, name)  # a renamed check would leave the declaration dead
        with pytest.raises(AssertionError, match="sample_weight"):
            check("AGPRegressor", AGPRegressor())


def test_check_estimator_passes_for_a_trained_matrix_kernel() -> None:
    results = _check_results(AGPRegressor(kernel="diagonal", n_centers=8, validation_fraction=1, max_epochs=20))
    assert not _failures(results), "\n".join(_failures(results))


def test_parameter_constraints_reject_every_invalid_type_and_value() -> None:
    # scikit-learn's own check, run on its own estimators: it builds invalid values from each
    # declared constraint and expects fit to raise InvalidParameterError naming the parameter.
    from sklearn.utils.estimator_checks import check_param_validation

    check_param_validation("AGPRegressor", AGPRegressor(max_epochs=1))


def test_parameters_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        AGPRegressor(25)  # type: ignore[misc]


def test_more_centers_than_rows_warns_and_uses_the_rows() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    with pytest.warns(UserWarning, match="n_centers=25 is more than the 30 rows|n_centers=40 is more than the 30 rows"):
        model = AGPRegressor(n_centers=40, max_epochs=2, random_state=0).fit(X, X[:, 0])
    assert model.centers_.shape == (30, 2) and len(model.validation_indices_) == 0
    assert np.all(np.isfinite(model.predict(X)))


@pytest.mark.parametrize(
    ("n_samples", "fraction", "expected"),
    [
        (39, 0.1, 0),
        (40, 0.1, 20),
        (600, 0.1, 60),
        (1_000_000, 0.1, 10_000),
        (600, 0.5, 300),
        (600, None, 0),
        (600, 0, 0),
    ],
)
def test_validation_fraction_has_a_floor_and_a_cap(n_samples: int, fraction, expected: int) -> None:
    assert AGPRegressor(validation_fraction=fraction)._validation_count(n_samples) == expected


def test_default_model_passes_the_regression_score_check() -> None:
    # The data of sklearn's check_regressors_train (make_regression, 1 informative of 10 features).
    from sklearn.datasets import make_regression

    X, y = make_regression(n_samples=200, n_features=10, n_informative=1, bias=5.0, noise=20, random_state=42)
    X, y = StandardScaler().fit_transform(X), scale(y)
    assert AGPRegressor(random_state=0).fit(X, y).score(X, y) > 0.5


def test_clone_and_cross_validation() -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (300, 3))
    y = np.sin(X[:, 0]) + X[:, 1]
    model = AGPRegressor(n_centers=10, validation_fraction=20, max_epochs=5, random_state=0)
    assert clone(model).get_params() == model.get_params()
    scores = cross_val_score(model, X, y, cv=3)
    assert np.all(scores > 0.9), scores


@pytest.mark.parametrize("bad", [np.array([[1.0, np.nan]]), np.array([[np.inf, 1.0]])])
def test_predict_rejects_non_finite_input(bad) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    model = AGPRegressor(n_centers=5, validation_fraction=10, kernel="center", random_state=0).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="NaN|infinity"):
        model.predict(bad)


def test_docstring_examples_run() -> None:
    import doctest

    import agp.estimator

    result = doctest.testmod(agp.estimator, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 10 and result.failed == 0, result
