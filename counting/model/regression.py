"""The regression stage of the count: the head's rows (descriptors, density sums) -> counts,
through the model's regressor, its count offset (a correction of the density head's sum), its
target transform and per-class gate. Rows holding NaN (pictures that could not be read) give
NaN counts."""

from __future__ import annotations

import numpy as np

from counting.core.errors import CountingError
from counting.features.layouts import frame_counts, predict_rows, split_views
from counting.heads.multiclass import apply_gate, inverse_transform
from counting.model.file import ModelFile

__all__ = ["FeatureDimensionError", "check_features", "predict_features"]


class FeatureDimensionError(CountingError, ValueError):
    """Features do not have the dimension the model was trained on."""


def check_features(model: ModelFile, features: np.ndarray, source: str = "features") -> np.ndarray:
    """Validate features against the model; returns a float array.

    ``frame``: ``(n, D)``; ``tiles``: ``(n, cells, D)``; ``pyramid``: ``(n, 1 + cells, D)``
    (the whole-frame descriptor first, see :func:`counting.features.layouts.stack_views`).
    """
    array = np.asarray(features, dtype=float)
    if array.ndim not in (2, 3):
        raise FeatureDimensionError(f"{source}: expected features shaped (n, {model.feature_dim}), got {array.shape}")
    if array.shape[-1] != model.feature_dim:
        raise FeatureDimensionError(
            f"{source}: features have {array.shape[-1]} dimensions but {model.name} expects "
            f"{model.feature_dim} ({model.backbone} descriptors)"
        )
    if model.grid is None:
        if array.ndim == 3:
            raise FeatureDimensionError(
                f"{source}: features have {array.shape[1]} tiles per image but {model.name} counts whole frames"
            )
        return array
    grid_text = f"{model.grid[0]}x{model.grid[1]}"
    if array.ndim == 2:
        raise FeatureDimensionError(
            f"{source}: whole-frame features, but {model.name} counts on a "
            f"{grid_text} grid of tiles (extract them with --grid)"
        )
    if array.shape[1] != model.views_per_image:
        wanted = str(model.views_per_image)
        if model.layout == "pyramid":  # say what the 1 + cells views are and in which order
            wanted += f" (shape (n, {model.views_per_image}, {model.feature_dim}): the whole frame, then its cells)"
        raise FeatureDimensionError(
            f"{source}: features have {array.shape[1]} descriptors per image but {model.name} "
            f"({model.layout} layout on a {grid_text} grid) takes {wanted}"
        )
    return array


def predict_features(model: ModelFile, features: np.ndarray, source: str = "features") -> np.ndarray:
    """Counts from descriptors: each frame's rows predicted and summed, clipped at 0."""
    array = check_features(model, features, source)
    n_images = array.shape[0]
    if model.layout == "pyramid":
        rows = predict_rows("pyramid", *split_views(array))
    else:
        rows = predict_rows(model.layout, array if array.ndim == 2 else None, array if array.ndim == 3 else None)
    finite = np.isfinite(rows).all(axis=1)
    n_outputs = len(model.class_names) if model.class_names else 1
    predicted = np.full((rows.shape[0], n_outputs), np.nan)
    if finite.any():
        values = np.asarray(model.regressor.predict(rows[finite]), dtype=float)
        predicted[finite] = values.reshape(-1, n_outputs)
    # Sum first, clip after: clipping each tile would bias sparse tiles upwards.
    summed = frame_counts(predicted, n_images)
    if model.count_offset == "head_sum":
        # The regressor predicted the count minus the head's sum. Imported here: the conv head's
        # training module brings torch, which models without the offset never load.
        from counting.heads.density.conv.training import corrected_counts

        summed = corrected_counts(array, summed[:, 0], model.correction_weight)[:, None]
    counts = inverse_transform(summed, model.target_transform)
    if not model.is_multi_output:
        return counts[:, 0]
    return apply_gate(counts, model.gate)
