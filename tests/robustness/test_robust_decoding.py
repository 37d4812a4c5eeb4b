"""Hostile JPEGs against the OpenCV decode path of the extraction pipeline (issue 8).

``load_pixels`` hands plain JPEGs to OpenCV for speed; every file must still give PIL's pixels
or PIL's one-line error. Each case failed before its fix.
"""

from __future__ import annotations

import base64
import csv
import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from robust_helpers import REPO_ROOT, assert_one_error, make_video

from counting.core.errors import ImageError
from counting.data.imaging import load_image, load_pixels


def _jpeg_bytes(size: tuple[int, int] = (64, 48), seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def _second_start_marker(path: Path) -> Path:
    # A copy-paste accident: the image data, then a second start-of-image marker before the end
    # marker. libjpeg fails after the last scan line: OpenCV kept the pixels, PIL says "broken".
    data = _jpeg_bytes()
    path.write_bytes(data[:-2] + b"\xff\xd8\xff\xd9")
    return path


def _garbage_inside(path: Path) -> Path:
    # A damaged download: the header and the start of the scan, then random bytes, then FFD9.
    data = _jpeg_bytes()
    start = data.find(b"\xff\xda")
    garbage = np.random.default_rng(0).integers(0, 256, 3000, dtype=np.uint8).tobytes()
    path.write_bytes(data[: start + 400] + garbage + b"\xff\xd9")
    return path


# A real arithmetic-coded JPEG, 8x8 (`jpegtran -arithmetic` of a PIL JPEG). OpenCV decodes any
# size; PIL's decoder reads small ones only (larger ones are "broken data stream" there).
_ARITHMETIC_JPEG = (
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDABALDA4MChAODQ4SERATGCgaGBYWGDEjJR0oOjM9PDkzODdASFxOQERXRTc4UG1RV19iZ2hnPk1xeXBk"
    "eFxlZ2P/2wBDARESEhgVGC8aGi9jQjhCY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2P/yQARCAAIAAgD"
    "ASIAAhEBAxEB/8wACgAQEAUBEBEF/9oADAMBAAIRAxEAPwBoyUkDzMq1pRLL56QNTHIcOPuC2qbmeDw5hpXCaLm0hJitZ6UB+Hx95NmLCxD/2Q=="
)


@pytest.mark.parametrize("make", [_second_start_marker, _garbage_inside], ids=["second-soi", "garbage"])
def test_damaged_jpeg_ending_with_its_end_marker_is_refused_like_pil(tmp_path: Path, make) -> None:
    path = make(tmp_path / "damaged.jpg")
    with pytest.raises(ImageError) as expected:
        load_image(path)
    with pytest.raises(ImageError) as caught:
        load_pixels(path)
    assert str(caught.value) == str(expected.value)
    assert str(caught.value).startswith(f"{path}: cannot decode image")


def test_arithmetic_coded_jpeg_takes_pils_decoder(tmp_path: Path) -> None:
    # Was: OpenCV's pixels, so a large arithmetic-coded JPEG was counted by `features`/`count` and
    # refused by everything reading through load_image.
    path = tmp_path / "arithmetic.jpg"
    path.write_bytes(base64.b64decode(_ARITHMETIC_JPEG))
    pixels, bgr = load_pixels(path)
    assert not bgr
    np.testing.assert_array_equal(np.asarray(pixels), np.asarray(load_image(path)))


def test_twelve_bit_jpeg_says_so(tmp_path: Path) -> None:
    # Was: "not an image file (unrecognised format)" for a JPEG PIL does not read.
    data = bytearray(_jpeg_bytes())
    data[data.find(b"\xff\xc0") + 4] = 12  # the frame header's sample precision
    path = tmp_path / "twelve.jpg"
    path.write_bytes(bytes(data))
    for loader in (load_image, load_pixels):
        with pytest.raises(ImageError) as caught:
            loader(path)
        assert str(caught.value) == f"{path}: cannot decode image (12-bit JPEG, which the JPEG decoder does not read)"


def test_damaged_jpeg_through_features_is_one_line_naming_it(cli, tmp_path: Path) -> None:
    path = _second_start_marker(tmp_path / "damaged.jpg")
    result = cli("features", path, "-o", tmp_path / "f.npy", "--no-progress")
    assert_one_error(result, str(path), "cannot decode image")
    assert not (tmp_path / "f.npy").exists()


def test_middle_cut_out_still_gives_pils_pixels(tmp_path: Path) -> None:
    # Damage inside the image data alone: both decoders fill the rest the same way (PIL does not
    # refuse it), so the fast path may keep it.
    data = _jpeg_bytes((160, 120))
    path = tmp_path / "cut.jpg"
    path.write_bytes(data[: len(data) // 2] + data[len(data) // 2 + 500 :])
    pixels, bgr = load_pixels(path)
    assert bgr
    np.testing.assert_array_equal(np.asarray(pixels)[:, :, ::-1], np.asarray(load_image(path)))


def test_a_huge_file_of_another_kind_named_jpg_is_not_read_whole(tmp_path: Path) -> None:
    # Was: load_pixels read all 512 MB into memory (peak RSS ~560 MB) before PIL refused it from
    # its first bytes. A sparse file: no disk used.
    path = tmp_path / "disk-image.jpg"
    with open(path, "wb") as handle:
        handle.truncate(512 << 20)
    code = (
        "import sys\n"
        "from counting.data.imaging import load_pixels\n"
        "from counting.core.errors import ImageError\n"
        "try:\n    load_pixels(sys.argv[1])\nexcept ImageError as error:\n    print(error)\n"
        # VmHWM is this process's own peak (ru_maxrss would carry the forking parent's over exec).
        "hwm = [line for line in open('/proc/self/status') if line.startswith('VmHWM')][0]\n"
        "print('peak MB', int(hwm.split()[1]) // 1024)\n"
    )
    process = subprocess.run(  # noqa: PLW1510 - checked below
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert f"{path}: not an image file" in process.stdout, process.stdout + process.stderr
    peak = int(process.stdout.split("peak MB")[1])
    assert peak < 256, peak


@pytest.mark.slow
def test_ctrl_c_in_video_with_two_batches_in_flight_keeps_every_reported_row(tmp_path: Path) -> None:
    # The onnxruntime loop computes the next batch while this one's rows are written: a Ctrl-C
    # must leave exactly the rows it reported, each whole.
    clip = make_video(tmp_path / "long.avi", n_frames=400)
    counts = tmp_path / "counts.csv"
    code = "import sys\nfrom counting.cli.app import main\nsys.argv[0] = 'counting'\nmain()\n"
    process = subprocess.Popen(
        [sys.executable, "-c", code, "video", str(clip), "--csv", str(counts), "--batch-size", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert process.stdout is not None
    seen = 0
    for line in process.stdout:
        seen += line.startswith("frame")
        if seen >= 10:
            break
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    reported = int(stderr.split("interrupted: ")[1].split(" frames")[0])  # the interruption line is on stderr
    with open(counts, newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][:3] == ["frame", "time_s", "count"]
    assert 10 <= len(rows) - 1 == reported < 400
    assert [int(row[0]) for row in rows[1:]] == list(range(reported))
    assert all(len(row) == len(rows[0]) for row in rows)
