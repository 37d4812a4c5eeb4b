"""Every decode/resize route against the reference, bit for bit (hostile QA of the routes).

The reference is ``load_image`` (PIL decode, EXIF transpose, RGB) then PIL's
``resize(size, BILINEAR, reducing_gap=1.05)`` at ``Preprocessing.target_size``, then the
backbone's normalisation. The pipeline (``load_pixels(path, array_if=prep.reduces_in_opencv, sideways=True)``
then ``backbone.prepare``), ``load_pixels`` without ``array_if`` (OpenCV array whenever the
JPEG is plain) and ``prepare`` on arrays of every layout must all give the same tensor, or the
same one-line ImageError naming the file. No bug was found in the routes; these are the
exactness checks worth keeping (hostile EXIF values, damaged rotated JPEGs, odd array layouts).
"""

from __future__ import annotations

import functools
import io
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from counting.core.errors import ImageError
from counting.data.imaging import image_size, load_image, load_pixels
from counting.features.backbones import Preprocessing, get_backbone


@pytest.fixture(scope="module")
def backbone():
    return get_backbone("efficientnet-lite0", runtime="onnxruntime")


def _photo(width: int, height: int, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) * 7 % 256], -1)
    return Image.fromarray(np.clip(base + rng.integers(-40, 41, (height, width, 3)), 0, 255).astype(np.uint8))


def _raw_exif(kind: int, count: int, value: bytes) -> bytes:
    """An EXIF block holding only the orientation tag, of any TIFF type (PIL writes SHORT only)."""
    if len(value) <= 4:
        field, extra = value.ljust(4, b"\0"), b""
    else:
        field, extra = struct.pack(">I", 8 + 18), value
    ifd = struct.pack(">H", 1) + struct.pack(">HHI", 0x0112, kind, count) + field + struct.pack(">I", 0)
    return b"Exif\0\0" + b"MM" + struct.pack(">HI", 42, 8) + ifd + extra


def _jpeg(path: Path, picture: Image.Image, orientation: int | None = None, exif: bytes | None = None, **kw) -> Path:
    if orientation is not None:
        tags = Image.Exif()
        tags[0x0112] = orientation
        exif = tags.tobytes()
    if exif is not None:
        kw["exif"] = exif
    picture.save(path, "JPEG", quality=90, **kw)
    return path


def _reference(path: Path, prep: Preprocessing, backbone) -> np.ndarray:
    picture = load_image(path)
    size = prep.checked_target_size(*picture.size, source=str(path))
    return _reference_of_picture(picture, size, prep, backbone)


def _reference_of_picture(picture: Image.Image, size, prep: Preprocessing, backbone) -> np.ndarray:
    if prep.input_size is not None:
        picture = picture.resize(size, Image.BILINEAR, reducing_gap=1.05)
    pixels = np.asarray(picture.convert("RGB"))
    mask = None if prep.roi_mask is None else prep.resized_mask(size)
    if prep.flip:
        pixels = pixels[:, ::-1]
        mask = None if mask is None else mask[:, ::-1]
    mean = np.asarray(backbone.normalisation.mean, np.float32)
    scale = 1.0 / np.asarray(backbone.normalisation.std, np.float32)
    out = (pixels.astype(np.float32) - mean) * scale
    if mask is not None:
        out = out * mask[:, :, None]
    return out.transpose(2, 0, 1)


def _outcome(call):
    with warnings.catch_warnings():  # small pictures warn; PIL warns of odd EXIF
        warnings.simplefilter("ignore")
        try:
            return np.asarray(call())
        except ImageError as error:
            return str(error)


def _assert_same(expected, got) -> None:
    if isinstance(expected, str) or isinstance(got, str):
        assert got == expected
    else:
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


def _check_routes(path: Path, prep: Preprocessing, backbone) -> None:
    expected = _outcome(lambda: _reference(path, prep, backbone))

    def through(array_if, sideways: bool = False):
        pixels, bgr = load_pixels(path, array_if=array_if, sideways=sideways)
        return backbone.prepare(pixels, prep, source=str(path), bgr=bgr)

    _assert_same(expected, _outcome(lambda: through(prep.reduces_in_opencv, sideways=True)))  # the pipeline
    _assert_same(expected, _outcome(lambda: through(prep.reduces_in_opencv)))  # PIL turns the picture first
    _assert_same(expected, _outcome(lambda: through(lambda width, height: False, sideways=True)))  # PIL only
    _assert_same(expected, _outcome(lambda: through(None)))  # an OpenCV array whenever possible


