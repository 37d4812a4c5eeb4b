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
        # counted_by: the default crowd model's sparse gate says which route counted the picture.
        assert (
            ours.keys()
            == theirs.keys()
            == {"image", "count", "low", "high", "familiarity", "unfamiliar", "counted_by", "disputed"}
        )
        assert ours["disputed"] is theirs["disputed"] is False  # Mall frames: the gate disputes none
        assert ours["familiarity"] == pytest.approx(theirs["familiarity"], abs=1e-9)
        assert ours["counted_by"] == theirs["counted_by"] in ("density", "detector")
        for key in ("count", "low", "high"):
            assert ours[key] == pytest.approx(theirs[key], abs=1e-9)
    assert counts.as_dict()["model"] == written["model"]
    assert Path(written["model"]).name == "crowd.npz"  # the shipped default (issue 21)
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
    assert set(counts.skipped) == {"/no/such/picture.jpg", "array:3"}  # keyed by the input
    assert counts.skipped["/no/such/picture.jpg"] == "/no/such/picture.jpg: no such file or folder"
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


def test_pictures_that_cannot_be_decoded_are_skipped_not_raised(frames: list[Path], tmp_path: Path) -> None:
    """A truncated or closed PIL image raised OSError / ValueError out of the call."""
    truncated = tmp_path / "broken.jpg"
    truncated.write_bytes(frames[0].read_bytes()[:1000])
    lazy = Image.open(truncated)  # opens: PIL reads the pixels only when asked
    closed = Image.open(frames[1])
    closed.close()
    counts = counting.count([lazy, closed, str(frames[2])])
    assert [row["image"] for row in counts] == [str(frames[2])]
    assert "array:0: cannot decode the image" in counts.skipped["array:0"]
    assert "array:1: cannot decode the image" in counts.skipped["array:1"]


@pytest.mark.parametrize("wrong", [None, 5, b"photos", {"a": 1}, {"a.jpg"}, [None], ["a.jpg", 3.5]])
def test_arguments_of_a_wrong_type_are_a_type_error_naming_it(wrong: object) -> None:
    with pytest.raises(TypeError, match="counting.count takes image paths"):
        counting.count(wrong)  # type: ignore[arg-type]


def test_a_generator_is_consumed_and_an_empty_path_names_no_folder(frames: list[Path]) -> None:
    counts = counting.count(str(frame) for frame in frames[:2])
    assert len(counts) == 2
    counts = counting.count(["", str(frames[0])])
    assert len(counts) == 1 and "an empty path" in counts.skipped["''"]
    with pytest.raises(CountingError, match="an empty path"):
        counting.count("")


def test_batch_size_and_cache_are_checked_and_a_folder_is_a_cache(frames: list[Path], tmp_path: Path) -> None:
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="batch_size must be a whole number from 1"):
            counting.count(str(frames[0]), batch_size=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cache must be a FeatureCache"):
        counting.count(str(frames[0]), cache=3)
    counting.count(str(frames[0]), cache=str(tmp_path / "cache"))
    assert any((tmp_path / "cache").rglob("*.npy"))


def test_when_nothing_is_counted_the_error_gives_the_first_reason(tmp_path: Path) -> None:
    with pytest.raises(CountingError, match=r"nothing could be counted \(2 inputs; first: /no/a.jpg: no such"):
        counting.count(["/no/a.jpg", "/no/b.jpg"])


def test_a_pil_image_is_turned_as_its_exif_says_as_its_file_is(frames: list[Path], tmp_path: Path) -> None:
    """A camera's picture stored sideways with EXIF orientation 6: opened by PIL and passed in
    memory it was counted sideways (a crowd of 234 beside an empty photo counted 0, sideways)."""
    stored = Image.open(frames[0]).convert("RGB").transpose(Image.Transpose.ROTATE_90)  # the camera's way
    exif = Image.Exif()
    exif[0x0112] = 6  # shown turned 90 degrees clockwise
    path = tmp_path / "sideways.jpg"
    stored.save(path, exif=exif, quality=95)
    model = counting.load_model(ROOT / "models" / "crowd.npz")  # no ROI: a sideways array is countable
    by_path = counting.count(path, model=model).rows[0]["count"]
    in_memory = counting.count(Image.open(path), model=model).rows[0]["count"]
    as_stored = counting.count(np.asarray(Image.open(path)), model=model).rows[0]["count"]
    assert in_memory == pytest.approx(by_path, rel=1e-6)
    assert abs(as_stored - by_path) > 0.5  # the sideways picture counts otherwise: the test can fail
