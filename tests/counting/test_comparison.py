"""The comparison runner on generated descriptors, and its descriptors of real frames."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from counting.core.errors import CountingError
from counting.evaluate.comparison import (
    ComparisonData,
    feature_rows,
    published_rows,
    run_comparison,
    run_feature_method,
    score,
    write_comparison,
)


@pytest.fixture(scope="module")
def tiled_data() -> ComparisonData:
    """Frames of 2x2 tiles whose tile count is linear in the tile descriptor."""
    rng = np.random.default_rng(0)
    n_train, n_test, cells, dim = 120, 40, 4, 6
    weights = rng.normal(size=dim)
    tiles = rng.normal(size=(n_train + n_test, cells, dim))
    tile_counts = np.clip(5 + tiles @ weights, 0, None)
    whole = tiles.mean(axis=1)
    counts = tile_counts.sum(axis=1)
    return ComparisonData(
        dataset="mall",
        split="generated",
        train_paths=[],
        test_paths=[],
        train_counts=counts[:n_train],
        test_counts=counts[n_train:],
        train_features=whole[:n_train],
        test_features=whole[n_train:],
        test_indices=np.arange(n_train + 1, n_train + n_test + 1),
        grid=(2, 2),
        train_tile_features=tiles[:n_train],
        test_tile_features=tiles[n_train:],
        train_tile_counts=tile_counts[:n_train],
        is_sequence=True,
        settings={"backbone": "generated", "input_size": None, "roi": False},
    )


def test_feature_layouts_have_the_expected_rows(tiled_data: ComparisonData) -> None:
    X, y, _ = feature_rows(tiled_data, "frame")
    assert X.shape == (120, 6) and np.array_equal(y, tiled_data.train_counts)
    X, y, _ = feature_rows(tiled_data, "tiles")
    assert X.shape == (480, 6) and y.sum() == pytest.approx(tiled_data.train_counts.sum())
    X, y, _ = feature_rows(tiled_data, "tiles+frame")
    assert X.shape == (600, 6)
    np.testing.assert_allclose(y[480:], tiled_data.train_counts / 4)  # a whole frame is the mean tile
    X, y, _ = feature_rows(tiled_data, "pyramid")
    assert X.shape == (120, 6 * 5)
    np.testing.assert_array_equal(X[:, 6:12], tiled_data.train_tile_features[:, 0])


def test_tiled_ridge_recovers_counts_summed_over_tiles(tiled_data: ComparisonData) -> None:
    tiled = run_feature_method(tiled_data, "ridge", "tiles")
    assert tiled.status == "ok" and tiled.n_train == 480 and tiled.features == "tiles 2x2"
    # Tile counts are (nearly) linear in the tile descriptors, so summed tile predictions are
    # close to the truth.
    assert tiled.metrics["mae"] < 0.1 * np.mean(np.abs(tiled_data.test_counts - tiled_data.test_counts.mean()))
    assert tiled.fit_seconds > 0 and tiled.predict_seconds > 0


def test_run_comparison_lists_whole_frame_then_tiled_rows(tiled_data: ComparisonData) -> None:
    seen = []
    results = run_comparison(
        tiled_data, methods=["ridge", "gp"], tiled_methods=["ridge"], on_result=seen.append, smoothing_window=3
    )
    assert [(r.method, r.features) for r in results] == [
        ("ridge", "whole frame"),
        ("gp", "whole frame"),
        ("ridge", "tiles 2x2"),
        ("ridge", "tiles 2x2 + frame"),
        ("ridge", "frame + 2x2 cells concatenated"),
    ]
    assert seen == results
    for result in results:
        errors = result.predictions - tiled_data.test_counts
        assert result.metrics["mae"] == pytest.approx(np.mean(np.abs(errors)))
        assert result.metrics["rmse"] == pytest.approx(np.sqrt(np.mean(errors**2)))
        assert "smoothed_mae" in result.metrics


def test_unknown_method_is_a_one_line_error(tiled_data: ComparisonData) -> None:
    with pytest.raises(CountingError, match="lasso"):
        run_comparison(tiled_data, methods=["lasso"])


def test_score_smooths_within_consecutive_runs_only() -> None:
    truth = np.array([10.0, 10, 10, 50, 50, 50])
    predicted = np.array([9.0, 12, 12, 50, 50, 53])
    figures = score(truth, predicted, np.array([1, 2, 3, 10, 11, 12]), window=3)
    assert figures["mae"] == pytest.approx(8 / 6)
    # centred mean of 3, nearest frame at the edges, each run on its own:
    # [10, 11, 12] and [50, 51, 52] -> errors 0, 1, 2 twice
    assert figures["smoothed_mae"] == pytest.approx(6 / 6)


def test_published_rows_merge_metrics_per_method() -> None:
    rows = {row["method"]: row for row in published_rows("mall")}
    assert rows["COUNT Forest"]["mae"] == 2.50 and rows["COUNT Forest"]["mse"] == 10.0
    assert rows["COUNT Forest"]["rmse"] == pytest.approx(np.sqrt(10.0), abs=0.01)
    shanghai = {row["method"]: row for row in published_rows("shanghaitech")}
    assert shanghai["MCNN"]["rmse"] == 41.3 and shanghai["MCNN"]["mse"] == pytest.approx(41.3**2, abs=0.1)


def test_written_files_agree(tiled_data: ComparisonData, tmp_path: Path) -> None:
    results = run_comparison(tiled_data, methods=["ridge"], tiled_methods=[])
    paths = write_comparison(tiled_data, results, tmp_path)
    with paths["csv"].open() as handle:
        records = list(csv.DictReader(handle))
    ours = [r for r in records if r["source"] == "measured here"]
    assert len(ours) == 1 and float(ours[0]["mae"]) == pytest.approx(results[0].metrics["mae"], abs=1e-4)
    assert any(r["method"] == "Bi-ConvLSTM" and float(r["mae"]) == 2.10 for r in records)
    summary = json.loads(paths["json"].read_text())
    predicted = np.array(summary["predictions"]["ridge|whole frame"])
    assert np.mean(np.abs(predicted - np.array(summary["y_true"]))) == pytest.approx(
        results[0].metrics["mae"], abs=1e-2
    )
    markdown = paths["md"].read_text()
    assert "| Ridge regression (RidgeCV) | whole frame |" in markdown and "COUNT Forest" in markdown


def test_whole_frame_descriptor_is_the_mean_of_per_position_cells(mall_root: Path, tmp_path: Path) -> None:
    """Why ``tiles+frame`` trains a whole frame on count / cells: it is the average cell."""
    from counting.data.imaging import load_image
    from counting.features import FeatureCache
    from counting.features.backbones import Preprocessing, get_backbone
    from counting.features.layouts import extract_views

    paths = [mall_root / "frames" / f"seq_{i:06d}.jpg" for i in (1, 2, 3)]
    backbone = get_backbone("efficientnet-lite0")
    prep = Preprocessing(input_size=64)
    # A grid with one cell per feature-map position: its cells' mean is the global pooling.
    feature_map = backbone.feature_map(backbone.prepare(load_image(paths[0]), prep)[None])
    per_position = tuple(feature_map.shape[2:])
    frame, cells = extract_views(paths, backbone, prep, "tiles+frame", per_position, FeatureCache(tmp_path))
    assert frame.shape == (3, 1000) and cells.shape == (3, per_position[0] * per_position[1], 1000)
    # ... and since the fc layer is linear, the whole-frame descriptor is the mean of those cells'.
    np.testing.assert_allclose(cells.mean(axis=1), frame, atol=1e-3)


def test_holdout_keeps_the_tail_of_a_sequence_and_a_random_part_of_images(tiled_data: ComparisonData) -> None:
    from dataclasses import replace

    from counting.evaluate.comparison import holdout

    validation = holdout(tiled_data, 0.25)
    assert len(validation.train_counts) == 90 and len(validation.test_counts) == 30
    np.testing.assert_array_equal(validation.test_counts, tiled_data.train_counts[90:])  # the last frames
    np.testing.assert_array_equal(validation.test_tile_features, tiled_data.train_tile_features[90:])
    np.testing.assert_array_equal(validation.test_indices, np.arange(91, 121))
    images = holdout(replace(tiled_data, is_sequence=False), 0.25, seed=3)
    held = np.flatnonzero(np.isin(tiled_data.train_counts, images.test_counts))
    assert len(held) == 30 and not np.array_equal(held, np.arange(90, 120))
    assert not np.isin(images.train_counts, images.test_counts).any()
