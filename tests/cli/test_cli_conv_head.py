"""`counting train --density-head --head-kind conv` and the commands that use its model (real Mall frames)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from counting.cli.app import app
from counting.data.imaging import load_image
from counting.heads.density.conv import training as conv_training
from counting.heads.density.conv.fitting import ConvSettings
from counting.heads.density.conv.head import ConvDensityHead
from counting.model.counting_model import load_model

pytestmark = pytest.mark.slow  # end-to-end: run by CI (.ci/run), not the default suite


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


def test_the_agp_corrects_the_conv_heads_count(conv_model: Path, mall_root: Path) -> None:
    """The AGP learnt the count minus the head's whole-ROI sum; the count is the sum plus
    CORRECTION_WEIGHT times the AGP's prediction."""
    model = load_model(conv_model)
    assert model.count_offset == "head_sum" and model.training["count_offset"] == "head_sum"
    assert model.correction_weight == conv_training.CORRECTION_WEIGHT == 0.5
    assert model.metadata()["format_version"] == 3
    frames = sorted((mall_root / "frames").glob("*.jpg"))[40:43]
    density = model.density_maps([model.prepare_image(load_image(path)) for path in frames])
    sums = model.density_head.sum_regions(density, model.roi_mask, model.density_head.grid)
    correction = np.asarray(model.regressor.predict(sums), float).ravel()
    expected = np.clip(sums[:, 0] + 0.5 * correction, 0, None)
    np.testing.assert_allclose(model.count_density(density), expected, rtol=1e-9)
    assert np.abs(correction).max() > 0  # the AGP does change the head's count


def test_a_target_transform_is_refused_for_the_conv_head(runner, mall_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "never.npz"
    result = runner.invoke(
        app,
        ["train", "-d", "mall", "-r", str(mall_root), "--split", "train=1-40,test=41-46", "--input-size", "128",
         "--density-head", "--head-kind", "conv", "--target-transform", "log", "-o", str(out)],
    )  # fmt: skip
    assert result.exit_code != 0 and not out.exists()
    assert "--target-transform does not apply to the conv density head" in result.output


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
            "--csv",
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


def _compare_with_model(runner, mall_root: Path, conv_model: Path, split: str, out: Path):
    result = runner.invoke(
        app,
        ["compare", "-d", "mall", "-r", str(mall_root), "--split", split, "--input-size", "64", "--grid", "2x2",
         "--methods", "ridge", "--tiled-methods", "", "--model", str(conv_model), "--out", str(out)],
        env={"COLUMNS": "250"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    with (out / "compare-mall.csv").open() as handle:
        return result, [row for row in csv.DictReader(handle) if row["method"] == "model"]


def test_compare_scores_the_conv_model_on_the_same_test_frames(
    conv_model: Path, runner, mall_root: Path, tmp_path: Path
) -> None:
    result, rows = _compare_with_model(runner, mall_root, conv_model, "train=1-40,test=41-46", tmp_path)
    (row,) = rows
    assert row["label"] == "model conv.npz" and row["status"] == "ok" and row["n_test"] == "6"
    assert row["features"] == "conv density head x2 (block4+block10), 2x2 sums @128"
    frames = sorted((mall_root / "frames").glob("*.jpg"))[40:46]
    model = load_model(conv_model)
    counted = model.count_paths(frames).counts
    from counting.data.datasets import load_dataset

    expected = load_dataset("mall", mall_root, split="train=1-40,test=41-46").subset("test").counts
    assert float(row["mae"]) == pytest.approx(np.mean(np.abs(counted - expected)), abs=1e-3)
    assert "model conv.npz" in result.output


def test_compare_refuses_a_model_trained_on_its_test_frames(
    conv_model: Path, runner, mall_root: Path, tmp_path: Path
) -> None:
    # The model learnt frames 1-40: ten of the test frames 31-46 are in sample.
    _, (row,) = _compare_with_model(runner, mall_root, conv_model, "train=1-30,test=31-46", tmp_path)
    assert row["status"] == "failed" and row["mae"] == ""
    assert row["note"] == "trained on 10 of the 16 test images (split 'train=1-40,test=41-46')"