# 128x96 turned upright is 96x128: at 40 both are 2x2-reduced by OpenCV (the array route); at
# 27 and 224 PIL reduces or enlarges; None keeps the native size; at 20 the sides divide by the
# 4x4 reduction, so a Sideways picture is reduced before it is turned.
@pytest.mark.parametrize("orientation", [None, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 65535])
def test_every_orientation_gives_the_reference_on_every_route(tmp_path: Path, backbone, orientation) -> None:
    path = _jpeg(tmp_path / "photo.jpg", _photo(128, 96, seed=3), orientation)
    plain = orientation in (None, 1, 2, 3, 4, 5, 6, 7, 8)
    assert load_pixels(path)[1] is plain  # OpenCV's array for every orientation it can turn
    assert load_pixels(path, array_if=Preprocessing(input_size=40).reduces_in_opencv)[1] is plain
    assert not load_pixels(path, array_if=Preprocessing(input_size=27).reduces_in_opencv)[1]
    for input_size in (None, 8, 20, 27, 40, 224):
        _check_routes(path, Preprocessing(input_size=input_size), backbone)
    rng = np.random.default_rng(0)
    height, width = image_size(path)
    prep = Preprocessing(input_size=40, flip=True, roi_mask=rng.random((height, width)) > 0.4)
    _check_routes(path, prep, backbone)


@pytest.mark.filterwarnings("ignore:Metadata Warning")  # PIL, of the two-value tag
@pytest.mark.parametrize(
    "kind, count, value",
    [
        (2, 2, b"6\0"),  # ASCII "6": PIL leaves it upright
        (5, 1, struct.pack(">II", 12, 2)),  # RATIONAL 6/1 as 12/2: PIL turns it
        (5, 1, struct.pack(">II", 13, 2)),  # 6.5
        (5, 1, struct.pack(">II", 0, 0)),  # NaN
        (11, 1, struct.pack(">f", 8.0)),  # FLOAT 8.0
        (12, 1, struct.pack(">d", float("nan"))),
        (8, 1, struct.pack(">h", -1)),
        (3, 2, struct.pack(">HH", 6, 3)),  # two values
        (4, 1, struct.pack(">I", 0x10006)),  # 65542: 6 in its low 16 bits
        (7, 1, b"\x06"),  # UNDEFINED: bytes
        (99, 1, b"\x06"),  # unknown type
    ],
    ids=["ascii", "rational-6", "rational-6.5", "rational-nan", "float-8", "double-nan", "minus-1", "two-values",
         "65542", "undefined", "unknown-type"],
)  # fmt: skip
def test_orientation_of_any_exif_type_is_read_alike(tmp_path: Path, backbone, kind, count, value) -> None:
    path = _jpeg(tmp_path / "odd.jpg", _photo(128, 96, seed=5), exif=_raw_exif(kind, count, value))
    pixels, bgr = load_pixels(path)
    upright = pixels[:, :, ::-1] if bgr else np.asarray(pixels)
    np.testing.assert_array_equal(upright, np.asarray(load_image(path)))
    assert image_size(path) == upright.shape[:2]
    for input_size in (None, 40):
        _check_routes(path, Preprocessing(input_size=input_size), backbone)


