"""Pictures wider than 2:1: the detector sees them in tiles, and the sparse gate reads them tile
by tile (counting.features.detector.evidence, counting.heads.crowd.sparse_gate, "Wide pictures")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from counting.features.detector.evidence import TILE_ASPECT, TILE_MARGIN, detector_tiles
from counting.heads.crowd.sparse_gate import (
    BY_BOTH,
    PartPeople,
    boxes_in_tiles,
    by_detector_alone,
    per_photo,
    photos_in,
    routes,
    tile_probes,
    tile_shares,
    tiled_density,
)

COCO = "coco-voc20/VOCdevkit/VOC2007/JPEGImages"
# Four landscape coco-voc20 validation photos with 5, 2, 3 and 13 people (person boxes).
STRIP = ["000000006954", "000000011149", "000000060623", "000000007511"]
STRIP_PEOPLE = 23
# coco-voc20 photos without a person box (an empty photo beside a crowd).
EMPTY = ["000000000009", "000000000042"]


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


def test_training_reads_a_wide_picture_as_its_average_photo() -> None:
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


def test_a_density_map_is_shared_among_the_tiles_by_where_its_mass_lies() -> None:
    tiles = detector_tiles(64, 256)  # 4:1, three tiles, cores [0, 85) [85, 171) [171, 256)
    assert len(tiles) == 3
    density = np.zeros((8, 32))
    density[:, 2] = 1.0  # column centre 2.5/32*256 = 20: the first core
    density[:, 30] = 3.0  # 244: the last core
    density[0, 15] = -5.0  # negative density is no one's
    np.testing.assert_allclose(tile_shares(density, tiles), [0.25, 0.0, 0.75])
    by_length = np.array([t.core_stop - t.core_start for t in tiles]) / 256
    np.testing.assert_allclose(tile_shares(np.zeros((8, 32)), tiles), by_length)
    np.testing.assert_allclose(tile_shares(None, tiles), by_length)
    np.testing.assert_array_equal(tile_shares(density, detector_tiles(64, 64)), [1.0])
    # Tall pictures share along their rows.
    np.testing.assert_allclose(tile_shares(density.T, detector_tiles(256, 64)), [0.25, 0.0, 0.75])


def test_each_tile_gets_the_familiarity_probe_of_its_own_core() -> None:
    from counting.heads.familiarity import map_statistics

    tiles = detector_tiles(64, 256)
    maps = np.random.default_rng(0).normal(size=(4, 8, 32)).astype(np.float32)
    maps[:, :, 21:] += (
        5.0  # the last core (cells whose centre, 8 px a cell, lies at 171 px or beyond) is unlike the rest
    )
    probes = tile_probes(maps, tiles)
    assert probes.shape == (3, 8)
    np.testing.assert_allclose(probes[0], map_statistics(maps[:, :, :11])[0], rtol=1e-6)
    np.testing.assert_allclose(probes[2], map_statistics(maps[:, :, 21:])[0], rtol=1e-6)
    assert probes[2, :4].mean() > probes[1, :4].mean() + 4
    np.testing.assert_allclose(tile_probes(maps.transpose(0, 2, 1), detector_tiles(256, 64)), probes, rtol=1e-6)


def test_boxes_and_maps_of_the_tiles_handed_to_the_detector() -> None:
    tiles = detector_tiles(64, 256)
    boxes = np.array([[0.05, 0.1, 0.1, 0.5, 0.9], [0.5, 0.1, 0.55, 0.5, 0.8], [0.9, 0.2, 0.95, 0.6, 0.4]])
    np.testing.assert_array_equal(boxes_in_tiles(boxes, tiles, np.array([False, True, True])), boxes[1:])
    np.testing.assert_array_equal(boxes_in_tiles(boxes, tiles, np.array([True, False, False])), boxes[:1])
    (whole,) = detector_tiles(64, 96)
    assert len(boxes_in_tiles(boxes, [whole], np.array([True]))) == 3
    assert len(boxes_in_tiles(boxes, [whole], np.array([False]))) == 0
    # The head's map (scaled to its count of 40) where the head counted, the detector's people elsewhere.
    density = np.zeros((8, 32))
    density[:, 2] = 1.0
    density[:, 30] = 3.0
    mixed = tiled_density(density, 40.0, boxes[1:], tiles, np.array([False, True, True]))
    assert mixed.shape == density.shape
    assert mixed.sum() == pytest.approx(40.0 * 0.25 + 2)
    np.testing.assert_allclose(mixed[:, 2], 40.0 / 32)
    # Each person the detector counted is spread about its box centre (columns 16 and 29), as
    # the heads spread theirs, not a whole person in one cell (it made the picture's heat top).
    assert mixed[:, 12:21].sum() == pytest.approx(1.0, abs=1e-3) and mixed[:, 25:].sum() == pytest.approx(1.0, abs=1e-3)
    assert mixed[:, 11:].max() < 0.2 and mixed[:, 3:11].sum() == pytest.approx(0.0, abs=1e-9)
    # The route of a picture the detector counted in part is its own; its interval is the head's.
    people = [None, np.zeros((1, 5)), PartPeople.of(boxes[1:])]
    assert list(routes(people)) == ["density", "detector", BY_BOTH]
    assert list(by_detector_alone(people)) == [False, True, False]


def test_the_gate_reads_a_wide_picture_tile_by_tile() -> None:
    from counting.features.detector.descriptor import QUANTITIES
    from counting.model.counting_model import load_model

    gate = load_model(Path(__file__).resolve().parents[2] / "models" / "crowd.npz").sparse_gate
    rng = np.random.default_rng(0)
    # Pictures within 2:1: one tile each, exactly what apply gives.
    head = np.array([3.0, 40.0, 250.0, 900.0, np.nan])
    rows = np.sqrt(rng.integers(0, 12, (5, len(QUANTITIES))).astype(float))
    familiarity, projected = np.array([0.05, 0.3, 0.6, 0.8, 0.5]), rng.normal(size=(5, 16))
    counts, handed = gate.apply_tiles(head, [np.ones(1)] * 5, list(rows[:, None]), familiarity, projected)
    expected, sparse = gate.apply(head, rows, familiarity, projected)
    np.testing.assert_array_equal(counts, expected)
    np.testing.assert_array_equal(np.concatenate(handed), sparse)
    np.testing.assert_array_equal(
        gate.needs_detector_tiles(head, [np.ones(1)] * 5, familiarity, projected),
        gate.needs_detector(head, familiarity, projected),
    )
    # A crowd beside an empty photo: the heads count 160 on the crowd's half and 40 of texture on
    # the other, the detector 6 people on the crowd's half, none on the other. Read tile by tile,
    # the crowd keeps the heads' count and the empty photo gets the detector's 0.
    crowd_rows = np.sqrt([[30.0, 20.0, 12.0, 9.0, 6.0, 4.0, 2.0, 8.0, 60.0]])
    empty_rows = np.zeros((1, len(QUANTITIES)))
    pair = [np.array([0.8, 0.2])]
    counts, (taken,) = gate.apply_tiles(
        np.array([200.0]), pair, [np.concatenate([crowd_rows, empty_rows])], np.array([0.5]), np.zeros((1, 16))
    )
    assert list(taken) == [False, True] and counts[0] == pytest.approx(160.0)
    # Each tile's own familiarity, where given, is what the gate reads: the crowd's tile as
    # familiar as a training crowd, the other as unlike anything the model saw.
    own = {0: (np.array([0.9, 0.001]), np.zeros((2, 16)))}
    _, head, familiar, _ = gate._tiles(np.array([200.0]), pair, np.array([0.5]), np.zeros((1, 16)), own)
    np.testing.assert_allclose(familiar, [0.9, 0.001])
    np.testing.assert_allclose(head, [160.0, 40.0])
    # Given for another number of tiles (the detector's own tiles differ), the picture's is read.
    _, _, familiar, _ = gate._tiles(np.array([200.0]), [np.ones(1)], np.array([0.5]), np.zeros((1, 16)), own)
    np.testing.assert_allclose(familiar, [0.5])


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


@pytest.mark.slow
def test_a_crowd_beside_an_empty_photo_keeps_the_heads_count_of_the_crowd(crowd_model, shared_data, tmp_path) -> None:
    """A ShanghaiTech B photo of 153 people beside a coco-voc20 photo without people (2048x768):
    the gate once read the pair's average photo, which looked sparse, and handed the whole picture
    to the detector: 5 people. Tile by tile, the crowd's tile keeps the heads' count and the empty
    photo's gets the detector's."""
    from PIL import Image

    from counting.apply.annotated import annotated_frame
    from counting.data.imaging import load_image

    crowd = load_image(shared_data / "shanghaitech-B-train" / "images" / "IMG_2.jpg").convert("RGB")
    crowd = np.asarray(crowd.resize((1024, 768)))
    empty = np.asarray(load_image(shared_data / COCO / f"{EMPTY[0]}.jpg").convert("RGB").resize((1024, 768)))
    pair = np.concatenate([crowd, empty], axis=1)
    path = tmp_path / "pair.png"
    Image.fromarray(pair).save(path)
    maps: dict[str, np.ndarray] = {}
    # With a dense ShanghaiTech A picture of 2.5:1 (243 people) the screen keeps from the detector.
    dense = shared_data / "shanghaitech-A-train" / "images" / "IMG_240.jpg"
    result = crowd_model.count_paths(
        [str(path), str(dense)], on_density=lambda source, density: maps.update({source: density})
    )
    assert result.ok.all() and result.counted_by[1] == "density" and 150 < result.counts[1] < 350
    alone = crowd_model.count_images([crowd])[0]
    assert alone > 90  # the heads' count of the crowd (153 people)
    assert result.counted_by[0] == BY_BOTH
    assert abs(result.counts[0] - alone) <= 0.1 * alone
    assert result.low[0] <= alone <= result.high[0]
    # The same from the pixels as from the file.
    batch = crowd_model.count_batch([crowd_model.prepare_image(pair)], with_density=True)
    counts, density, people, interval_routes = batch.counts, batch.density, batch.people, batch.routes
    assert counts[0] == pytest.approx(result.counts[0], abs=1e-6)
    assert isinstance(people[0], PartPeople) and interval_routes[0] != "detector"
    # The people the detector counted lie in the empty photo's half; the map zones read sums to the
    # count, the crowd's half holding the heads' share.
    assert all((box[0] + box[2]) / 2 >= 0.5 for box in people[0])
    zone_map = maps[str(path)]
    assert zone_map.sum() == pytest.approx(result.counts[0], rel=1e-6)
    half = zone_map.shape[1] // 2
    assert zone_map[:, :half].sum() > 0.9 * alone
    np.testing.assert_allclose(density[0], zone_map, rtol=1e-5, atol=1e-6)
    # Drawn with the heads' heat on the crowd, and any people the detector found on the other side.
    record, picture = annotated_frame(crowd_model, pair, own_scale=True)
    assert record["counted_by"] == BY_BOTH and picture.shape == (768, 2048, 3)
    changed = np.abs(picture[100:, :1024].astype(int) - crowd[100:, :, ::-1]).max(axis=2) > 20  # below the label
    assert changed.mean() > 0.01  # 2.2 % (drawn as the detector's people alone: none)


@pytest.mark.slow
def test_the_heads_are_routed_tile_by_tile_so_a_crowd_keeps_its_specialist(crowd_model, shared_data) -> None:
    """ShanghaiTech B IMG_1 (234 people) at 512x384 beside a people-free photo of the same size
    (1024x384): read whole, the router's statistics of the pair sent it to the general head and
    the crowd was counted 162 (222.6 alone); each tile routed by its own maps, about as alone."""
    from counting.data.imaging import load_image
    from counting.features.detector.evidence import detector_tiles
    from counting.heads.density.maps import maps_on_grid
    from counting.heads.familiarity import map_statistics

    crowd = np.asarray(
        load_image(shared_data / "shanghaitech-B-train" / "images" / "IMG_1.jpg").convert("RGB").resize((512, 384))
    )
    empty = np.asarray(load_image(shared_data / COCO / f"{EMPTY[0]}.jpg").convert("RGB").resize((512, 384)))
    pair = np.concatenate([crowd, empty], axis=1)
    alone = crowd_model.count_images([crowd])[0]
    batch = crowd_model.count_batch([crowd_model.prepare_image(pair)])
    counts, people = batch.counts, batch.people
    assert alone > 180 and abs(counts[0] - alone) <= 0.05 * alone
    assert isinstance(people[0], PartPeople)
    # What changed: the router's weights of the pair whole differ from the crowd's, its tiles' do not.
    head = crowd_model.density_head
    maps = maps_on_grid(
        crowd_model.get_backbone(), np.stack([crowd_model.prepare_image(pair)]), head.layers, head.stride
    )
    names = list(head.specialists)
    whole = head.router.mixture(map_statistics(maps), names)[0]
    half = maps.shape[-1] // 2
    assert len(detector_tiles(maps.shape[-2] * head.stride, maps.shape[-1] * head.stride)) == 2
    crowd_tile = head.router.mixture(map_statistics(maps[:, :, :, :half]), names)[0]
    assert np.abs(whole - crowd_tile).max() > 0.5
    # Maps within 2:1 are routed as before, whole.
    one = maps[:, :, :, :half]
    mixed = np.tensordot(crowd_tile, head.member_densities(one)[:, 0], 1)
    np.testing.assert_allclose(head.density(one)[0], mixed, rtol=1e-9, atol=1e-12)
    # A wide picture's: each tile's core by its own weights.
    members = head.member_densities(maps)[:, 0]
    other = head.router.mixture(map_statistics(maps[:, :, :, half:]), names)[0]
    expected = np.concatenate(
        [np.tensordot(crowd_tile, members[:, :, :half], 1), np.tensordot(other, members[:, :, half:], 1)], axis=1
    )
    np.testing.assert_allclose(head.density(maps)[0], expected, rtol=1e-9, atol=1e-12)
