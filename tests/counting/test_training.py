"""Training pipeline on real Mall frames: calibration hold-out, tiles from head dots, grid models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from counting.core.errors import DatasetError
from counting.data.datasets import load_dataset
from counting.data.datasets.splits import cv_folds
from counting.data.imaging import image_size
from counting.features import FeatureCache
from counting.features.tiles import tile_count_matrix
from counting.train.pipeline import TrainingConfig, calibration_split, train_model


def test_tail_calibration_holds_out_the_last_frames() -> None:
    indices = np.array([5, 1, 2, 3, 4, 10, 9, 8, 7, 6])
    fit, held = calibration_split(indices, "tail", fraction=0.15, minimum=3, seed=0)
    assert sorted(indices[held]) == [8, 9, 10] and sorted(indices[fit]) == [1, 2, 3, 4, 5, 6, 7]


def test_block_calibration_holds_out_whole_runs_of_frames() -> None:
    indices = np.arange(1, 201)[::-1]  # order on disk does not matter
    fit, held = calibration_split(indices, "blocks", fraction=0.15, minimum=30, seed=0)
    frames = np.sort(indices[held])
    assert len(held) == 30 and np.intersect1d(fit, held).size == 0 and len(fit) == 170
    # three whole blocks of ten consecutive frames, each starting at a multiple of ten (+1)
    starts = frames[::10]
    assert np.array_equal(frames, (starts[:, None] + np.arange(10)).ravel()) and set(starts % 10) == {1}
    assert not np.array_equal(held, calibration_split(indices, "blocks", 0.15, 30, seed=1)[1])


def test_random_calibration_is_seeded_and_disjoint() -> None:
    indices = np.arange(1, 201)
    fit, held = calibration_split(indices, "random", fraction=0.15, minimum=30, seed=3)
    again = calibration_split(indices, "random", fraction=0.15, minimum=30, seed=3)[1]
    other = calibration_split(indices, "random", fraction=0.15, minimum=30, seed=4)[1]
    assert len(held) == 30 and np.array_equal(held, again) and not np.array_equal(held, other)
    assert np.intersect1d(fit, held).size == 0 and len(fit) + len(held) == 200


def test_calibration_needs_enough_frames() -> None:
    with pytest.raises(DatasetError, match="too few"):
        calibration_split(np.arange(20), "tail", 0.15, 30, 0)
    fit, held = calibration_split(np.arange(20), "none", 0.15, 30, 0)
    assert len(fit) == 20 and len(held) == 0


@pytest.fixture(scope="module")
def mall_small(mall_root: Path):
    return load_dataset("mall", mall_root, split="train=1-80,test=81-100")


def test_tile_targets_sum_to_frame_counts(mall_small) -> None:
    train = mall_small.subset("train")
    tiles = tile_count_matrix(
        [s.dots for s in train.samples],
        [image_size(train.paths[0])] * len(train),
        (2, 2),
        mall_small.roi_mask,
    )
    assert tiles.shape == (80, 4)
    assert np.array_equal(tiles.sum(axis=1), train.counts)  # every Mall head lies inside the ROI


def test_grid_model_learns_tile_counts(mall_small, session_cache_dir: Path) -> None:
    config = TrainingConfig(input_size=112, grid=(2, 2), n_centers=8, max_epochs=3, calibration="tail")
    lines: list[str] = []
    model = train_model(
        mall_small,
        config,
        cache=FeatureCache(session_cache_dir),
        log=lines.append,
        split="train=1-80,test=81-100",
    )
    assert model.grid == (2, 2)
    # 80 frames: the last 30 calibrate, 50 fit -> 50 x 4 tile rows
    assert model.dataset["n_fit"] == 50 and model.training["n_rows"] == 200
    assert any("grid start" in line for line in lines) and any("epoch    3" in line for line in lines)
    figures = model.validation_metrics
    counts = mall_small.subset("train").counts
    assert figures["n"] == 30 and np.isfinite(figures["mae"])
    # summed tile predictions beat predicting the mean count of the fitted frames
    constant_mae = np.abs(counts[50:] - counts[:50].mean()).mean()
    assert figures["mae"] < 0.8 * constant_mae
    assert model.interval is not None and model.interval.n_calibration == 30
    assert set(model.training["interval_scale_widths"]) == {"absolute", "sqrt", "linear"}


def test_whole_frame_rows_are_added_to_the_tiles(mall_small, session_cache_dir: Path) -> None:
    config = TrainingConfig(
        input_size=112, grid=(2, 2), whole_frame_rows=True, n_centers=8, max_epochs=1, calibration="tail"
    )
    model = train_model(mall_small, config, cache=FeatureCache(session_cache_dir))
    assert model.training["n_rows"] == 50 * 4 + 50 and model.training["whole_frame_rows"] is True
    assert model.layout == "tiles+frame" and model.training["layout"] == "tiles+frame"


def test_whole_frame_rows_weigh_one_over_cells_in_the_fit(mall_small, session_cache_dir: Path) -> None:
    """The regressor of ``tiles+frame`` is the AGP fitted with the frame rows at weight 1/4 (2x2):
    the same rows at weight 1 (the old fit, 3.92 against 3.68 test MAE on Mall) differ."""
    from agp import AGPRegressor
    from counting.features.backbones import Preprocessing, get_backbone
    from counting.features.layouts import extract_views, training_rows
    from counting.features.tiles import dot_tile_counts

    config = TrainingConfig(
        input_size=112, grid=(2, 2), whole_frame_rows=True, n_centers=8, max_epochs=2, calibration="none"
    )
    cache = FeatureCache(session_cache_dir)
    model = train_model(mall_small, config, cache=cache)
    train = mall_small.subset("train")
    frame, cells = extract_views(
        [s.path for s in train.samples],
        get_backbone(config.backbone),
        Preprocessing(input_size=112, roi_mask=mall_small.roi_mask),
        "tiles+frame",
        (2, 2),
        cache=cache,
    )
    tiles = dot_tile_counts(list(train.samples), (2, 2), mall_small.roi_mask, mall_small.name)
    X, y = training_rows("tiles+frame", frame, cells, np.asarray(train.counts, dtype=float), tiles)
    weights = np.r_[np.ones(4 * len(frame)), np.full(len(frame), 0.25)]
    params = model.regressor.get_params()
    weighted = AGPRegressor(**params).fit(X, y, sample_weight=weights)
    unweighted = AGPRegressor(**params).fit(X, y)
    probe = cells[:10].reshape(-1, cells.shape[-1])
    np.testing.assert_allclose(model.regressor.predict(probe), weighted.predict(probe), rtol=1e-9, atol=1e-9)
    assert np.abs(model.regressor.predict(probe) - unweighted.predict(probe)).max() > 1e-3


def test_pyramid_model_is_saved_and_counts_images(mall_small, session_cache_dir: Path, tmp_path: Path) -> None:
    from counting.model.counting_model import load_model

    config = TrainingConfig(
        input_size=112, grid=(2, 2), layout="pyramid", n_centers=8, max_epochs=2, calibration="tail"
    )
    cache = FeatureCache(session_cache_dir)
    model = train_model(mall_small, config, cache=cache)
    assert model.layout == "pyramid" and model.training["n_rows"] == 50  # one row per frame
    assert model.feature_dim == 1000 and model.regressor.n_features_in_ == 5 * 1000
    loaded = load_model(model.save(tmp_path / "pyramid.npz"))
    assert loaded.layout == "pyramid" and loaded.grid == (2, 2)
    test = mall_small.subset("test")
    from_files = loaded.count_paths(test.paths[:4], cache=cache).counts
    from counting.data.imaging import load_image

    from_images = loaded.count_images([load_image(path) for path in test.paths[:4]])
    np.testing.assert_allclose(from_files, from_images, rtol=1e-3, atol=1e-3)
    assert np.abs(from_files - np.asarray(test.counts[:4])).mean() < 10
    # `count --features` takes the documented (n, 1 + cells, D) array: the frame, then its cells
    from counting.features.backbones import Preprocessing, get_backbone
    from counting.features.layouts import extract_views, stack_views
    from counting.model.regression import FeatureDimensionError

    frame, cells = extract_views(
        test.paths[:4], get_backbone(loaded.backbone), Preprocessing(112, mall_small.roi_mask), "pyramid", (2, 2), cache
    )
    stacked = stack_views(frame, cells)
    np.testing.assert_allclose(loaded.predict_features(stacked), from_files, rtol=1e-6, atol=1e-6)
    with pytest.raises(
        FeatureDimensionError, match=r"takes 5 \(shape \(n, 5, 1000\): the whole frame, then its cells\)"
    ):
        loaded.predict_features(cells)  # the cells alone (`counting features --grid 2x2`)


def test_cv_folds_deal_runs_of_frames_in_turn() -> None:
    indices = np.arange(1, 101)
    folds = cv_folds(indices, 5, contiguous=True, seed=0, block=10)
    assert np.array_equal(np.sort(np.concatenate(folds)), np.arange(100))
    assert indices[folds[0]].tolist() == [*range(1, 11), *range(51, 61)]
    assert indices[folds[4]].tolist() == [*range(41, 51), *range(91, 101)]
    shuffled = cv_folds(indices, 5, contiguous=False, seed=0)
    assert sorted(len(f) for f in shuffled) == [20] * 5 and not np.array_equal(shuffled[0], folds[0])
    with pytest.raises(DatasetError, match="too few"):
        cv_folds(np.arange(8), 5, True, 0, 10)


def test_cv_folds_of_a_short_sequence_are_never_empty() -> None:
    """12 frames in runs of 10 gave folds of 10, 2, 0, 0, 0 frames: the runs shrink to fit."""
    for n in (10, 12, 17, 49):
        folds = cv_folds(np.arange(1, n + 1), 5, contiguous=True, seed=0, block=10)
        sizes = [len(fold) for fold in folds]
        assert min(sizes) >= 2 and sum(sizes) == n, (n, sizes)
        assert np.array_equal(np.sort(np.concatenate(folds)), np.arange(n))
    assert [len(fold) for fold in cv_folds(np.arange(12), 5, True, 0, 10)] == [4, 2, 2, 2, 2]


def test_cv_calibration_fits_on_every_frame(mall_small, session_cache_dir: Path) -> None:
    config = TrainingConfig(input_size=112, n_centers=8, max_epochs=3)  # calibration "auto" = cv
    model = train_model(mall_small, config, cache=FeatureCache(session_cache_dir))
    assert (model.dataset["n_fit"], model.dataset["n_calibration"], model.dataset["calibration"]) == (
        80,
        80,
        "cv5",
    )
    assert model.training["n_rows"] == 80 and "out-of-fold" in model.validation_metrics["on"]
    counts = mall_small.subset("train").counts
    # out-of-fold predictions beat the out-of-fold mean count (same folds)
    from counting.core import defaults
    from counting.train.pipeline import CV_BLOCK

    baseline = np.zeros_like(counts)
    for fold in cv_folds(np.arange(1, 81), defaults.CALIBRATION_FOLDS, True, 0, CV_BLOCK):
        baseline[fold] = np.delete(counts, fold).mean()
    assert model.validation_metrics["mae"] < np.abs(counts - baseline).mean()
    assert model.interval.n_calibration == 80
