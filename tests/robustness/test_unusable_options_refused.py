"""Options and inputs a command cannot use are refused in one line before any work: a --methods
naming no method, a perspective descriptor of plain images, a density head with a layout it would
ignore, --show-above on a one-count model, contradicting inputs, absurd thread counts."""

from __future__ import annotations

from pathlib import Path

import pytest
from robust_helpers import (
    DEFAULT_MODEL,
    assert_one_error,
    make_image,
)


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


# -- --show-above on a single-count model ---------------------------------------------------------
def test_show_above_on_a_single_count_model_is_refused(cli, features_file: Path) -> None:
    # Was: exit 0, the option silently ignored.
    mall = ("-m", DEFAULT_MODEL)  # a descriptor model (the default crowd model reads feature maps)
    assert_one_error(
        cli("count", "--features", features_file, *mall, "--show-above", "2"), "default.npz", "--show-above"
    )
    assert cli("count", "--features", features_file, *mall).exit_code == 0


def test_contradicting_and_ignored_inputs_are_usage_errors(cli, tmp_path: Path, features_file: Path) -> None:
    """`--no-cache --cache-dir X` and `count IMAGES --features F` were accepted, one of the
    two silently ignored."""
    from robust_helpers import make_image

    image = make_image(tmp_path / "a.png")
    for command in (["count", image], ["features", image, "-o", tmp_path / "f.npy"]):
        result = cli(*command, "--no-cache", "--cache-dir", tmp_path / "c")
        assert result.exit_code == 2 and "ask for opposite things" in result.stderr
        assert not (tmp_path / "c").exists()
    result = cli("count", image, "--features", features_file)
    assert result.exit_code == 2 and "leave out the images" in result.stderr


@pytest.mark.parametrize("threads", ["100000", "0"])
def test_absurd_thread_counts_are_one_line(cli, tmp_path: Path, threads: str) -> None:
    image = make_image(tmp_path / "a.png")
    result = cli("features", image, "--threads", threads, "--no-cache")
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output and "threads" in result.stderr
