"""The real converted MB3-CenterNet against TensorFlow.js's own run of the same graph on shared photos.

The reference (tfjs_reference.json) was computed once with TensorFlow.js 4.22.0 on node 20 from
the same 512x512 inputs. Needs the model files: fetched with npm (present in CI, where this test
must run) or from $COUNTING_DETECTOR_SOURCE; skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from counting.features.detector.fetch import SOURCE_ENV, model_files_present

REFERENCE = json.loads((Path(__file__).with_name("tfjs_reference.json")).read_text())
PHOTOS = "coco-voc20/VOCdevkit/VOC2007/JPEGImages"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def detector(detector_files):
    from counting.features.detector import detector_backbone

    return detector_backbone(2)


def _inputs(shared_data: Path) -> tuple[list[str], np.ndarray, list[tuple[int, int]]]:
    from counting.data.imaging import load_image
    from counting.features.detector.runner import to_input

    stems = sorted(REFERENCE["photos"])
    images = [load_image(shared_data / PHOTOS / f"{stem}.jpg") for stem in stems]
    return stems, np.stack([to_input(image) for image in images]), [(im.height, im.width) for im in images]


def test_detections_match_tfjs(detector, shared_data: Path) -> None:
    stems, batch, _ = _inputs(shared_data)
    found, heat = detector.detector.detect(batch)
    for index, stem in enumerate(stems):
        expected = np.asarray(REFERENCE["photos"][stem]["detections"], np.float64)
        np.testing.assert_allclose(found.scores[index], expected[:, 4], atol=2e-5)
        confident = expected[:, 4] > 0.05  # ties among faint centres may swap order
        np.testing.assert_array_equal(found.classes[index][confident], expected[confident, 5])
        np.testing.assert_allclose(found.boxes[index][confident], expected[confident, :4], atol=0.05)
        mass = heat[index].sum(axis=(1, 2))
        np.testing.assert_allclose(mass, REFERENCE["photos"][stem]["heat_mass"], rtol=1e-4, atol=1e-3)


def test_detect_counts_people(detector, shared_data: Path) -> None:
    from counting.features.detector import PERSON, detect_counts

    stems = sorted(REFERENCE["photos"])
    paths = [shared_data / PHOTOS / f"{stem}.jpg" for stem in stems]
    counts = detect_counts(paths, thresholds=0.3)
    assert counts.shape == (len(stems), 20)
    for index, stem in enumerate(stems):
        expected = np.asarray(REFERENCE["photos"][stem]["detections"])
        assert counts[index, PERSON] == int(np.sum((expected[:, 5] == 0) & (expected[:, 4] >= 0.3)))
    # 000000000257 holds 13 annotated people: the detector finds most of them
    assert 8 <= counts[stems.index("000000000257"), PERSON] <= 16
    # arrays give the same counts as files
    from counting.data.imaging import load_image

    arrays = [np.asarray(load_image(path)) for path in paths[:2]]
    np.testing.assert_array_equal(detect_counts(arrays, thresholds=0.3), counts[:2])


def test_letterbox_descriptor_counts_its_own_detections(shared_data: Path) -> None:
    """`detector-letterbox`: the columns count the letterboxed input's detections, whose boxes land
    on the photo (not the grey border), and the people of a group photo are found."""
    if not model_files_present() and shutil.which("npm") is None and not os.environ.get(SOURCE_ENV):
        pytest.skip(f"the detector's files cannot be had here: no npm and no {SOURCE_ENV}")
    from counting.data.imaging import load_image
    from counting.features.detector import PERSON, detector_backbone
    from counting.features.detector.decode import COCO_TO_VOC
    from counting.features.detector.descriptor import THRESHOLDS, count_columns

    backbone = detector_backbone(2, letterbox=True)
    assert backbone.name == "centernet-letterbox"
    stems = sorted(REFERENCE["photos"])
    pictures = [np.asarray(load_image(shared_data / PHOTOS / f"{stem}.jpg")) for stem in stems]
    descriptors = backbone.forward(np.stack([backbone.to_input(p) for p in pictures]))
    found = backbone.detect_pictures(pictures)
    person = 0  # COCO class 0, VOC column PERSON
    columns = count_columns(THRESHOLDS.index(0.25))
    assert COCO_TO_VOC[PERSON] == person
    for index, picture in enumerate(pictures):
        height, width = picture.shape[:2]
        people = (found.classes[index] == person) & (found.scores[index] >= 0.25)
        assert round(float(descriptors[index, columns][PERSON]) ** 2) == int(people.sum())
        boxes = found.boxes[index][people]
        centres_x, centres_y = (boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2
        assert ((centres_x >= 0) & (centres_x <= width) & (centres_y >= 0) & (centres_y <= height)).all()
    # 000000000257 holds 13 annotated people
    group = stems.index("000000000257")
    assert 8 <= round(float(descriptors[group, columns][PERSON]) ** 2) <= 16
    # a different view of the photo than the stretched input's
    stretched = detector_backbone(2).forward(np.stack([detector_backbone(2).to_input(p) for p in pictures]))
    assert not np.allclose(stretched, descriptors)
