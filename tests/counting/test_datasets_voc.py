"""VOC-2007 reader: the five real test images and a generated VOCdevkit tree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fixtures.voc import make_voc_fixture, write_annotation

from counting.core.errors import DatasetError
from counting.data.datasets import VOC_CLASSES, load_dataset


def _counts_by_class(sample) -> dict[str, float]:
    return {VOC_CLASSES[k]: float(v) for k, v in enumerate(sample.count) if v}


def test_real_mini_voc_is_five_test_images_with_20_class_counts(voc_root: Path) -> None:
    ds = load_dataset("voc", voc_root)
    assert ds.class_names == list(VOC_CLASSES) and len(ds.class_names) == 20
    assert ds.counts.shape == (5, 20)
    assert ds.indices.tolist() == [342, 542, 3123, 4101, 8591]
    assert len(ds.subset("train")) == 0 and len(ds.subset("test")) == 5
    assert all(path.is_file() for path in ds.paths)


def test_real_mini_voc_leaves_difficult_objects_out_by_default(voc_root: Path) -> None:
    by_id = {s.path.stem: s for s in load_dataset("voc", voc_root)}
    # 004101.xml: sofa, person, and three bicycles flagged difficult.
    assert _counts_by_class(by_id["004101"]) == {"sofa": 1.0, "person": 1.0}
    assert _counts_by_class(by_id["003123"]) == {"person": 14.0, "diningtable": 1.0}
    assert _counts_by_class(by_id["000542"]) == {"cat": 1.0}
    counted = by_id["004101"]
    assert counted.dots.shape == (2, 2)
    assert [VOC_CLASSES[k] for k in counted.dot_labels] == ["sofa", "person"]


def test_real_mini_voc_counts_difficult_objects_when_asked(voc_root: Path) -> None:
    by_id = {s.path.stem: s for s in load_dataset("voc", voc_root / "VOC2007", include_difficult=True)}
    assert _counts_by_class(by_id["004101"]) == {"sofa": 1.0, "person": 1.0, "bicycle": 3.0}
    assert _counts_by_class(by_id["003123"]) == {"person": 14.0, "diningtable": 1.0, "chair": 1.0}
    assert sum(s.count.sum() for s in by_id.values()) == 30


def test_generated_trainval_and_test_lists_give_the_standard_split(tmp_path: Path) -> None:
    truth = make_voc_fixture(tmp_path, n_trainval=6, n_test=4)
    ds = load_dataset("voc", tmp_path)
    assert [s.split for s in ds] == ["train"] * 6 + ["test"] * 4
    assert np.array_equal(ds.counts, truth["easy"])
    assert np.array_equal(load_dataset("voc", tmp_path, include_difficult=True).counts, truth["all"])
    assert load_dataset("voc", tmp_path, split="train=1-3,test=9-10").subset("test").indices.tolist() == [9, 10]


def test_bad_annotations_are_named(tmp_path: Path) -> None:
    make_voc_fixture(tmp_path, n_trainval=2, n_test=1)
    annotations = tmp_path / "VOC2007" / "Annotations"
    write_annotation(annotations / "000002.xml", "000002", [("unicorn", False, (1, 1, 5, 5))], (24, 32))
    with pytest.raises(DatasetError, match=r"000002\.xml: object 1 has unknown class 'unicorn'"):
        load_dataset("voc", tmp_path)
    (annotations / "000002.xml").write_text("<annotation><object>")
    with pytest.raises(DatasetError, match=r"000002\.xml: not valid XML"):
        load_dataset("voc", tmp_path)
    (annotations / "000002.xml").unlink()
    with pytest.raises(DatasetError, match=r"000002\.xml: file not found"):
        load_dataset("voc", tmp_path)


def test_missing_image_and_doubly_listed_image_are_named(tmp_path: Path) -> None:
    make_voc_fixture(tmp_path, n_trainval=2, n_test=2)
    main = tmp_path / "VOC2007" / "ImageSets" / "Main"
    (main / "test.txt").write_text("000003\n000001\n")
    with pytest.raises(DatasetError, match=r"test\.txt: line 2: image 000001 is also in the train list"):
        load_dataset("voc", tmp_path)
    (main / "test.txt").write_text("000003\n000004\n")
    (tmp_path / "VOC2007" / "JPEGImages" / "000004.jpg").unlink()
    with pytest.raises(DatasetError, match=r"000004\.jpg: image not found"):
        load_dataset("voc", tmp_path)


def test_without_image_sets_only_random_or_range_splits_work(tmp_path: Path) -> None:
    make_voc_fixture(tmp_path, n_trainval=3, n_test=3)
    for name in ("trainval.txt", "test.txt"):
        (tmp_path / "VOC2007" / "ImageSets" / "Main" / name).unlink()
    with pytest.raises(DatasetError, match="no standard split here"):
        load_dataset("voc", tmp_path)
    assert len(load_dataset("voc", tmp_path, split="random:0.5:2").subset("test")) == 3


def test_a_folder_without_annotations_is_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no Annotations/ folder"):
        load_dataset("voc", tmp_path)
