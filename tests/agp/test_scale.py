"""Fitting that holds up off small, clean data: solver failures, memory-mapped input, large-n paths."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import agp.objective
from agp import AGPRegressor, metrics
from agp.centers import select_centers


@pytest.fixture(scope="module")
def wavy():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (1200, 3))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.05 * rng.standard_normal(len(X))
    return X, y


def test_a_solver_failure_keeps_the_best_epoch_so_far(wavy, monkeypatch) -> None:
    X, y = wavy
    reference = AGPRegressor(max_epochs=3, random_state=0).fit(X, y)
    real = agp.objective.factor_system
    calls = {"n": 0}
    steps_per_epoch = -(-(len(X) - len(reference.validation_indices_)) // 64)

    def failing(A, *args, **kwargs):
        calls["n"] += 1
        # Epoch 0 solves once; then every step solves once and every epoch end once more.
        if calls["n"] == 1 + 2 * (steps_per_epoch + 1) + 5:
            raise np.linalg.LinAlgError("SVD did not converge")
        return real(A, *args, **kwargs)

    monkeypatch.setattr(agp.objective, "factor_system", failing)
    with pytest.warns(ConvergenceWarning, match=r"stopped training in epoch 3 \(SVD did not converge\); keeping epoch"):
        model = AGPRegressor(max_epochs=10, random_state=0).fit(X, y)
    # The two finished epochs are kept, identical to a run that only asked for them.
    assert len(model.history_["val_loss"]) == 3
    np.testing.assert_allclose(model.history_["val_loss"], reference.history_["val_loss"][:3])
    assert np.all(np.isfinite(model.predict(X)))


def test_memory_mapped_input_gives_the_same_model(tmp_path, wavy) -> None:
    X, y = wavy
    path = tmp_path / "X.npy"
    np.save(path, X)
    mapped = np.load(path, mmap_mode="r")
    in_memory = AGPRegressor(max_epochs=2, random_state=0).fit(X, y)
    from_disk = AGPRegressor(max_epochs=2, random_state=0).fit(mapped, y)
    np.testing.assert_allclose(from_disk.predict(mapped), in_memory.predict(X), rtol=1e-12, atol=1e-12)


def test_zero_mean_models_the_raw_targets(wavy) -> None:
    X, y = wavy
    model = AGPRegressor(mean="zero", kernel="center", random_state=0).fit(X, y + 5.0)
    assert np.all(model.y_mean_ == 0.0) and np.all(model.mean_coef_ == 0.0) and model.mean_penalty_ is None
    # Far from every center the zero-mean GP falls back to 0, the constant-mean one to ȳ.
    far = np.full((1, 3), 1e3)
    assert abs(model.predict(far)[0]) < 1e-6
    constant = AGPRegressor(mean="constant", kernel="center", random_state=0).fit(X, y + 5.0)
    assert constant.predict(far)[0] == pytest.approx(constant.y_mean_[0])


def test_minibatch_kmeans_centers_for_large_n() -> None:
    rng = np.random.default_rng(0)
    blobs = rng.normal(size=(5, 2)) * 10
    X = np.repeat(blobs, 25_000, axis=0) + rng.normal(size=(125_000, 2)) * 0.1
    y = np.repeat(np.arange(5.0), 25_000)[:, None]
    centers = select_centers(X, y, 5, "kmeans", rng)
    # Every blob found, and each center's target is its blob's (mean of its members, via bincount).
    order = np.argsort(centers.targets[:, 0])
    np.testing.assert_allclose(centers.targets[order, 0], np.arange(5.0), atol=1e-12)
    np.testing.assert_allclose(centers.points[order], blobs, atol=0.01)


def test_lengthscales_stay_within_their_bounds(wavy) -> None:
    X, y = wavy
    # A huge learning rate would push log-lengthscales anywhere; the bound keeps them in range.
    model = AGPRegressor(learning_rate=5.0, max_epochs=3, random_state=0).fit(X, y)
    ratio = model.lengthscales_ / model.lengthscale_
    assert np.all(ratio >= 1 / 30 - 1e-12) and np.all(ratio <= 30 + 1e-9)


def test_warm_up_changes_only_the_first_steps(wavy) -> None:
    X, y = wavy
    a = AGPRegressor(max_epochs=2, warmup_steps=0, random_state=0).fit(X, y)
    b = AGPRegressor(max_epochs=2, warmup_steps=10, random_state=0).fit(X, y)
    assert a.history_["val_loss"][0] == b.history_["val_loss"][0]
    assert a.history_["val_loss"][1] != b.history_["val_loss"][1]
    assert metrics.rmse(y, b.predict(X)) < np.std(y)
