"""An exported network that gives NaN stops the run with the export file named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from counting.core.errors import BackboneError


def test_exported_network_giving_nan_stops_with_the_file_named(tmp_path: Path) -> None:
    from counting.features.backbones.onnx_export import OnnxTrunk

    class _NanSession:
        def run(self, names, feeds):
            return [np.full((1, 4, 2, 2), np.nan, dtype=np.float32)]

    trunk = OnnxTrunk(session=_NanSession(), outputs=("final",), path=tmp_path / "net.onnx", max_abs_diff=0.0)
    with pytest.raises(BackboneError, match="net.onnx: the exported network gives non-finite outputs"):
        trunk.run(np.zeros((1, 3, 8, 8), dtype=np.float32))
