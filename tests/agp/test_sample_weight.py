"""``AGPRegressor.fit(..., sample_weight=...)``: each row's squared error counted with its weight."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from agp import AGPRegressor
from agp.kernels import make_kernel
from agp.objective import CenterSystem, loss_and_gradient


@pytest.mark.parametrize("kind", ["univariate", "diagonal", "full"])
def test_a_weight_of_two_in_the_loss_is_the_row_given_twice(kind: str) -> None:
    rng = np.random.default_rng(0)
    kernel = make_kernel(kind)
    centers, X, y = rng.normal(size=(4, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 1))
    system = CenterSystem(kernel, centers, kernel.prepare(centers, centers), rng.normal(size=(4, 1)), 0.05)
    params = kernel.initial_params(1.3, centers, rng)
    weights = np.array([2.0, 1.0, 0.0, 1.0, 0.5, 1.0])
    loss, grads = loss_and_gradient(system, params, kernel.prepare(X, centers), y, 1e-3, weights)
    # the same loss from repeated rows: row 0 twice, row 2 never, row 4 at half weight (its own term halved)
    repeated = [0, 0, 1, 3, 5]
    loss_rep, grads_rep = loss_and_gradient(system, params, kernel.prepare(X[repeated], centers), y[repeated], 1e-3)
    half, half_grads = loss_and_gradient(system, params, kernel.prepare(X[[4]], centers), y[[4]], 0.0)
    assert loss == pytest.approx(loss_rep + 0.5 * half, rel=1e-12)
    for name in grads:
        np.testing.assert_allclose(grads[name], grads_rep[name] + 0.5 * half_grads[name], rtol=1e-10, atol=1e-12)


def test_rows_of_weight_zero_do_not_move_the_fit() -> None:
    rng = np.random.default_rng(1)
    X = rng.uniform(-3, 3, (400, 2))
    y = np.sin(X[:, 0]) + 0.05 * rng.normal(size=400)
    bad = np.arange(400) % 4 == 0
    y_bad = np.where(bad, y + 20.0, y)  # a quarter of the rows are wrong by 20
    params = dict(n_centers=15, max_epochs=5, random_state=0, validation_fraction=0.2)
    X_test = rng.uniform(-3, 3, (200, 2))
    clean = np.sin(X_test[:, 0])
    weighted = AGPRegressor(**params).fit(X, y_bad, sample_weight=np.where(bad, 0.0, 1.0))
    unweighted = AGPRegressor(**params).fit(X, y_bad)
    error_weighted = np.sqrt(np.mean((weighted.predict(X_test) - clean) ** 2))
    error_unweighted = np.sqrt(np.mean((unweighted.predict(X_test) - clean) ** 2))
    assert error_weighted < 0.15 and error_unweighted > 3.0
    # the mean function and the standardisation are the weighted ones
    fit_rows = np.setdiff1d(np.arange(400), weighted.validation_indices_)
    good = fit_rows[~bad[fit_rows]]
    np.testing.assert_allclose(weighted.x_mean_, X[good].mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(weighted.x_scale_, X[good].std(axis=0), rtol=1e-10)


def test_the_constant_mean_is_the_weighted_mean() -> None:
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(100, 2)), rng.normal(size=100)
    weights = rng.uniform(0, 2, 100)
    model = AGPRegressor(kernel="center", mean="constant", n_centers=5, random_state=0).fit(X, y, sample_weight=weights)
    fit_rows = np.setdiff1d(np.arange(100), model.validation_indices_)
    np.testing.assert_allclose(model.y_mean_, [np.average(y[fit_rows], weights=weights[fit_rows])], rtol=1e-12)


def test_no_weight_left_to_fit_on_is_one_clear_error() -> None:
    X = np.random.default_rng(3).normal(size=(30, 2))
    with pytest.raises(ValueError, match="at least one"):
        AGPRegressor(n_centers=3).fit(X, X[:, 0], sample_weight=np.zeros(30))
    with pytest.raises(ValueError, match="sample_weight"):
        AGPRegressor(n_centers=3).fit(X, X[:, 0], sample_weight=-np.ones(30))


def test_huber_validation_loss_is_twice_hubers_loss_with_a_mad_scale() -> None:
    rng = np.random.default_rng(4)
    X = rng.uniform(-2, 2, (300, 2))
    y = X[:, 0] ** 2 + 0.1 * rng.standard_t(1.5, size=300)  # heavy tails, as flight delays
    model = AGPRegressor(n_centers=10, max_epochs=0, validation_fraction=100, validation_loss="huber", random_state=0)
    model.fit(X, y)
    rows = model.validation_indices_
    residual = model.predict(X[rows]) - y[rows]  # the grid start: the model kept at max_epochs=0
    delta = 1.345 * 1.4826 * np.median(np.abs(residual - np.median(residual)))
    size = np.abs(residual)
    expected = np.mean(np.where(size <= delta, size**2, 2 * delta * size - delta**2))
    assert model.history_["val_loss"][0] == pytest.approx(expected, rel=1e-9)
    assert expected < np.mean(residual**2) / 2  # the outliers weigh linearly, not squared


@pytest.mark.parametrize(
    ("weights", "problem"),
    [
        (lambda n: np.where(np.arange(n) == 3, 1e30, 1.0), "1e+30 times the smallest non-zero one"),
        (lambda n: np.full(n, 1e200), "the largest weight is 1e+200 (row 0), above 1e+100"),
    ],
    ids=["one-row-1e30-times-heavier", "all-1e200"],
)
def test_extreme_weights_are_one_line_value_error_not_runtime_warnings(weights, problem: str) -> None:
    # Were: a fit that "worked" after dozens of multi-line RuntimeWarnings (divide by zero in
    # RidgeCV's leave-one-out, overflow in Adam's squared gradients).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=60)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError) as caught:
            AGPRegressor(n_centers=5, max_epochs=3, random_state=0).fit(X, y, sample_weight=weights(60))
    message = str(caught.value)
    assert message.startswith("sample_weight: ") and problem in message and "\n" not in message


def test_unequal_but_workable_weights_still_fit_without_warnings() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=60)
    weights = np.where(np.arange(60) == 3, 1e10, 1.0)
    weights[5] = 0.0  # zeros do not count as the smallest weight
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = AGPRegressor(n_centers=5, max_epochs=3, random_state=0).fit(X, y, sample_weight=weights)
    assert np.isfinite(model.predict(X)).all()
