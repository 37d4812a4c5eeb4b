"""Point 1: no single input can ask for unbounded memory; bounds are checked before allocating."""

from __future__ import annotations

import struct
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from robust_helpers import assert_one_error, make_image

from counting.core.errors import ImageError
from counting.data.imaging import load_image
from counting.features.backbones import Preprocessing
from counting.features.backbones.preprocessing import MAX_INPUT_PIXELS, MAX_LONG_SIDE


def png_with_header_size(path: Path, width: int, height: int) -> Path:
    """A tiny PNG whose header claims ``width`` x ``height`` (nothing that big is stored)."""
    Image.new("L", (1, 1)).save(path)
    data = bytearray(path.read_bytes())
    ihdr = 8  # after the signature: length(4) type(4) data(13) crc(4)
    data[ihdr + 8 : ihdr + 16] = struct.pack(">II", width, height)
    crc = zlib.crc32(bytes(data[ihdr + 4 : ihdr + 8 + 13])) & 0xFFFFFFFF
    data[ihdr + 21 : ihdr + 25] = struct.pack(">I", crc)
    path.write_bytes(bytes(data))
    return path


def test_thin_strip_alone_is_one_line(cli, tmp_path: Path) -> None:
    thin = tmp_path / "thin.png"
    Image.new("RGB", (1, 5000)).save(thin)
    assert thin.stat().st_size < 200
    assert_one_error(cli("count", thin), "thin.png", "aspect ratio 5000:1")


def test_an_aspect_just_above_the_limit_says_by_how_much_in_one_line(cli, tmp_path: Path) -> None:
    # "20:1 is above the limit of 20:1" read as a contradiction; and a picture refused for its size
    # got the short-side warning first, two lines for one file.
    strip = tmp_path / "strip.png"
    Image.new("RGB", (4001, 200)).save(strip)
    assert_one_error(cli("count", strip), "strip.png", "aspect ratio 20.005:1 is above the limit of 20:1")
    tiny = tmp_path / "tiny.png"
    Image.new("RGB", (100, 5)).save(tiny)
    result = cli("count", tiny)  # short side 5 (warned when counted), 11520x576 at 576: refused
    assert_one_error(result, "tiny.png", "after resizing is above the limit")
    assert "short side" not in result.stderr


