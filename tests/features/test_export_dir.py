"""One rule for the folder of exported ONNX networks, read by the backbones and the detector."""

from __future__ import annotations

from pathlib import Path

import pytest

from counting.features.backbones import onnx_export
from counting.features.cache import default_export_dir
from counting.features.detector import runner


@pytest.mark.parametrize(
    ("onnx_dir", "cache_dir", "expected"),
    [
        ("/tmp/onnx-here", "/tmp/cache", Path("/tmp/onnx-here")),
        (None, "/tmp/cache", Path("/tmp/cache/onnx")),
        (None, None, Path.home() / ".cache" / "counting" / "onnx"),
    ],
)
def test_backbones_and_detector_export_to_the_same_folder(monkeypatch, onnx_dir, cache_dir, expected) -> None:
    for name, value in (("COUNTING_ONNX_DIR", onnx_dir), ("COUNTING_CACHE_DIR", cache_dir)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert default_export_dir() == expected
    assert onnx_export.default_export_dir() == expected
    assert runner._export_dir() == expected
    assert runner.detector_onnx_path().parent == expected


def test_the_detector_reads_the_rule_rather_than_a_copy(monkeypatch) -> None:
    # A copy would not follow a change of the rule; the runner calls it.
    monkeypatch.setattr("counting.features.cache.default_export_dir", lambda: Path("/elsewhere"))
    assert runner._export_dir() == Path("/elsewhere")
