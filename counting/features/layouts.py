"""Regressor rows for every feature layout: the one place that decides what a row is.

A layout says how a frame's descriptors become regressor rows and how the predictions of those
rows become the frame's count. Training, ``counting compare`` and the accuracy studies all build
their rows here, so a frame is counted the same way everywhere.

- ``frame``: one whole-frame descriptor per frame; target the frame count.
- ``tiles``: one row per grid cell with the cell's dot count; a frame is the sum of its cells.
- ``tiles+frame``: the tile rows plus each whole frame as the *average* cell, target
  count / cells (the fc layer is linear, so the whole-frame descriptor is about the mean of the
  cell descriptors; training it on the full count would teach the regressor that an average
  cell holds a whole frame's people). Predicted as ``tiles``. Each frame row weighs 1 / cells
  (:func:`training_weights`): it is the mean of rows already in the design, not a new
  observation, and at full weight the frames' dense cluster of "average cells" (never
  predicted) pulled the centres, the grid search, the ridge mean and the best-epoch choice off
  the cells: on Mall 2x2 (train 1-600, test 601-800) test MAE 3.92 at weight 1 against 3.68
  for ``tiles``, 3.69 at 1 / cells (docs/accuracy.md).
- ``pyramid``: one row per frame, the whole-frame descriptor concatenated with every cell's, so
  each cell gets its own weights (people at the back look different from those in front).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from counting.core.errors import CountingError

LAYOUTS: tuple[str, ...] = ("frame", "tiles", "tiles+frame", "pyramid")


def check_layout(layout: str, grid: tuple[int, int] | None) -> str:
    """``layout`` if it exists and fits ``grid`` (every layout but ``frame`` needs a grid)."""
    if layout not in LAYOUTS:
        raise CountingError(f"layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    if layout != "frame" and grid is None:
        raise CountingError(f"layout {layout!r} needs a grid (--grid ROWSxCOLS)")
    return layout


def needs_frame(layout: str) -> bool:
    """Whether the layout uses whole-frame descriptors."""
    return layout in ("frame", "tiles+frame", "pyramid")


def needs_cells(layout: str) -> bool:
    """Whether the layout uses per-cell descriptors."""
    return layout != "frame"


def training_rows(
    layout: str,
    frame: np.ndarray | None,
    cells: np.ndarray | None,
    counts: np.ndarray,
    cell_counts: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``X`` and targets ``y`` for frames with descriptors ``frame`` ``(n, D)`` and/or
    ``cells`` ``(n, cells, D)``, counts ``(n,)`` or ``(n, K)`` and per-cell counts ``(n, cells)``."""
    counts = np.asarray(counts, dtype=float)
    if layout == "frame":
        return _need(frame, "frame"), counts
    cells = _need(cells, "cells")
    if layout == "pyramid":
        return predict_rows(layout, frame, cells), counts
    dim = cells.shape[-1]
    X = cells.reshape(-1, dim)
    y = np.asarray(_need(cell_counts, "cell counts"), dtype=float).reshape(-1)
    if layout == "tiles+frame":
        X = np.concatenate([X, _need(frame, "frame")])
        y = np.concatenate([y, counts / cells.shape[1]])
    return X, y


def training_weights(layout: str, n_frames: int, n_cells: int) -> np.ndarray | None:
    """Weight of each row of :func:`training_rows` (``None``: every row weighs 1).

    ``tiles+frame``: the ``n_frames * n_cells`` tile rows weigh 1, the ``n_frames`` frame rows
    after them 1 / ``n_cells`` each (see the module docstring for why).
    """
    if layout != "tiles+frame":
        return None
    return np.concatenate([np.ones(n_frames * n_cells), np.full(n_frames, 1.0 / n_cells)])


def predict_rows(layout: str, frame: np.ndarray | None, cells: np.ndarray | None) -> np.ndarray:
    """The rows whose predictions make the frames' counts (see :func:`frame_counts`)."""
    if layout == "frame":
        return _need(frame, "frame")
    cells = _need(cells, "cells")
    if layout == "pyramid":
        frame = _need(frame, "frame")
        return np.concatenate([frame, cells.reshape(len(cells), -1)], axis=1)
    return cells.reshape(-1, cells.shape[-1])


def frame_counts(predictions: np.ndarray, n_frames: int) -> np.ndarray:
    """Each frame's count: the sum of the predictions of its rows (one row or one per cell)."""
    predictions = np.asarray(predictions, dtype=float)
    if n_frames == 0:
        return predictions.reshape(0, *predictions.shape[1:])
    return predictions.reshape(n_frames, -1, *predictions.shape[1:]).sum(axis=1)


def stack_views(frame: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """``(n, 1 + cells, D)``: the whole-frame descriptor first, then the cells (how a pyramid
    model receives one array of features)."""
    return np.concatenate([np.asarray(frame)[:, None, :], np.asarray(cells)], axis=1)


def split_views(stacked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`stack_views`: ``(frame, cells)``."""
    return stacked[:, 0, :], stacked[:, 1:, :]


def _need(array: np.ndarray | None, what: str) -> np.ndarray:
    if array is None:
        raise CountingError(f"this layout needs {what} descriptors, none were given")
    return np.asarray(array)


def extract_views(
    paths: Sequence[str | Path],
    backbone: Any,
    prep: Any,
    layout: str,
    grid: tuple[int, int] | None,
    cache: Any = None,
    batch_size: int = 16,
    progress: bool = False,
    extract: Any = None,
    descriptor: Any = None,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(frame, cells)`` descriptors the layout needs (the other is None), cached; an unreadable
    image stops with its one-line ImageError. ``extract`` replaces ``extract_features`` (same
    signature), e.g. :func:`counting.apply.distributed.cluster_extractor` on a Dask cluster."""
    from counting.features import extract_features

    extractor = extract if extract is not None else extract_features
    # A descriptor (counting.features.descriptors) is passed only when given: any extractor takes the classic call.
    kind = {} if descriptor is None else {"descriptor": descriptor}

    def view(view_grid: tuple[int, int] | None) -> np.ndarray:
        return extractor(
            [str(path) for path in paths],
            backbone,
            prep,
            grid=view_grid,
            cache=cache,
            batch_size=batch_size,
            progress=progress,
            on_error="raise",
            **kind,
        ).features

    frame = view(None) if needs_frame(layout) else None
    cells = view(grid) if needs_cells(layout) else None
    return frame, cells


def model_features(layout: str, frame: np.ndarray | None, cells: np.ndarray | None) -> np.ndarray:
    """The one array a ``CountingModel`` of this layout takes (see ``CountingModel.check_features``)."""
    if layout == "frame":
        return _need(frame, "frame")
    if layout == "pyramid":
        return stack_views(_need(frame, "frame"), _need(cells, "cells"))
    return _need(cells, "cells")
