"""MATLAB file helpers: unwrapping MATLAB nesting and one-line errors for bad files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.io
from fixtures.matlab import cell, struct

from counting.core.errors import DatasetError
from counting.data.datasets.matfiles import cell_items, field, load_mat, numbers, points

# The first 128 bytes of a MATLAB v7.3 file: text, subsystem offset, version 0x0200, 'IM'.
V73_HEADER = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, HDF5 schema 1.00 .".ljust(116) + bytes(8) + b"\x00\x02IM"


def test_struct_in_cell_reads_like_matlab_indexing(tmp_path: Path) -> None:
    path = tmp_path / "gt.mat"
    locs = [np.array([[1.0, 2.0], [3.0, 4.0]]), np.zeros((0, 2))]
    scipy.io.savemat(path, {"frame": cell([struct(loc=loc) for loc in locs]), "n": np.array([[2.0, 0.0]])})
    contents = load_mat(path, ("frame", "n"))
    frames = cell_items(contents["frame"], path, "frame")
    assert len(frames) == 2
    assert points(field(frames[0], "loc", path, "frame{1}"), path, "loc").tolist() == [
        [1, 2],
        [3, 4],
    ]
    assert points(field(frames[1], "loc", path, "frame{2}"), path, "loc").shape == (0, 2)
    assert numbers(contents["n"], path, "n").tolist() == [2.0, 0.0]


def test_missing_variable_and_field_are_named(tmp_path: Path) -> None:
    path = tmp_path / "roi.mat"
    scipy.io.savemat(path, {"roi": struct(mask=np.ones((2, 2)))})
    with pytest.raises(DatasetError, match=r"roi\.mat: variable 'count' not found"):
        load_mat(path, ("count",))
    roi = load_mat(path, ("roi",), optional=("pMapN",))
    assert set(roi) == {"roi"}
    with pytest.raises(DatasetError, match=r"roi\.mat: roi has no field 'loc'"):
        field(roi["roi"], "loc", path, "roi")


def test_non_matrix_points_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"x\.mat: loc is not a \(k, 2\) matrix"):
        points(np.array([[1.0], [2.0]]), tmp_path / "x.mat", "loc")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"not a readable MATLAB \.mat file"),
        (b"hello, I am text\n" * 20, r"not a readable MATLAB \.mat file"),
        (V73_HEADER + bytes(512), r"MATLAB v7\.3 \(HDF5\) files are not supported"),
    ],
)
def test_unreadable_files_give_one_line_naming_the_file(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.mat"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=message) as caught:
        load_mat(path, ("count",))
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)
