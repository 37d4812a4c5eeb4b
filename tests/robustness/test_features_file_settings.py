"""`count --features` gives the counts of the pictures the file was made from, or refuses in one
line: a features file records what its rows were made with (``NAME.features.json``: backbone,
input size, ROI mask, grid, layout, descriptor, flip) and `counting features -m MODEL` makes the
rows the model reads from the pictures.

The README's own `counting features` frames counted with a Mall model trained with its ROI mask
counted 4-7 people more than counting the same frames, without a word: `counting features`
read the whole frame, the model reads inside its ROI.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from robust_helpers import DEFAULT_MODEL, REPO_ROOT, assert_one_error

FRAMES = ("seq_000700.jpg", "seq_000701.jpg", "seq_000702.jpg")


@pytest.fixture(scope="module")
def mall_roi_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The descriptor model of the README's Mall example, reading inside Mall's ROI mask (the mask of
    the shipped Mall model, models/mall-sums.npz), as `counting train -d mall` makes it."""
    from counting.model.counting_model import load_model

    model = load_model(DEFAULT_MODEL)
    mask = load_model(REPO_ROOT / "models" / "mall-sums.npz").roi_mask
    assert mask is not None and model.roi_mask is None
    path = tmp_path_factory.mktemp("model") / "mall-roi.npz"
    dataclasses.replace(model, roi_mask=mask, _backbone_cache={}).save(path)
    return path


def frames(mall_root: Path) -> list[str]:
    return [str(mall_root / "frames" / name) for name in FRAMES]


def counts_of(cli: Callable[..., Any], tmp_path: Path, name: str, *arguments: Any) -> list[float]:
    out = tmp_path / f"{name}.json"
    result = cli("count", *arguments, "--json", out, "-q")
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())
    rows = rows["images"] if isinstance(rows, dict) else rows
    return [float(row["count"]) for row in rows]


def test_features_made_for_the_model_count_as_the_pictures(
    cli: Callable[..., Any], tmp_path: Path, mall_root: Path, mall_roi_model: Path
) -> None:
    made = tmp_path / "mall.npy"
    result = cli("features", *frames(mall_root), "-m", mall_roi_model, "-o", made)
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "mall.features.json").read_text())
    assert record["roi_sha256"] is not None and record["input_size"] == 224 and record["n_rows"] == 3
    from_file = counts_of(cli, tmp_path, "file", "--features", made, "-m", mall_roi_model)
    from_pictures = counts_of(cli, tmp_path, "pictures", *frames(mall_root), "-m", mall_roi_model)
    assert len(from_file) == 3
    np.testing.assert_allclose(from_file, from_pictures, rtol=0, atol=1e-6)


def test_features_of_the_whole_frame_are_refused_for_a_model_with_an_roi(
    cli: Callable[..., Any], tmp_path: Path, mall_root: Path, mall_roi_model: Path
) -> None:
    made = tmp_path / "mall.npy"
    assert cli("features", *frames(mall_root), "-o", made).exit_code == 0  # the README's command
    record = json.loads((tmp_path / "mall.features.json").read_text())
    assert record["roi_sha256"] is None and record["backbone"] == "efficientnet-lite0"
    result = cli("count", "--features", made, "-m", mall_roi_model)
    assert_one_error(result, "mall.npy: made with ROI off", "inside its ROI mask", "counting features IMAGES -m")
    # Without its record, a file cannot say it was made inside the ROI: refused as well.
    (tmp_path / "mall.features.json").unlink()
    result = cli("count", "--features", made, "-m", mall_roi_model)
    assert_one_error(result, "mall.npy: no record", "mall.features.json missing", "inside its ROI mask")


def test_features_of_another_input_size_are_refused(cli: Callable[..., Any], tmp_path: Path, mall_root: Path) -> None:
    made = tmp_path / "small.npy"
    assert cli("features", frames(mall_root)[0], "--input-size", "160", "-o", made).exit_code == 0
    result = cli("count", "--features", made, "-m", DEFAULT_MODEL)
    assert_one_error(result, "small.npy: made with input short side 160 px", "the model reads input short side 224 px")


def test_a_file_changed_after_its_record_is_refused(cli: Callable[..., Any], tmp_path: Path, mall_root: Path) -> None:
    made = tmp_path / "frames.npy"
    assert cli("features", *frames(mall_root), "-o", made).exit_code == 0
    np.save(made, np.load(made)[:2])
    result = cli("count", "--features", made, "-m", DEFAULT_MODEL)
    assert_one_error(result, "frames.npy: holds 2 rows, its record frames.features.json 3")


def test_model_settings_beside_m_are_refused(cli: Callable[..., Any], tmp_path: Path, mall_root: Path) -> None:
    result = cli("features", frames(mall_root)[0], "-m", DEFAULT_MODEL, "--input-size", "320", "-o", tmp_path / "x.npy")
    assert_one_error(result, "--input-size", "model's own settings", code=2)
    assert not (tmp_path / "x.npy").exists()
