"""One row builder for every layout: targets and frame counts on small generated descriptors."""

from __future__ import annotations

import numpy as np
import pytest

from counting.core.errors import CountingError
from counting.features.layouts import (
    LAYOUTS,
    check_layout,
    frame_counts,
    model_features,
    predict_rows,
    split_views,
    stack_views,
    training_rows,
    training_weights,
)

N, CELLS, DIM = 6, 4, 3


@pytest.fixture
def views() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    cells = rng.normal(size=(N, CELLS, DIM))
    frame = cells.mean(axis=1)
    cell_counts = rng.integers(0, 9, size=(N, CELLS)).astype(float)
    return frame, cells, cell_counts.sum(axis=1), cell_counts


def test_whole_frame_rows_target_count_over_cells(views) -> None:
    frame, cells, counts, cell_counts = views
    X, y = training_rows("tiles+frame", frame, cells, counts, cell_counts)
    assert X.shape == (N * CELLS + N, DIM) and y.shape == (N * CELLS + N,)
    np.testing.assert_array_equal(X[-N:], frame)
    np.testing.assert_allclose(y[-N:], counts / CELLS)
    # the tile rows are the cells in row-major order with their own dot counts
    np.testing.assert_array_equal(X[:CELLS], cells[0])
    np.testing.assert_array_equal(y[: N * CELLS], cell_counts.ravel())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_only_the_frame_rows_of_tiles_plus_frame_weigh_less(layout: str, views) -> None:
    frame, cells, counts, cell_counts = views
    X, _ = training_rows(layout, frame, cells, counts, cell_counts)
    weights = training_weights(layout, N, CELLS)
    if layout != "tiles+frame":
        assert weights is None
        return
    # a row per tile at weight 1, then a frame row per frame (the average cell) at 1 / cells
    assert weights.shape == (len(X),)
    np.testing.assert_array_equal(weights[: N * CELLS], 1.0)
    np.testing.assert_allclose(weights[N * CELLS :], 1.0 / CELLS)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_counts_a_frame_as_the_sum_it_claims(layout: str, views) -> None:
    frame, cells, counts, cell_counts = views
    X, y = training_rows(layout, frame, cells, counts, cell_counts)
    # A perfect regressor's predictions on the training frames' rows: the row targets.
    rows = predict_rows(layout, frame, cells)
    if layout in ("frame", "pyramid"):
        assert rows.shape[0] == N
        perfect = y
    else:
        assert rows.shape == (N * CELLS, DIM)
        perfect = cell_counts.ravel()  # the frame rows of tiles+frame are for training only
    np.testing.assert_allclose(frame_counts(perfect, N), counts)
    assert X.shape[1] == rows.shape[1]


def test_frame_counts_sum_per_frame_for_many_outputs() -> None:
    predictions = np.arange(24, dtype=float).reshape(12, 2)  # 3 frames x 4 cells x 2 classes
    np.testing.assert_array_equal(frame_counts(predictions, 3), predictions.reshape(3, 4, 2).sum(axis=1))


def test_pyramid_row_is_frame_then_cells(views) -> None:
    frame, cells, counts, _ = views
    X, y = training_rows("pyramid", frame, cells, counts, None)
    assert X.shape == (N, DIM * (1 + CELLS))
    np.testing.assert_array_equal(X[:, :DIM], frame)
    np.testing.assert_array_equal(X[:, DIM:], cells.reshape(N, -1))
    stacked = model_features("pyramid", frame, cells)
    assert stacked.shape == (N, 1 + CELLS, DIM)
    back_frame, back_cells = split_views(stacked)
    np.testing.assert_array_equal(back_frame, frame)
    np.testing.assert_array_equal(back_cells, cells)
    np.testing.assert_array_equal(stack_views(frame, cells), stacked)


def test_layouts_need_a_grid_and_known_names() -> None:
    assert check_layout("frame", None) == "frame"
    with pytest.raises(CountingError, match="needs a grid"):
        check_layout("tiles", None)
    with pytest.raises(CountingError, match="expected one of"):
        check_layout("mosaic", (2, 2))
