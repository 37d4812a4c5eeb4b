"""Per-tile counts from head dots, checked against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from counting.core.errors import DatasetError
from counting.features.tiles import parse_grid, tile_count_matrix, tile_counts


def test_one_dot_per_quadrant_of_a_2x2_grid() -> None:
    dots = np.array([[10, 10], [90, 10], [10, 70], [90, 70], [95, 75]])  # x, y in a 100x80 frame
    counts = tile_counts(dots, image_size=(80, 100), grid=(2, 2))
    # row-major: top-left, top-right, bottom-left, bottom-right
    np.testing.assert_array_equal(counts, [1, 1, 1, 2])


def test_dots_on_cell_borders_go_to_the_cell_below_and_right() -> None:
    # 3 columns over W = 90 have borders at x = 30 and x = 60; 2 rows over H = 40 at y = 20.
    dots = np.array([[30.0, 5.0], [60.0, 5.0], [29.999, 5.0], [0.0, 20.0], [0.0, 19.5]])
    counts = tile_counts(dots, image_size=(40, 90), grid=(2, 3))
    np.testing.assert_array_equal(counts, [2, 1, 1, 1, 0, 0])


def test_dots_on_the_far_edge_or_slightly_outside_are_kept_in_the_edge_cell() -> None:
    dots = np.array([[100.0, 80.0], [-0.5, -0.5], [100.4, 10.0]])
    counts = tile_counts(dots, image_size=(80, 100), grid=2)
    np.testing.assert_array_equal(counts, [1, 1, 0, 1])
    assert counts.sum() == len(dots)


def test_uneven_grid_uses_proportional_borders() -> None:
    # W = 10 in 3 columns: borders at 3.33 and 6.67.
    dots = np.array([[3.3, 0], [3.4, 0], [6.6, 0], [6.7, 0]])
    counts = tile_counts(dots, image_size=(1, 10), grid=(1, 3))
    np.testing.assert_array_equal(counts, [1, 2, 1])


def test_roi_mask_drops_dots_outside_it() -> None:
    mask = np.zeros((80, 100), dtype=bool)
    mask[:, :50] = True  # left half only
    dots = np.array([[10, 10], [49.9, 70], [50, 70], [90, 10]])
    counts = tile_counts(dots, image_size=(80, 100), grid=(2, 2), roi_mask=mask)
    np.testing.assert_array_equal(counts, [1, 0, 1, 0])


def test_roi_mask_at_a_lower_resolution_is_scaled_onto_the_image() -> None:
    mask = np.array([[True, False], [False, True]])  # quadrants of a 200x200 image
    dots = np.array([[10, 10], [150, 10], [10, 150], [150, 150], [199, 199]])
    counts = tile_counts(dots, image_size=(200, 200), grid=(1, 1), roi_mask=mask)
    np.testing.assert_array_equal(counts, [3])


def test_tile_counts_sum_to_the_roi_count() -> None:
    rng = np.random.default_rng(0)
    dots = rng.uniform([0, 0], [640, 480], size=(200, 2))
    mask = np.zeros((480, 640), dtype=bool)
    mask[100:400, 50:600] = True
    inside = ((dots[:, 1] >= 100) & (dots[:, 1] < 400) & (dots[:, 0] >= 50) & (dots[:, 0] < 600)).sum()
    for grid in [(1, 1), (2, 2), (3, 3), (4, 4), (3, 5)]:
        counts = tile_counts(dots, (480, 640), grid, roi_mask=mask)
        assert counts.shape == (grid[0] * grid[1],)
        assert counts.sum() == inside


def test_no_dots_gives_zero_counts() -> None:
    np.testing.assert_array_equal(tile_counts(None, (10, 10), 3), np.zeros(9))
    np.testing.assert_array_equal(tile_counts(np.zeros((0, 2)), (10, 10), (1, 2)), [0, 0])


def test_matrix_stacks_images_with_a_shared_or_per_image_size() -> None:
    dots = [np.array([[1, 1]]), np.array([[9, 9], [1, 9]]), None]
    shared = tile_count_matrix(dots, (10, 10), (2, 2))
    np.testing.assert_array_equal(shared, [[1, 0, 0, 0], [0, 0, 1, 1], [0, 0, 0, 0]])
    per_image = tile_count_matrix(dots, [(10, 10), (20, 20), (10, 10)], (2, 2))
    np.testing.assert_array_equal(per_image[1], [2, 0, 0, 0])  # both dots in the top-left of 20x20


@pytest.mark.parametrize(
    ("given", "expected"),
    [(3, (3, 3)), ((2, 4), (2, 4)), ("3x2", (3, 2)), ("4", (4, 4)), (None, None), ("none", None)],
)
def test_parse_grid(given, expected) -> None:
    assert parse_grid(given) == expected


@pytest.mark.parametrize("bad", ["3xq", (0, 2), (1, 2, 3)])
def test_bad_grid_is_a_one_line_error(bad) -> None:
    with pytest.raises(DatasetError, match="grid"):
        parse_grid(bad)
