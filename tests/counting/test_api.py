"""counting.count / counting.load_model: the one-call Python API gives the CLI's records."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

import counting
from counting.cli.app import app
from counting.core.errors import CountingError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def frames(mall_root: Path) -> list[Path]:
    return sorted((mall_root / "frames").glob("seq_00000*.jpg"))[:3]


def test_count_of_paths_is_the_cli_json(frames: list[Path], tmp_path: Path) -> None:
    counts = counting.count([str(frame) for frame in frames])
    out = tmp_path / "c.json"
    result = CliRunner().invoke(app, ["count", *map(str, frames), "--json", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert [row["image"] for row in counts] == [row["image"] for row in written["images"]]
    for ours, theirs in zip(counts, written["images"]):
        assert ours.keys() == theirs.keys() == {"image", "count", "low", "high"}
        for key in ("count", "low", "high"):
            assert ours[key] == pytest.approx(theirs[key], abs=1e-9)
    assert counts.as_dict()["model"] == written["model"]
    assert Path(written["model"]).name == "default.npz"
    assert counts.skipped == {}


def test_arrays_paths_and_failures_keep_the_input_order(frames: list[Path]) -> None:
    model = counting.load_model(ROOT / "models" / "default.npz")
    array = np.asarray(Image.open(frames[1]).convert("RGB"))
    counts = counting.count([str(frames[0]), array, "/no/such/picture.jpg", np.zeros((4, 4)), frames[2]], model=model)
    assert [row["image"] for row in counts] == [str(frames[0]), "array:1", str(frames[2])]
    by_path = model.count_paths([str(frames[1])])
    # A decoded frame counts as its file does (the same pixels, prepared in memory).
    assert counts[1]["count"] == pytest.approx(float(by_path.counts[0]), abs=1e-4)
    assert counts[1]["low"] < counts[1]["count"] < counts[1]["high"]
    assert set(counts.skipped) == {"/no/such/picture.jpg: no such file or folder", "array:3"}
    assert "uint8" in counts.skipped["array:3"]
    np.testing.assert_allclose(counts.counts, [row["count"] for row in counts])


def test_nothing_countable_is_one_error_naming_it() -> None:
    with pytest.raises(CountingError, match="/no/such/folder: no such file or folder"):
        counting.count("/no/such/folder")
    with pytest.raises(CountingError, match="no images given"):
        counting.count([])


def test_per_class_model_gives_a_total_and_a_column_per_class(shared_data: Path) -> None:
    photos = sorted((shared_data / "voc2007-mini").rglob("*.jpg"))[:2]
    counts = counting.count([str(photo) for photo in photos], model=ROOT / "models" / "voc20.npz")
    assert len(counts) == 2
    row = counts[0]
    assert {"image", "total", "count_person", "low_person", "high_person"} <= row.keys()
    classes = [key for key in row if key.startswith("count_")]
    assert len(classes) == 20
    assert row["total"] == pytest.approx(sum(row[key] for key in classes))
    np.testing.assert_allclose(counts.counts, [r["total"] for r in counts])
