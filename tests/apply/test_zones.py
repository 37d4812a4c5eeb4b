"""Zones (counting.apply.zones): parsing, files, exact cell weights and the shares of a frame's
count, on generated density maps (the real Mall frames are in test_zones_mall.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from counting.apply.zones import (
    ZONE_SCATTER,
    Zone,
    ZoneError,
    check_localises,
    check_zone_names,
    combined_zones,
    density_records,
    load_zones,
    parse_zone,
    zone_fields,
    zone_intervals,
    zone_shares,
    zone_weights,
)
from counting.features.backbones import Preprocessing
from counting.heads.uncertainty import ConformalInterval

# Whole-frame class scores: a model with no density map, which cannot count zones.
DESCRIPTOR_MODEL = Path(__file__).resolve().parents[2] / "models" / "default.npz"

FRAME = (480, 640)  # (height, width), as Mall's frames


class GeometryModel:
    """What zone_weights and density_records read of a density model: its input size (native
    here, so the map is the frame over the stride), the head's stride, the ROI and the interval.
    The counts are given by the tests; nothing here counts."""

    def __init__(self, stride: int = 16, roi_mask: np.ndarray | None = None, interval: bool = True) -> None:
        self.name = "geometry-model"
        self.density_head = SimpleNamespace(stride=stride)
        self.class_density_head = None
        self.roi_mask = roi_mask
        self._prep = Preprocessing(input_size=None)
        self.interval = ConformalInterval(level=0.9, quantile=np.array([2.0])) if interval else None

    def preprocessing(self) -> Preprocessing:
        return self._prep

    def intervals(self, counts: np.ndarray):
        if self.interval is None:
            return None, None
        return self.interval.interval(counts)


def halves() -> list[Zone]:
    return [parse_zone("left:0,0,0.5,0,0.5,1,0,1"), parse_zone("right:320,0,640,0,640,480,320,480")]


# ------------------------------------------------------------------ parsing


def test_parse_zone_pixels_relative_and_percent() -> None:
    pixels = parse_zone("door:0,0,320,0,320,480")
    assert pixels == Zone("door", ((0.0, 0.0), (320.0, 0.0), (320.0, 480.0)), relative=False)
    relative = parse_zone(" door : 0, 0, 0.5,0,0.5,1 ")
    assert relative.name == "door" and relative.relative
    assert relative.points == ((0.0, 0.0), (0.5, 0.0), (0.5, 1.0))
    percent = parse_zone("door:0%,0%,50%,0%,50%,100%")
    assert percent == relative


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("door", "expected NAME:x1,y1"),
        ("door:", "expected NAME:x1,y1"),
        ("door:0,0,1,0", "at least 3 points, got 2"),
        ("door:0,0,1,0,1", "expected x,y pairs"),
        ("door:0,0,a,0,1,1", "numbers separated by commas"),
        ("door:0,0,nan,0,1,1", "finite"),
        ("do or:0,0,1,0,1,1", "zone name"),
        (":0,0,1,0,1,1", "zone name"),
        ("bow:0,0,10,10,10,0,0,10", "edges cross"),
        ("line:0,0,5,5,10,10", "no area"),
        ("door:0%,0,50%,0,50%,100%", "in % or none"),
        ("door:0%,0%,150%,0%,150%,100%", "between 0 and 1"),
        # Fractions with one past 0-1 were read as pixels: a zone inside the corner pixel, counted 0.
        ("neg:-0.1,0,1,0,1,1", "-0.1 lies outside 0-1, so these would be pixels"),
        ("over:0,0,1.2,0,1.2,1", "1.2 lies outside 0-1"),
    ],
)
def test_parse_zone_errors_are_one_line_naming_the_option(text: str, says: str) -> None:
    with pytest.raises(ZoneError) as caught:
        parse_zone(text)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("--zone ") and says in message


def test_names_must_give_distinct_columns() -> None:
    with pytest.raises(ZoneError, match="'a' is given twice"):
        check_zone_names([parse_zone("a:0,0,1,0,1,1"), parse_zone("a:0,0,1,0,0,1")])
    with pytest.raises(ZoneError, match="clashes with zone 'a' \\(zone_a_low\\)"):
        check_zone_names([parse_zone("a:0,0,1,0,1,1"), parse_zone("a_low:0,0,1,0,0,1")])
    check_zone_names([parse_zone("a:0,0,1,0,1,1"), parse_zone("b:0,0,1,0,0,1")])


# ------------------------------------------------------------------ files


TOML = """
[[zone]]
name = "left"
points = [[0, 0], [320, 0], [320, 480], [0, 480]]

