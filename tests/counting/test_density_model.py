"""A --density-head counting model on real Mall frames: training, its file, counts, heat maps."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from counting.data.datasets import load_dataset
from counting.data.imaging import load_image
from counting.features import FeatureCache
from counting.heads.density.heatmap import PICTURE_TOP_FLOOR, density_heatmap_png, overlay_density, picture_top
from counting.model.counting_model import default_model_path, load_model
from counting.train.pipeline import TrainingConfig, train_model


@pytest.fixture(scope="module")
def mall_density(mall_root: Path):
    return load_dataset("mall", mall_root, split="train=1-60,test=61-72")


@pytest.fixture(scope="module")
def density_model(mall_density, session_cache_dir: Path):
    config = TrainingConfig(
        input_size=160, grid=(2, 2), density_head=True, n_centers=5, max_epochs=3, calibration="tail"
    )
    messages: list[str] = []
    model = train_model(mall_density, config, cache=FeatureCache(session_cache_dir), log=messages.append)
    model.log_lines = messages  # type: ignore[attr-defined]
    return model


def test_density_model_feeds_the_regressor_its_region_sums(density_model) -> None:
    head = density_model.density_head
    assert head is not None and head.grid == (2, 2) and density_model.grid is None
    assert density_model.layout == "frame" and density_model.regressor.n_features_in_ == 5  # ROI + 4 cells
    assert density_model.training["density_head"] is True
    assert head.settings["target"] == {"sigma": 4.0, "perspective": False}
    assert head.settings["count_weight"] == 0.0 and head.settings["display_max"] > 0
    assert any("density head: penalty" in line and "out-of-fold count MAE" in line for line in density_model.log_lines)


def test_density_model_counts_real_frames_after_a_round_trip(
    density_model, mall_density, session_cache_dir: Path, tmp_path: Path
) -> None:
    loaded = load_model(density_model.save(tmp_path / "density.npz"))
    assert loaded.density_head is not None and loaded.density_head.layers == density_model.density_head.layers
    np.testing.assert_array_equal(loaded.density_head.coef, density_model.density_head.coef)
    test = mall_density.subset("test")
    result = loaded.count_paths(test.paths, cache=FeatureCache(session_cache_dir))
    assert result.ok.all() and result.low is not None
    from_images = loaded.count_images([load_image(path) for path in test.paths])
    np.testing.assert_allclose(result.counts, from_images, rtol=1e-3, atol=1e-3)
    # Frames 61-72 hold 18-26 people; the head fitted on 60 frames at 160 px sums to within a few
    # (the 5-centre, 3-epoch AGP of this quick test only has to stay inside the train range).
    from counting.heads.density.maps import extract_maps

    maps = extract_maps(test.paths, loaded.get_backbone(), loaded.preprocessing(), loaded.density_head.layers)
    sums = loaded.density_head.region_counts(maps.stacked(), loaded.roi_mask, (2, 2))
    np.testing.assert_allclose(sums[:, 1:].sum(axis=1), sums[:, 0], rtol=1e-9)  # cells add up to the ROI
    assert np.abs(sums[:, 0] - test.counts).mean() < 5.0
    train_counts = mall_density.subset("train").counts
    assert np.all((result.counts > train_counts.min() - 5) & (result.counts < train_counts.max() + 5))


def test_heat_map_has_the_frame_size_and_marks_people(density_model, mall_density, tmp_path: Path) -> None:
    path = mall_density.subset("test").paths[0]
    png = density_heatmap_png(density_model, path, tmp_path / "heat.png")
    drawn = cv2.imread(str(png))
    assert drawn.shape == (480, 640, 3)
    frame = cv2.imread(str(path))
    changed = np.abs(drawn.astype(int) - frame.astype(int)).sum(axis=2) > 30
    assert 0.01 < changed.mean() < 0.9  # coloured where the people are, not everywhere


def test_overlay_leaves_empty_cells_alone() -> None:
    image = np.full((40, 60, 3), 100, np.uint8)
    density = np.zeros((4, 6))
    density[0, 0] = 1.0
    drawn = overlay_density(image, density)
    assert drawn.shape == image.shape
    assert np.array_equal(drawn[30:, 30:], image[30:, 30:]) and not np.array_equal(drawn[:5, :5], image[:5, :5])
    with pytest.raises(ValueError, match="uint8"):
        overlay_density(image.astype(float), density)


def test_a_picture_drawn_on_its_own_scale_turns_red_at_its_densest_cell_within_bounds() -> None:
    density = np.zeros((6, 8))
    density[2, 3], density[4, 4] = 0.3, -0.2  # a negative cell is no person
    assert picture_top(density, 1.4) == pytest.approx(0.3)
    assert picture_top(density, None) == pytest.approx(0.3)
    assert picture_top(density, 0.25) == pytest.approx(0.25)  # a crowd saturates as on the model's scale
    assert picture_top(density * 0.01, 1.4) == PICTURE_TOP_FLOOR  # a few hundredths of a person stay faint
    assert picture_top(np.zeros((0, 0)), 1.4) == PICTURE_TOP_FLOOR
    image = np.full((60, 80, 3), 100, np.uint8)
    assert overlay_density(image, density, picture_top(density, 1.4))[25, 35].tolist() != [100, 100, 100]


def test_models_without_a_head_keep_their_metadata(tmp_path: Path) -> None:
    # The Mall class-score model (the default before the crowd model, which has a head).
    shipped = load_model(default_model_path().parent / "default.npz")
    assert shipped.density_head is None
    assert "density_head" not in shipped.metadata() and "density_head" not in shipped.summary()
    again = load_model(shipped.save(tmp_path / "again.npz"))
    assert again.metadata() == shipped.metadata() | {"counting_version": again.metadata()["counting_version"]}


def test_density_head_needs_dots_of_one_kind(tmp_path: Path) -> None:
    from counting.core.errors import DatasetError
    from counting.data.datasets import CountingDataset, Sample

    samples = [Sample(path=tmp_path / f"{i}.jpg", count=1.0, split="train", index=i) for i in range(12)]
    with pytest.raises(DatasetError, match="needs head dots, which folder does not have"):
        train_model(CountingDataset(name="folder", root=tmp_path, samples=samples), TrainingConfig(density_head=True))
    # Several classes: the per-class head (counting.heads.density.classes.head) needs each photo's VOC boxes.
    several = CountingDataset(name="voc", root=tmp_path, samples=samples, class_names=["person", "car"])
    with pytest.raises(DatasetError, match=r"Annotations/0.xml: --density-head needs the photo's boxes"):
        train_model(several, TrainingConfig(density_head=True))