def _damaged(data: bytes, how: str, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    scan = data.find(b"\xff\xda")
    if how == "flip":
        changed = bytearray(data)
        for _ in range(3):
            changed[int(rng.integers(scan + 20, len(data) - 2))] ^= 1 << int(rng.integers(8))
        return bytes(changed)
    if how == "truncated":
        return data[: len(data) * 2 // 3]
    if how == "truncated-then-eoi":
        return data[: len(data) * 2 // 3] + b"\xff\xd9"
    if how == "middle-cut":
        return data[: len(data) // 2] + data[len(data) // 2 + 300 :]
    if how == "junk-after":
        return data + bytes(rng.integers(0, 256, 40, dtype=np.uint8)) + b"\xff\xd9"
    if how == "second-soi":
        return data[:-2] + b"\xff\xd8\xff\xd9"
    if how == "garbage-inside":
        return data[: scan + 200] + bytes(rng.integers(0, 256, 2000, dtype=np.uint8)) + b"\xff\xd9"
    raise AssertionError(how)


@pytest.mark.parametrize("orientation", [6, 8, 5])
@pytest.mark.parametrize(
    "how", ["flip", "truncated", "truncated-then-eoi", "middle-cut", "junk-after", "second-soi", "garbage-inside"]
)
@pytest.mark.parametrize("progressive", [False, True], ids=["baseline", "progressive"])
def test_damaged_rotated_jpeg_gives_pils_pixels_or_its_error(tmp_path: Path, orientation, how, progressive) -> None:
    buffer = io.BytesIO()
    _jpeg(buffer, _photo(160, 120, seed=orientation), orientation, progressive=progressive)
    path = tmp_path / "damaged.jpg"
    for seed in range(3):
        path.write_bytes(_damaged(buffer.getvalue(), how, seed))
        expected = _outcome(lambda: load_image(path))

        def fast():
            pixels, bgr = load_pixels(path)
            return pixels[:, :, ::-1] if bgr else pixels

        _assert_same(expected, _outcome(fast))
        if isinstance(expected, str):
            assert expected.startswith(f"{path}: ") and "\n" not in expected


def _layouts(rgb: np.ndarray):
    """(name, array, bgr) for one picture in every layout a caller may hand ``prepare``."""
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])
    padded = np.zeros((rgb.shape[0] * 2 + 1, rgb.shape[1] * 3 + 2, 4), np.uint8)
    padded[1::2, 2::3, :3] = rgb
    readonly = rgb.copy()
    readonly.setflags(write=False)
    yield "rgb", rgb, False
    yield "bgr", bgr, True
    yield "bgr-view", rgb[:, :, ::-1], True
    yield "rgb-view-of-bgr", bgr[:, :, ::-1], False
    yield "fortran", np.asfortranarray(rgb), False
    yield "fortran-bgr", np.asfortranarray(bgr), True
    yield "strided", padded[1::2, 2::3, :3], False
    yield "strided-bgr", padded[1::2, 2::3, :3][:, :, ::-1], True
    yield "transposed-view", np.ascontiguousarray(rgb.transpose(1, 0, 2)).transpose(1, 0, 2), False
    yield "readonly", readonly, False
    yield "h-w-1", rgb[:, :, 1:2].copy(), False
    yield "grey", rgb[:, :, 1].copy(), False
    yield "grey-strided", rgb[:, :, 1], True  # bgr means nothing for one channel


def _as_rgb_picture(array: np.ndarray, bgr: bool) -> Image.Image:
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim == 3 and bgr:
        array = array[:, :, ::-1]
    return Image.fromarray(np.ascontiguousarray(array)).convert("RGB")


def _array_reference(array: np.ndarray, bgr: bool, prep: Preprocessing, backbone) -> np.ndarray:
    picture = _as_rgb_picture(array, bgr)
    return _reference_of_picture(picture, prep.checked_target_size(*picture.size, source="image"), prep, backbone)


@pytest.mark.parametrize(
    "width, height",
    [(1, 1), (2, 3), (31, 33), (97, 101), (98, 74), (99, 74), (448, 336), (160, 8), (8, 161), (450, 338), (301, 899)],
)
def test_arrays_of_every_layout_give_the_reference_and_stay_untouched(backbone, width: int, height: int) -> None:
    # At 35, 98x74 takes OpenCV's 2x2 reduction and 99x74 PIL's; at 160, 448x336 takes OpenCV's.
    assert Preprocessing(input_size=35).reduces_in_opencv(98, 74)
    assert not Preprocessing(input_size=35).reduces_in_opencv(99, 74)
    assert Preprocessing(input_size=160).reduces_in_opencv(448, 336)
    rgb = np.asarray(_photo(width, height, seed=width + height))
    for input_size in (None, 8, 35, 160):
        for flip in (False, True):
            prep = Preprocessing(input_size=input_size, flip=flip)
            for name, array, bgr in _layouts(rgb):
                before = array.copy()
                expected = _outcome(functools.partial(_array_reference, array, bgr, prep, backbone))
                got = _outcome(functools.partial(backbone.prepare, array, prep, source="image", bgr=bgr))
                _assert_same(expected, got)
                np.testing.assert_array_equal(array, before, err_msg=name)  # never written to
                if not isinstance(got, str) and array.flags.writeable:
                    # The tensor owns its values: writing into the caller's array later changes nothing.
                    array[...] = 255 - array
                    np.testing.assert_array_equal(got, expected, err_msg=name)
                    array[...] = before


# Found by hostile QA (sideways phone photos): ImageOps.exif_transpose re-serialises the EXIF
# block after dropping the orientation, and PIL's writer fails on tags whose stored type does
# not match their definition (Make stored as RATIONAL, XResolution as a negative SLONG, ...):
# load_image raised a bare AttributeError / struct.error (not ImageError) for such a turned
# photo, while the feature pipeline (OpenCV array, Sideways) gives its pixels.
def _exif_entries(entries: list[tuple[int, int, int, bytes]]) -> bytes:
    ifd = struct.pack(">H", len(entries))
    ifd += b"".join(struct.pack(">HHI", tag, kind, count) + field for tag, kind, count, field in sorted(entries))
    return b"Exif\0\0" + b"MM" + struct.pack(">HI", 42, 8) + ifd + struct.pack(">I", 0) + struct.pack(">II", 12, 2)


@pytest.mark.filterwarnings("ignore:Metadata Warning")
@pytest.mark.parametrize(
    "odd_tag",
    [
        (0x010F, 5, 1, struct.pack(">I", 38)),  # Make (ASCII) stored as a RATIONAL
        (0x011A, 9, 1, struct.pack(">i", -1)),  # XResolution as a negative SLONG
        (0x0100, 11, 1, struct.pack(">f", 2.5)),  # ImageWidth as a FLOAT
    ],
    ids=["make-rational", "xres-negative", "width-float"],
)
@pytest.mark.parametrize("suffix", ["jpg", "png"])
def test_turned_photo_with_mistyped_exif_tag_loads_on_every_route(tmp_path: Path, backbone, odd_tag, suffix) -> None:
    orientation = (0x0112, 3, 1, struct.pack(">HH", 6, 0))
    path = tmp_path / f"odd.{suffix}"
    _photo(90, 120, seed=7).save(path, exif=_exif_entries([orientation, odd_tag]))
    picture = load_image(path)  # was: AttributeError / struct.error from exif_transpose
    assert picture.size == (120, 90)
    for input_size in (None, 40, 224):
        _check_routes(path, Preprocessing(input_size=input_size), backbone)
