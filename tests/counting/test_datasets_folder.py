"""Folder reader: images plus a counts CSV."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fixtures.images import draw_frame

from counting.core.errors import DatasetError
from counting.data.datasets import load_dataset


@pytest.fixture()
def images(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    for name in ("a.jpg", "b.png", "c.jpg"):
        draw_frame(tmp_path / name, (12, 16), np.zeros((0, 2)), rng)
    return tmp_path


def _write(folder: Path, text: str, name: str = "counts.csv") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_single_count_csv_in_row_order(images: Path) -> None:
    _write(images, "filename,count\nc.jpg,7\na.jpg,2.5\nb.png,0\n")
    ds = load_dataset("folder", images)
    assert [p.name for p in ds.paths] == ["c.jpg", "a.jpg", "b.png"]
    assert ds.counts.tolist() == [7.0, 2.5, 0.0]
    assert ds.indices.tolist() == [1, 2, 3] and ds.class_names is None
    assert {s.split for s in ds} == {"train"}


def test_one_column_per_class_and_a_split_column(images: Path) -> None:
    _write(images, "filename,person,car,split\na.jpg,1,2,train\nb.png,0,3,test\nc.jpg,4,0,train\n")
    ds = load_dataset("folder", images)
    assert ds.class_names == ["person", "car"]
    assert ds.counts.tolist() == [[1, 2], [0, 3], [4, 0]]
    assert ds.subset("test").paths[0].name == "b.png"


def test_headerless_two_column_csv_and_a_csv_elsewhere(images: Path, tmp_path_factory) -> None:
    elsewhere = _write(tmp_path_factory.mktemp("csv"), "a.jpg,1\nb.png,2\nc.jpg,3\n", "labels.csv")
    ds = load_dataset("folder", images, csv_path=elsewhere, split="train=1-2,test=3")
    assert ds.subset("test").counts.tolist() == [3.0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "filename,count\na.jpg,1\nb.png,many\nc.jpg,2\n",
            r"counts\.csv: line 3: count 'many' in column 'count' is not a number",
        ),
        (
            "filename,count\na.jpg,1\nmissing.jpg,1\nb.png,1\nc.jpg,1\n",
            r"counts\.csv: line 3: image 'missing\.jpg' not found",
        ),
        ("filename,count\na.jpg,1\nb.png,1\n", r"c\.jpg: image has no row in .*counts\.csv"),
        (
            "filename,count\na.jpg,1\nb.png,-2\nc.jpg,1\n",
            r"line 3: count -2 in column 'count' is negative",
        ),
        ("filename,count\na.jpg,1\nb.png,1,9\nc.jpg,1\n", r"line 3: 3 cells, the header has 2"),
        (
            "filename,count\na.jpg,1\na.jpg,2\nb.png,1\nc.jpg,1\n",
            r"line 3: 'a\.jpg' is listed again \(first on line 2\)",
        ),
        ("name,x,y\na.jpg,1,1\n", r"line 1: expected a header 'filename,count'"),
        (
            "filename,count,split\na.jpg,1,val\nb.png,1,test\nc.jpg,1,train\n",
            r"line 2: split 'val' is not train or test",
        ),
        ("filename,count\n", r"no data rows after the header"),
    ],
)
def test_bad_csv_rows_name_the_file_and_line(images: Path, text: str, message: str) -> None:
    _write(images, text)
    with pytest.raises(DatasetError, match=message) as caught:
        load_dataset("folder", images)
    assert "\n" not in str(caught.value)


def test_missing_csv_is_named(images: Path) -> None:
    with pytest.raises(DatasetError, match=r"counts\.csv: counts CSV not found"):
        load_dataset("folder", images)
