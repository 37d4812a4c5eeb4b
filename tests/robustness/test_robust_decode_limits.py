"""Issue 24: every decode route bounded in size, structure and time; memory flat in the number
of images counted.

A sparse file that starts like a JPEG kept PIL's marker scan busy for many minutes (it reads
stray bytes one at a time); `counting count` on 10 000 images held every image's descriptor and
the regressor's working copies of all of them at once. Sparse files cost no disk: they are
made with ``os.truncate`` and removed at the end of each case.
"""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from robust_helpers import REPO_ROOT, assert_one_error, make_image

from counting.apply.chunks import count_in_chunks
from counting.core.errors import CountingError, ImageError
from counting.data.imaging import MAX_IMAGE_BYTES, image_size, load_image, load_pixels
from counting.model.counting_model import CountResult

MALL_FRAME = REPO_ROOT.parent / "shared" / "data" / "mall-train" / "frames" / "seq_000001.jpg"
ROUTES = {
    "load_pixels": lambda path: load_pixels(path),
    "load_pixels-sideways": lambda path: load_pixels(path, sideways=True),
    "load_pixels-pil": lambda path: load_pixels(path, array_if=lambda width, height: False),
    "load_image": load_image,
    "image_size": image_size,
}


def _jpeg_bytes() -> bytes:
    if MALL_FRAME.exists():
        return MALL_FRAME.read_bytes()
    buffer = io.BytesIO()
    pixels = np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def _header_end(data: bytes) -> int:
    """Offset of the image data: just after the start-of-scan segment."""
    start = data.find(b"\xff\xda")
    return start + 2 + int.from_bytes(data[start + 2 : start + 4], "big")


@pytest.fixture
def sparse(tmp_path: Path) -> Iterator:
    """``sparse(name, head, size)``: a file holding ``head`` then zeros up to ``size`` bytes,
    without using the disk; removed afterwards."""
    made: list[Path] = []

    def make(name: str, head: bytes, size: int, folder: Path = tmp_path) -> Path:
        path = folder / name
        path.write_bytes(head)
        os.truncate(path, size)
        made.append(path)
        return path

    yield make
    for path in made:
        path.unlink(missing_ok=True)


def _timed(route, path: Path) -> tuple[str, float]:
    start = time.perf_counter()
    with pytest.raises(ImageError) as caught:
        route(path)
    return str(caught.value), time.perf_counter() - start


# ------------------------------------------------------------------ size and structure guards


def _warm_up(cli, tmp_path: Path) -> None:
    """One count first: the session's first exports the backbone to ONNX (half a minute on a
    busy machine), which is no part of what the timed cases measure."""
    result = cli("count", make_image(tmp_path / "warm-up.png"), "--no-progress")
    assert result.exit_code == 0, result.output


def test_three_gigabyte_sparse_jpeg_alone_is_one_line_at_once(cli, sparse, tmp_path: Path) -> None:
    _warm_up(cli, tmp_path)
    path = sparse("huge.jpg", _jpeg_bytes()[:200], 3 << 30)
    start = time.perf_counter()
    line = assert_one_error(cli("count", path, "--no-progress"), "huge.jpg", "file too large", "3,072 MB")
    assert "COUNTING_MAX_IMAGE_BYTES" in line
    assert time.perf_counter() - start < 30  # was: no answer after many minutes


@pytest.mark.skipif(not MALL_FRAME.exists(), reason="needs the shared Mall frames")
def test_folder_with_sparse_jpegs_counts_the_real_frame(cli, sparse, tmp_path: Path) -> None:
    folder = tmp_path / "frames"
    folder.mkdir()
    data = MALL_FRAME.read_bytes()
    sparse("a-huge.jpg", data[:200], 3 << 30, folder)
    sparse("b-header-then-zeros.jpg", data[:200], 300 << 20, folder)
    sparse("c-scan-of-zeros.jpg", data[: _header_end(data)], 40 << 20, folder)
    (folder / "d-real.jpg").write_bytes(data)
    out = tmp_path / "counts.csv"
    _warm_up(cli, tmp_path)
    start = time.perf_counter()
    result = cli("count", folder, "--no-progress", "--csv", out)
    assert time.perf_counter() - start < 60
    assert result.exit_code == 0, result.output
    skipped = [line for line in result.output.splitlines() if line.startswith("skipped:")]
    assert len(skipped) == 3, result.output
    assert "a-huge.jpg: file too large" in skipped[0]
    assert (
        "b-header-then-zeros.jpg: cannot decode image (JPEG header holds more than 1.0 MB of zero bytes" in skipped[1]
    )
    assert "c-scan-of-zeros.jpg: cannot decode image (JPEG image data is zero bytes to the end" in skipped[2]
    rows = out.read_text().splitlines()
    assert len(rows) == 2 and "d-real.jpg" in rows[1]


