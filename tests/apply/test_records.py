"""One record builder (issue 50, "one counter"): a video frame's row and the record `count` makes
of the same picture (``count_rows``) are both built by ``counting.apply.records.picture_record``,
and every field they share holds the same value, in the same order: the count, its interval, the
zones, familiarity and the crowd model's route and disputed mark.

Slow: the shipped crowd model (density heads, specialists, sparse gate) counts one Mall frame
twice, as a PNG file and as the one frame of a lossless video."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

import counting.apply.records as records_module
import counting.apply.video as video_module
from counting.apply.records import FRAME_COLUMNS, PICTURE_COLUMNS, count_rows, picture_record
from counting.apply.zones import count_paths_in_zones, parse_zone
from counting.model.counting_model import load_model

pytestmark = pytest.mark.slow

MODEL = Path(__file__).resolve().parents[2] / "models" / "crowd.npz"
ZONES = [parse_zone("left:0,0,0.5,0,0.5,1,0,1"), parse_zone("right:0.5,0,1,0,1,1,0.5,1")]
SHARED = (
    "count",
    "low",
    "high",
    "zone_left",
    "zone_left_low",
    "zone_left_high",
    "zone_right",
    "zone_right_low",
    "zone_right_high",
    "familiarity",
    "unfamiliar",
    "counted_by",
    "disputed",
)


@pytest.fixture(scope="module")
def picture_and_clip(mall_root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("one-frame")
    bgr = cv2.imread(str(mall_root / "frames" / "seq_000005.jpg"))
    picture = folder / "picture.png"  # lossless: both ways see the same pixels
    assert cv2.imwrite(str(picture), bgr)
    clip = folder / "picture.avi"
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"FFV1"), 5.0, (bgr.shape[1], bgr.shape[0]))
    writer.write(bgr)
    writer.release()
    assert np.array_equal(cv2.VideoCapture(str(clip)).read()[1], bgr)  # the codec is lossless here
    return picture, clip


def test_a_frame_and_the_same_picture_get_their_fields_from_the_one_builder(
    picture_and_clip: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    picture, clip = picture_and_clip
    model = load_model(MODEL)
    built: list[tuple[Any, dict[str, Any]]] = []  # (layout, record) of each call of the builder

    def spy(*args: Any, **kwargs: Any) -> dict[str, Any]:
        record = picture_record(*args, **kwargs)
        built.append((args[6] if len(args) > 6 else kwargs.get("layout", PICTURE_COLUMNS), record))
        return record

    monkeypatch.setattr(records_module, "picture_record", spy)
    monkeypatch.setattr(video_module, "picture_record", spy)

    result, zone_records = count_paths_in_zones(model, [str(picture)], ZONES)
    (by_count,) = count_rows(model, result, zone_records)
    (by_video,) = video_module.count_video(model, str(clip), zones=ZONES, keep_records=True).records

    # Both records are the builder's own, one call each: count's layout, then video's.
    assert [layout for layout, _ in built] == [PICTURE_COLUMNS, FRAME_COLUMNS]
    assert built[0][1] is by_count and built[1][1] is by_video
    # What names the record comes first; the fields of the count follow in one order.
    assert list(by_count) == ["image", *SHARED]
    assert list(by_video) == ["frame", "time_s", *SHARED]
    assert by_count["image"] == str(picture) and (by_video["frame"], by_video["time_s"]) == (0, 0.0)
    assert {field: by_video[field] for field in SHARED} == {field: by_count[field] for field in SHARED}
    # A Mall frame: counted by the density heads, a plausible crowd, its zones a partition of it.
    assert 10 < by_count["count"] < 60 and by_count["low"] < by_count["count"] < by_count["high"]
    assert by_count["counted_by"] == "density" and by_count["disputed"] is False
    assert by_count["zone_left"] + by_count["zone_right"] == pytest.approx(by_count["count"], rel=1e-9)
    assert 0 < by_count["familiarity"] <= 1 and by_count["unfamiliar"] is False
