"""VOC annotation fields that are not what VOC writes (issue 49).

A ``difficult`` that is not 0 or 1 was read as "not 1" without a word (the object counted, where
the ground truth may leave it out), and a bounding-box coordinate that is not a number gave
"has no valid bndbox" without saying which. Each is now one line naming the file, the object and
the field, with what was found.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from robust_helpers import assert_one_error

from counting.core.errors import DatasetError
from counting.data.datasets import load_dataset
from counting.data.datasets.voc import VOC_CLASSES, count_objects

PERSON = VOC_CLASSES.index("person")


def annotation(path: Path, *objects: str) -> Path:
    path.write_text("<annotation>" + "".join(objects) + "</annotation>")
    return path


def person(difficult: str | None = "0", box: dict[str, str] | None = None) -> str:
    corners = {"xmin": "10", "ymin": "20", "xmax": "30", "ymax": "60"} if box is None else box
    flag = "" if difficult is None else f"<difficult>{difficult}</difficult>"
    inner = "".join(f"<{tag}>{value}</{tag}>" for tag, value in corners.items())
    return f"<object><name>person</name>{flag}<bndbox>{inner}</bndbox></object>"


@pytest.mark.parametrize("value", ["yes", "true", "2", "-1", "0.5", "one"])
def test_difficult_that_is_not_0_or_1_names_the_file_and_field(tmp_path: Path, value: str) -> None:
    xml = annotation(tmp_path / "000001.xml", person("0"), person(value))
    with pytest.raises(DatasetError) as raised:
        count_objects(xml)
    assert str(raised.value) == f"{xml}: object 2's difficult is {value!r}, not 0 or 1"
    with pytest.raises(DatasetError):  # whether difficult objects are counted or not
        count_objects(xml, include_difficult=True)


def test_difficult_0_1_and_absent_are_read_as_before(tmp_path: Path) -> None:
    xml = annotation(tmp_path / "a.xml", person("0"), person("1"), person(None), person(" 1 "), person(""))
    counts, centres, labels = count_objects(xml)
    assert counts[PERSON] == 3  # 0, absent and empty are not difficult
    assert np.array_equal(centres, [[20.0, 40.0]] * 3)
    assert list(labels) == [PERSON] * 3
    assert count_objects(xml, include_difficult=True)[0][PERSON] == 5


@pytest.mark.parametrize(
    ("box", "message"),
    [
        ({"xmin": "ten", "ymin": "20", "xmax": "30", "ymax": "60"}, "object 1's bndbox xmin is 'ten', not a number"),
        ({"xmin": "10", "ymin": "20", "xmax": "30", "ymax": ""}, "object 1's bndbox ymax is '', not a number"),
        ({"xmin": "10", "ymin": "20", "xmax": "30"}, "object 1's bndbox has no ymax"),
    ],
)
def test_bndbox_coordinate_that_is_not_a_number_names_it(tmp_path: Path, box: dict, message: str) -> None:
    xml = annotation(tmp_path / "000001.xml", person("0", box))
    with pytest.raises(DatasetError) as raised:
        count_objects(xml)
    assert str(raised.value) == f"{xml}: {message}"


def test_object_without_a_bndbox_says_so(tmp_path: Path) -> None:
    xml = annotation(tmp_path / "a.xml", "<object><name>person</name><difficult>0</difficult></object>")
    with pytest.raises(DatasetError) as raised:
        count_objects(xml)
    assert str(raised.value) == f"{xml}: object 1 has no bndbox"


def test_train_on_a_dataset_with_a_bad_difficult_is_one_line(cli, tmp_path: Path) -> None:
    year = tmp_path / "VOCdevkit" / "VOC2007"
    (year / "Annotations").mkdir(parents=True)
    (year / "JPEGImages").mkdir()
    annotation(year / "Annotations" / "000001.xml", person("0"))
    bad = annotation(year / "Annotations" / "000002.xml", person("maybe"))
    with pytest.raises(DatasetError):
        load_dataset("voc", year, split="random:0.5:0")
    out = tmp_path / "model.npz"
    result = cli("train", "-d", "voc", "--root", year, "--split", "random:0.5:0", "--out", out)
    assert_one_error(result, str(bad), "object 1's difficult is 'maybe', not 0 or 1")
    assert not out.exists()
