"""`counting train` end to end on real Mall frames, and its bad-input errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from counting.cli.app import app
from counting.model.counting_model import CountingModel

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_train_writes_a_self_describing_model(trained) -> None:
    path, output = trained
    assert "grid start" in output and "epoch    1" in output and "validation loss" in output
    assert "model saved" in output
    model = CountingModel.load(path)
    assert model.backbone == "efficientnet-lite0" and len(model.backbone_weights_sha256) == 64
    assert model.input_size == 112 and model.grid is None
    assert model.roi_mask is not None and model.roi_mask.shape == (480, 640)  # Mall's ROI, on by default
    assert model.dataset["name"] == "mall" and model.dataset["split"] == "train=1-100,test=101-120"
    # default calibration: the regressor is fitted on all 100 train frames and the interval is
    # calibrated on out-of-fold predictions of each of them
    assert (model.dataset["n_train"], model.dataset["n_fit"], model.dataset["n_calibration"]) == (
        100,
        100,
        100,
    )
    assert model.dataset["calibration"] == "cv5" and "out-of-fold" in model.validation_metrics["on"]
    assert model.training["n_centers"] == 8 and model.training["kernel"] == "univariate"
    assert len(model.history["train_loss"]) == len(model.history["val_loss"]) == 5  # grid start + 4 epochs
    figures = model.validation_metrics
    assert figures["mse"] == np.float64(figures["rmse"]) ** 2 or abs(figures["mse"] - figures["rmse"] ** 2) < 1e-9
    # Mall counts are 13-53: a model that learned nothing sensible would be far off
    assert 0 < figures["mae"] < 15
    assert model.interval is not None and model.interval.level == 0.9
    test = model.test_metrics["per_frame"]
    assert test["n"] == 20 and 0 < test["mae"] < 15
    loss_png = path.with_name(f"{path.stem}.loss.png")
    assert loss_png.read_bytes()[:8] == PNG_MAGIC
    assert path.stat().st_size < 512 * 1024
    json.dumps(model.metadata())  # everything in the file is plain JSON


def test_missing_dataset_files_one_line(runner, tmp_path: Path, one_error_line) -> None:
    root = tmp_path / "mall"
    (root / "frames").mkdir(parents=True)
    result = runner.invoke(app, ["train", "--dataset", "mall", "--root", str(root), "--out", str(tmp_path / "m.npz")])
    line = one_error_line(result)
    assert str(root) in " ".join(line.split()) and "mall_gt.mat" in line


def test_missing_root_folder_one_line(runner, tmp_path: Path, one_error_line) -> None:
    result = runner.invoke(
        app,
        [
            "train",
            "--dataset",
            "shanghaitech",
            "--root",
            str(tmp_path / "nowhere"),
            "--out",
            str(tmp_path / "m.npz"),
        ],
    )
    assert "folder not found" in one_error_line(result)


def test_head_kind_without_density_head_is_said_before_the_dataset_loads(
    runner, tmp_path: Path, one_error_line
) -> None:
    # A root that holds no dataset: had the dataset been opened first, its error would be the line.
    result = runner.invoke(
        app,
        [
            "train",
            "-d",
            "mall",
            "--root",
            str(tmp_path / "nowhere"),
            "--head-kind",
            "conv",
            "-o",
            str(tmp_path / "m.npz"),
        ],
    )
    assert "add --density-head" in one_error_line(result)
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize(
    ("options", "said"),
    [
        # The default kind typed out still asks for a density head that would not be trained.
        (["--head-kind", "ridge"], "--head-kind chooses the density head: add --density-head"),
        (["--head-layers", "block7"], "--head-layers chooses the density head: add --density-head"),
        (
            ["--head-kind", "ridge", "--head-layers", "block7"],
            "--head-kind and --head-layers choose the density head",
        ),
        # A list naming no layer was read as not given: the default layers, in silence.
        (["--density-head", "--head-layers", ","], "--head-layers ',' names no layer"),
        (["--density-head", "--head-layers", " , "], "--head-layers ' , ' names no layer"),
    ],
)
def test_density_head_options_that_would_be_ignored_are_refused(
    runner, tmp_path: Path, one_error_line, options: list[str], said: str
) -> None:
    result = runner.invoke(
        app, ["train", "-d", "mall", "--root", str(tmp_path / "nowhere"), *options, "-o", str(tmp_path / "m.npz")]
    )
    assert said in one_error_line(result)
    assert not (tmp_path / "m.npz").exists()


def test_density_head_options_left_out_train_as_before(runner, tmp_path: Path, one_error_line) -> None:
    # Not typed: no refusal, so the line is the dataset's (the root holds none).
    result = runner.invoke(
        app, ["train", "-d", "mall", "--root", str(tmp_path / "nowhere"), "-o", str(tmp_path / "m.npz")]
    )
    assert "folder not found" in one_error_line(result)


def test_grid_needs_head_dots(runner, voc_root: Path, tmp_path: Path, one_error_line) -> None:
    result = runner.invoke(
        app,
        [
            "train",
            "--dataset",
            "voc",
            "--root",
            str(voc_root),
            "--split",
            "random:0.4:0",
            "--grid",
            "2x2",
            "--out",
            str(tmp_path / "m.npz"),
            "--no-cache",
        ],
    )
    assert "grid" in one_error_line(result)


def test_bad_option_values_are_usage_errors(runner, tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["train", "--dataset", "mall", "--root", str(tmp_path), "--out", "m.npz", "--input-size", "huge"]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output and "native" in result.output


def test_more_centres_than_rows_are_clamped_to_the_rows(
    runner, mall_root: Path, session_cache_dir: Path, tmp_path: Path
) -> None:
    # AGPRegressor reduces n_centers to the rows it can use (with a warning) instead of failing (issue 10).
    result = runner.invoke(
        app,
        [
            "train",
            "--dataset",
            "mall",
            "--root",
            str(mall_root),
            "--split",
            "train=1-100,test=101-120",
            "--input-size",
            "112",
            "--centers",
            "500",
            "--cache-dir",
            str(session_cache_dir),
            "--out",
            str(tmp_path / "m.npz"),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    from agp import AGPRegressor

    centres = AGPRegressor.load(tmp_path / "m.npz").centers_
    assert 1 < len(centres) < 100


def test_a_bare_grid_number_is_refused_not_read_as_a_square(runner, tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["train", "-d", "mall", "-r", str(tmp_path), "--grid", "2", "-o", str(tmp_path / "m.npz")],
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "Traceback" not in result.output  # a usage error
    assert "'--grid'" in lines[0] and "'2'" in lines[0] and "ROWSxCOLS" in lines[0] and "2x2" in lines[0]
    assert not (tmp_path / "m.npz").exists()