[[zone]]
name = "corner"
points = [[0.5, 0.5], [1, 0.5], [1, 1]]
relative = true
"""


def test_toml_and_json_files_give_the_same_zones(tmp_path: Path) -> None:
    toml_file = tmp_path / "zones.toml"
    toml_file.write_text(TOML)
    zones = load_zones(toml_file)
    assert [zone.name for zone in zones] == ["left", "corner"]
    assert [zone.relative for zone in zones] == [False, True]
    assert zones[0].points[2] == (320.0, 480.0)
    json_file = tmp_path / "zones.json"
    json_file.write_text(json.dumps({"zones": [zone.to_dict() for zone in zones]}))
    assert load_zones(json_file) == zones
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps([zone.to_dict() for zone in zones]))
    assert load_zones(bare) == zones


def test_a_file_without_relative_reads_numbers_up_to_1_as_fractions(tmp_path: Path) -> None:
    path = tmp_path / "zones.json"
    path.write_text(
        '[{"name": "a", "points": [[0, 0], [1, 0], [1, 1]]}, {"name": "b", "points": [[0, 0], [2, 0], [2, 2]]}]'
    )
    assert [zone.relative for zone in load_zones(path)] == [True, False]
    path.write_text('[{"name": "a", "points": [[0, 0], [1, 0], [1, 1]], "relative": false}]')
    assert load_zones(path)[0].relative is False


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("zones.toml", "[[zone]\nname=", "not valid TOML"),
        ("zones.json", "{", "not valid JSON"),
        ("zones.yaml", "zone: []", "expected a .toml or .json"),
        ("zones.json", "{}", "no zones"),
        ("zones.json", "[]", "non-empty list"),
        ("zones.json", '[{"name": "a"}]', "zone 1: needs a name and points"),
        ("zones.json", '[{"name": "a", "points": [[0, 0], [1, 0], [1, 1]], "colour": 1}]', "unknown key 'colour'"),
        ("zones.json", '[{"name": "a", "points": [[0, 0], [1, 0], ["x", 1]]}]', "[x, y] number pairs"),
        ("zones.json", '[{"name": "a", "points": [[0, 0], [1, 0], [1, 1]], "relative": "yes"}]', "true or false"),
        ("zones.json", '[{"name": "a", "points": [[0, 0], [9, 9], [9, 0], [0, 9]]}]', "zone 1 ('a'): the polygon"),
        (
            "zones.json",
            '[{"name": "a", "points": [[0, 0], [1, 0], [1, 1]]}, {"name": "a", "points": [[0, 0], [1, 0], [1, 1]]}]',
            "'a' is given twice",
        ),
    ],
)
def test_zone_file_errors_name_the_file(tmp_path: Path, name: str, text: str, says: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ZoneError) as caught:
        load_zones(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and says in message and "\n" not in message


def test_missing_zone_file_and_combined_options(tmp_path: Path) -> None:
    with pytest.raises(ZoneError, match="zones file not found"):
        load_zones(tmp_path / "nowhere.toml")
    path = tmp_path / "zones.toml"
    path.write_text(TOML)
    zones = combined_zones(path, ["door:0,0,10,0,10,10"])
    assert [zone.name for zone in zones] == ["left", "corner", "door"]
    with pytest.raises(ZoneError, match="'left' is given twice"):
        combined_zones(path, ["left:0,0,10,0,10,10"])


# ------------------------------------------------------------------ weights on the map


def test_relative_and_pixel_zones_weigh_the_same_cells() -> None:
    model = GeometryModel()
    relative = zone_weights([parse_zone("a:0.1,0.2,0.7,0.25,0.4,0.9")], FRAME, model)
    pixels = zone_weights([parse_zone("a:64,96,448,120,256,432")], FRAME, model)
    assert relative.shape == (1, 30, 40)  # 480x640 at stride 16
    np.testing.assert_allclose(relative, pixels, atol=1e-12)


def test_cells_cut_by_an_edge_weigh_their_covered_area() -> None:
    model = GeometryModel()  # 16-pixel cells
    # x from 8 to 40: half of column 0, all of column 1, half of column 2; y from 0 to 16: row 0.
    weights = zone_weights([parse_zone("strip:8,0,40,0,40,16,8,16")], FRAME, model)[0]
    np.testing.assert_allclose(weights[0, :4], [0.5, 1.0, 0.5, 0.0], atol=1e-12)
    assert weights[1:].sum() == 0
    # A triangle's weights times the cell area give its area exactly.
    triangle = zone_weights([parse_zone("tri:3,5,611,37,100,470")], FRAME, model)[0]
    area = abs((611 - 3) * (470 - 5) - (100 - 3) * (37 - 5)) / 2
    assert triangle.sum() * 16 * 16 == pytest.approx(area, rel=1e-12)


def test_zones_are_clipped_to_the_frame_and_one_outside_is_refused() -> None:
    model = GeometryModel()
    beyond = zone_weights([parse_zone("b:320,0,900,0,900,900,320,900")], FRAME, model)
    right = zone_weights([parse_zone("r:320,0,640,0,640,480,320,480")], FRAME, model)
    np.testing.assert_allclose(beyond, right, atol=1e-12)
    with pytest.raises(ZoneError, match="lies outside the 640x480 frame"):
        zone_weights([parse_zone("gone:700,0,800,0,800,100")], FRAME, model)


def test_cells_outside_the_roi_weigh_nothing() -> None:
    roi = np.zeros(FRAME, dtype=bool)
    roi[:, :320] = True  # the left half only
    model = GeometryModel(roi_mask=roi)
    left, right = zone_weights(halves(), FRAME, model)
    assert left.sum() == pytest.approx(30 * 20) and right.sum() == 0
    density = np.random.default_rng(0).random((1, 30, 40))
    record = density_records(model, halves(), FRAME, density, np.array([12.0]))[0]
    assert record["zones"]["left"]["count"] == pytest.approx(12.0, abs=1e-12)
    assert record["zones"]["right"]["count"] == 0.0


# ------------------------------------------------------------------ shares of the frame count


def test_half_frame_zone_on_a_synthetic_density() -> None:
    model = GeometryModel()
    density = np.zeros((2, 30, 40))
    density[0] = 0.01  # uniform: each half holds half
    density[1, :, :20] = 0.02  # everyone on the left
    density[1, 5, 30] = -0.5  # a negative cell (ridge heads) takes nothing from the right's share
    counts = np.array([24.0, 10.0])
    records = density_records(model, halves(), FRAME, density, counts)
    low, high = model.intervals(counts)
    assert records[0]["zones"]["left"]["count"] == pytest.approx(12.0, abs=1e-12)
    # Half the frame's interval, each bound moved out by the zone's scatter: 12 people in a half,
    # the frame's interval as wide about its 24 as r says, the other half's people could be here.
    r = (high[0] - low[0]) / (2 * 24.0)
    scatter = ZONE_SCATTER * np.sqrt(13 * 0.5 * (1 + 12 * r**2))
    expected = {"count": 12.0, "low": low[0] / 2 - scatter, "high": high[0] / 2 + scatter}
    assert records[0]["zones"]["right"] == pytest.approx(expected)
    assert records[1]["zones"]["left"]["count"] == pytest.approx(10.0, abs=1e-12)
    # Everyone on the left: the left half is the frame, its interval the frame's; the empty right
    # half is 0, and the most it could hold is what its scatter allows for a count of 0.
    assert records[1]["zones"]["left"]["low"] == pytest.approx(low[1]) and records[1]["zones"]["left"][
        "high"
    ] == pytest.approx(high[1])
    assert records[1]["zones"]["right"] == pytest.approx({"count": 0.0, "low": 0.0, "high": ZONE_SCATTER})
    assert records[1]["count"] == 10.0 and records[1]["low"] == low[1]


def test_a_zone_outside_the_roi_counts_no_one_and_its_interval_is_empty() -> None:
    roi = np.ones(FRAME, dtype=bool)
    roi[:, :320] = False  # the model counts the right half only
    model = GeometryModel(roi_mask=roi)
    density = np.full((1, 30, 40), 0.02)
    records = density_records(model, halves(), FRAME, density, np.array([12.0]))
    assert records[0]["zones"]["left"] == {"count": 0.0, "low": 0.0, "high": 0.0}  # nobody is counted there
    right, frame = records[0]["zones"]["right"], records[0]
    assert right["count"] == pytest.approx(12.0) and right["high"] == pytest.approx(frame["high"])


def test_a_zone_interval_is_the_frames_share_widened_by_the_zones_scatter() -> None:
    counts, low, high = np.array([40.0, 40.0, 0.0]), np.array([30.0, 36.0, 0.0]), np.array([50.0, 44.0, 3.0])
    shares = np.array([[0.25, 1.0], [0.25, 1.0], [0.25, 1.0]])
    lower, upper = zone_intervals(counts, low, high, shares)
    # A quarter of 40 people: 10, [7.5, 12.5] scaled alone, widened by 0.515 sqrt(11 * 0.75 *
    # (1 + 10 * 0.25^2)) = 1.886 where the frame is known to +-25 %, by 1.551 where to +-10 %.
    np.testing.assert_allclose(lower[:, 0], [7.5 - 1.8856, 9.0 - 1.5514, 0.0], atol=1e-3)
    np.testing.assert_allclose(
        upper[:, 0], [12.5 + 1.8856, 11.0 + 1.5514, 0.75 + ZONE_SCATTER * np.sqrt(0.75)], atol=1e-3
    )
    np.testing.assert_allclose(np.column_stack([lower[:, 1], upper[:, 1]]), np.column_stack([low, high]))
    # Another level: the scatter as a normal quantile, 1.2816 / 1.6449 of the 90 % one at 80 %.
    lower80, upper80 = zone_intervals(counts, low, high, shares, level=0.8)
    np.testing.assert_allclose(upper80[0, 0] - 12.5, 1.8856 * 1.28155 / 1.64485, atol=1e-3)
    # No zone holds more than the frame: a frame counted 0 [0, 0] has zones of 0 [0, 0], and the
    # high bound stops at the frame's. A share of 1 to rounding is the whole frame, exactly.
    lower0, upper0 = zone_intervals(np.array([0.0, 2.0]), np.zeros(2), np.array([0.0, 2.5]), np.array([[0.5], [0.9]]))
    np.testing.assert_array_equal(upper0[:, 0] <= [0.0, 2.5], True)
    assert upper0[0, 0] == 0.0 and lower0[0, 0] == 0.0
    nearly_whole = zone_intervals(counts[:1], low[:1], high[:1], np.array([[1 - 1e-16]]))
    assert (nearly_whole[0][0, 0], nearly_whole[1][0, 0]) == (low[0], high[0])
    # An interval without end (too few calibration pictures) stays without end, from 0.
    wide_low, wide_high = zone_intervals(counts[:1], np.array([-np.inf]), np.array([np.inf]), shares[:1])
    assert wide_low[0, 0] == 0.0 and wide_high[0, 0] == np.inf


def test_a_partition_adds_up_to_the_frame_count_and_the_whole_frame_is_the_frame() -> None:
    model = GeometryModel(stride=8)
    # Four zones whose edges cut cells anywhere: two triangles and two quadrilaterals.
    partition = [
        parse_zone("a:0,0,333,0,250,217"),
        parse_zone("b:333,0,640,0,640,301,250,217"),
        parse_zone("c:0,0,250,217,640,301,640,480,0,480"),
    ]
    whole = parse_zone("all:0,0,1,0,1,1,0,1")
    density = np.random.default_rng(1).gamma(0.3, 0.05, size=(3, 60, 80))
    counts = np.array([31.7, 0.4, 55.2])
    records = density_records(model, [*partition, whole], FRAME, density, counts)
    for record, count in zip(records, counts):
        parts = [record["zones"][zone.name] for zone in partition]
        assert abs(sum(part["count"] for part in parts) - count) < 1e-9
        # The parts' intervals reach further than the frame's: where the map puts the people is
        # uncertain too. A zone covering the frame keeps its count and its interval.
        assert sum(part["low"] for part in parts) <= record["low"] + 1e-9
        assert sum(part["high"] for part in parts) > record["high"]
        assert all(part["low"] <= part["count"] <= part["high"] for part in parts)
        whole_zone = record["zones"]["all"]
        assert whole_zone == pytest.approx({key: record[key] for key in ("count", "low", "high")}, abs=1e-6)


def test_a_map_without_mass_shares_by_area() -> None:
    model = GeometryModel()
    shares = zone_shares(np.zeros((1, 30, 40)), zone_weights(halves(), FRAME, model), np.ones((30, 40)))
    np.testing.assert_allclose(shares, [[0.5, 0.5]])


def test_zone_fields_are_the_output_columns() -> None:
    model = GeometryModel()
    record = density_records(model, halves(), FRAME, np.full((1, 30, 40), 0.01), np.array([8.0]))[0]
    fields = zone_fields(record["zones"])
    assert list(fields) == [
        "zone_left",
        "zone_left_low",
        "zone_left_high",
        "zone_right",
        "zone_right_low",
        "zone_right_high",
    ]
    assert fields["zone_left"] == pytest.approx(4.0)
    uncalibrated = density_records(
        GeometryModel(interval=False), halves(), FRAME, np.ones((1, 30, 40)), np.array([8.0])
    )
    assert list(zone_fields(uncalibrated[0]["zones"])) == ["zone_left", "zone_right"]
    assert "low" not in uncalibrated[0]


# ------------------------------------------------------------------ models that cannot localise


def test_descriptor_models_refuse_zones_in_one_line() -> None:
    import counting
    from counting.model.counting_model import load_model

    model = load_model(DESCRIPTOR_MODEL)  # class scores of the whole frame
    with pytest.raises(ZoneError) as caught:
        check_localises(model)
    assert "cannot count zones" in str(caught.value) and "density-head model" in str(caught.value)
    frame = np.zeros((48, 64, 3), dtype=np.uint8)
    with pytest.raises(ZoneError, match="cannot count zones"):
        counting.count([frame], model=DESCRIPTOR_MODEL, zones=["a:0,0,1,0,1,1"])
    per_class = SimpleNamespace(name="voc", density_head=None, class_density_head=object())
    with pytest.raises(ZoneError, match="per-class density models"):
        check_localises(per_class)


def test_detections_count_in_the_zones_holding_their_centres() -> None:
    from counting.apply.zones import detections_in_zones

    centres = np.array([[10.0, 10.0], [600.0, 400.0], [330.0, 50.0], [320.0, 240.0], [700.0, 10.0]])
    counts = detections_in_zones(centres, halves(), FRAME)
    # (320, 240) lies on the shared edge: it counts in both halves; (700, 10) is outside the frame.
    np.testing.assert_array_equal(counts, [2.0, 3.0])
    scored = detections_in_zones(centres, halves(), FRAME, weights=np.array([0.5, 1, 1, 0, 1]))
    np.testing.assert_allclose(scored, [0.5, 2.0])
    assert detections_in_zones(np.zeros((0, 2)), halves(), FRAME).tolist() == [0.0, 0.0]


def test_weights_equal_every_cell_intersected_with_the_polygon() -> None:
    import shapely

    model = GeometryModel(stride=8)  # 60x80 cells of 8 pixels
    concave = parse_zone("u:50,40,600,30,590,450,400,460,380,120,200,130,210,440,60,430")
    weights = zone_weights([concave], FRAME, model)[0]
    xs, ys = np.meshgrid(np.arange(80) * 8.0, np.arange(60) * 8.0)
    boxes = shapely.box(xs.ravel(), ys.ravel(), xs.ravel() + 8, ys.ravel() + 8)
    expected = shapely.area(shapely.intersection(boxes, concave.polygon(FRAME))) / 64
    np.testing.assert_allclose(weights.ravel(), expected, atol=1e-12)
    assert 0 < (weights == 1).sum() < weights.size and ((weights > 0) & (weights < 1)).sum() > 100


def test_zones_from_a_configuration_table_name_its_file() -> None:
    import pickle

    from counting.apply.zones import zones_from_entries

    zones = zones_from_entries([{"name": "door", "points": [[0, 0], [0.5, 0], [0.5, 1]]}], "serve.toml: camera 1")
    assert zones == [Zone("door", ((0.0, 0.0), (0.5, 0.0), (0.5, 1.0)), relative=True)]
    assert pickle.loads(pickle.dumps(zones)) == zones  # zones travel to Dask workers (video --sources)
    with pytest.raises(ZoneError, match=r"^serve.toml: camera 1: zone 1 \('door'\): a zone needs at least 3"):
        zones_from_entries([{"name": "door", "points": [[0, 0], [1, 1]]}], "serve.toml: camera 1")
    with pytest.raises(ZoneError, match="^serve.toml: zones must be a list"):
        zones_from_entries({"name": "door"}, "serve.toml")  # type: ignore[arg-type]
