"""The memory of `video` is bounded by what it keeps of each frame, not by the frame's size (issue 49).

A 7680x4320 clip with --annotated peaked at 3.1 GB (the bound is 2 GB): every frame read ahead
(up to 16 waiting, 8 a batch, two batches in flight) held the whole 100 MB picture, and the heat
map was drawn over it in float copies of 400 MB. The reader now keeps only what is drawn: nothing
without --annotated, and with it a copy at most :data:`MAX_ANNOTATED_PIXELS` (Full HD), the
size the annotated video is written at (1.3 GB measured for the same clip, with /usr/bin/time -v).
As the suite's other bounds, these are tested on the planned sizes, not by measuring memory.
"""

from __future__ import annotations

import csv
from pathlib import Path

import cv2
import numpy as np
from robust_helpers import make_video

from counting.apply.video import (
    MAX_ANNOTATED_PIXELS,
    FrameReader,
    VideoSource,
    annotated_size,
    no_picture,
    picture_for_drawing,
    zones_on_picture,
)
from counting.apply.zones import Zone


def test_annotated_size_of_an_8k_frame_is_full_hd() -> None:
    assert annotated_size((7680, 4320)) == (1920, 1080)
    assert annotated_size((1920, 1080)) == (1920, 1080)
    assert annotated_size((640, 480)) == (640, 480)  # at or under the bound: drawn as before
    width, height = annotated_size((20000, 3000))  # any size: under the bound, aspect kept
    assert width * height <= MAX_ANNOTATED_PIXELS
    assert abs(width / height - 20000 / 3000) < 0.05  # even sides: a pixel off at most
    assert width % 2 == 0 and height % 2 == 0


def test_a_large_frame_is_kept_for_drawing_at_the_bounded_size() -> None:
    frame = np.full((3000, 4000, 3), 200, dtype=np.uint8)
    kept = picture_for_drawing(frame)
    assert kept.shape == (1246, 1662, 3)
    assert kept.nbytes * 5 < frame.nbytes
    assert int(kept.mean()) == 200
    small = np.zeros((480, 640, 3), dtype=np.uint8)
    assert picture_for_drawing(small) is small  # no copy under the bound


def test_reader_keeps_no_picture_when_nothing_is_drawn(tmp_path: Path) -> None:
    clip = make_video(tmp_path / "clip.avi", n_frames=3, size=(320, 240))
    with FrameReader(VideoSource.parse(str(clip)), keep=no_picture) as reader:
        frames = [frame for batch in reader.batches(2) for frame in batch]
    assert [frame.index for frame in frames] == [0, 1, 2]
    assert all(frame.image is None and frame.size == (240, 320) for frame in frames)
    with FrameReader(VideoSource.parse(str(clip))) as reader:  # default: the whole picture
        frames = [frame for batch in reader.batches(2) for frame in batch]
    assert all(frame.image is not None and frame.image.shape == (240, 320, 3) for frame in frames)


def test_zones_in_pixels_are_drawn_scaled_with_the_picture() -> None:
    zones = [
        Zone("door", ((0.0, 0.0), (4000.0, 0.0), (4000.0, 2000.0)), relative=False),
        Zone("half", ((0.0, 0.0), (0.5, 0.0), (0.5, 1.0)), relative=True),
    ]
    drawn = zones_on_picture(zones, (3000, 4000), (1246, 1662))
    assert drawn[0].points == ((0.0, 0.0), (1662.0, 0.0), (1662.0, 2000.0 * 1246 / 3000))
    assert drawn[1] is zones[1]
    assert zones_on_picture(zones, (480, 640), (480, 640)) is zones


def test_annotated_video_of_a_large_clip_is_written_at_the_bounded_size(cli, tmp_path: Path) -> None:
    clip = make_video(tmp_path / "wide.avi", n_frames=2, size=(2600, 1500))
    out, counts, plain = tmp_path / "annotated.avi", tmp_path / "counts.csv", tmp_path / "plain.csv"
    result = cli("video", clip, "--annotated", out, "--csv", counts, "--no-progress", "-q")
    assert result.exit_code == 0, result.output
    capture = cv2.VideoCapture(str(out))
    size = (int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)))
    frames = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    capture.release()
    assert size == annotated_size((2600, 1500)) == (1894, 1092)
    assert frames == 2
    # The counts do not depend on what is drawn.
    assert cli("video", clip, "--csv", plain, "--no-progress", "-q").exit_code == 0
    with open(counts, newline="") as first, open(plain, newline="") as second:
        assert list(csv.DictReader(first)) == list(csv.DictReader(second))