# 32 MB takes the OpenCV route's size (read whole), 300 MB PIL's.
@pytest.mark.parametrize("size", [32 << 20, 300 << 20], ids=["32MB", "300MB"])
@pytest.mark.parametrize("route", ROUTES, ids=list(ROUTES))
def test_sparse_jpeg_under_the_size_cap_is_refused_by_every_route(sparse, route: str, size: int) -> None:
    data = _jpeg_bytes()
    for name, head, problem in [
        ("header.jpg", data[:200], "JPEG header holds more than 1.0 MB of zero bytes: a zero-filled or sparse file"),
        ("soi.jpg", data[:3], "JPEG header holds more than 1.0 MB of zero bytes"),
        ("scan.jpg", data[: _header_end(data)], "JPEG image data is zero bytes to the end of the file"),
    ]:
        path = sparse(name, head, size)
        message, seconds = _timed(ROUTES[route], path)
        assert message.startswith(f"{path}: ") and problem in message, message
        assert "\n" not in message
        assert seconds < 5, seconds  # a few reads: milliseconds


@pytest.mark.parametrize("route", ROUTES, ids=list(ROUTES))
def test_zero_filled_jpeg_written_out_is_refused_too(tmp_path: Path, route: str) -> None:
    # Not sparse: a download preallocated with zeros, of which only the header arrived. PIL
    # decoded it to a flat grey picture without a word.
    data = _jpeg_bytes()
    path = tmp_path / "preallocated.jpg"
    path.write_bytes(data[: _header_end(data)] + bytes(3 << 20))
    message, _ = _timed(ROUTES[route], path)
    assert "image data is zero bytes to the end of the file" in message


@pytest.mark.parametrize("padding", [0, 200_000], ids=["plain", "zero-padded-after-end"])
def test_flat_picture_coded_as_zero_bytes_still_decodes_as_pil_does(tmp_path: Path, padding: int) -> None:
    # A flat grey picture with optimised Huffman tables is coded as zero bytes (its end marker
    # follows them): a valid JPEG the zero-data check must let through, padding and all.
    buffer = io.BytesIO()
    Image.new("RGB", (640, 480), (128, 128, 128)).save(buffer, "JPEG", optimize=True)
    data = buffer.getvalue()
    assert not data[_header_end(data) : -2].strip(b"\0")  # the premise: zero bytes only
    path = tmp_path / "flat.jpg"
    path.write_bytes(data + bytes(padding))
    with Image.open(path) as reference:
        expected = np.asarray(reference.convert("RGB"))
    np.testing.assert_array_equal(np.asarray(load_image(path)), expected)
    pixels, bgr = load_pixels(path)
    np.testing.assert_array_equal(np.asarray(pixels)[:, :, ::-1] if bgr else np.asarray(pixels), expected)
    assert image_size(path) == (480, 640)


def test_a_few_stray_bytes_between_markers_still_give_pils_pixels(tmp_path: Path) -> None:
    # PIL steps over junk between header segments; so do the checks, up to 1 MB of it.
    data = _jpeg_bytes()
    after_app0 = 4 + int.from_bytes(data[4:6], "big")
    path = tmp_path / "junk.jpg"
    path.write_bytes(data[:after_app0] + b"\x00\x01junk" * 1000 + data[after_app0:])
    with Image.open(path) as reference:
        expected = np.asarray(reference.convert("RGB"))
    np.testing.assert_array_equal(np.asarray(load_image(path)), expected)
    pixels, bgr = load_pixels(path)
    np.testing.assert_array_equal(np.asarray(pixels)[:, :, ::-1] if bgr else np.asarray(pixels), expected)


def test_megabytes_of_stray_bytes_in_a_jpeg_header_are_refused(tmp_path: Path) -> None:
    data = _jpeg_bytes()
    path = tmp_path / "stray.jpg"
    path.write_bytes(data[:20] + b"\x01" * (2 << 20) + data[20:])
    for route in ROUTES.values():
        message, seconds = _timed(route, path)
        assert "JPEG header holds more than 1.0 MB of bytes that are no JPEG markers" in message, message
        assert seconds < 5


