"""PNG plots for training and reports (matplotlib, headless Agg backend)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _save(figure: plt.Figure, path: str | Path) -> Path:
    from counting.core.files import atomic_path

    target = Path(path)
    figure.tight_layout()
    try:
        with atomic_path(target) as temporary:
            figure.savefig(temporary, dpi=110, format=target.suffix.lstrip(".") or "png")
    finally:
        plt.close(figure)
    return target


def plot_loss(history: dict, path: str | Path, best_epoch: int | None = None) -> Path:
    """Train and validation loss per epoch (log scale when the range is wide)."""
    figure, axis = plt.subplots(figsize=(6, 3.6))
    for key, label in (("train_loss", "train"), ("val_loss", "validation")):
        values = np.asarray(history.get(key, []), dtype=float)
        if values.size:
            axis.plot(np.arange(values.size), values, label=label, marker="." if values.size < 40 else None)
    if best_epoch is not None:
        axis.axvline(best_epoch, color="grey", linestyle=":", label=f"best epoch {best_epoch}")
    positive = [v for key in ("train_loss", "val_loss") for v in history.get(key, []) if v > 0]
    if positive and max(positive) / max(min(positive), 1e-12) > 50:
        axis.set_yscale("log")
    axis.set_xlabel("epoch (0 = grid-search start)")
    axis.set_ylabel("loss")
    axis.set_title("AGP training loss")
    axis.legend()
    return _save(figure, path)


def plot_sequence(
    indices: np.ndarray,
    y_true: np.ndarray,
    y_pred: np.ndarray,
    path: str | Path,
    low: np.ndarray | None = None,
    high: np.ndarray | None = None,
    smoothed: np.ndarray | None = None,
) -> Path:
    """Predicted and true count over the frame sequence (with the interval band if any)."""
    order = np.argsort(indices, kind="stable")
    x = np.asarray(indices)[order]
    figure, axis = plt.subplots(figsize=(8, 3.6))
    if low is not None and high is not None:
        axis.fill_between(
            x,
            np.asarray(low)[order],
            np.asarray(high)[order],
            color="tab:blue",
            alpha=0.18,
            step="mid",
            label="interval",
        )
    axis.plot(x, np.asarray(y_true)[order], color="black", linewidth=1.2, label="true")
    axis.plot(x, np.asarray(y_pred)[order], color="tab:blue", linewidth=1.0, label="predicted")
    if smoothed is not None:
        axis.plot(x, np.asarray(smoothed)[order], color="tab:red", linewidth=1.0, label="smoothed")
    axis.set_xlabel("frame / image index")
    axis.set_ylabel("count")
    axis.legend(loc="upper right", ncols=4, fontsize="small")
    return _save(figure, path)


def plot_scatter(y_true: np.ndarray, y_pred: np.ndarray, path: str | Path) -> Path:
    """Predicted against true count, with the identity line."""
    truth, predicted = np.ravel(y_true), np.ravel(y_pred)
    figure, axis = plt.subplots(figsize=(4.2, 4.2))
    axis.scatter(truth, predicted, s=10, alpha=0.6)
    low = float(min(truth.min(), predicted.min(), 0)) if truth.size else 0.0
    high = float(max(truth.max(), predicted.max(), 1)) if truth.size else 1.0
    axis.plot([low, high], [low, high], color="grey", linestyle="--", linewidth=1)
    axis.set_xlim(low, high)
    axis.set_ylim(low, high)
    axis.set_xlabel("true count")
    axis.set_ylabel("predicted count")
    return _save(figure, path)


def plot_class_bars(
    class_names: list[str],
    y_true: np.ndarray,
    y_pred: np.ndarray,
    per_class_rmse: dict[str, float],
    path: str | Path,
    per_class_rel_rmse: dict[str, float] | None = None,
) -> Path:
    """Per-class mean true and predicted counts, and the per-class RMSE (and relRMSE)."""
    x = np.arange(len(class_names))
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    top.bar(x - 0.2, np.mean(y_true, axis=0), width=0.4, label="true")
    top.bar(x + 0.2, np.mean(np.round(np.clip(y_pred, 0, None)), axis=0), width=0.4, label="predicted")
    top.set_ylabel("mean count")
    top.legend()
    if per_class_rel_rmse is None:
        bottom.bar(x, [per_class_rmse[name] for name in class_names], color="tab:red")
        bottom.set_ylabel("RMSE")
    else:
        bottom.bar(x - 0.2, [per_class_rmse[name] for name in class_names], width=0.4, color="tab:red", label="RMSE")
        rel = [per_class_rel_rmse[name] for name in class_names]
        bottom.bar(x + 0.2, rel, width=0.4, color="tab:purple", label="relRMSE")
        bottom.set_ylabel("error (rounded counts)")
        bottom.legend()
    bottom.set_xticks(x, class_names, rotation=60, ha="right")
    return _save(figure, path)
