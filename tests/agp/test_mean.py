"""Explicit mean functions: the linear mean captures linear trends, the AGP models the rest."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.linear_model import RidgeCV

from agp import AGPRegressor, metrics
from agp.mean import RIDGE_ALPHAS


@pytest.fixture(scope="module")
def linear_data():
    """An exactly linear function of 20 inputs: 25 RBF centers alone cannot represent it."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(400, 20)) * rng.uniform(0.5, 3.0, 20) + rng.normal(size=20)
    y = X @ rng.normal(size=20) + 7.0
    return X[:300], y[:300], X[300:], y[300:]


def test_linear_mean_recovers_an_exactly_linear_function(linear_data) -> None:
    X, y, X_test, y_test = linear_data
    linear = AGPRegressor(mean="linear", max_epochs=5, random_state=0).fit(X, y)
    constant = AGPRegressor(mean="constant", max_epochs=5, random_state=0).fit(X, y)
    linear_error = metrics.nrmse(y_test, linear.predict(X_test), y)
    assert linear_error < 1e-3, linear_error
    assert linear_error < 0.05 * metrics.nrmse(y_test, constant.predict(X_test), y)
    # GCV picks the smallest penalty on noise-free data; the slope is the true one in input units.
    assert linear.mean_penalty_ == pytest.approx(RIDGE_ALPHAS[0])
    assert constant.mean_penalty_ is None and not np.any(constant.mean_coef_)


def test_linear_mean_is_ridgecv_on_the_non_validation_rows(linear_data) -> None:
    X, y, _, _ = linear_data
    y = y + np.random.default_rng(0).normal(scale=3.0, size=len(y))  # noise makes GCV pick a real penalty
    model = AGPRegressor(kernel="center", mean="linear", validation_fraction=60, random_state=1).fit(X, y)
    rest = np.setdiff1d(np.arange(len(X)), model.validation_indices_)
    Xs = (X[rest] - X[rest].mean(axis=0)) / X[rest].std(axis=0)
    ridge = RidgeCV(alphas=RIDGE_ALPHAS).fit(Xs, y[rest])
    assert model.mean_penalty_ == pytest.approx(ridge.alpha_) and model.mean_penalty_ > RIDGE_ALPHAS[0]
    np.testing.assert_allclose(model.mean_coef_[:, 0], ridge.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(model.y_mean_, [ridge.intercept_])


def test_explicit_center_targets_are_in_target_units(linear_data) -> None:
    X, y, _, _ = linear_data
    centers = X[:6] + 0.1
    targets = np.arange(6.0) * 3.0 - 4.0  # unrelated to the linear trend on purpose
    model = AGPRegressor(
        kernel="center", mean="linear", centers=centers, center_targets=targets, noise=0.0, random_state=0
    ).fit(X, y)
    np.testing.assert_allclose(model.center_targets_[:, 0], targets, atol=1e-9)
    # With σ² = 0 the GP interpolates its centers: mean function plus residual gives the targets.
    np.testing.assert_allclose(model.predict(centers), targets, atol=1e-6)


def test_multi_output_linear_mean(linear_data) -> None:
    X, y, X_test, y_test = linear_data
    model = AGPRegressor(mean="linear", max_epochs=2, random_state=0).fit(X, np.column_stack([y, -2 * y]))
    prediction = model.predict(X_test)
    assert prediction.shape == (len(X_test), 2) and model.mean_coef_.shape == (20, 2)
    np.testing.assert_allclose(prediction, np.column_stack([y_test, -2 * y_test]), rtol=1e-3, atol=1e-2)


def test_unknown_mean_is_rejected(linear_data) -> None:
    X, y, _, _ = linear_data
    with pytest.raises(ValueError, match="'mean' parameter of AGPRegressor must be a str among"):
        AGPRegressor(mean="quadratic").fit(X, y)


@pytest.mark.parametrize("kind", ["center", "univariate"])
def test_linear_mean_round_trip(tmp_path, linear_data, kind: str) -> None:
    X, y, X_test, _ = linear_data
    model = AGPRegressor(kernel=kind, mean="linear", max_epochs=3, random_state=0).fit(X, y)
    model.save(tmp_path / "m.npz")
    loaded = AGPRegressor.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded.predict(X_test), model.predict(X_test))
    np.testing.assert_array_equal(loaded.mean_coef_, model.mean_coef_)
    assert loaded.mean == "linear" and loaded.mean_penalty_ == model.mean_penalty_


def _rewrite(path, change_document, drop=()) -> None:
    with np.load(path, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files if name not in drop}
    document = json.loads(str(arrays["metadata"]))
    change_document(document)
    arrays["metadata"] = np.array(json.dumps(document))
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def test_version_1_files_load_as_constant_mean_models(tmp_path, linear_data) -> None:
    X, y, X_test, _ = linear_data
    model = AGPRegressor(mean="constant", max_epochs=2, random_state=0).fit(X, y)
    path = tmp_path / "old.npz"
    model.save(path)

    def as_version_1(document: dict) -> None:
        document["format_version"] = 1
        del document["hyper_parameters"]["mean"]
        del document["mean_penalty"]

    _rewrite(path, as_version_1, drop=("mean_coef",))
    loaded = AGPRegressor.load(path)
    assert loaded.mean == "constant" and loaded.mean_penalty_ is None
    np.testing.assert_array_equal(loaded.predict(X_test), model.predict(X_test))


def test_version_2_file_without_its_mean_fails_clearly(tmp_path, linear_data) -> None:
    X, y, _, _ = linear_data
    path = tmp_path / "broken.npz"
    AGPRegressor(kernel="center", mean="linear", random_state=0).fit(X, y).save(path)
    _rewrite(path, lambda document: None, drop=("mean_coef",))
    with pytest.raises(ValueError, match=r"broken\.npz: incomplete agp-model file \(missing mean_coef\)"):
        AGPRegressor.load(path)
