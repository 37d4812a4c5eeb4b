"""Familiarity on the command line: count's table, CSV, JSON and warning line, video's records,
and `counting familiarize` (adds the section, counts unchanged)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from counting.cli.app import app
from counting.model.counting_model import load_model

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "models" / "default.npz"
COCO = ("000000000009.jpg", "000000000036.jpg", "000000000042.jpg")


def _pictures(shared_data: Path) -> list[str]:
    photos = shared_data / "coco-voc20" / "VOCdevkit" / "VOC2007" / "JPEGImages"
    frames = shared_data / "mall-train" / "frames"
    return [str(photos / name) for name in COCO] + [str(frames / "seq_000100.jpg"), str(frames / "seq_000700.jpg")]


def test_count_marks_photos_unlike_the_training_frames_with_one_warning_line(
    runner: CliRunner, shared_data: Path, tmp_path: Path
) -> None:
    out_csv, out_json = tmp_path / "counts.csv", tmp_path / "counts.json"
    result = runner.invoke(
        app, ["count", *_pictures(shared_data), "-m", str(DEFAULT), "--csv", str(out_csv), "--json", str(out_json)]
    )
    assert result.exit_code == 0, result.output
    with out_csv.open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[-2:] == ["familiarity", "unfamiliar"]
    scores = np.array([float(row["familiarity"]) for row in rows])
    assert np.all((scores > 0) & (scores <= 1))
    # Three everyday photos against a model of one mall camera; a training frame and a later frame.
    assert [row["unfamiliar"] for row in rows] == ["True", "True", "True", "False", "False"]
    assert scores[3] > 0.1 and scores[4] > 0.01 and scores[:3].max() < 0.01
    warnings = [line for line in result.stderr.splitlines() if "unlike" in line]
    assert warnings == [
        "warning: 3 of 5 pictures are unlike this model's training pictures; their counts are unreliable"
    ]
    assert "unlike training" in result.stdout  # the table marks the rows
    document = json.loads(out_json.read_text())
    assert [image["unfamiliar"] for image in document["images"]] == [True, True, True, False, False]
    np.testing.assert_allclose([image["familiarity"] for image in document["images"]], scores, atol=5e-4)


def test_a_model_without_familiarity_says_unknown(runner: CliRunner, shared_data: Path, tmp_path: Path) -> None:
    model = load_model(DEFAULT)
    model.familiarity = None
    old = model.save(tmp_path / "old.npz")
    out_csv = tmp_path / "counts.csv"
    result = runner.invoke(app, ["count", *_pictures(shared_data)[:2], "-m", str(old), "--csv", str(out_csv)])
    assert result.exit_code == 0, result.output
    assert "unknown" in result.stdout and "unlike" not in result.stderr
    with out_csv.open() as handle:
        assert [(row["familiarity"], row["unfamiliar"]) for row in csv.DictReader(handle)] == [("", "")] * 2


def test_video_records_carry_familiarity(runner: CliRunner, short_video: Path, tmp_path: Path) -> None:
    records = tmp_path / "video.csv"
    result = runner.invoke(app, ["video", str(short_video), "-m", str(DEFAULT), "--csv", str(records), "--quiet"])
    assert result.exit_code == 0, result.output
    with records.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 12
    scores = np.array([float(row["familiarity"]) for row in rows])
    assert np.all(scores > 0.01) and {row["unfamiliar"] for row in rows} == {"False"}  # training frames 1-12
    assert "unlike" not in result.stderr


def test_familiarize_adds_the_section_and_keeps_every_count(
    runner: CliRunner, mall_root: Path, tmp_path: Path, one_error_line
) -> None:
    out = tmp_path / "with.npz"
    stripped = load_model(DEFAULT)
    stripped.familiarity = None
    source = stripped.save(tmp_path / "without.npz")
    args = ["familiarize", "-m", str(source), "-d", "mall", "-r", str(mall_root), "--split", "train=1-60,test=61-80"]
    result = runner.invoke(app, [*args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    model, before = load_model(out), load_model(source)
    assert model.familiarity.settings["n_pictures"] == 60 and model.familiarity.probe == "descriptor"
    frames = [str(mall_root / "frames" / f"seq_{k:06d}.jpg") for k in (1, 70, 500)]
    counted, reference = model.count_paths(frames), before.count_paths(frames)
    np.testing.assert_array_equal(counted.counts, reference.counts)  # bit for bit
    np.testing.assert_array_equal(counted.low, reference.low)
    assert reference.familiarity is None and counted.familiarity[0] > 0.1
    # Never written over its input.
    line = one_error_line(runner.invoke(app, [*args, "-o", str(source)]))
    assert "without.npz" in line
