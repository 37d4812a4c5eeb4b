"""Points 11, 13, 16: dataset readers refuse bad annotations, lists, rows, seeds and arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from robust_helpers import assert_one_error, assert_unchanged, make_image, snapshot

from counting.core.errors import DatasetError
from counting.data.datasets import load_dataset

BOX = "<xmin>{0}</xmin><ymin>{1}</ymin><xmax>{2}</xmax><ymax>{3}</ymax>"


def voc_xml(*boxes: tuple) -> str:
    objects = "".join(
        f"<object><name>person</name><difficult>0</difficult><bndbox>{BOX.format(*box)}</bndbox></object>"
        for box in boxes
    )
    return f"<annotation>{objects}</annotation>"


@pytest.fixture
def voc_root(tmp_path: Path) -> Path:
    """A VOC2007 layout with 6 images (4 trainval, 2 test)."""
    year = tmp_path / "VOCdevkit" / "VOC2007"
    for folder in ("Annotations", "JPEGImages", "ImageSets/Main"):
        (year / folder).mkdir(parents=True)
    ids = [f"{k:06d}" for k in range(1, 7)]
    for k, image_id in enumerate(ids):
        make_image(year / "JPEGImages" / f"{image_id}.jpg", seed=k)
        (year / "Annotations" / f"{image_id}.xml").write_text(voc_xml((1, 2, 10, 20)))
    (year / "ImageSets/Main/trainval.txt").write_text("\n".join(ids[:4]) + "\n")
    (year / "ImageSets/Main/test.txt").write_text("\n".join(ids[4:]) + "\n")
    return tmp_path / "VOCdevkit"


def evaluate(cli, dataset: str, root: Path, *more):
    return cli("evaluate", "--dataset", dataset, "--root", root, "--no-progress", *more)


def annotation(root: Path, image_id: str = "000002") -> Path:
    return root / "VOC2007" / "Annotations" / f"{image_id}.xml"


# -- point 11: VOC ---------------------------------------------------------------------------------
def test_voc_reads_when_all_is_well(voc_root: Path) -> None:
    data = load_dataset("voc", voc_root)
    assert len(data.subset("train")) == 4 and len(data.subset("test")) == 2


def test_voc_annotation_that_is_a_folder(cli, voc_root: Path) -> None:
    path = annotation(voc_root)
    path.unlink()
    path.mkdir()
    assert_one_error(evaluate(cli, "voc", voc_root), str(path), "is a folder")


def test_voc_annotation_that_cannot_be_read(cli, voc_root: Path) -> None:
    path = annotation(voc_root)
    path.unlink()
    path.symlink_to(path)  # a link to itself: opening it fails (ELOOP) for any user
    assert_one_error(evaluate(cli, "voc", voc_root), str(path), "cannot read the annotation")


def test_voc_image_list_not_utf8(cli, voc_root: Path) -> None:
    listing = voc_root / "VOC2007" / "ImageSets" / "Main" / "test.txt"
    listing.write_bytes(b"000005\n\xff\xfe000006\n")
    before = snapshot(listing)
    assert_one_error(evaluate(cli, "voc", voc_root), str(listing), "not UTF-8")
    assert_unchanged(before)


@pytest.mark.parametrize("box", [("nan", 2, 10, 20), (1, 2, "inf", 20), (1, "-inf", 10, 20)])
def test_voc_non_finite_boxes_are_refused(cli, voc_root: Path, box: tuple) -> None:
    path = annotation(voc_root, "000003")
    path.write_text(voc_xml((1, 2, 3, 4), box))
    assert_one_error(evaluate(cli, "voc", voc_root), str(path), "object 2", "NaN or infinite")


# -- point 16: folder CSV ----------------------------------------------------------------------------
@pytest.fixture
def folder_root(tmp_path: Path) -> Path:
    root = tmp_path / "photos"
    root.mkdir()
    for k in range(4):
        make_image(root / f"{k}.png", seed=k)
    return root


def write_counts(root: Path, rows: list[str]) -> Path:
    table = root / "counts.csv"
    table.write_text("filename,count,split\n" + "\n".join(rows) + "\n")
    return table


@pytest.mark.parametrize("name", ["../outside.png", "/etc/hostname", "sub/../../outside.png"])
def test_folder_rows_outside_the_root(cli, folder_root: Path, name: str) -> None:
    make_image(folder_root.parent / "outside.png")
    table = write_counts(
        folder_root,
        ["0.png,1,train", "1.png,2,train", f"{name},3,test", "3.png,1,test"],
    )
    line = assert_one_error(
        evaluate(cli, "folder", folder_root),
        str(table),
        "line 4",
        "outside the dataset folder",
    )
    assert name in line


@pytest.mark.parametrize("count", ["1e300", "2e6", "inf", "nan"])
def test_folder_absurd_counts(cli, folder_root: Path, count: str) -> None:
    table = write_counts(
        folder_root,
        ["0.png,1,train", f"1.png,{count},train", "2.png,1,test", "3.png,1,test"],
    )
    assert_one_error(evaluate(cli, "folder", folder_root), str(table), "line 3")


def test_folder_symlinked_image_inside_the_root_is_fine(folder_root: Path, tmp_path: Path) -> None:
    elsewhere = make_image(tmp_path / "elsewhere.png")
    (folder_root / "4.png").symlink_to(elsewhere)
    write_counts(
        folder_root,
        [
            "0.png,1,train",
            "1.png,2,train",
            "2.png,3,test",
            "3.png,1,test",
            "4.png,5,train",
        ],
    )
    assert len(load_dataset("folder", folder_root)) == 5


# -- point 13: seeds and 0-d arrays -------------------------------------------------------------------
@pytest.mark.parametrize("seed", [str(2**32), str(10**30), "-1"])
def test_split_seed_out_of_range(cli, folder_root: Path, seed: str) -> None:
    write_counts(folder_root, ["0.png,1,train", "1.png,2,train", "2.png,3,test", "3.png,1,test"])
    assert_one_error(
        evaluate(cli, "folder", folder_root, "--split", f"random:0.5:{seed}"),
        seed,
        "SEED",
    )


def test_split_seed_at_the_limit_works(folder_root: Path) -> None:
    write_counts(folder_root, ["0.png,1,train", "1.png,2,train", "2.png,3,test", "3.png,1,test"])
    data = load_dataset("folder", folder_root, split=f"random:0.5:{2**32 - 1}")
    assert len(data.subset("test")) == 2


@pytest.mark.parametrize(
    ("array", "problem"),
    [
        (np.array(3.0), "found float64 ()"),
        (np.zeros(1000), "(1000,)"),
        (np.array(["a", "b"]), "<U1"),
    ],
)
def test_count_features_with_a_bad_array(cli, tmp_path: Path, array: np.ndarray, problem: str) -> None:
    path = tmp_path / "features.npy"
    np.save(path, array)
    assert_one_error(cli("count", "--features", path), str(path), "not a features file", problem)


@pytest.mark.parametrize(
    "header",
    [
        b"{'descr': '<f8', 'fortran_order': False, 'shape': (3,), ",  # unclosed: tokenize's TokenError
        b"{'descr': f(), 'fortran_order': False, 'shape': (3,), }",  # not a literal: '<ast.Call object ...>'
    ],
)
def test_count_features_with_a_damaged_header(cli, tmp_path: Path, header: bytes) -> None:
    path = tmp_path / "features.npy"
    padded = header.ljust(118) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(padded).to_bytes(2, "little") + padded + bytes(24))
    line = assert_one_error(cli("count", "--features", path), str(path), "an array header is damaged")
    assert "<ast." not in line


def test_count_features_that_is_a_folder_or_a_pickle(cli, tmp_path: Path) -> None:
    folder = tmp_path / "features.npy"
    folder.mkdir()
    assert_one_error(cli("count", "--features", folder), str(folder), "not a regular file")
    pickled = tmp_path / "objects.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert_one_error(cli("count", "--features", pickled), str(pickled), "not a features file")


def test_dataset_error_is_a_dataset_error(folder_root: Path) -> None:
    write_counts(folder_root, ["../x.png,1,train"])
    with pytest.raises(DatasetError, match="outside the dataset folder"):
        load_dataset("folder", folder_root)
