"""Figures of merit of counts: MAE/MSE/RMSE for crowds, mRMSE and m-relRMSE for VOC classes.

Training (validation figures), evaluation and comparison all score counts with these, so they
sit below every stage that uses them."""

from __future__ import annotations

import numpy as np


def crowd_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict:
    """MAE, MSE (squared) and RMSE of counts."""
    from agp import metrics

    truth, predicted = np.asarray(y_true, float), np.asarray(y_pred, float)
    return {
        "n": int(truth.shape[0]),
        "mae": float(metrics.mae(truth, predicted)),
        "mse": float(metrics.mse(truth, predicted)),
        "rmse": float(metrics.rmse(truth, predicted)),
    }


def voc_metrics(y_true: np.ndarray, y_pred: np.ndarray, class_names: list[str] | None = None) -> dict:
    """Chattopadhyay et al. (CVPR 2017): predictions clipped at 0 and rounded, then per class
    RMSE = sqrt(mean((pred - true)^2)) and relRMSE = sqrt(mean((pred - true)^2 / (true + 1))) over
    all images (zeros included), averaged over the classes; ``*_nz`` over each class's images with
    a true count above 0 only (classes absent from every image are left out of that mean)."""
    from agp import metrics

    truth = np.asarray(y_true, float)
    predicted = rounded_counts(y_pred)
    squared = (predicted - truth) ** 2
    present = truth > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        nz_rmse = np.sqrt((squared * present).sum(axis=0) / present.sum(axis=0))
        nz_rel = np.sqrt((squared / (truth + 1.0) * present).sum(axis=0) / present.sum(axis=0))
    names = class_names or [str(k) for k in range(truth.shape[1])]

    def by_class(values: np.ndarray) -> dict[str, float | None]:
        return {name: (float(v) if np.isfinite(v) else None) for name, v in zip(names, values)}

    any_present = bool(present.any())
    return {
        "n": int(truth.shape[0]),
        "mrmse": float(metrics.mrmse(truth, predicted)),
        "m_rel_rmse": float(metrics.m_rel_rmse(truth, predicted)),
        "mrmse_nz": float(metrics.mrmse(truth, predicted, nonzero_only=True)) if any_present else None,
        "m_rel_rmse_nz": float(metrics.m_rel_rmse(truth, predicted, nonzero_only=True)) if any_present else None,
        "per_class_rmse": by_class(np.sqrt(squared.mean(axis=0))),
        "per_class_rel_rmse": by_class(np.sqrt((squared / (truth + 1.0)).mean(axis=0))),
        "per_class_rmse_nz": by_class(nz_rmse),
        "per_class_rel_rmse_nz": by_class(nz_rel),
        "per_class_images": {name: int(v) for name, v in zip(names, present.sum(axis=0))},
    }


def rounded_counts(y_pred: np.ndarray) -> np.ndarray:
    """Counts as the VOC metrics score them: clipped at 0, rounded to whole objects."""
    return np.round(np.clip(np.asarray(y_pred, float), 0.0, None))
