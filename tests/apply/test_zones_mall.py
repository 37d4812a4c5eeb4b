"""Zones on real Mall frames with the shipped density model (models/mall-accurate.npz): the
counts of a partition of the frame add up to the frame count, a zone covering the frame counts
what the frame does, image files and arrays agree, the commands write the zone columns.

Slow: the model runs its 720-pixel backbone and conv head on each frame (about 2 s a frame on
2 cores, plus the session's ONNX export)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

import counting
from counting.apply.zones import count_frames, parse_zone
from counting.cli.app import app
from counting.data.imaging import load_image
from counting.model.counting_model import load_model

pytestmark = pytest.mark.slow

MODEL = Path(__file__).resolve().parents[2] / "models" / "mall-accurate.npz"
# Whole-frame class scores: a model with no density map, which cannot count zones.
DESCRIPTOR_MODEL = MODEL.with_name("default.npz")
FRAMES = (1, 400)
# A partition of the 640x480 frame whose edges cut the map's cells anywhere (5.33-pixel cells).
PARTITION = [
    "north:0,0,333,0,250,217",
    "east:333,0,640,0,640,301,250,217",
    "south:0,0,250,217,640,301,640,480,0,480",
]
HALVES = ["left:0,0,0.5,0,0.5,1,0,1", "right:50%,0%,100%,0%,100%,100%,50%,100%"]
WHOLE = "all:0,0,640,0,640,480,0,480"
ABOVE_ROI = "above:0,0,640,0,640,16,0,16"  # Mall's ROI starts at row 16


@pytest.fixture(scope="module")
def model():
    return load_model(MODEL)


@pytest.fixture(scope="module")
def frame_paths(mall_root: Path) -> list[Path]:
    return [mall_root / "frames" / f"seq_{index:06d}.jpg" for index in FRAMES]


@pytest.fixture(scope="module")
def records(model, frame_paths) -> list[dict]:
    assert model.density_head is not None
    frames = [np.asarray(load_image(path)) for path in frame_paths]
    zones = [parse_zone(text) for text in (*PARTITION, *HALVES, WHOLE, ABOVE_ROI)]
    return count_frames(model, frames, zones)


def test_partitions_add_up_to_the_frame_count(records) -> None:
    for record in records:
        assert 10 < record["count"] < 60  # Mall frames hold 13-53 people
        for names in (["north", "east", "south"], ["left", "right"]):
            parts = [record["zones"][name] for name in names]
            assert all(part["count"] > 0 for part in parts)
            assert abs(sum(part["count"] for part in parts) - record["count"]) < 1e-6, names
            # Each part's interval is its share of the frame's widened by its own scatter.
            assert sum(part["low"] for part in parts) <= record["low"] + 1e-6, names
            assert sum(part["high"] for part in parts) > record["high"], names


def test_a_zone_covering_the_frame_is_the_frame_and_one_outside_the_roi_is_empty(records, model, frame_paths) -> None:
    frames = [np.asarray(load_image(path)) for path in frame_paths]
    counts = model.count_images(frames)
    for record, count in zip(records, counts):
        assert record["count"] == pytest.approx(count, abs=1e-9)
        assert record["zones"]["all"]["count"] == pytest.approx(record["count"], abs=1e-6)
        assert record["zones"]["all"]["high"] == pytest.approx(record["high"], abs=1e-6)
        assert record["zones"]["above"] == {"count": 0.0, "low": 0.0, "high": 0.0}  # outside the ROI


def test_files_and_arrays_count_the_same_zones(records, frame_paths) -> None:
    rows = counting.count(frame_paths, model=MODEL, zones=[*HALVES, WHOLE])
    assert len(rows) == len(records)
    for row, record in zip(rows, records):
        assert row["count"] == pytest.approx(record["count"], abs=1e-4)
        for name in ("left", "right", "all"):
            assert row[f"zone_{name}"] == pytest.approx(record["zones"][name]["count"], abs=1e-4)
            assert row[f"zone_{name}_low"] == pytest.approx(record["zones"][name]["low"], abs=1e-4)


def test_count_command_writes_zone_columns(tmp_path: Path, frame_paths, records) -> None:
    zones_file = tmp_path / "zones.toml"
    zones_file.write_text(
        '[[zone]]\nname = "left"\npoints = [[0, 0], [320, 0], [320, 480], [0, 480]]\n'
        '[[zone]]\nname = "right"\npoints = [[0.5, 0], [1, 0], [1, 1], [0.5, 1]]\n'
    )
    out_csv, out_json = tmp_path / "counts.csv", tmp_path / "counts.json"
    args = ["count", *map(str, frame_paths), "-m", str(MODEL), "--zones", str(zones_file)]
    result = CliRunner().invoke(app, [*args, "--zone", WHOLE, "--csv", str(out_csv), "--json", str(out_json)])
    assert result.exit_code == 0, result.output
    assert "zone_left" in result.stdout and "zone_all" in result.stdout
    rows = list(csv.DictReader(out_csv.open()))
    assert list(rows[0])[:4] == ["image", "count", "low", "high"]
    assert list(rows[0])[4:] == [
        f"zone_{name}{kind}" for name in ("left", "right", "all") for kind in ("", "_low", "_high")
    ] + ["familiarity", "unfamiliar"]
    for row, record in zip(rows, records):
        assert float(row["zone_left"]) + float(row["zone_right"]) == pytest.approx(float(row["count"]), abs=2e-3)
        assert float(row["zone_left"]) == pytest.approx(record["zones"]["left"]["count"], abs=2e-3)
    document = json.loads(out_json.read_text())
    first = document["images"][0]
    assert first["zone_left"] + first["zone_right"] == pytest.approx(first["count"], abs=1e-6)
    # On an 80-column terminal the zones' cells do not fit beside the paths: each row prints as a
    # record and every number stays whole (rich alone squeezed them to "17.…").
    narrow = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert narrow.exit_code == 0, narrow.output
    assert "…" not in narrow.stdout and max(map(len, narrow.stdout.splitlines())) <= 80 + max(
        len(str(path)) for path in frame_paths
    )
    for image in document["images"]:
        assert f"── {image['image']}" in narrow.stdout
        for name in ("left", "right"):
            cell = f"{image[f'zone_{name}']:.1f} [{image[f'zone_{name}_low']:.1f}-{image[f'zone_{name}_high']:.1f}]"
            assert re.search(rf"zone_{name} +{re.escape(cell)}", narrow.stdout), narrow.stdout


def test_commands_refuse_zones_a_model_cannot_count(tmp_path: Path, frame_paths) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["count", str(frame_paths[0]), "-m", str(DESCRIPTOR_MODEL), "--zone", "a:0,0,1,0,1,1"])
    assert result.exit_code == 1
    assert "cannot count zones" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["count", str(frame_paths[0]), "-m", str(MODEL), "--zone", "far:700,0,800,0,800,9"])
    assert result.exit_code == 1 and "zone 'far' lies outside the 640x480 frame" in result.output


def test_video_writes_zone_columns_and_draws_the_zones(tmp_path: Path, frame_paths) -> None:
    source = tmp_path / "mall.avi"
    writer = cv2.VideoWriter(str(source), cv2.VideoWriter_fourcc(*"MJPG"), 5, (640, 480))
    for path in frame_paths:
        writer.write(cv2.imread(str(path)))
    writer.release()
    records_path, annotated = tmp_path / "counts.jsonl", tmp_path / "annotated.avi"
    args = ["video", str(source), "-m", str(MODEL), "--zone", HALVES[0], "--zone", HALVES[1]]
    result = CliRunner().invoke(app, [*args, "--jsonl", str(records_path), "--annotated", str(annotated)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in records_path.read_text().splitlines()]
    assert len(lines) == len(frame_paths)
    for line in lines:
        assert abs(line["zone_left"] + line["zone_right"] - line["count"]) < 1e-6
        assert line["zone_left_high"] + line["zone_right_high"] > line["high"]
        assert line["zone_left_low"] <= line["zone_left"] <= line["zone_left_high"]
    capture = cv2.VideoCapture(str(annotated))
    ok, frame = capture.read()
    capture.release()
    assert ok
    # The zones' outlines: the right zone's left edge (magenta, drawn last) runs down column 320.
    edge = frame[100:400, 317:324].astype(int)
    magenta = (edge[..., 0] > 150) & (edge[..., 2] > 150) & (edge[..., 1] < 120)
    assert magenta.any(axis=1).mean() > 0.9


def test_annotated_frame_draws_heat_map_zones_and_count(model, frame_paths, records) -> None:
    from counting.apply.annotated import annotated_frame

    rgb = np.asarray(load_image(frame_paths[0]))
    zones = [parse_zone(text) for text in HALVES]
    record, picture = annotated_frame(model, rgb, zones)
    assert picture.shape == rgb.shape and picture.dtype == np.uint8
    assert record["count"] == pytest.approx(records[0]["count"], abs=1e-9)
    assert record["zones"]["left"]["count"] == pytest.approx(records[0]["zones"]["left"]["count"], abs=1e-9)
    # The right zone's left edge (magenta) down column 320, the count's dark box in the corner.
    edge = picture[100:400, 318:322].astype(int)
    assert ((edge[..., 0] > 200) & (edge[..., 2] > 200) & (edge[..., 1] < 60)).any(axis=1).all()
    assert picture[2:10, 2:10].max() < 20


def test_count_frames_without_zones_takes_any_model(frame_paths) -> None:
    default = load_model(DESCRIPTOR_MODEL)  # whole-frame class scores: no map, no zones
    rgb = np.asarray(load_image(frame_paths[0]))
    (record,) = count_frames(default, [rgb], [])
    assert record["zones"] == {} and record["low"] <= record["count"] <= record["high"]
    assert record["count"] == pytest.approx(counting.count([rgb], model=default)[0]["count"], abs=1e-9)


def test_count_frames_without_zones_takes_a_density_model(frame_paths) -> None:
    # An empty zone list on a density model (serve's cameras without zones; the default crowd
    # model) was a reshape error on the (0, h, w) weights.
    model = load_model(MODEL)
    rgb = np.asarray(load_image(frame_paths[0]))
    (record,) = count_frames(model, [rgb], [])
    assert record["zones"] == {} and record["low"] <= record["count"] <= record["high"]
    assert record["count"] == pytest.approx(counting.count([rgb], model=model)[0]["count"], abs=1e-9)


def test_count_annotated_draws_a_density_models_heat_map_and_zones(tmp_path: Path, frame_paths) -> None:
    out = tmp_path / "drawn"
    args = ["count", str(frame_paths[0]), "-m", str(MODEL), "--zone", HALVES[0], "--zone", HALVES[1]]
    result = CliRunner().invoke(app, [*args, "--annotated", str(out), "-q"])
    assert result.exit_code == 0, result.output
    drawn = cv2.imread(str(out / frame_paths[0].with_suffix(".jpg").name))
    original = cv2.imread(str(frame_paths[0]))
    assert drawn.shape == original.shape
    # the heat map, the zones and the labels change the picture
    assert np.abs(drawn.astype(int) - original.astype(int)).mean() > 5
    descriptor = CliRunner().invoke(
        app, ["count", str(frame_paths[0]), "-m", str(DESCRIPTOR_MODEL), "--annotated", str(out)]
    )
    assert descriptor.exit_code == 1 and "has neither" in " ".join(descriptor.output.split())
