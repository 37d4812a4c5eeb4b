"""Hostile use of the features added on one day: descriptor kinds, per-class models, features files.

Each case is a problem found by trying the command as a new user would; the test failed before
its fix.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from robust_helpers import DEFAULT_MODEL, REPO_ROOT, assert_one_error, make_image, model_parts, write_model

MALL_SUMS = REPO_ROOT / "models" / "mall-sums.npz"


def _edited_descriptor(tmp_path: Path, spec: str) -> Path:
    arrays, document = model_parts(MALL_SUMS)
    document["user_metadata"]["descriptor"]["spec"] = spec
    return write_model(tmp_path / "edited.npz", arrays, document)


def test_model_whose_descriptor_no_longer_fits_its_regressor_names_the_model_file(cli, tmp_path: Path) -> None:
    # levels=1+2 -> levels=1: the spec still parses, but gives 5x fewer numbers than the regressor takes.
    model = _edited_descriptor(tmp_path, "sum:block4+block7+block10+block14,perspective")
    image = make_image(tmp_path / "frame.png", size=(640, 480))
    line = assert_one_error(cli("count", "-m", model, image), str(model), "gives 424 numbers", "takes 2120")
    assert not line.startswith("error: features:"), line


def test_model_naming_an_unknown_feature_map_names_the_model_file(cli, tmp_path: Path) -> None:
    model = _edited_descriptor(tmp_path, "sum:block99+block7,perspective,levels=1+2")
    image = make_image(tmp_path / "frame.png", size=(640, 480))
    assert_one_error(cli("count", "-m", model, image), str(model), "no feature map 'block99'")


def test_model_edited_to_class_scores_is_refused_before_counting(cli, tmp_path: Path) -> None:
    model = _edited_descriptor(tmp_path, "scores")
    image = make_image(tmp_path / "frame.png", size=(640, 480))
    assert_one_error(cli("count", "-m", model, image), str(model), "'scores' gives 1000 numbers", "takes 2120")


def test_features_file_without_rows_says_so(cli, tmp_path: Path) -> None:
    path = tmp_path / "empty.npy"
    np.save(path, np.zeros((0, 1000), np.float32))
    assert_one_error(cli("count", "--features", path), str(path), "no rows")


def test_features_file_of_nan_rows_names_the_file(cli, tmp_path: Path) -> None:
    path = tmp_path / "failed.npy"
    np.save(path, np.full((3, 1000), np.nan, np.float32))
    # A descriptor model: the default crowd model counts from feature maps, not descriptor files.
    assert_one_error(cli("count", "--features", path, "-m", DEFAULT_MODEL), str(path), "NaN or infinite")


def test_features_file_with_one_nan_row_reports_it_skipped(cli, tmp_path: Path) -> None:
    path = tmp_path / "partly.npy"
    rows = np.random.default_rng(0).normal(size=(3, 1000))
    rows[1] = np.nan
    np.save(path, rows)
    out = tmp_path / "counts.csv"
    result = cli("count", "--features", path, "-m", DEFAULT_MODEL, "--csv", out)
    assert result.exit_code == 0, result.output
    assert "skipped: partly.npy[1]: NaN or infinite features" in result.stderr
    lines = out.read_text().splitlines()
    assert [line.split(",")[0] for line in lines[1:]] == ["partly.npy[0]", "partly.npy[2]"]


def test_compare_methods_naming_no_method_is_a_usage_error(cli, tmp_path: Path, voc_root: Path) -> None:
    # Was: exit 0 with only the published rows written (no method of ours run, nothing said).
    result = cli("compare", "-d", "voc", "-r", voc_root, "--split", "random:0.4", "--methods", ",", "-o", tmp_path)
    assert_one_error(result, "--methods", "names no method", code=2)
    assert list(tmp_path.iterdir()) == []


def test_features_with_perspective_descriptor_says_images_have_no_perspective_map(cli, tmp_path: Path) -> None:
    # Was: "features has no perspective map", as if a file named features lacked one.
    image = make_image(tmp_path / "frame.png")
    result = cli("features", image, "-o", tmp_path / "out.npy", "--descriptor", "sum:block10,perspective")
    assert_one_error(result, "'sum:block10,perspective'", "(images, no dataset) has no perspective map")
    assert not (tmp_path / "out.npy").exists()


def test_density_head_refuses_a_layout_it_would_ignore(cli, tmp_path: Path, mall_root: Path) -> None:
    # Was: exit 0 and a model recorded with layout 'frame', whatever --layout asked for.
    out = tmp_path / "model.npz"
    args = ("train", "-d", "mall", "-r", mall_root, "--split", "train=1-6,test=7-8", "-o", out, "--density-head")
    assert_one_error(cli(*args, "--grid", "2x2", "--layout", "pyramid"), "--density-head", "--layout")
    assert not out.exists()


def test_per_class_model_with_a_repeated_class_name_is_refused(cli, tmp_path: Path) -> None:
    # Was: exit 0, a CSV with repeated columns and a JSON whose keys merged the classes' counts.
    arrays, document = model_parts(REPO_ROOT / "models" / "voc20.npz")
    names = document["user_metadata"]["class_names"]
    names[1] = names[0]
    model = write_model(tmp_path / "renamed.npz", arrays, document)
    image = make_image(tmp_path / "photo.png")
    out = tmp_path / "counts.json"
    assert_one_error(cli("count", "-m", model, image, "--json", out), str(model), "'aeroplane' is named twice")
    assert not out.exists()


def test_density_model_with_edited_head_layers_or_grid_is_refused_naming_the_file(
    cli, tmp_path: Path, mall_root: Path
) -> None:
    # Were tracebacks (a channel-count ValueError, a broadcast error) and a message without the file.
    trained = tmp_path / "density.npz"
    split = "train=1-30,test=31-34"
    result = cli("train", "-d", "mall", "-r", mall_root, "--split", split, "-o", trained, "--density-head")
    assert result.exit_code == 0, result.output

    def edited(name: str, change) -> Path:
        arrays, document = model_parts(trained)
        change(document["user_metadata"]["density_head"])
        return write_model(tmp_path / name, arrays, document)

    image = make_image(tmp_path / "frame.png", size=(640, 480))
    layers = edited("layers.npz", lambda head: head.update(layers=head["layers"][1:]))
    assert_one_error(cli("count", "-m", layers, image), str(layers), "channels but the head takes")
    unknown = edited("unknown.npz", lambda head: head.update(layers=["block99"]))
    assert_one_error(cli("count", "-m", unknown, image), str(unknown), "'block99'")
    grid = edited("grid.npz", lambda head: head["settings"].update(grid=[3, 3]))
    assert_one_error(cli("count", "-m", grid, image), str(grid), "gives 10 sums per image", "takes 1")
    zero = edited("zero.npz", lambda head: head["settings"].update(grid=[0, 2]))
    assert_one_error(cli("count", "-m", zero, image), str(zero), "settings.grid")
    assert cli("count", "-m", trained, image).exit_code == 0


def test_report_with_a_roi_model_on_images_of_another_size_says_why_nothing_was_counted(
    cli, tmp_path: Path, shanghaitech_root: Path
) -> None:
    # Was a traceback: "metrics need at least one sample, got none" (Mall's 640x480 ROI, 1024x768 images).
    result = cli(
        "report", "-d", "shanghaitech", "-r", shanghaitech_root, "--split", "train=1-5,test=6-8",
        "-m", MALL_SUMS, "-o", tmp_path / "report",
    )  # fmt: skip
    assert_one_error(result, str(shanghaitech_root), "none of the 3 test images", "ROI mask is 640x480")
