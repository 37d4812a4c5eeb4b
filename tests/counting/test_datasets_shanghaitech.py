"""ShanghaiTech reader: the real Part B train folder and generated part layouts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.io
from fixtures.shanghaitech import make_shanghaitech_part, make_shanghaitech_split

from counting.core.errors import DatasetError
from counting.data.datasets import load_dataset

# Head counts read from the real ground_truth/GT_IMG_n.mat files (location rows = number).
KNOWN_PART_B_COUNTS = {1: 234, 2: 153, 100: 206, 222: 578, 400: 62}


@pytest.fixture(scope="module")
def part_b_train(shanghaitech_root: Path):
    return load_dataset("shanghaitech", shanghaitech_root)


def test_real_part_b_train_folder_is_400_train_images_sorted_by_number(part_b_train) -> None:
    assert len(part_b_train) == 400
    assert part_b_train.indices.tolist() == list(range(1, 401))
    assert {sample.split for sample in part_b_train} == {"train"}
    summary = part_b_train.describe()["splits"]
    assert (summary["train"]["count_min"], summary["train"]["count_max"]) == (12.0, 578.0)
    assert summary["test"]["n"] == 0


def test_real_part_b_known_counts_and_dots(part_b_train) -> None:
    by_index = {sample.index: sample for sample in part_b_train}
    for index, count in KNOWN_PART_B_COUNTS.items():
        sample = by_index[index]
        assert sample.path.name == f"IMG_{index}.jpg" and sample.path.is_file()
        assert sample.count == count and sample.dots.shape == (count, 2)


def test_real_part_b_range_and_random_splits(shanghaitech_root: Path) -> None:
    ranged = load_dataset("shanghaitech", shanghaitech_root, split="train=1-300,test=301-400")
    assert ranged.subset("test").indices.tolist() == list(range(301, 401))
    shuffled = load_dataset("shanghaitech", shanghaitech_root, split="random:0.2:5")
    assert len(shuffled.subset("test")) == 80 and len(shuffled.subset("train")) == 320


@pytest.fixture()
def part(tmp_path: Path):
    return tmp_path, make_shanghaitech_part(tmp_path, n_train=6, n_test=4)


def test_part_folder_takes_the_split_from_train_data_and_test_data(part) -> None:
    root, truth = part
    ds = load_dataset("shanghaitech", root)
    train, test = ds.subset("train"), ds.subset("test")
    assert np.array_equal(train.counts, truth["train"].counts)
    assert np.array_equal(test.counts, truth["test"].counts)  # read through ground_truth/
    assert all("test_data" in str(path) for path in test.paths)
    assert np.allclose(test.samples[2].dots, truth["test"].dots[2])


def test_a_lone_test_data_folder_is_test_and_other_folders_are_train(part) -> None:
    root, truth = part
    assert {s.split for s in load_dataset("shanghaitech", root / "test_data")} == {"test"}
    assert {s.split for s in load_dataset("shanghaitech", root / "train_data")} == {"train"}


def test_range_split_over_a_part_folder_is_ambiguous(part) -> None:
    root, _ = part
    with pytest.raises(DatasetError, match="image number 1 occurs more than once"):
        load_dataset("shanghaitech", root, split="train=1-3,test=4-6")


def test_image_without_ground_truth_is_named(tmp_path: Path) -> None:
    make_shanghaitech_split(tmp_path, 3)
    (tmp_path / "ground-truth" / "GT_IMG_2.mat").unlink()
    with pytest.raises(DatasetError, match=r"GT_IMG_2\.mat: file not found"):
        load_dataset("shanghaitech", tmp_path)


def test_ground_truth_without_its_image_is_named(tmp_path: Path) -> None:
    make_shanghaitech_split(tmp_path, 3)
    (tmp_path / "images" / "IMG_3.jpg").unlink()
    with pytest.raises(DatasetError, match=r"GT_IMG_3\.mat: ground truth without its image .*IMG_3\.jpg"):
        load_dataset("shanghaitech", tmp_path)


def test_number_that_disagrees_with_the_locations_is_an_error(tmp_path: Path) -> None:
    make_shanghaitech_split(tmp_path, 2)
    path = tmp_path / "ground-truth" / "GT_IMG_1.mat"
    contents = scipy.io.loadmat(path)
    contents["image_info"][0, 0][0, 0]["number"] = np.array([[99.0]])
    scipy.io.savemat(path, {"image_info": contents["image_info"]})
    with pytest.raises(DatasetError, match=r"GT_IMG_1\.mat: 'number' is \[99\.0\] but 'location' has"):
        load_dataset("shanghaitech", tmp_path)


def test_corrupt_ground_truth_and_wrong_folders_are_named(tmp_path: Path) -> None:
    make_shanghaitech_split(tmp_path / "split", 2)
    (tmp_path / "split" / "ground-truth" / "GT_IMG_2.mat").write_bytes(b"\x00" * 64)
    with pytest.raises(DatasetError, match=r"GT_IMG_2\.mat: not a readable MATLAB"):
        load_dataset("shanghaitech", tmp_path / "split")
    with pytest.raises(DatasetError, match="neither train_data/ and test_data/ nor images/"):
        load_dataset("shanghaitech", tmp_path)
