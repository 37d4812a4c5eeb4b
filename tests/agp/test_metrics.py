"""Metrics against values computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from agp import metrics


def test_scalar_metrics_by_hand() -> None:
    true = [1.0, 2.0, 4.0]
    pred = [2.0, 2.0, 1.0]  # errors 1, 0, -3
    assert metrics.mae(true, pred) == pytest.approx(4.0 / 3.0)
    assert metrics.mse(true, pred) == pytest.approx(10.0 / 3.0)
    assert metrics.rmse(true, pred) == pytest.approx(np.sqrt(10.0 / 3.0))


def test_nrmse_is_eq14() -> None:
    true = np.array([1.0, 2.0, 4.0])
    pred = np.array([2.0, 2.0, 1.0])
    train = np.array([0.0, 2.0])  # variance 1
    assert metrics.nrmse(true, pred, y_train=train) == pytest.approx(np.sqrt(10.0 / 3.0))
    # Without training targets the test targets' variance (14/9) is the reference.
    assert metrics.nrmse(true, pred) == pytest.approx(np.sqrt((10.0 / 3.0) / (14.0 / 9.0)))


def test_mrmse_and_relative_version_by_hand() -> None:
    true = np.array([[0.0, 3.0], [2.0, 1.0]])
    pred = np.array([[1.0, 3.0], [2.0, 3.0]])
    # class 0: errors 1, 0 -> rmse sqrt(1/2); class 1: errors 0, 2 -> rmse sqrt(4/2)
    assert metrics.mrmse(true, pred) == pytest.approx((np.sqrt(0.5) + np.sqrt(2.0)) / 2)
    # relative: class 0: 1/(0+1), 0 -> sqrt(1/2); class 1: 0, 4/(1+1) -> sqrt(2/2)
    assert metrics.m_rel_rmse(true, pred) == pytest.approx((np.sqrt(0.5) + 1.0) / 2)
    # non-zero only: class 0 keeps row 1 only (error 0), class 1 keeps both rows
    assert metrics.mrmse(true, pred, nonzero_only=True) == pytest.approx((0.0 + np.sqrt(2.0)) / 2)


def test_single_class_mrmse_equals_rmse() -> None:
    true, pred = np.array([3.0, 5.0, 7.0]), np.array([4.0, 5.0, 5.0])
    assert metrics.mrmse(true, pred) == pytest.approx(metrics.rmse(true, pred))


@pytest.mark.parametrize(
    "true,pred,message",
    [([1.0, 2.0], [1.0], "shape"), ([1.0, np.nan], [1.0, 2.0], "finite"), ([], [], "at least one")],
)
def test_bad_input_raises_clear_error(true, pred, message) -> None:
    with pytest.raises(ValueError, match=message):
        metrics.mse(true, pred)


def test_nrmse_rejects_constant_training_targets() -> None:
    with pytest.raises(ValueError, match="variance"):
        metrics.nrmse([1.0, 2.0], [1.0, 2.0], y_train=[3.0, 3.0])
