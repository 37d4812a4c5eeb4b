"""UCSD reader on generated releases in the published vidf/ + vidf-cvpr/ format."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.io
from fixtures.matlab import cell, struct
from fixtures.ucsd import make_ucsd_fixture
from PIL import Image

from counting.core.errors import DatasetError
from counting.data.datasets import load_dataset


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory):
    return make_ucsd_fixture(tmp_path_factory.mktemp("ucsd"), seed=3)


def test_standard_split_is_frames_601_1400_train_and_the_other_1200_test(release) -> None:
    ds = load_dataset("ucsd", release.root)
    assert ds.subset("train").indices.tolist() == list(range(601, 1401))
    test = ds.subset("test").indices
    assert len(test) == 1200 and test.min() == 1 and test.max() == 2000
    assert not np.isin(test, np.arange(601, 1401)).any()


def test_counts_are_the_sum_of_both_directions_and_match_the_fixture(release) -> None:
    ds = load_dataset("ucsd", release.root)
    assert np.array_equal(ds.indices, release.indices)
    assert np.array_equal(ds.counts, release.counts)
    clip = scipy.io.loadmat(release.root / "vidf-cvpr" / "vidf1_33_004_count_roi_mainwalkway.mat")["count"]
    per_direction = clip[0, 0].ravel() + clip[0, 1].ravel()
    assert np.array_equal(ds.counts[800:1000], per_direction)
    assert ds.samples[800].path.name == "vidf1_33_004_f001.png" and ds.samples[800].index == 801


def test_roi_and_full_frame_dots_are_read(release) -> None:
    ds = load_dataset("ucsd", release.root)
    assert ds.roi_mask.shape == (158, 238) and np.array_equal(ds.roi_mask, release.roi_mask)
    assert all(np.allclose(s.dots, d) for s, d in zip(ds.samples[::97], release.dots[::97], strict=True))
    # frame_full covers the whole frame; the count only the walkway ROI.
    assert all(len(sample.dots) >= sample.count for sample in ds.samples)
    with Image.open(ds.paths[0]) as frame:
        assert (frame.mode, frame.size) == ("L", (238, 158))


@pytest.mark.parametrize("folder", ["vidf", "vidf-cvpr"])
def test_root_may_point_at_either_folder(release, folder: str) -> None:
    ds = load_dataset("ucsd", release.root / folder)
    assert ds.root == release.root.resolve() and len(ds) == 2000


def test_range_split_over_global_frame_numbers(release) -> None:
    ds = load_dataset("ucsd", release.root, split="train=1-200,test=1801-2000")
    assert ds.subset("train").paths[0].name == "vidf1_33_000_f001.png"
    assert ds.subset("test").paths[-1].name == "vidf1_33_009_f200.png"
    assert np.array_equal(ds.subset("test").counts, release.counts[1800:])


def test_clips_on_disk_define_what_is_available(tmp_path: Path) -> None:
    truth = make_ucsd_fixture(tmp_path, clips=(2, 3, 4), frames_per_clip=200, size=(16, 24), with_roi=False)
    ds = load_dataset("ucsd", tmp_path)
    assert ds.subset("test").indices.tolist() == list(range(401, 601))
    assert ds.subset("train").indices.tolist() == list(range(601, 1001))
    assert np.array_equal(ds.counts, truth.counts) and ds.roi_mask is None
    shutil.rmtree(tmp_path / "vidf" / "vidf1_33_003.y")
    assert len(load_dataset("ucsd", tmp_path)) == 400
    with pytest.raises(DatasetError, match=r"vidf1_33_003_f001\.png: image not found"):
        load_dataset("ucsd", tmp_path, split="train=601-700")


def test_frame_missing_inside_a_clip_is_named(tmp_path: Path) -> None:
    make_ucsd_fixture(tmp_path, clips=(0,), frames_per_clip=20, size=(16, 24))
    (tmp_path / "vidf" / "vidf1_33_000.y" / "vidf1_33_000_f007.png").unlink()
    with pytest.raises(DatasetError, match=r"vidf1_33_000_f007\.png: frame not found"):
        load_dataset("ucsd", tmp_path, split="random:0.5")


def test_frames_without_a_count_file_and_corrupt_annotations_are_named(tmp_path: Path) -> None:
    make_ucsd_fixture(tmp_path, clips=(0, 1), frames_per_clip=5, size=(16, 24), with_roi=False)
    count_file = tmp_path / "vidf-cvpr" / "vidf1_33_001_count_roi_mainwalkway.mat"
    count_file.write_text("garbage")
    with pytest.raises(DatasetError, match=r"vidf1_33_001_count_roi_mainwalkway\.mat: not a readable MATLAB"):
        load_dataset("ucsd", tmp_path, split="random:0.5")
    count_file.unlink()
    with pytest.raises(DatasetError, match=r"vidf1_33_001_count_roi_mainwalkway\.mat: file not found"):
        load_dataset("ucsd", tmp_path, split="random:0.5")


def test_direction_counts_of_different_lengths_are_an_error(tmp_path: Path) -> None:
    make_ucsd_fixture(tmp_path, clips=(0,), frames_per_clip=5, size=(16, 24))
    scipy.io.savemat(
        tmp_path / "vidf-cvpr" / "vidf1_33_000_count_roi_mainwalkway.mat",
        {"count": cell([np.ones((5, 1)), np.ones((4, 1))])},
    )
    with pytest.raises(DatasetError, match=r"count\{\} cells have different lengths \[5, 4\]"):
        load_dataset("ucsd", tmp_path, split="random:0.4")


def test_dots_file_is_optional_and_a_third_loc_column_is_ignored(tmp_path: Path) -> None:
    make_ucsd_fixture(tmp_path, clips=(0,), frames_per_clip=3, size=(16, 24), with_dots=False)
    assert all(sample.dots is None for sample in load_dataset("ucsd", tmp_path, split="random:0.4"))
    locs = [
        np.array([[3.0, 4.0, 1.0]]),
        np.zeros((0, 3)),
        np.array([[1.0, 2.0, 1.0], [5.0, 6.0, 1.0]]),
    ]
    scipy.io.savemat(
        tmp_path / "vidf-cvpr" / "vidf1_33_000_frame_full.mat",
        {"frame": cell([struct(loc=loc) for loc in locs])},
    )
    ds = load_dataset("ucsd", tmp_path, split="train=1-2,test=3")
    assert [s.dots.tolist() for s in ds.samples] == [[[3.0, 4.0]], [], [[1.0, 2.0], [5.0, 6.0]]]


def test_missing_annotation_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "vidf").mkdir()
    with pytest.raises(DatasetError, match=r"vidf-cvpr: folder not found"):
        load_dataset("ucsd", tmp_path)