def test_thin_strip_in_a_folder_is_skipped_and_the_rest_counted(cli, tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    Image.new("RGB", (5000, 1)).save(folder / "a-thin.png")
    make_image(folder / "b-good.png")
    make_image(folder / "c-good.png", seed=2)
    out = tmp_path / "counts.csv"
    result = cli("count", folder, "--csv", out)
    assert result.exit_code == 0, result.output
    assert "skipped: " in result.output and "a-thin.png" in result.output and "aspect ratio" in result.output
    rows = out.read_text().splitlines()
    assert len(rows) == 3 and "b-good.png" in rows[1] and "c-good.png" in rows[2]


def test_native_size_above_the_pixel_bound_is_refused_per_image(cli, tmp_path: Path) -> None:
    big = tmp_path / "big.png"
    Image.new("RGB", (2600, 2600), (40, 80, 120)).save(big)  # 6.8 Mpx > the 4.2 Mpx bound
    good = make_image(tmp_path / "good.png")
    out = tmp_path / "f.npy"
    result = cli(
        "features",
        big,
        good,
        "--input-size",
        "native",
        "--skip-bad",
        "--no-progress",
        "--no-cache",
        "-o",
        out,
    )
    assert result.exit_code == 0, result.output
    assert "big.png" in result.stderr and "megapixels" in result.stderr
    features = np.load(out)
    assert np.isnan(features[0]).all() and np.isfinite(features[1]).all()


def test_header_claiming_a_huge_picture_is_refused_before_decoding(
    tmp_path: Path,
) -> None:
    bomb = png_with_header_size(tmp_path / "bomb.png", 60_000, 60_000)  # 3.6 Gpx claimed, 70 bytes
    with pytest.raises(ImageError, match=r"bomb.png: image too large"):
        load_image(bomb)
    # Below PIL's own refusal (2 x 89 Mpx) but above what counting decodes (100 Mpx).
    large = png_with_header_size(tmp_path / "large.png", 11_000, 9_500)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # counting's own line alone, not PIL's warning beside it
        with pytest.raises(ImageError, match=r"large.png: image too large \(11000x9500"):
            load_image(large)


def test_huge_header_through_the_cli_is_one_line(cli, tmp_path: Path) -> None:
    bomb = png_with_header_size(tmp_path / "bomb.png", 60_000, 60_000)
    assert_one_error(cli("count", bomb), "bomb.png", "image too large")


@pytest.mark.parametrize(
    ("size", "input_size", "problem"),
    [
        ((1, 5000), 224, "aspect ratio"),
        ((5000, 300), 2048, "after resizing"),
        ((3000, 3000), None, "after resizing"),
    ],
)
def test_bounds_are_checked_from_sizes_alone(size, input_size, problem) -> None:
    prep = Preprocessing(input_size=input_size)
    with pytest.raises(ImageError, match=problem):
        prep.checked_target_size(*size, source="x.png")
    width, height = prep.checked_target_size(640, 480, source="ok.png") if input_size != 2048 else (0, 0)
    assert width * height <= MAX_INPUT_PIXELS and max(width, height) <= MAX_LONG_SIDE


@pytest.mark.parametrize("input_size", [100_000, 4096, -5])
def test_model_input_size_out_of_range(cli, mutated_model, features_file: Path, input_size: int) -> None:
    def change(arrays: dict, document: dict) -> None:
        document["user_metadata"]["preprocessing"]["input_size"] = input_size

    model = mutated_model(change)
    line = assert_one_error(cli("count", "--features", features_file, "--model", model), str(model))
    assert "preprocessing.input_size" in line


def test_model_roi_mask_of_100000_squared_is_refused_before_decoding(cli, mutated_model, features_file) -> None:
    def change(arrays: dict, document: dict) -> None:
        side = 100_000
        document["user_metadata"]["preprocessing"].update(
            roi=True,
            roi_mask={"shape": [side, side], "first": True, "runs": [side * side]},
        )

    model = mutated_model(change)
    assert_one_error(
        cli("count", "--features", features_file, "--model", model),
        str(model),
        "roi_mask",
    )


def test_preprocessing_refuses_a_huge_input_size() -> None:
    with pytest.raises(ValueError, match="at most 2048"):
        Preprocessing(input_size=100_000)


def test_a_one_pixel_image_is_counted_with_one_warning_line(cli, tmp_path: Path) -> None:
    dot = tmp_path / "dot.png"
    Image.new("RGB", (1, 1), (120, 50, 30)).save(dot)
    out = tmp_path / "counts.csv"
    result = cli("count", dot, "--csv", out)
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning: ")]
    # The picture's own warning, and the familiarity summary (a dot is unlike Mall's frames).
    assert len(warnings) == 2 and "dot.png" in warnings[0] and "1x1 pixels" in warnings[0]
    assert (
        warnings[1] == "warning: 1 of 1 pictures is unlike this model's training pictures; their counts are unreliable"
    )
    assert len(out.read_text().splitlines()) == 2  # still counted: header and its row


def test_the_python_api_warns_of_a_tiny_photo_once(tmp_path: Path, shared_data: Path, detector_files) -> None:
    """The crowd model's detector prepares a picture a second time; its warning came twice."""
    import counting

    tiny = tmp_path / "tiny.jpg"
    photo = shared_data / "coco-voc20" / "VOCdevkit" / "VOC2007" / "JPEGImages" / "000000000009.jpg"
    load_image(photo).convert("RGB").resize((40, 30)).save(tiny)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        counts = counting.count([tiny])
    assert counts.rows[0]["counted_by"] == "detector"  # the second preparation happened
    said = [str(item.message) for item in caught if "only 40x30 pixels" in str(item.message)]
    assert len(said) == 1 and "tiny.jpg" in said[0]


def test_an_ordinary_photo_gives_no_small_image_warning() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Preprocessing(input_size=224).checked_target_size(640, 480) == (299, 224)
    with pytest.warns(UserWarning, match="only 31x40 pixels"):
        Preprocessing(input_size=224).checked_target_size(31, 40, source="x.png")


def test_a_panorama_too_wide_at_the_model_input_is_one_line_that_count_can_follow(cli, tmp_path: Path) -> None:
    """4000x300 is within the aspect limit, but 7680x576 at the crowd model's input is above the
    pixel limit; the line told `count` users to pass --input-size, which only `train` has."""
    wide = tmp_path / "wide.png"
    Image.new("RGB", (4000, 300)).save(wide)
    result = cli("count", wide)
    assert_one_error(result, "wide.png", "7680x576 after resizing")
    assert "crop or split the picture" in result.output
    assert "at most 12.6:1" in result.output  # the limit a user meets: the widest picture that fits
