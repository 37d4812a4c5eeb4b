"""The NumPy top-k decode and the per-class descriptors, on small generated heat maps."""

from __future__ import annotations

import numpy as np

from counting.data.datasets.voc import VOC_CLASSES
from counting.features.detector.decode import COCO_CLASSES, COCO_TO_VOC, decode_detections, peak_scores
from counting.features.detector.descriptor import (
    DESCRIPTOR_DIM,
    MASS_SCALE,
    QUANTITIES,
    THRESHOLDS,
    detection_descriptors,
    threshold_counts,
)


def _reference_decode(heat: np.ndarray, sides: np.ndarray, k: int):
    """The tfjs graph's decode, written plainly: 3x3 max pool, NHWC flattening, stable top-k."""
    b, c, h, w = heat.shape
    padded = np.pad(heat, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    pooled = np.max([padded[:, :, i : i + h, j : j + w] for i in range(3) for j in range(3)], axis=0)
    flat = (heat * (heat == pooled)).transpose(0, 2, 3, 1).reshape(b, -1)
    out = []
    for image in range(b):
        order = np.argsort(-flat[image], kind="stable")[:k]
        cls, cell = order % c, order // c
        col, row = cell % w, cell // w
        s = sides[image].reshape(4, -1)[:, cell]
        boxes = np.stack([col * 4 - s[0], row * 4 - s[1], col * 4 + s[2], row * 4 + s[3]], axis=-1)
        out.append((flat[image, order], cls, boxes))
    return out


def test_decode_matches_plain_reference() -> None:
    rng = np.random.default_rng(3)
    heat = rng.uniform(0, 1, (2, 80, 16, 12)).astype(np.float32) ** 4
    sides = rng.uniform(0, 30, (2, 4, 16, 12)).astype(np.float32)
    found = decode_detections(heat, sides, k=25)
    for image, (scores, classes, boxes) in enumerate(_reference_decode(heat, sides, 25)):
        np.testing.assert_array_equal(found.scores[image], scores)
        np.testing.assert_array_equal(found.classes[image], classes)
        np.testing.assert_allclose(found.boxes[image], boxes, rtol=1e-6)


def test_decode_peaks_classes_and_boxes() -> None:
    heat = np.zeros((1, 80, 8, 8), np.float32)
    heat[0, 0, 2, 3] = 0.9  # a person centred at row 2, column 3
    heat[0, 0, 2, 4] = 0.5  # its neighbour: not a peak
    heat[0, 2, 6, 1] = 0.7  # a car
    sides = np.zeros((1, 4, 8, 8), np.float32)
    sides[0, :, 2, 3] = [4, 8, 12, 16]
    found = decode_detections(heat, sides, k=3)
    assert found.scores[0, :2].tolist() == [np.float32(0.9), np.float32(0.7)]
    assert found.classes[0, :2].tolist() == [0, 2]
    np.testing.assert_allclose(found.boxes[0, 0], [12 - 4, 8 - 8, 12 + 12, 8 + 16])
    assert found.cells[0, 1].tolist() == [6, 1]
    assert peak_scores(heat)[0, 0, 2, 4] == 0


def test_coco_to_voc_mapping() -> None:
    names = [COCO_CLASSES[i] for i in COCO_TO_VOC]
    assert names[VOC_CLASSES.index("aeroplane")] == "airplane"
    assert names[VOC_CLASSES.index("tvmonitor")] == "tv"
    assert names[VOC_CLASSES.index("diningtable")] == "dining table"
    assert names[VOC_CLASSES.index("person")] == "person"
    assert len(set(COCO_TO_VOC.tolist())) == 20


def test_descriptors_count_soft_and_mass() -> None:
    heat = np.zeros((1, 80, 8, 8), np.float32)
    person, car, dropped = 0, 2, COCO_CLASSES.index("cup")
    heat[0, person, 1, 1], heat[0, person, 5, 6] = 0.45, 0.22
    heat[0, car, 6, 1] = 0.31
    heat[0, dropped, 3, 3] = 0.95  # not a VOC class: in no column
    sides = np.ones((1, 4, 8, 8), np.float32)
    found = decode_detections(heat, sides, k=10)
    row = detection_descriptors(found, heat)[0] ** 2  # stored as square roots
    assert row.shape == (DESCRIPTOR_DIM,)
    table = row.reshape(len(QUANTITIES), 20)
    p, c = VOC_CLASSES.index("person"), VOC_CLASSES.index("car")
    expected_person = [sum(s >= t for s in (0.45, 0.22)) for t in THRESHOLDS]
    np.testing.assert_allclose(table[: len(THRESHOLDS), p], expected_person, atol=1e-5)
    np.testing.assert_allclose(table[len(THRESHOLDS), p], 0.67, atol=1e-5)
    np.testing.assert_allclose(table[-1, c], 0.31 / MASS_SCALE, atol=1e-6)
    assert table[:, [i for i in range(20) if i not in (p, c)]].sum() == 0
    counts = threshold_counts(np.sqrt(row)[None], np.full(20, THRESHOLDS.index(0.2)))
    assert counts[0, p] == 2 and counts[0, c] == 1


def test_grid_cells_partition_the_frame() -> None:
    rng = np.random.default_rng(5)
    heat = rng.uniform(0, 1, (2, 80, 16, 16)).astype(np.float32) ** 6
    sides = np.ones((2, 4, 16, 16), np.float32)
    found = decode_detections(heat, sides, k=40)
    whole = detection_descriptors(found, heat) ** 2
    cells = detection_descriptors(found, heat, grid=(2, 3)) ** 2
    assert cells.shape == (2, 6, DESCRIPTOR_DIM)
    np.testing.assert_allclose(cells.sum(axis=1), whole, rtol=1e-4, atol=1e-5)


def test_the_candidate_decode_equals_the_full_decode_and_falls_back_when_few_peaks_stand_out() -> None:
    """decode_detections looks for the top k only among values above CANDIDATE_FLOOR; the result
    (order, ties included) is the full peak-and-top-k decode's, and a heat map with fewer than k
    peaks above the floor is decoded in full."""
    from counting.features.detector.decode import CANDIDATE_FLOOR, _top_peaks, _top_peaks_in_full

    rng = np.random.default_rng(3)
    busy = (rng.random((80, 32, 32), dtype=np.float32) ** 3).astype(np.float32)
    busy[5, 10, 10] = busy[7, 20, 3] = 0.9  # a tie between two classes
    quiet = (rng.random((80, 32, 32), dtype=np.float32) * CANDIDATE_FLOOR).astype(np.float32)
    quiet[1, 4, 4] = 0.8
    for heat in (busy, quiet):
        expected = _top_peaks_in_full(heat[None], 100)
        found = _top_peaks(heat, 100)
        if heat is quiet:
            assert found is None  # one peak above the floor: the full decode is used
            continue
        np.testing.assert_array_equal(found[0], expected[0])
        np.testing.assert_array_equal(found[1], expected[1])
    both = decode_detections(np.stack([busy, quiet]), np.ones((2, 4, 32, 32), np.float32))
    for b, heat in enumerate((busy, quiet)):
        index, scores = _top_peaks_in_full(heat[None], 100)
        np.testing.assert_array_equal(both.scores[b], scores)
        np.testing.assert_array_equal(both.classes[b], index % 80)
