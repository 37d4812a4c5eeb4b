"""Pictures wider than 2:1: the detector sees them in tiles, and the sparse gate reads their
average photo (counting.features.detector.evidence, counting.heads.sparse_gate, "Wide pictures")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from counting.features.detector.evidence import TILE_ASPECT, TILE_MARGIN, detector_tiles
from counting.heads.sparse_gate import per_photo, photos_in

COCO = "coco-voc20/VOCdevkit/VOC2007/JPEGImages"
# Four landscape coco-voc20 validation photos with 5, 2, 3 and 13 people (person boxes).
STRIP = ["000000006954", "000000011149", "000000060623", "000000007511"]
STRIP_PEOPLE = 23


def test_pictures_within_two_to_one_are_one_tile() -> None:
    for height, width in [(576, 768), (768, 576), (576, 1152), (1152, 576), (576, 576)]:
        (tile,) = detector_tiles(height, width)
        assert tile.is_whole and (tile.core_start, tile.core_stop) == (0, max(height, width))
        assert photos_in(height, width) == 1


@pytest.mark.parametrize(("height", "width"), [(576, 1153), (576, 2688), (427, 6400), (4320, 576), (576, 8192)])
def test_wider_pictures_are_cut_into_tiles_whose_cores_share_the_long_side(height: int, width: int) -> None:
    tiles = detector_tiles(height, width)
    long, short = max(height, width), min(height, width)
    assert len(tiles) > 1 and len(tiles) == photos_in(height, width)
    assert all(tile.along_rows == (height > width) for tile in tiles)
    # The cores partition the long side: every place lies in exactly one core.
    assert tiles[0].core_start == 0 and tiles[-1].core_stop == long
    assert all(a.core_stop == b.core_start for a, b in zip(tiles[:-1], tiles[1:], strict=True))
    reach = round(TILE_MARGIN * short)
    for tile in tiles:
        assert tile.stop - tile.start <= TILE_ASPECT * short
        assert tile.start == max(0, tile.core_start - reach) and tile.stop == min(long, tile.core_stop + reach)
        assert tile.length == long
    # The fewest such tiles: one fewer would need a core longer than a tile may hold.
    assert long / (len(tiles) - 1) > TILE_ASPECT * short - 2 * reach


def test_a_tile_keeps_the_detections_whose_centre_lies_in_its_core() -> None:
    first, second = detector_tiles(576, 1728)
    # first: [0, 1008) with core [0, 864); second: [720, 1728) with core [864, 1728)
    np.testing.assert_array_equal(first.core_positions(np.array([0.0, 0.85, 0.86, 0.99])), [True, True, False, False])
    np.testing.assert_array_equal(second.core_positions(np.array([0.1, 0.15, 0.5])), [False, True, True])
    planes = np.arange(3 * 576 * 1728, dtype=np.float32).reshape(3, 576, 1728)
    np.testing.assert_array_equal(second.planes(planes), planes[:, :, 720:1728])


def test_the_gate_reads_a_wide_picture_as_its_average_photo_and_hands_over_the_whole_count() -> None:
    from counting.model.counting_model import load_model

    gate = load_model(Path(__file__).resolve().parents[2] / "models" / "crowd.npz").sparse_gate
    counts, persons = per_photo(np.array([600.0, 40.0]), np.array([[4.0] * 9, [1.0] * 9]), np.array([6, 1]))
    np.testing.assert_allclose(counts, [100.0, 40.0])
    np.testing.assert_allclose(persons, [[4.0 / np.sqrt(6)] * 9, [1.0] * 9])
    assert per_photo(np.array([5.0]), None, None)[0][0] == 5.0
    # A row of six everyday photos, unlike the training crowds (familiarity 0.01): the heads count
    # 240, the detector 9 people in all (its rows hold square roots).
    head = np.array([240.0])
    rows = np.sqrt(np.array([[16.0, 12.0, 9.0, 8.0, 6.0, 4.0, 2.0, 7.0, 20.0]]))
    familiarity, projected, six = np.array([0.01]), np.zeros((1, 16)), np.array([6])
    # Read whole, the ratio is a dense crowd's: the heads' count stands, and the screen would not
    # even run the detector.
    np.testing.assert_array_equal(gate.apply(head, rows, familiarity, projected)[0], [240.0])
    assert not gate.needs_detector(head, familiarity, projected)[0]
    # Read as six photos of 40 and 1.5 people, it is sparse: the detector's count of the whole picture.
    counts, sparse = gate.apply(head, rows, familiarity, projected, photos=six)
    assert sparse[0] and counts[0] == gate.detector_counts(rows)[0] == 9.0
    each_head, each_rows = per_photo(head, rows, six)
    np.testing.assert_array_equal(gate.apply(each_head, each_rows, familiarity, projected)[1], sparse)
    assert gate.needs_detector(head, familiarity, projected, photos=six)[0]
    # The limit is on the average photo's head count.
    assert gate.head_limit is not None
    big = np.array([gate.head_limit * 3])
    assert not gate.within_limit(big)[0] and gate.within_limit(per_photo(big, None, np.array([4]))[0])[0]


# --------------------------------------------------------------------------- with the real detector
@pytest.fixture(scope="module")
def crowd_model(detector_files):
    from counting.model.counting_model import load_model

    return load_model(Path(__file__).resolve().parents[2] / "models" / "crowd.npz")


def _strip(shared_data: Path, height: int = 480) -> np.ndarray:
    from counting.data.imaging import load_image

    photos = [load_image(shared_data / COCO / f"{name}.jpg").convert("RGB") for name in STRIP]
    photos = [photo.resize((round(photo.size[0] * height / photo.size[1]), height)) for photo in photos]
    return np.concatenate([np.asarray(photo) for photo in photos], axis=1)


@pytest.mark.slow
def test_a_row_of_photos_is_counted_as_its_photos_are(crowd_model, shared_data, monkeypatch, tmp_path) -> None:
    """Four coco-voc20 photos side by side (2639x480, 23 people): stretched whole to the
    detector's square it found 4 of them and the model answered 4 with an interval that
    excluded 23; in tiles it finds what it finds in the photos one by one."""
    from PIL import Image

    from counting.data.imaging import load_image
    from counting.features.detector import evidence
    from counting.features.detector.descriptor import THRESHOLDS

    normalisation = crowd_model.get_backbone().normalisation
    strip = _strip(shared_data)
    tensor = crowd_model.prepare_image(strip)
    assert len(detector_tiles(*np.shape(tensor)[-2:])) > 1
    index = crowd_model.sparse_gate.count_index
    rows, (boxes,) = evidence.person_evidence([tensor], normalisation, with_boxes=True)
    tiled = float(np.rint(rows[0, index] ** 2))
    singles = evidence.person_evidence(
        [crowd_model.prepare_image(load_image(shared_data / COCO / f"{name}.jpg")) for name in STRIP], normalisation
    )
    alone = float(np.sum(np.rint(singles[:, index] ** 2)))
    assert abs(tiled - alone) <= 2 and abs(tiled - STRIP_PEOPLE) <= 3
    # The boxes are the counted people, in the strip's fractions, spread over its four photos.
    counted = boxes[boxes[:, 4] >= THRESHOLDS[index]]
    assert len(counted) == tiled
    assert (counted[:, :4] >= 0).all() and (counted[:, :4] <= 1).all()
    centres = (counted[:, 0] + counted[:, 2]) / 2
    assert (centres < 0.25).any() and (centres > 0.75).any()
    # The model: handed to the detector, about right, the interval holding the truth; the same
    # from a file as from the pixels.
    path = tmp_path / "strip.png"
    Image.fromarray(strip).save(path)
    result = crowd_model.count_paths([str(path)])
    assert result.counted_by[0] == "detector" and abs(result.counts[0] - STRIP_PEOPLE) <= 3
    assert result.low[0] <= STRIP_PEOPLE <= result.high[0]
    assert crowd_model.count_images([strip])[0] == pytest.approx(result.counts[0], abs=1e-9)
    # Stretched whole, as before the tiles, the detector saw a fraction of them.
    monkeypatch.setattr(evidence, "detector_tiles", lambda h, w: detector_tiles(h, w, max_aspect=1e9))
    whole = evidence.person_evidence([tensor], normalisation)
    assert np.rint(whole[0, index] ** 2) <= STRIP_PEOPLE / 2


@pytest.mark.slow
def test_photos_within_two_to_one_give_the_rows_they_gave_before_the_tiles(
    crowd_model, shared_data, monkeypatch
) -> None:
    from counting.data.imaging import load_image
    from counting.features.detector import evidence

    normalisation = crowd_model.get_backbone().normalisation
    tensors = [crowd_model.prepare_image(load_image(shared_data / COCO / f"{name}.jpg")) for name in STRIP[:3]]
    tensors.append(crowd_model.prepare_image(_strip(shared_data)))  # a tiled one in the same batch
    rows, boxes = evidence.person_evidence(tensors, normalisation, with_boxes=True)
    monkeypatch.setattr(evidence, "detector_tiles", lambda h, w: detector_tiles(h, w, max_aspect=1e9))
    before, boxes_before = evidence.person_evidence(tensors[:3], normalisation, with_boxes=True)
    np.testing.assert_array_equal(rows[:3], before)
    for mine, theirs in zip(boxes[:3], boxes_before, strict=True):
        np.testing.assert_array_equal(mine, theirs)
