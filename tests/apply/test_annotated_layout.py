"""The layout of annotated pictures (counting.apply.label_drawing and its users): label sizes that
follow the picture, greedy placement without overlaps, the video's heat-map scale, the frame's
label when zones are drawn, and a real detector photo drawn at 640x480 and 4032x3024."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from counting.apply.label_drawing import (
    MIN_CAP_PX,
    clamped,
    label_size,
    line_thickness,
    overlaps,
    place_labels,
    text_style,
)
from counting.apply.video import overlay_label, video_heat_top
from counting.cli.app import app
from counting.heads.density.heatmap import PICTURE_TOP_FLOOR
from counting.model.counting_model import load_model

REPO = Path(__file__).resolve().parents[2]


def test_labels_and_lines_grow_with_the_pictures_shorter_side() -> None:
    frame, photo, thumbnail = text_style((480, 640)), text_style((3024, 4032)), text_style((90, 120))
    cap = cv2.getTextSize("H", cv2.FONT_HERSHEY_SIMPLEX, 1.0, 1)[0][1]
    assert frame.font_scale * cap == pytest.approx(MIN_CAP_PX)  # the floor: 2.8 % of 480 is 13.4
    assert photo.font_scale * cap == pytest.approx(0.028 * 3024)
    assert thumbnail.font_scale == frame.font_scale  # never below the floor
    assert photo.thickness > frame.thickness >= 2 and photo.pad > frame.pad
    # A portrait photo is sized by its width, a landscape one by its height: the same labels.
    assert text_style((4032, 3024)) == photo
    assert line_thickness((480, 640)) == 2 and line_thickness((3024, 4032)) == 13
    width, height = label_size("door 12.3 [10-15]", frame)
    assert 22 <= height <= 32 and width > 5 * height


def test_overlaps_counts_shared_pixels_only() -> None:
    assert overlaps((0, 0, 10, 10), (9, 9, 5, 5))
    assert not overlaps((0, 0, 10, 10), (10, 0, 5, 5))  # touching edges share no pixel
    assert not overlaps((0, 0, 10, 10), (0, 10, 10, 10))


def test_place_labels_takes_the_first_free_candidate_and_skips_what_collides() -> None:
    legend = (0, 0, 100, 40)
    candidates = [
        [(50, 20, 60, 20), (120, 0, 60, 20)],  # the first covers the legend: the second is taken
        [(130, 10, 60, 20), (130, 30, 60, 20)],  # the first covers the label above
        [(125, 5, 60, 20)],  # nowhere free: left out
        [(125, 5, 60, 20)],  # required: placed anyway (a zone is always labelled)
    ]
    spots = place_labels(candidates, taken=[legend], required=[False, False, False, True])
    assert spots == [(120, 0, 60, 20), (130, 30, 60, 20), None, (125, 5, 60, 20)]
    free = [spot for spot in spots[:3] if spot is not None]
    assert not any(overlaps(a, b) for i, a in enumerate(free + [legend]) for b in (free + [legend])[i + 1 :])


def test_a_zone_label_keeps_out_of_the_corner_where_the_frames_count_is_drawn() -> None:
    from counting.apply.zone_drawing import zone_label_spots
    from counting.apply.zone_specs import parse_zone

    frame = (480, 640)
    band = parse_zone("top:0,0,1,0,1,0.15,0,0.15")  # its centre (320, 36) is beside the count's corner
    (spot,) = zone_label_spots([band], ["top 4.2 [2-7]"], frame, text_style(frame))
    assert not overlaps(spot, (0, 0, 320, 48)) and spot[1] + spot[3] <= 72
    # A zone with no room outside the corner is labelled anyway, inside it.
    corner = parse_zone("nook:0,0,0.3,0,0.3,0.08,0,0.08")
    (spot,) = zone_label_spots([corner], ["nook 0.3"], frame, text_style(frame))
    assert spot[0] < 192 and spot[1] < 39


def test_clamped_moves_a_label_onto_the_picture_without_shrinking_it() -> None:
    assert clamped((-5, -3, 50, 20), 640, 480) == (0, 0, 50, 20)
    assert clamped((620, 470, 50, 20), 640, 480) == (590, 460, 50, 20)


def test_the_frame_label_beside_zones_is_the_raw_count_and_says_so() -> None:
    record = {"count": 40.3, "low": 34.1, "high": 46.0, "smoothed": 39.5, "smoothed_low": 33.2, "smoothed_high": 45.1}
    assert overlay_label(record) == "smoothed 39.5 [33-46]"
    assert overlay_label(record, raw=True) == "raw count 40.3 [34-46]"
    unsmoothed = {"count": 40.3, "low": 34.1, "high": 46.0}
    assert overlay_label(unsmoothed, raw=True) == overlay_label(unsmoothed) == "count 40.3 [34-46]"
    per_class = {"count_person": 3.0, "count_dog": 1.0, "smoothed_person": 2.5, "smoothed_dog": 1.0}
    assert overlay_label(per_class, ["person", "dog"], raw=True) == "raw count 4.0"


def test_the_videos_heat_scale_is_its_densest_frame_so_far() -> None:
    sparse, dense = np.full((4, 4), 0.05), np.full((4, 4), 0.5)
    top = video_heat_top(0.0, sparse, 1.4)
    assert top == PICTURE_TOP_FLOOR  # a near-empty frame is not painted as a crowd
    top = video_heat_top(top, dense, 1.4)
    assert top == 0.5  # the Mall frame's own peak, not the model's 1.4 (a faint wash)
    assert video_heat_top(top, sparse, 1.4) == 0.5  # it never shrinks: the frames share a scale
    assert video_heat_top(top, np.full((4, 4), 3.0), 1.4) == 1.4  # at most the model's top


@pytest.mark.slow
@pytest.mark.parametrize("size", [(640, 480), (4032, 3024)])
def test_count_annotated_draws_a_readable_detector_photo(
    size: tuple[int, int], coco_voc20_root: Path, detector_files: None, tmp_path: Path
) -> None:
    from counting.apply.detection_drawing import legend_lines
    from counting.apply.label_drawing import LABEL_BACKGROUND

    photo = tmp_path / "bus.jpg"  # two buses and people (the coco-voc20 test photo 532)
    cv2.imwrite(str(photo), cv2.resize(cv2.imread(str(coco_voc20_root / "JPEGImages" / "000000000532.jpg")), size))
    out, counts = tmp_path / "drawn", tmp_path / "counts.json"
    args = ["count", str(photo), "-m", str(REPO / "models" / "voc20.npz"), "--json", str(counts)]
    result = CliRunner().invoke(app, [*args, "--annotated", str(out), "-q"])
    assert result.exit_code == 0, result.output
    row = json.loads(counts.read_text())["images"][0]
    lines = legend_lines(load_model(REPO / "models" / "voc20.npz").class_names, row)
    assert any(text.startswith("bus ") and "–" in text for text, _ in lines)  # "bus 2.2 [2.2–2.2]"
    drawn = cv2.imread(str(out / "bus.jpg"))
    # The legend's dark boxes down the left edge: one line each, 2.8 % of the shorter side or more.
    column = np.abs(drawn[:, 1].astype(int) - LABEL_BACKGROUND).max(axis=1) < 30
    legend_height = int(np.argmin(column)) if not column.all() else drawn.shape[0]
    short = min(size)
    assert legend_height >= len(lines) * max(MIN_CAP_PX, 0.028 * short)