def test_tens_of_thousands_of_header_markers_are_refused(tmp_path: Path) -> None:
    data = _jpeg_bytes()
    path = tmp_path / "comments.jpg"
    path.write_bytes(data[:2] + b"\xff\xfe\x00\x02" * 20_000 + data[2:])  # empty comment segments
    message, _ = _timed(load_pixels, path)
    assert "JPEG header holds more than 10,000 markers" in message


def test_the_size_cap_is_overridable_and_a_bad_value_stops_the_run(cli, tmp_path: Path, monkeypatch) -> None:
    # In a folder of its own: the feature cache of these tests is tmp_path/feature-cache, and a
    # cache inside a folder being counted is refused before any picture is read.
    (tmp_path / "photos").mkdir()
    image = make_image(tmp_path / "photos" / "photo.png", (320, 240))
    monkeypatch.setenv("COUNTING_MAX_IMAGE_BYTES", "1000")
    for route in ROUTES.values():
        message, _ = _timed(route, image)
        assert message.startswith(f"{image}: file too large for an image"), message
    monkeypatch.setenv("COUNTING_MAX_IMAGE_BYTES", "lots")
    with pytest.raises(CountingError, match="COUNTING_MAX_IMAGE_BYTES='lots': expected a whole number of bytes"):
        load_image(image)
    assert_one_error(cli("count", image, image.parent, "--no-progress"), "COUNTING_MAX_IMAGE_BYTES='lots'")
    monkeypatch.delenv("COUNTING_MAX_IMAGE_BYTES")
    assert MAX_IMAGE_BYTES >= 512 << 20  # the default leaves room for a 100-megapixel RGB TIFF
    assert load_image(image).size == (320, 240)


def _png_with_many_chunks(path: Path, chunks: int) -> Path:
    """A valid 64x48 PNG with ``chunks`` empty private chunks before its image data: PIL reads
    it, a few microseconds a chunk, so it stands for any file that keeps a decoder busy."""
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 20, 30)).save(buffer, "PNG")
    data = buffer.getvalue()
    empty = struct.pack(">I", 0) + b"prVt" + struct.pack(">I", zlib.crc32(b"prVt") & 0xFFFFFFFF)
    path.write_bytes(data[:33] + empty * chunks + data[33:])  # after the signature and IHDR
    return path


@pytest.mark.parametrize("route", ROUTES, ids=list(ROUTES))
def test_a_decode_that_runs_past_its_time_is_stopped(tmp_path: Path, monkeypatch, route: str) -> None:
    path = _png_with_many_chunks(tmp_path / "chunky.png", 100_000)
    monkeypatch.setenv("COUNTING_DECODE_SECONDS", "0.05")
    message, seconds = _timed(ROUTES[route], path)
    assert message == (
        f"{path}: cannot decode image (still decoding after 0.05 s: a damaged or hostile file; "
        "COUNTING_DECODE_SECONDS raises the limit)"
    )
    assert seconds < 5
    monkeypatch.delenv("COUNTING_DECODE_SECONDS")
    assert load_image(path).size == (64, 48)  # the same file within the default bound


