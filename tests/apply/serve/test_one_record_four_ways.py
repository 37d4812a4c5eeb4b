"""One picture, four ways in, one record (issue 50's "one counter"): `count --json`,
`counting.count`, `video --jsonl` of a video made of the picture with a lossless codec, and
`POST /api/count` give the same count, interval, familiarity and route, to the last bit, with
the default crowd model (density heads, specialists, sparse gate)."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from serve_helpers import RunningServer, write_config
from typer.testing import CliRunner

import counting
from counting.cli.app import app

SHARED_FIELDS = ("count", "low", "high", "familiarity", "unfamiliar", "counted_by", "disputed")


@pytest.mark.slow
def test_one_picture_gets_one_record_whichever_way_it_comes_in(mall_root: Path, tmp_path: Path) -> None:
    bgr = cv2.imread(str(mall_root / "frames" / "seq_000005.jpg"))
    picture = tmp_path / "picture.png"  # lossless: every way in sees the same pixels
    assert cv2.imwrite(str(picture), bgr)
    clip = tmp_path / "picture.avi"
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"FFV1"), 5.0, (bgr.shape[1], bgr.shape[0]))
    writer.write(bgr)
    writer.release()
    decoded = cv2.VideoCapture(str(clip)).read()[1]
    assert np.array_equal(decoded, bgr)  # the codec is lossless here

    runner = CliRunner()
    result = runner.invoke(app, ["count", str(picture), "--json", "-", "-q"])
    assert result.exit_code == 0, result.output
    by_command = json.loads(result.stdout)["images"][0]
    by_api = counting.count(str(picture)).rows[0]
    lines = tmp_path / "frames.jsonl"
    result = runner.invoke(app, ["video", str(clip), "--jsonl", str(lines), "-q"])
    assert result.exit_code == 0, result.output
    by_video = json.loads(lines.read_text().splitlines()[0])
    server = RunningServer(write_config(tmp_path / "serve.toml", 'database = "h.sqlite"\nport = 0\n'))
    try:
        response = server.client.post("/api/count", content=picture.read_bytes(), headers={"Content-Type": "image/png"})
    finally:
        server.close()
    assert response.status_code == 200, response.text
    by_upload = response.json()["images"][0]

    expected = {field: by_command[field] for field in SHARED_FIELDS}
    assert 10 < expected["count"] < 60 and expected["counted_by"] == "density"  # a Mall frame, the heads
    for way, record in (("counting.count", by_api), ("video --jsonl", by_video), ("POST /api/count", by_upload)):
        assert {field: record[field] for field in SHARED_FIELDS} == expected, way
