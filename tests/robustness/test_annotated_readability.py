"""Annotated pictures people can read (issue 49): zone labels sized to the picture and present in
every zone, zone outlines with a dark rim, the detector's legend showing count's table values,
box labels that never cover one another, and ``video --annotated`` drawing the crowd model's
heat map with frame and zone figures of one kind (raw).

Measured on pixels of pictures at the sizes people use: a 640x480 frame and a 4032x3024 photo.
Before the fix a zone label's capitals were 8 px of ink on a 640x480 frame (49 px, 1.6 %, on a
4032x3024 photo), zone outlines were 1-px lines without a rim, two zones sharing a centre showed
one label, the legend said "bus: 2" beside a table's "bus 1.6 [0.9–2.4]", and the video's heat map
was drawn on the crowd model's dense-crowd scale (a Mall frame changed by at most 50 levels).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import shapely

from counting.apply.zone_drawing import ZONE_COLOURS, draw_zones
from counting.apply.zone_specs import parse_zone

REPO = Path(__file__).resolve().parents[2]
CROWD_MODEL = REPO / "models" / "crowd.npz"
SIZES = [(480, 640), (3024, 4032)]  # (height, width): a video frame, a phone photo
HALVES = ["left:0,0,0.5,0,0.5,1,0,1", "right:0.5,0,1,0,1,1,0.5,1"]
GREY = 128


def grey_picture(height: int, width: int) -> np.ndarray:
    return np.full((height, width, 3), GREY, np.uint8)


def label_boxes(picture: np.ndarray) -> list[tuple[int, int, int, int]]:
    """The dark label boxes drawn on a grey picture: ``(x, y, w, h)`` of each dark connected
    region small enough to be a label (the outlines' dark rims run across the picture)."""
    height, width = picture.shape[:2]
    dark = (picture.max(axis=2) < 50).astype(np.uint8)
    count, _, stats, _ = cv2.connectedComponentsWithStats(dark, connectivity=8)
    return [
        (int(x), int(y), int(w), int(h))
        for x, y, w, h, area in stats[1:count]
        if h < 0.12 * height and w < 0.6 * width and w > 2 * h and area > 40  # not a letter's hole
    ]


def text_height(picture: np.ndarray, box: tuple[int, int, int, int]) -> int:
    """Rows of a label box that hold its text (bright pixels), 2 px in from the box's edge."""
    x, y, w, h = box
    inside = picture[y + 2 : y + h - 2, x + 2 : x + w - 2]
    rows = np.flatnonzero((inside.max(axis=2) > 100).any(axis=1))
    return int(rows[-1] - rows[0] + 1) if rows.size else 0


@pytest.mark.parametrize(("height", "width"), SIZES)
def test_every_zone_is_labelled_inside_it_at_a_readable_size(height: int, width: int) -> None:
    zones = [parse_zone(text) for text in HALVES]
    counts = {"left": {"count": 15.7}, "right": {"count": 11.0}}
    picture = draw_zones(grey_picture(height, width), zones, counts)
    boxes = label_boxes(picture)
    assert len(boxes) == 2, boxes
    short = min(height, width)
    for zone in zones:
        polygon = zone.polygon((height, width))
        inside = [
            box for box in boxes if polygon.contains(shapely.box(box[0], box[1], box[0] + box[2], box[1] + box[3]))
        ]
        assert len(inside) == 1, (zone.name, boxes)
        # Capitals of at least 12 px and 2.2 % of the shorter side: were 7 px on 480, 50 on 3024.
        assert max(12, 0.022 * short) <= text_height(picture, inside[0]) <= 0.05 * short


@pytest.mark.parametrize(("height", "width"), SIZES)
def test_zone_outlines_are_thick_with_a_dark_rim(height: int, width: int) -> None:
    picture = draw_zones(grey_picture(height, width), [parse_zone(text) for text in HALVES])
    row = picture[height // 4, width // 2 - width // 20 : width // 2 + width // 20].astype(int)
    magenta = np.flatnonzero((row[:, 0] > 150) & (row[:, 2] > 150) & (row[:, 1] < 100))
    assert magenta.size >= max(2, min(height, width) // 300), magenta  # the right zone's left edge
    left, right = magenta[0], magenta[-1]
    assert magenta.size == right - left + 1  # one stroke
    # A dark rim either side: the outline reads on a light floor as well as on a dark one.
    assert row[left - 3 : left].max(axis=1).min() < 60 and row[right + 1 : right + 4].max(axis=1).min() < 60


def test_two_zones_sharing_a_centre_both_show_their_label() -> None:
    # A zone over the whole frame and a door in its middle: both labels were drawn at the frame's
    # centre, the door's over the whole frame's, which was gone.
    zones = [parse_zone("all:0,0,1,0,1,1,0,1"), parse_zone("door:0.35,0.35,0.65,0.35,0.65,0.65,0.35,0.65")]
    counts = {"all": {"count": 30.2}, "door": {"count": 3.1}}
    picture = draw_zones(grey_picture(480, 640), zones, counts)
    assert ZONE_COLOURS[0] == (255, 255, 255)  # "all" is labelled in white
    middle = picture[12:-12, 12:-12]  # the whole-frame zone's white outline runs along the edges
    white = (middle.min(axis=2) > 200).sum()
    assert white > 100, white
    magenta = ((middle[..., 0] > 200) & (middle[..., 2] > 200) & (middle[..., 1] < 60)).sum()
    assert magenta > 100


def test_zone_labels_are_placed_inside_their_zones_without_covering_one_another() -> None:
    from counting.apply.label_drawing import overlaps, text_style
    from counting.apply.zone_drawing import zone_label_spots

    frame = (480, 640)
    zones = [
        parse_zone("all:0,0,1,0,1,1,0,1"),
        parse_zone("door:0.35,0.35,0.65,0.35,0.65,0.65,0.35,0.65"),
        parse_zone("mat:0.4,0.4,0.6,0.4,0.6,0.6,0.4,0.6"),
    ]
    texts = ["all 30.2 [25-36]", "door 3.1 [1-6]", "mat 1.0 [0-3]"]
    spots = zone_label_spots(zones, texts, frame, text_style(frame))
    assert len(spots) == 3
    for zone, (x, y, w, h) in zip(zones, spots):
        polygon = zone.polygon(frame)
        # Wholly inside where the zone has room, centred inside it always (the nested mat).
        assert polygon.contains(shapely.box(x, y, x + w, y + h)) or zone.name == "mat", zone.name
        assert polygon.contains(shapely.Point(x + w / 2, y + h / 2)), zone.name
        assert 0 <= x and x + w <= 640 and 0 <= y and y + h <= 480
    assert not any(overlaps(a, b) for i, a in enumerate(spots) for b in spots[i + 1 :])


# -- the detector's pictures (count --annotated with models/voc20.npz) --------------------------


def _table_cells(row: dict, class_names: list[str]) -> tuple[str, str]:
    """(total, classes) as count's table writes the row."""
    from counting.cli.multiclass_output import class_counts_table

    model = SimpleNamespace(class_names=class_names, interval=SimpleNamespace(level=0.9), name="voc20")
    table = class_counts_table(model, [row], display=str)
    return str(table.columns[1]._cells[0]), str(table.columns[2]._cells[0])


def _voc_row(counts: dict[str, tuple[float, float, float]]) -> dict:
    from counting.core.columns import class_column

    row: dict = {"image": "bus.jpg", "total": sum(c for c, _, _ in counts.values())}
    for name, (count, low, high) in counts.items():
        row |= {class_column("count", name): count, class_column("low", name): low, class_column("high", name): high}
    return row


def test_the_legend_shows_the_tables_counts_with_their_intervals() -> None:
    from counting.apply.detection_drawing import legend_lines

    names = ["bus", "car", "person", "dog"]
    row = _voc_row({"bus": (1.6, 0.93, 2.36), "car": (3.6, 2.0, 5.21), "person": (0.2, 0.0, 1.1), "dog": (0.5, 0, 1)})
    lines = [text for text, _ in legend_lines(names, row)]
    total, classes = _table_cells(row, names)
    assert lines[0] == f"total {total}"
    assert ", ".join(lines[1:]) == classes == "car 3.6 [2.0–5.2], bus 1.6 [0.9–2.4], dog 0.5 [0.0–1.0]"
    nothing = _voc_row({"bus": (0.1, 0.0, 0.6)})
    assert [text for text, _ in legend_lines(["bus"], nothing)] == ["total 0.1", "no class counted 0.5 or more"]


def _crowded_detections(height: int, width: int, boxes: int = 60):
    """A street of people: ``boxes`` overlapping person boxes (COCO class 0) in three rows."""
    from counting.features.detector.decode import Detections

    rng = np.random.default_rng(0)
    w, h = width / 14, height / 4
    x1 = rng.uniform(0.05, 0.85, boxes) * width
    y1 = (0.3 + 0.15 * rng.integers(0, 3, boxes)) * height
    corners = np.stack([x1, y1, x1 + w, y1 + h], axis=1)[None].astype(np.float32)
    scores = np.sort(rng.uniform(0.3, 0.95, boxes))[::-1][None].astype(np.float32)
    return Detections(corners, scores, np.zeros((1, boxes), int), np.zeros((1, boxes, 2), int))


@pytest.mark.parametrize(("height", "width"), SIZES)
def test_box_labels_of_a_crowd_never_overlap(height: int, width: int) -> None:
    from counting.apply.detection_drawing import box_label_spots, draw_detections
    from counting.apply.label_drawing import label_size, overlaps, text_style

    found = _crowded_detections(height, width)
    style = text_style((height, width), 0.02, 11)
    boxes = [tuple(int(v) for v in box) for box in found.boxes[0]]
    sizes = [label_size(f"person {score:.2f}", style) for score in found.scores[0]]
    legend = (0, 0, width // 4, height // 6)
    spots = box_label_spots(boxes, sizes, (height, width), [legend])
    placed = [spot for spot in spots if spot is not None]
    assert 3 <= len(placed) < len(boxes)  # the surest boxes labelled, the colliding ones left bare
    assert spots[0] is not None  # best score first
    assert not any(overlaps(a, b) for i, a in enumerate(placed) for b in placed[i + 1 :])
    assert not any(overlaps(spot, legend) for spot in placed)
    for x, y, w, h in placed:
        assert 0 <= x and x + w <= width and 0 <= y and y + h <= height
    # Drawn: the legend's lines top left, each at least 2.5 % of the shorter side high.
    row = _voc_row({"person": (41.3, 30.2, 52.8)})
    drawn = draw_detections(grey_picture(height, width), found, 0, ["person"], row)
    dark = drawn[:, :, :].max(axis=2) < 50
    legend_rows = np.flatnonzero(dark[:, 1])
    assert legend_rows[0] == 0 and legend_rows.size >= 2 * 0.025 * min(height, width)


# -- video --annotated with the crowd model ------------------------------------------------------


@pytest.fixture
def mall_clip(mall_root: Path, tmp_path: Path) -> tuple[Path, list[np.ndarray]]:
    """Mall frames 1-3 as an MJPEG .avi, and the frames as the video decodes them."""
    path = tmp_path / "mall.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (640, 480))
    for index in (1, 2, 3):
        writer.write(cv2.imread(str(mall_root / "frames" / f"seq_{index:06d}.jpg")))
    writer.release()
    return path, _frames(path)


def _frames(path: Path) -> list[np.ndarray]:
    capture = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame.astype(int))
    capture.release()
    return frames


@pytest.mark.slow
def test_video_draws_the_crowd_models_heat_map_and_one_kind_of_count(
    mall_clip: tuple[Path, list[np.ndarray]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import counting.apply.video as video_module
    from counting.model.counting_model import load_model

    source, frames = mall_clip
    model = load_model(CROWD_MODEL)
    plain = video_module.count_video(model, str(source), output_video=tmp_path / "plain.avi")
    assert plain.frames == 3
    # The heat map: the head's people show (a Mall frame changed by at most 50 levels on the
    # model's dense-crowd scale, outside the count's corner label).
    for original, drawn in zip(frames, _frames(tmp_path / "plain.avi"), strict=True):
        change = np.abs(drawn - original).sum(axis=2)[60:]
        assert change.max() > 100 and (change > 60).mean() > 0.002

    drawn_labels: list[str] = []
    real_annotate = video_module.annotate
    monkeypatch.setattr(
        video_module,
        "annotate",
        lambda image, text, note=None: drawn_labels.append(text) or real_annotate(image, text, note),
    )
    zones = [parse_zone(text) for text in HALVES]
    run = video_module.count_video(
        model, str(source), smooth_window=5, output_video=tmp_path / "zones.avi", zones=zones, keep_records=True
    )
    assert len(drawn_labels) == len(run.records) == 3
    for label, record in zip(drawn_labels, run.records):
        # The zones are drawn with the frame's own counts: so is the frame's ("raw count"), not
        # the smoothed count that was drawn beside raw zone counts ("smoothed 39.5", 19.4 + 20.9).
        assert label.startswith(f"raw count {record['count']:.1f} ["), label
        assert record["zone_left"] + record["zone_right"] == pytest.approx(record["count"], abs=1e-6)
    assert run.records[1]["smoothed"] != run.records[1]["count"]  # smoothing was on
