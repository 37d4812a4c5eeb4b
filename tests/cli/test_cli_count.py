"""`counting count` end to end: real Mall frames, bad images skipped, bad inputs one line."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.io

from counting.cli.app import app
from counting.model.counting_model import default_model_path

FRAMES = (101, 102, 103)


@pytest.fixture(scope="module")
def true_counts(mall_root: Path) -> dict[int, float]:
    counts = scipy.io.loadmat(mall_root / "mall_gt.mat")["count"].ravel()
    return {k: float(counts[k - 1]) for k in range(1, len(counts) + 1)}


@pytest.fixture()
def image_folder(tmp_path: Path, mall_root: Path) -> Path:
    folder = tmp_path / "images"
    folder.mkdir()
    for k in FRAMES:
        shutil.copy(mall_root / "frames" / f"seq_{k:06d}.jpg", folder)
    good = (mall_root / "frames" / "seq_000104.jpg").read_bytes()
    (folder / "truncated.jpg").write_bytes(good[: len(good) // 3])
    (folder / "notes.jpg").write_text("not an image")
    return folder


def test_count_folder_table_csv_json(trained, runner, image_folder: Path, tmp_path: Path, true_counts) -> None:
    model_path, _ = trained
    out_csv, out_json = tmp_path / "counts.csv", tmp_path / "counts.json"
    result = runner.invoke(
        app,
        [
            "count",
            str(image_folder),
            "--model",
            str(model_path),
            "--csv",
            str(out_csv),
            "--json",
            str(out_json),
        ],
        terminal_width=200,
    )
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert result.output.count("skipped") == 2 and "notes.jpg" in result.output and "truncated.jpg" in result.output
    with open(out_csv, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [Path(r["image"]).name for r in rows] == [f"seq_{k:06d}.jpg" for k in FRAMES]
    for row, k in zip(rows, FRAMES):
        count, low, high = float(row["count"]), float(row["low"]), float(row["high"])
        assert 0 <= low <= count <= high
        assert abs(count - true_counts[k]) < 15  # Mall counts here are 20-40
        assert f"{count:.1f}" in result.output
    document = json.loads(out_json.read_text())
    assert [r["count"] for r in document["images"]] == pytest.approx([float(r["count"]) for r in rows], abs=1e-3)
    assert len(document["skipped"]) == 2


def test_count_glob_pattern(trained, runner, image_folder: Path) -> None:
    model_path, _ = trained
    # Wide: an 80-column table wraps long temporary paths (pytest-xdist's) inside "seq_000101.jpg".
    result = runner.invoke(
        app, ["count", str(image_folder / "seq_*.jpg"), "--model", str(model_path)], env={"COLUMNS": "250"}
    )
    assert result.exit_code == 0 and "skipped" not in result.output
    assert all(f"seq_{k:06d}.jpg" in result.output for k in FRAMES)


def test_a_table_written_to_a_file_keeps_whole_paths_and_numbers(
    trained, runner, mall_root: Path, tmp_path: Path
) -> None:
    # stdout a file (CliRunner's buffer) and no $COLUMNS: rich laid the table out at 80 columns,
    # folding each long path over several lines and squeezing counts to "117.…". A row is one line now.
    model_path, _ = trained
    deep = tmp_path / ("long-folder-name-" * 8) / "frames"
    deep.mkdir(parents=True)
    for k in FRAMES:
        shutil.copy(mall_root / "frames" / f"seq_{k:06d}.jpg", deep)
    out = tmp_path / "counts.json"
    result = runner.invoke(app, ["count", str(deep), "--model", str(model_path), "--json", str(out), "-q"])
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())["images"]
    lines = result.stdout.splitlines()
    for row in rows:
        line = next(line for line in lines if row["image"] in line)  # the whole path on one line
        assert f"{row['count']:.1f}" in line and f"{row['high']:.1f}" in line
    assert "…" not in result.stdout
    narrow = runner.invoke(app, ["count", str(deep), "--model", str(model_path), "-q"], env={"COLUMNS": "70"})
    assert narrow.exit_code == 0 and not any(row["image"] in narrow.stdout for row in rows)  # $COLUMNS still rules
    # ... and the paths fold to make room: the numbers stay whole (rich alone cut them to "29.…").
    assert "…" not in narrow.stdout and all(f"{row['high']:.1f}" in narrow.stdout for row in rows)
    # FORCE_COLOR asks for colours in the file, not for a terminal's 80 columns: rich's is_terminal
    # reads it, and the table was laid out at 80 again.
    coloured = runner.invoke(app, ["count", str(deep), "--model", str(model_path), "-q"], env={"FORCE_COLOR": "1"})
    assert coloured.exit_code == 0, coloured.output
    for row in rows:
        line = next(line for line in coloured.stdout.splitlines() if row["image"] in line)
        assert f"{row['count']:.1f}" in line and f"{row['high']:.1f}" in line


def test_default_model_counts_a_mall_test_frame(runner, mall_root: Path, true_counts, tmp_path: Path) -> None:
    assert default_model_path().is_file(), "models/default.npz must ship with the package"
    out = tmp_path / "c.json"
    result = runner.invoke(app, ["count", str(mall_root / "frames" / "seq_000700.jpg"), "--json", str(out)])
    assert result.exit_code == 0, result.output
    count = json.loads(out.read_text())["images"][0]["count"]
    # frame 700 is outside the default model's training frames (1-600)
    assert abs(count - true_counts[700]) < 8


def test_empty_folder_one_line(runner, tmp_path: Path, one_error_line) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "folder holds no images" in one_error_line(runner.invoke(app, ["count", str(empty)]))


def test_a_path_longer_than_the_system_allows_is_one_line(trained, runner, image_folder: Path, one_error_line) -> None:
    # Path.is_dir raised ENAMETOOLONG (a traceback) where other missing paths are one line each.
    model_path, _ = trained
    too_long = "/".join(["x" * 250] * 20) + "/a.jpg"
    assert "File name too long" in one_error_line(runner.invoke(app, ["count", too_long, "--model", str(model_path)]))
    beside = runner.invoke(app, ["count", too_long, str(image_folder / "seq_000101.jpg"), "--model", str(model_path)])
    assert beside.exit_code == 0 and "seq_000101.jpg" in beside.stdout and "File name too long" in beside.stderr


def test_only_unreadable_images_one_line(trained, runner, image_folder: Path, one_error_line) -> None:
    model_path, _ = trained
    result = runner.invoke(app, ["count", str(image_folder / "notes.jpg"), "--model", str(model_path)])
    # One image with one problem: the error line is that problem (issue 9), not a summary.
    assert "notes.jpg: not an image file" in one_error_line(result)


def test_features_of_the_wrong_dimension_one_line(trained, runner, tmp_path: Path, one_error_line) -> None:
    model_path, _ = trained
    features = tmp_path / "features.npy"
    np.save(features, np.zeros((2, 512), dtype=np.float32))
    result = runner.invoke(app, ["count", "--features", str(features), "--model", str(model_path)])
    line = " ".join(one_error_line(result).split())
    assert f"{features}: features have 512 dimensions" in line and "expects 1000" in line


def test_counts_from_a_features_file(runner, mall_root: Path, tmp_path: Path, session_cache_dir: Path) -> None:
    """`counting features` output counted with --features equals counting the images directly
    (the Mall class-score model, models/default.npz: no ROI, default input size, so the descriptors are the same;
    the default crowd model counts from feature maps, not descriptor files)."""
    from counting.model.counting_model import default_model_path, load_model

    mall = default_model_path().parent / "default.npz"
    model = load_model(mall)
    assert model.roi_mask is None  # scripts/train_default_model.py trains without the ROI
    frames = [str(mall_root / "frames" / f"seq_{k:06d}.jpg") for k in FRAMES]
    features = tmp_path / "f.npy"
    size = ["--input-size", "native" if model.input_size is None else str(model.input_size)]
    grid = [] if model.grid is None else ["--grid", f"{model.grid[0]}x{model.grid[1]}"]
    extracted = runner.invoke(
        app,
        ["features", *frames, "--out", str(features), *size, *grid]
        + ["--cache-dir", str(session_cache_dir), "--no-progress"],
    )
    assert extracted.exit_code == 0, extracted.output
    from_features, from_images = tmp_path / "a.json", tmp_path / "b.json"
    result = runner.invoke(app, ["count", "--features", str(features), "-m", str(mall), "--json", str(from_features)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["count", *frames, "-m", str(mall), "--json", str(from_images)])
    assert result.exit_code == 0, result.output
    counts_a = [row["count"] for row in json.loads(from_features.read_text())["images"]]
    counts_b = [row["count"] for row in json.loads(from_images.read_text())["images"]]
    assert len(counts_a) == 3 and counts_a == pytest.approx(counts_b, abs=1e-3)


def test_per_class_model_writes_a_column_per_class(runner, voc_root: Path, tmp_path: Path) -> None:
    """A multi-output (VOC-style) model: one column per class plus the total."""
    from agp import AGPRegressor
    from counting.data.datasets import VOC_CLASSES
    from counting.model.counting_model import CountingModel

    rng = np.random.default_rng(0)
    # Fitted on generated descriptors: this checks the output format, not the counts.
    regressor = AGPRegressor(n_centers=3, max_epochs=1, validation_fraction=5, random_state=0).fit(
        rng.normal(size=(40, 1000)), rng.poisson(1.0, size=(40, len(VOC_CLASSES))).astype(float)
    )
    model_path = CountingModel(
        regressor=regressor, input_size=64, class_names=list(VOC_CLASSES), dataset={"name": "voc"}
    ).save(tmp_path / "voc.npz")
    out = tmp_path / "c.csv"
    images = voc_root / "VOC2007" / "JPEGImages"
    result = runner.invoke(app, ["count", str(images), "--model", str(model_path), "--csv", str(out)])
    assert result.exit_code == 0, result.output
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 5 and list(rows[0])[:-2] == ["image", "total", *(f"count_{name}" for name in VOC_CLASSES)]
    assert list(rows[0])[-2:] == ["familiarity", "unfamiliar"]
    for row in rows:
        per_class = np.array([float(row[f"count_{name}"]) for name in VOC_CLASSES])
        assert (per_class >= 0).all() and float(row["total"]) == pytest.approx(per_class.sum(), abs=0.01)
