"""Mall reader: the real frames 1-800 and generated full-release layouts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.io
from fixtures.mall import make_mall_fixture

from counting.core.errors import DatasetError
from counting.data.datasets import load_dataset

# Read from the real mall_gt.mat (frame number -> count); each equals that frame's head dots.
KNOWN_MALL_COUNTS = {1: 29, 2: 30, 3: 35, 90: 13, 397: 50, 400: 48, 800: 29}


@pytest.fixture(scope="module")
def mall(mall_root: Path):
    return load_dataset("mall", mall_root)


def test_real_mall_standard_split_is_800_train_frames_and_an_empty_test_split(mall) -> None:
    summary = mall.describe()
    assert summary["splits"]["train"] == {
        "n": 800,
        "count_min": 13.0,
        "count_max": 50.0,
        "count_mean": pytest.approx(29.544, abs=1e-3),
    }
    assert summary["splits"]["test"]["n"] == 0
    assert mall.subset("train").indices.tolist() == list(range(1, 801))
    assert len(mall.subset("test")) == 0
    assert repr(mall).endswith("split='standard', train=800, test=0)")


def test_real_mall_known_counts_match_the_head_dots(mall) -> None:
    by_index = {sample.index: sample for sample in mall.samples}
    for index, count in KNOWN_MALL_COUNTS.items():
        sample = by_index[index]
        assert sample.path.name == f"seq_{index:06d}.jpg"
        assert sample.count == count
        assert sample.dots.shape == (count, 2)
    assert all(len(sample.dots) == sample.count for sample in mall.samples)


def test_real_mall_dots_lie_in_the_640x480_frames_and_the_roi_is_loaded(mall) -> None:
    dots = np.concatenate([sample.dots for sample in mall.samples])
    assert dots.min() >= 0 and dots[:, 0].max() <= 640 and dots[:, 1].max() <= 480
    assert mall.roi_mask.shape == (480, 640) and mall.roi_mask.dtype == bool
    assert mall.roi_mask.sum() == 277153
    assert mall.perspective_map.shape == (480, 640)
    assert all(path.is_file() for path in mall.paths[::100])


def test_real_mall_range_split_selects_the_asked_frames(mall_root: Path) -> None:
    ds = load_dataset("mall", mall_root, split="train=1-100,test=701-800")
    assert ds.subset("train").indices.tolist() == list(range(1, 101))
    assert ds.subset("test").indices.tolist() == list(range(701, 801))
    assert ds.subset("test").counts[-1] == KNOWN_MALL_COUNTS[800]


def test_real_mall_range_beyond_the_ground_truth_is_an_error(mall_root: Path) -> None:
    with pytest.raises(DatasetError, match="frame 801 has no ground truth"):
        load_dataset("mall", mall_root, split="train=1-800,test=801-2000")


def test_real_mall_random_split_is_reproducible(mall_root: Path) -> None:
    first = load_dataset("mall", mall_root, split="random:0.25:1")
    again = load_dataset("mall", mall_root, split="random:0.25:1")
    assert len(first.subset("test")) == 200
    assert np.array_equal(first.subset("test").indices, again.subset("test").indices)


@pytest.fixture(scope="module")
def full_release(tmp_path_factory: pytest.TempPathFactory):
    return make_mall_fixture(tmp_path_factory.mktemp("mall-full"))


def test_full_release_standard_split_is_frames_1_800_train_801_2000_test(full_release) -> None:
    ds = load_dataset("mall", full_release.root)
    train, test = ds.subset("train"), ds.subset("test")
    assert train.indices.tolist() == list(range(1, 801))
    assert test.indices.tolist() == list(range(801, 2001))
    assert np.array_equal(ds.counts, full_release.counts)
    assert np.array_equal(ds.roi_mask, full_release.roi_mask)
    assert ds.describe()["splits"]["test"]["n"] == 1200
    assert np.allclose(ds.samples[1234].dots, full_release.dots[1234])


def test_full_ground_truth_with_only_frames_1_800_on_disk_uses_those(tmp_path: Path) -> None:
    truth = make_mall_fixture(tmp_path, frames_on_disk=range(1, 801), with_roi=False)
    ds = load_dataset("mall", tmp_path)
    assert len(ds.subset("train")) == 800 and len(ds.subset("test")) == 0
    assert np.array_equal(ds.counts, truth.counts[:800])
    assert ds.roi_mask is None and ds.perspective_map is None
    with pytest.raises(DatasetError, match=r"seq_000801\.jpg: image not found"):
        load_dataset("mall", tmp_path, split="train=1-800,test=801-2000")


def test_a_frame_missing_between_present_frames_is_named(tmp_path: Path) -> None:
    make_mall_fixture(tmp_path, n_frames=40, frames_on_disk=[n for n in range(1, 31) if n != 17])
    with pytest.raises(DatasetError, match=r"seq_000017\.jpg: frame not found"):
        load_dataset("mall", tmp_path)


def test_count_that_disagrees_with_the_head_dots_is_an_error(tmp_path: Path) -> None:
    make_mall_fixture(tmp_path, n_frames=12)
    contents = scipy.io.loadmat(tmp_path / "mall_gt.mat")
    contents["count"][4, 0] += 1
    scipy.io.savemat(tmp_path / "mall_gt.mat", {"frame": contents["frame"], "count": contents["count"]})
    with pytest.raises(DatasetError, match=r"mall_gt\.mat: frame 5 has \d+ head points but count"):
        load_dataset("mall", tmp_path)


def test_corrupt_or_missing_ground_truth_names_the_file(tmp_path: Path) -> None:
    make_mall_fixture(tmp_path, n_frames=5)
    (tmp_path / "mall_gt.mat").write_text("not a MATLAB file\n")
    with pytest.raises(DatasetError, match=r"mall_gt\.mat: not a readable MATLAB \.mat file") as caught:
        load_dataset("mall", tmp_path)
    assert "\n" not in str(caught.value)
    (tmp_path / "mall_gt.mat").unlink()
    with pytest.raises(DatasetError, match=r"mall_gt\.mat: file not found"):
        load_dataset("mall", tmp_path)


def test_roi_mask_of_the_wrong_size_is_an_error(tmp_path: Path) -> None:
    make_mall_fixture(tmp_path, n_frames=5, size=(24, 32))
    scipy.io.savemat(tmp_path / "perspective_roi.mat", {"roi": {"mask": np.ones((20, 32), np.uint8)}})
    with pytest.raises(DatasetError, match=r"perspective_roi\.mat: roi\.mask is 32x20 \(WxH\) but frame"):
        load_dataset("mall", tmp_path)


def test_missing_frames_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"frames: folder not found"):
        load_dataset("mall", tmp_path)
