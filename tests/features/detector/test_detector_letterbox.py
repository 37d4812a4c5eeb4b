"""The aspect-preserving detector input (``detector-letterbox``): geometry, pixels, boxes back, identity."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from counting.features.descriptors import DETECTOR_KINDS, OWN_BACKBONE, parse_descriptor
from counting.features.detector.backbone import descriptor_identity
from counting.features.detector.decode import Detections
from counting.features.detector.letterbox import (
    PAD_VALUE,
    letterbox_geometry,
    letterbox_input,
    to_picture_pixels,
)


def test_geometry_of_landscape_and_portrait() -> None:
    # COCO's 640x480: scaled by 0.8 to 512x384, 64 grey rows above and below
    assert letterbox_geometry(480, 640) == (0.8, 64, 0, 384, 512)
    scale, top, left, rows, cols = letterbox_geometry(1000, 500)
    assert (scale, top, left, rows, cols) == (0.512, 0, 128, 512, 256)
    # a tiny picture is scaled up; a one-pixel line keeps one row
    assert letterbox_geometry(1, 3000)[3:] == (1, 512)


def test_input_is_the_picture_centred_on_grey() -> None:
    rng = np.random.default_rng(0)
    picture = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
    prepared = letterbox_input(picture)
    assert prepared.shape == (3, 512, 512) and prepared.dtype == np.float32
    assert (prepared[:, :64] == PAD_VALUE).all() and (prepared[:, 448:] == PAD_VALUE).all()
    expected = np.asarray(Image.fromarray(picture).resize((512, 384), Image.BILINEAR), np.float32)
    np.testing.assert_array_equal(prepared[:, 64:448].transpose(1, 2, 0), expected)
    # BGR arrays, PIL images and grayscale pictures give the same pixels as the RGB array
    np.testing.assert_array_equal(letterbox_input(picture[:, :, ::-1].copy(), bgr=True), prepared)
    np.testing.assert_array_equal(letterbox_input(Image.fromarray(picture)), prepared)
    gray = picture[:, :, 0]
    np.testing.assert_array_equal(letterbox_input(gray), letterbox_input(np.repeat(gray[:, :, None], 3, axis=2)))


def test_portrait_is_padded_left_and_right() -> None:
    picture = np.full((640, 320, 3), 200, np.uint8)
    prepared = letterbox_input(picture)
    assert (prepared[:, :, :128] == PAD_VALUE).all() and (prepared[:, :, 384:] == PAD_VALUE).all()
    assert (prepared[:, :, 128:384] == 200).all()


def test_boxes_go_back_to_picture_pixels() -> None:
    # a box around picture pixels (100..300, 40..200) of a 480x640 photo and of a 640x320 one
    sizes = [(480, 640), (640, 320)]
    canvas = []
    for (height, width), (x1, y1, x2, y2) in zip(sizes, [(100, 40, 300, 200), (10, 600, 50, 640)]):
        scale, top, left, _, _ = letterbox_geometry(height, width)
        canvas.append([x1 * scale + left, y1 * scale + top, x2 * scale + left, y2 * scale + top])
    found = Detections(
        boxes=np.asarray(canvas, np.float32)[:, None, :],
        scores=np.array([[0.9], [0.8]], np.float32),
        classes=np.zeros((2, 1), int),
        cells=np.zeros((2, 1, 2), int),
    )
    back = to_picture_pixels(found, sizes)
    np.testing.assert_allclose(back.boxes[:, 0], [[100, 40, 300, 200], [10, 600, 50, 640]], atol=1e-3)
    np.testing.assert_array_equal(back.scores, found.scores)


def test_descriptor_kind_and_identity() -> None:
    assert parse_descriptor("detector-letterbox").kind == "detector-letterbox"
    assert OWN_BACKBONE["detector-letterbox"] == "centernet-letterbox" and "detector-letterbox" in DETECTOR_KINDS
    # the stretched detector's identity (cache keys, model files) is what it was before the letterbox
    assert descriptor_identity() == "1b18eaaede89a42931334c10ec487e2ca66b115baff4ddf9f874291886a7e40c"
    assert descriptor_identity(True) != descriptor_identity()
    with pytest.raises(Exception, match="unknown kind"):
        parse_descriptor("detector-lettrbox")
