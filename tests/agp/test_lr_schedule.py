"""The learning-rate schedule after the warm-up (``lr_schedule``): the rule, a fit, the check."""

from __future__ import annotations

import numpy as np
import pytest

import agp.estimator
from agp import AGPRegressor, metrics
from agp._sklearn_compat import InvalidParameterError
from agp.optimizers import schedule_factor


@pytest.fixture(scope="module")
def wavy():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (600, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.05 * rng.standard_normal(len(X))
    return X, y


def test_cosine_ramps_up_then_decays_to_zero_at_the_last_planned_step() -> None:
    steps = np.arange(1, 1001)
    cosine = np.array([schedule_factor(int(t), 100, 1000, "cosine") for t in steps])
    constant = np.array([schedule_factor(int(t), 100, 1000, "constant") for t in steps])
    np.testing.assert_allclose(cosine[:100], steps[:100] / 100)  # the warm-up is the same ramp
    np.testing.assert_allclose(constant[:100], steps[:100] / 100)
    assert np.all(constant[100:] == 1.0)
    assert cosine[100] == pytest.approx(1.0, abs=1e-4)  # full rate right after the warm-up
    assert cosine[549] == pytest.approx(0.5)  # half-way through the decay
    assert np.all(np.diff(cosine[100:]) < 0)
    assert cosine[-1] == pytest.approx(0.0, abs=1e-12)
    assert schedule_factor(1, 0, 1, "cosine") == pytest.approx(0.0)  # one step, no warm-up
    with pytest.raises(ValueError, match="unknown learning-rate schedule 'step'"):
        schedule_factor(5, 0, 10, "step")


def test_cosine_fit_uses_the_decaying_rate_and_predicts(wavy, monkeypatch) -> None:
    X, y = wavy
    seen: list[float] = []
    real = agp.estimator.schedule_factor

    def recording(step: int, warmup: int, total: int, schedule: str = "constant") -> float:
        seen.append(real(step, warmup, total, schedule))
        return seen[-1]

    monkeypatch.setattr(agp.estimator, "schedule_factor", recording)
    model = AGPRegressor(n_centers=20, max_epochs=3, lr_schedule="cosine", random_state=0).fit(X, y)
    steps_per_epoch = -(-(len(X) - len(model.validation_indices_)) // 64)
    assert len(seen) == 3 * steps_per_epoch
    assert max(seen) == pytest.approx(1.0, abs=1e-2) and seen[-1] == pytest.approx(0.0, abs=1e-12)
    assert model.history_["val_loss"][-1] < model.history_["val_loss"][0]  # it trained
    assert metrics.rmse(y, model.predict(X)) < 0.35 * np.std(y)
    constant = AGPRegressor(n_centers=20, max_epochs=3, random_state=0).fit(X, y)
    assert constant.history_["val_loss"][0] == model.history_["val_loss"][0]  # same grid start
    assert constant.history_["val_loss"][-1] != model.history_["val_loss"][-1]


def test_cosine_with_sgd_momentum_runs(wavy) -> None:
    X, y = wavy
    model = AGPRegressor(
        n_centers=10, kernel="diagonal", optimizer="sgd", learning_rate=1e-3, lr_schedule="cosine", max_epochs=2
    ).fit(X, y)
    assert np.all(np.isfinite(model.predict(X)))


def test_an_unknown_schedule_is_refused(wavy) -> None:
    X, y = wavy
    with pytest.raises(InvalidParameterError, match="'lr_schedule' parameter of AGPRegressor must be a str among"):
        AGPRegressor(lr_schedule="linear").fit(X, y)


def test_the_schedule_survives_a_save_and_the_default_is_not_written(wavy, tmp_path) -> None:
    X, y = wavy
    cosine = AGPRegressor(n_centers=5, max_epochs=1, lr_schedule="cosine", random_state=0).fit(X, y)
    cosine.save(tmp_path / "cosine.npz")
    assert AGPRegressor.load(tmp_path / "cosine.npz").lr_schedule == "cosine"
    constant = AGPRegressor(n_centers=5, max_epochs=1, random_state=0).fit(X, y)
    assert "lr_schedule" not in constant.get_state()[1]["hyper_parameters"]
    constant.save(tmp_path / "constant.npz")
    assert AGPRegressor.load(tmp_path / "constant.npz").lr_schedule == "constant"
