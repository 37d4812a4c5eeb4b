"""Image loading: real frames, orientation, grayscale, and one-line errors for bad files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from counting.core.errors import CountingError, ImageError
from counting.data.imaging import load_image, load_pixels

RED, BLUE = (220, 20, 20), (20, 20, 220)


@pytest.fixture(scope="module")
def mall_frame(mall_root: Path) -> Path:
    return mall_root / "frames" / "seq_000001.jpg"


def test_real_mall_frame_is_rgb_at_native_size(mall_frame: Path) -> None:
    image = load_image(mall_frame)
    assert image.mode == "RGB"
    assert image.size == (640, 480)
    pixels = np.asarray(image)
    assert pixels.dtype == np.uint8 and pixels.std() > 20  # a real photo, not a blank frame


def test_exif_orientation_is_applied(tmp_path: Path) -> None:
    # 40x20 landscape, red left half, blue right half, stored with "rotate 90 CW" (tag 6).
    stored = Image.new("RGB", (40, 20), BLUE)
    stored.paste(Image.new("RGB", (20, 20), RED), (0, 0))
    exif = Image.Exif()
    exif[0x0112] = 6
    path = tmp_path / "rotated.jpg"
    stored.save(path, exif=exif, quality=95)

    image = load_image(path)
    assert image.size == (20, 40)  # shown upright: portrait
    pixels = np.asarray(image).astype(int)
    # Rotating 90 degrees clockwise puts the left (red) half on top.
    assert np.abs(pixels[5:15, 5:15] - RED).max() < 30
    assert np.abs(pixels[25:35, 5:15] - BLUE).max() < 30


def test_grayscale_png_becomes_three_equal_channels(tmp_path: Path) -> None:
    gray = np.tile(np.arange(0, 256, 4, dtype=np.uint8), (10, 1))  # 10x64 ramp
    path = tmp_path / "ramp.png"
    Image.fromarray(gray, mode="L").save(path)
    pixels = np.asarray(load_image(path))
    assert pixels.shape == (10, 64, 3)
    for channel in range(3):
        np.testing.assert_array_equal(pixels[:, :, channel], gray)


def test_sixteen_bit_grayscale_is_rescaled_not_clipped(tmp_path: Path) -> None:
    deep = np.array([[0, 16384, 32768, 65535]], dtype=np.uint16)
    path = tmp_path / "deep.png"
    Image.fromarray(deep).save(path)
    pixels = np.asarray(load_image(path))[0, :, 0].astype(int)
    np.testing.assert_allclose(pixels, [0, 64, 128, 255], atol=1)


def test_transparent_png_is_composited_on_white(tmp_path: Path) -> None:
    rgba = np.zeros((4, 4, 4), dtype=np.uint8)
    rgba[:2] = (0, 0, 255, 255)  # top: opaque blue; bottom: fully transparent
    path = tmp_path / "alpha.png"
    Image.fromarray(rgba, mode="RGBA").save(path)
    pixels = np.asarray(load_image(path))
    np.testing.assert_array_equal(pixels[0, 0], (0, 0, 255))
    np.testing.assert_array_equal(pixels[3, 3], (255, 255, 255))


def _truncated_copy(source: Path, target: Path) -> Path:
    data = source.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    return target


def _written(target: Path, data: bytes) -> Path:
    target.write_bytes(data)
    return target


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda tmp, real: tmp / "absent.jpg", "file not found"),
        (lambda tmp, real: _written(tmp / "empty.jpg", b""), "empty (0 bytes)"),
        (lambda tmp, real: _written(tmp / "notes.jpg", b"these are notes, not pixels\n"), "not an image file"),
        (lambda tmp, real: _truncated_copy(real, tmp / "cut.jpg"), "truncated"),
        (lambda tmp, real: tmp, "is a folder"),
    ],
    ids=["missing", "zero-bytes", "text-file", "truncated-jpeg", "folder"],
)
@pytest.mark.parametrize("loader", [load_image, load_pixels], ids=["load_image", "load_pixels"])
def test_bad_files_give_one_line_error_naming_the_file(
    tmp_path: Path, mall_frame: Path, make, problem: str, loader
) -> None:
    path = make(tmp_path, mall_frame)
    with pytest.raises(ImageError) as caught:
        loader(path)
    message = str(caught.value)
    assert isinstance(caught.value, CountingError)
    assert message.startswith(f"{path}: ")
    assert problem in message
    assert "\n" not in message


# -- load_pixels: the extraction pipeline's decoder -------------------------------------------


def _as_rgb(pixels, bgr: bool) -> np.ndarray:
    return np.asarray(pixels)[:, :, ::-1] if bgr else np.asarray(pixels)


def test_load_pixels_decodes_real_jpegs_with_opencv_to_the_same_pixels(
    mall_root: Path, coco_voc20_root: Path, shanghaitech_root: Path
) -> None:
    photos = sorted((coco_voc20_root / "JPEGImages").glob("*.jpg"))
    paths = (
        sorted((mall_root / "frames").glob("*.jpg"))[:5]
        + photos[:: max(1, len(photos) // 25)]
        + sorted(shanghaitech_root.rglob("*.jpg"))[:3]
    )
    assert len(paths) > 30
    for path in paths:
        pixels, bgr = load_pixels(path)
        assert bgr, f"{path}: a plain JPEG should take the OpenCV path"
        np.testing.assert_array_equal(_as_rgb(pixels, bgr), np.asarray(load_image(path)), err_msg=str(path))


def _jpeg(path: Path, image: Image.Image, **options) -> Path:
    image.save(path, quality=90, **options)
    return path


def _photo_like(size: tuple[int, int] = (64, 48)) -> Image.Image:
    rng = np.random.default_rng(0)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


@pytest.mark.parametrize(
    ("make", "fast"),
    [
        (lambda tmp: _jpeg(tmp / "colour.jpg", _photo_like()), True),
        (lambda tmp: _jpeg(tmp / "grey.jpg", _photo_like().convert("L")), True),
        (lambda tmp: _jpeg(tmp / "progressive.jpg", _photo_like(), progressive=True), True),
        (lambda tmp: _jpeg(tmp / "cmyk.jpg", _photo_like().convert("CMYK")), False),
        *[
            (
                lambda tmp, value=value: _jpeg(tmp / "oriented.jpg", _photo_like((65, 47)), exif=_orientation(value)),
                True,
            )
            for value in range(1, 9)
        ],
        (lambda tmp: _jpeg(tmp / "bad-orientation.jpg", _photo_like(), exif=_orientation(9)), False),
        (lambda tmp: _png(tmp / "picture.png"), False),
        (lambda tmp: _trailing_bytes(tmp / "trailing.jpg"), False),
    ],
    ids=[
        "colour",
        "grey",
        "progressive",
        "cmyk",
        *[f"exif-orientation-{value}" for value in range(1, 9)],
        "exif-orientation-9",
        "png",
        "bytes-after-end",
    ],
)
def test_load_pixels_gives_load_images_pixels_whichever_decoder(tmp_path: Path, make, fast: bool) -> None:
    path = make(tmp_path)
    pixels, bgr = load_pixels(path)
    assert bgr is fast
    np.testing.assert_array_equal(_as_rgb(pixels, bgr), np.asarray(load_image(path)))


def _orientation(value: int) -> Image.Exif:
    exif = Image.Exif()
    exif[0x0112] = value
    return exif


def _png(path: Path) -> Path:
    _photo_like().save(path)
    return path


def _trailing_bytes(path: Path) -> Path:
    # Some cameras append data after the end-of-image marker: PIL reads such files fine.
    _jpeg(path, _photo_like())
    path.write_bytes(path.read_bytes() + b"\x00" * 16)
    return path


@pytest.mark.parametrize("orientation", [1, 6])
def test_load_pixels_asks_for_the_array_with_the_upright_size(tmp_path: Path, orientation: int) -> None:
    path = _jpeg(tmp_path / "photo.jpg", _photo_like((65, 47)), exif=_orientation(orientation))
    upright = (65, 47) if orientation == 1 else (47, 65)
    asked: list[tuple[int, int]] = []
    for wanted in (True, False):

        def array_if(width: int, height: int, wanted: bool = wanted) -> bool:
            asked.append((width, height))
            return wanted

        pixels, bgr = load_pixels(path, array_if=array_if)
        assert bgr is wanted and isinstance(pixels, np.ndarray) is wanted
        np.testing.assert_array_equal(_as_rgb(pixels, bgr), np.asarray(load_image(path)))
    assert asked == [upright, upright]


def test_pipeline_decodes_to_an_array_only_before_the_opencv_reduction() -> None:
    from counting.features.backbones import Preprocessing

    prep = Preprocessing(input_size=224)
    assert prep.reduces_in_opencv(640, 480)  # Mall frames: 2x2 box reduction in OpenCV
    assert not prep.reduces_in_opencv(641, 480)  # odd side: PIL's reduce
    assert not prep.reduces_in_opencv(4032, 3024)  # 12x12 reduction: PIL's reduce
    assert not prep.reduces_in_opencv(500, 375)  # no reduction
    assert not Preprocessing(input_size=None).reduces_in_opencv(640, 480)  # native size


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("mode", ["RGB", "CMYK"])
def test_sideways_pictures_are_reduced_first_with_the_same_pixels(tmp_path: Path, orientation: int, mode: str) -> None:
    from counting.data.imaging import Sideways
    from counting.features.backbones import Preprocessing
    from counting.features.backbones.preprocessing import _REDUCING_GAP, Normalisation, prepare_image, reduction_factors

    # Upright 120x88 and 63x62 at input 20 divide by their 4x4 and 3x2 reductions (reduced,
    # then turned: unequal factors must be swapped for the stored picture); 121x91 does not
    # (turned first).
    normalisation = Normalisation((127.0, 127.0, 127.0), (128.0, 128.0, 128.0))
    expected_factors = {(120, 88): (4, 4), (63, 62): (3, 2), (121, 91): None}
    for upright_size, divisible_by in expected_factors.items():
        stored = upright_size[::-1] if orientation in (5, 6, 7, 8) else upright_size
        path = _jpeg(
            tmp_path / f"{mode}-{stored[0]}.jpg", _photo_like(stored).convert(mode), exif=_orientation(orientation)
        )
        picture, bgr = load_pixels(path, array_if=lambda width, height: False, sideways=True)
        assert not bgr and isinstance(picture, Sideways) is (orientation != 1)
        upright = load_image(path)
        assert picture.size == upright.size == upright_size
        prep = Preprocessing(input_size=20)
        size = prep.target_size(*upright.size)
        factors = reduction_factors(*upright.size, size)
        divides = upright_size[0] % factors[0] == 0 and upright_size[1] % factors[1] == 0
        assert divides is (divisible_by is not None) and (divisible_by is None or factors == divisible_by)
        resized = np.asarray(upright.resize(size, Image.BILINEAR, reducing_gap=_REDUCING_GAP), dtype=np.float32)
        expected = ((resized - 127.0) / 128.0).transpose(2, 0, 1)
        prepared = prepare_image(picture, prep, normalisation, channels_last=False)
        np.testing.assert_array_equal(prepared.numpy(), expected)


@pytest.mark.parametrize("orientation", [6, 8])
def test_upright_pictures_no_longer_ask_to_be_turned(tmp_path: Path, orientation: int) -> None:
    from PIL import ImageOps

    path = _jpeg(tmp_path / "turned.jpg", _photo_like((65, 47)), exif=_orientation(orientation))
    upright = load_image(path)
    assert upright.size == (47, 65)
    again = ImageOps.exif_transpose(upright)  # what a caller may do with the picture
    assert again.size == upright.size
    np.testing.assert_array_equal(np.asarray(again), np.asarray(upright))


def test_an_rgba_array_is_the_rgba_file(tmp_path: Path) -> None:
    """An (H, W, 4) array is composited on white as an RGBA file is, so both prepare alike;
    other channel counts are refused in one line."""
    from counting.features.backbones.preprocessing import Normalisation, Preprocessing, prepare_image

    rng = np.random.default_rng(0)
    rgba = rng.integers(0, 256, (40, 60, 4), dtype=np.uint8)
    path = tmp_path / "alpha.png"
    Image.fromarray(rgba).save(path)
    prep, normalisation = Preprocessing(input_size=32), Normalisation((127.0,) * 3, (128.0,) * 3)
    from_file = np.asarray(prepare_image(load_image(path), prep, normalisation))
    from_array = np.asarray(prepare_image(rgba, prep, normalisation))
    np.testing.assert_array_equal(from_array, from_file)
    with pytest.raises(ImageError, match=r"picture: expected an \(H, W\), \(H, W, 3\) or \(H, W, 4\) uint8"):
        prepare_image(rgba[:, :, :2].copy(), prep, normalisation, source="picture")
