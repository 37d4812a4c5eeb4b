"""The option bundles the count and features commands hand their steps (counting/cli/count_outputs.py,
counting/cli/features.py): which outputs are files, which go to stdout, what -o writes, and the
features command's descriptor options kept in their place on the command line."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import typer

from counting.cli.count_outputs import CountOutputs, check_outputs
from counting.cli.features import DescriptorReading, features, features_outputs


def test_the_outputs_that_are_files_leave_out_stdout(tmp_path: Path) -> None:
    outputs = CountOutputs(csv=Path("-"), json_path=tmp_path / "c.json", annotated=tmp_path / "drawn")
    assert outputs.files == [tmp_path / "c.json"]  # "-" is stdout; the folder is not a CSV or JSON file
    assert outputs.on_stdout
    assert CountOutputs(csv=tmp_path / "c.csv").files == [tmp_path / "c.csv"]
    assert not CountOutputs(csv=tmp_path / "c.csv").on_stdout
    assert CountOutputs().files == []


def test_csv_and_json_both_into_stdout_are_refused_before_any_work() -> None:
    with pytest.raises(typer.BadParameter, match=r"^--csv - and --json /dev/stdout both write into stdout"):
        check_outputs(CountOutputs(csv=Path("-"), json_path=Path("/dev/stdout")))


def test_features_out_names_the_listing_and_the_record_beside_it(tmp_path: Path) -> None:
    assert features_outputs(tmp_path / "d.npy") == [
        tmp_path / "d.npy",
        tmp_path / "d.files.txt",
        tmp_path / "d.features.json",
    ]
    assert features_outputs(tmp_path / "d.csv") == [tmp_path / "d.csv", None, tmp_path / "d.features.json"]


def test_the_descriptor_options_keep_their_place_and_defaults() -> None:
    names = list(inspect.signature(features).parameters)
    assert names[:9] == ["inputs", "out", "backbone", "weights", "input_size", "grid", "pooled", "descriptor", "strict"]
    reading = DescriptorReading()
    assert (reading.pooled, reading.descriptor, reading.weights) == (False, "scores", None)
    assert DescriptorReading(backbone="centernet").with_detector_spelling().descriptor == "detector"
