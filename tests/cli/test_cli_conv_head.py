"""`counting train --density-head --head-kind conv` and the commands that use its model (real Mall frames)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from counting.cli.app import app
from counting.density import conv_training
from counting.density.conv_fitting import ConvSettings
from counting.density.conv_head import ConvDensityHead
from counting.imaging import load_image
from counting.model import load_model


@pytest.fixture(scope="module")
def conv_model(runner, mall_root: Path, session_cache_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("conv") / "conv.npz"
    # The default's shape (folds, weight averaging, last weights), a few steps: the commands, not the accuracy.
    quick = ConvSettings(width=8, depth=1, batch=4, max_steps=40, eval_every=20, ema=0.9, keep="last", folds=2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(conv_training, "DEFAULT_SETTINGS", quick)
        patch.setenv("COUNTING_CACHE_DIR", str(session_cache_dir))
        result = runner.invoke(
            app,
            ["train", "-d", "mall", "-r", str(mall_root), "--split", "train=1-40,test=41-46", "--input-size", "128",
             "--grid", "2x2", "--density-head", "--head-kind", "conv", "--head-layers", "block4,block10",
             "--centers", "4", "--epochs", "3", "--calibration", "none", "--no-progress", "-o", str(out)],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "conv density head 2: kept step 40" in result.output and "2 heads, out-of-fold count MAE" in result.output
    return out


def test_train_records_the_conv_head_and_its_layers(conv_model: Path) -> None:
    model = load_model(conv_model)
    head = model.density_head
    assert isinstance(head, ConvDensityHead) and head.layers == ("block4", "block10")
    assert head.n_channels == 40 + 112 and head.width == 8 and head.depth == 1
    assert model.training["density_kind"] == "conv" and model.training["density_layers"] == ["block4", "block10"]
    # Two heads, each validated on one half of frames 1-40: the AGP learns from all 40 out-of-fold rows.
    assert model.dataset["n_train"] == 40 and len(head.members) == 2 and head.settings["members"] == 2


def test_count_and_video_use_the_conv_head(
    conv_model: Path, runner, mall_root: Path, short_video: Path, tmp_path: Path
) -> None:
    frames = sorted((mall_root / "frames").glob("*.jpg"))[:12]
    out = tmp_path / "counts.json"
    result = runner.invoke(app, ["count", "-m", str(conv_model), *map(str, frames[:3]), "--json", str(out)])
    assert result.exit_code == 0, result.output
    model = load_model(conv_model)
    expected = model.count_images([load_image(path) for path in frames])
    counted = json.loads(out.read_text())
    rows = counted["images"]
    np.testing.assert_allclose([float(row["count"]) for row in rows], expected[:3], rtol=1e-3, atol=1e-3)
    table = tmp_path / "video.csv"
    result = runner.invoke(
        app,
        [
            "video",
            str(short_video),
            "-m",
            str(conv_model),
            "--counts",
            str(table),
            "--annotated",
            str(tmp_path / "a.avi"),
        ],
    )
    assert result.exit_code == 0, result.output
    with open(table, newline="") as handle:
        counts = np.array([float(row["count"]) for row in csv.DictReader(handle)])
    # MJPG frames are re-encoded JPEGs: the same frames within a person or so.
    assert len(counts) == 12 and np.abs(counts - expected).max() < 1.5