def test_the_time_bound_is_one_skipped_line_in_a_folder(cli, tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    _png_with_many_chunks(folder / "a-slow.png", 100_000)
    make_image(folder / "b-good.png")
    monkeypatch.setenv("COUNTING_DECODE_SECONDS", "0.05")
    out = tmp_path / "counts.csv"
    result = cli("count", folder, "--no-progress", "--csv", out)
    assert result.exit_code == 0, result.output
    assert "skipped: " in result.output and "a-slow.png: cannot decode image (still decoding" in result.output
    rows = out.read_text().splitlines()
    assert len(rows) == 2 and "b-good.png" in rows[1]


# ------------------------------------------------------------------ memory flat in the inputs


class _ChunkRecorder:
    """A model whose count_paths records its calls: counts are the image numbers."""

    def __init__(self, intervals: bool = True) -> None:
        self.calls: list[tuple[int, dict]] = []
        self.intervals = intervals

    def count_paths(self, paths: list[str], **options) -> CountResult:
        self.calls.append((len(paths), options))
        numbers = np.array([float(Path(p).stem.split("-")[1]) for p in paths])
        ok = numbers % 7 != 3
        counts = np.where(ok, numbers, np.nan)
        errors = {p: f"{p}: bad" for p, good in zip(paths, ok) if not good}
        low, high = (counts - 1, counts + 1) if self.intervals else (None, None)
        return CountResult(sources=list(paths), counts=counts, low=low, high=high, ok=ok, errors=errors)


@pytest.mark.parametrize("intervals", [True, False])
def test_chunks_join_into_one_result_in_input_order(intervals: bool) -> None:
    paths = [f"img-{k}.jpg" for k in range(1000)]
    model = _ChunkRecorder(intervals)
    result = count_in_chunks(model, paths, chunk=100, batch_size=16, progress=True)
    # 96 = the largest multiple of the batch size in 100: batches as one call makes them
    assert [n for n, _ in model.calls] == [96] * 10 + [40]
    assert all(options["progress"] is False and options["batch_size"] == 16 for _, options in model.calls)
    assert result.sources == paths
    np.testing.assert_array_equal(result.ok, np.arange(1000) % 7 != 3)
    np.testing.assert_array_equal(result.counts[result.ok], np.arange(1000)[result.ok])
    assert list(result.errors) == [p for k, p in enumerate(paths) if k % 7 == 3]
    assert (result.low is None) == (not intervals)
    if intervals:
        np.testing.assert_array_equal(result.high[result.ok], np.arange(1000)[result.ok] + 1)


def test_a_run_that_fits_one_chunk_is_one_plain_call() -> None:
    model = _ChunkRecorder()
    count_in_chunks(model, [f"img-{k}.jpg" for k in range(50)], progress=True, batch_size=8)
    assert len(model.calls) == 1 and model.calls[0] == (50, {"progress": True, "batch_size": 8})


@pytest.mark.skipif(not MALL_FRAME.exists(), reason="needs the shared Mall frames")
def test_chunked_counts_are_the_counts_of_one_call(tmp_path: Path) -> None:
    from counting.model.counting_model import load_model

    model = load_model(REPO_ROOT / "models" / "default.npz")
    frames = sorted(MALL_FRAME.parent.glob("seq_0000[0-3]*.jpg"))[:40]
    whole = model.count_paths(frames, batch_size=8)
    chunked = count_in_chunks(model, frames, chunk=16, batch_size=8)
    assert chunked.sources == whole.sources
    np.testing.assert_array_equal(chunked.counts, whole.counts)
    np.testing.assert_array_equal(chunked.low, whole.low)
    np.testing.assert_array_equal(chunked.high, whole.high)


_PEAK_CHILD = """
import sys
import numpy as np
import counting.features
from counting.features.extract import FeatureSet
from counting.apply.chunks import count_in_chunks
from counting.model.counting_model import CountingModel, load_model

def extract(paths, backbone, prep=None, grid=None, **options):
    rows = np.random.default_rng(len(paths)).random((len(paths), 1000), dtype=np.float32)
    return FeatureSet(features=rows, ok=np.ones(len(paths), bool), errors={}, paths=list(map(str, paths)))

# The network is not what grows with the images: its descriptors are faked, the rest is real.
counting.features.extract_features = extract
CountingModel.get_backbone = lambda self, weights=None: None
model = load_model(sys.argv[1])
count_in_chunks(model, [f"warm-{k}.jpg" for k in range(64)], batch_size=16)
n = int(sys.argv[2])
result = count_in_chunks(model, [f"img-{k:06d}.jpg" for k in range(n)], batch_size=16)
assert len(result.counts) == n and result.ok.all()
with open("/proc/self/status") as status:
    print(next(line for line in status if line.startswith("VmHWM")).split()[1])
"""


def _peak_mb(n_images: int) -> float:
    process = subprocess.run(  # noqa: PLW1510 - checked below
        [sys.executable, "-c", _PEAK_CHILD, str(REPO_ROOT / "models" / "default.npz"), str(n_images)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-2000:]
    return int(process.stdout.split()[-1]) / 1024


@pytest.mark.slow
def test_counting_twenty_thousand_images_needs_no_more_memory_than_five_hundred() -> None:
    # Was: +513 MB at 20 000 images (every descriptor, float64 copies and the regressor's working
    # arrays at once: about 26 KB an image). Now one chunk's worth: a few MB.
    small, large = _peak_mb(500), _peak_mb(20_000)
    assert large - small < 40, (small, large)
