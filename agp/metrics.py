"""Regression and counting metrics.

``mae``, ``mse`` (squared), ``rmse`` average over every entry, so they accept (n,) or (n, K).
``nrmse`` is eq. 14 of Pintea et al. 2018.  ``mrmse`` and ``m_rel_rmse`` are the VOC counting
metrics of Chattopadhyay et al. (CVPR 2017): the per-class RMSE averaged over classes, the
relative version dividing each squared error by (true count + 1); ``nonzero_only=True`` gives
their "-nz" variants (per class, only images where that class is present).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def _pair(y_true: ArrayLike, y_pred: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    true = np.asarray(y_true, dtype=float)
    pred = np.asarray(y_pred, dtype=float)
    if true.shape != pred.shape:
        raise ValueError(f"y_true has shape {true.shape} but y_pred has shape {pred.shape}")
    if true.size == 0:
        raise ValueError("metrics need at least one sample, got none")
    if not (np.all(np.isfinite(true)) and np.all(np.isfinite(pred))):
        raise ValueError("y_true and y_pred must be finite (found NaN or inf)")
    return true, pred


def mae(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Mean absolute error over all entries."""
    true, pred = _pair(y_true, y_pred)
    return float(np.mean(np.abs(pred - true)))


def mse(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Mean squared error over all entries."""
    true, pred = _pair(y_true, y_pred)
    return float(np.mean((pred - true) ** 2))


def rmse(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Root of the mean squared error over all entries."""
    return float(np.sqrt(mse(y_true, y_pred)))


def nrmse(y_true: ArrayLike, y_pred: ArrayLike, y_train: ArrayLike | None = None) -> float:
    """Eq. 14: sqrt(mean((y_pred - y_true)²) / var(y_train)); ``y_train`` defaults to ``y_true``."""
    reference = np.asarray(y_true if y_train is None else y_train, dtype=float)
    variance = float(np.var(reference))
    if not np.isfinite(variance) or variance <= 0.0:
        raise ValueError("nrmse needs training targets with a positive, finite variance")
    return float(np.sqrt(mse(y_true, y_pred) / variance))


def _per_class(y_true: ArrayLike, y_pred: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    true, pred = _pair(y_true, y_pred)
    if true.ndim == 1:
        true, pred = true[:, None], pred[:, None]
    if true.ndim != 2:
        raise ValueError(f"counts must be (n,) or (n, classes), got shape {true.shape}")
    return true, pred


def _class_mean_rmse(squared: np.ndarray, mask: np.ndarray) -> float:
    counts = mask.sum(axis=0)
    present = counts > 0
    if not np.any(present):
        raise ValueError("no class has any sample to evaluate")
    per_class = np.sqrt((squared * mask).sum(axis=0)[present] / counts[present])
    return float(per_class.mean())


def mrmse(y_true: ArrayLike, y_pred: ArrayLike, nonzero_only: bool = False) -> float:
    """mRMSE: (1/C) Σ_c sqrt(mean_i (ŷ_ic - y_ic)²)."""
    true, pred = _per_class(y_true, y_pred)
    mask = (true > 0) if nonzero_only else np.ones_like(true, dtype=bool)
    return _class_mean_rmse((pred - true) ** 2, mask)


def m_rel_rmse(y_true: ArrayLike, y_pred: ArrayLike, nonzero_only: bool = False) -> float:
    """m-relRMSE: (1/C) Σ_c sqrt(mean_i (ŷ_ic - y_ic)² / (y_ic + 1))."""
    true, pred = _per_class(y_true, y_pred)
    if np.any(true <= -1.0):
        raise ValueError("m_rel_rmse needs true counts > -1 (it divides by count + 1)")
    mask = (true > 0) if nonzero_only else np.ones_like(true, dtype=bool)
    return _class_mean_rmse((pred - true) ** 2 / (true + 1.0), mask)
