"""The shipped crowd model's per-route intervals: a picture its Mall or ShanghaiTech B specialist
counts gets that route's interval, by every way of counting it (files, arrays, zones, video)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from counting.model.counting_model import load_model

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def crowd():
    return load_model(REPO / "models" / "crowd.npz")


def _mall_frames(shared_data: Path) -> list[str]:
    return [str(shared_data / "mall-train" / "frames" / f"seq_{number:06d}.jpg") for number in (650, 750)]


def test_mall_frames_get_the_mall_route_and_a_narrower_interval(crowd, shared_data: Path) -> None:
    frames = _mall_frames(shared_data)
    result = crowd.count_paths(frames)
    probes, ok, _ = crowd.probe_paths(frames)
    assert ok.all() and list(crowd.interval_routes(probes)) == ["mall", "mall"]
    on_route = crowd.interval.by_route["mall"]
    np.testing.assert_allclose((result.low, result.high), on_route.interval(result.counts))
    whole_low, whole_high = crowd.interval.interval(result.counts)
    # Calibrated on the Mall specialist's own out-of-fold errors: several times narrower than
    # the interval of every route together (a frame of 33 got [8, 59] from that one).
    assert np.all((result.high - result.low) < 0.5 * (whole_high - whole_low))
    assert np.all((result.low <= result.counts) & (result.counts <= result.high))


def test_arrays_zones_and_video_frames_get_the_same_route_interval(crowd, shared_data: Path, tmp_path: Path) -> None:
    from counting.apply.api import count
    from counting.apply.zone_specs import parse_zone
    from counting.apply.zones import count_frames

    frame = _mall_frames(shared_data)[0]
    by_file = crowd.count_paths([frame])
    pixels = np.asarray(Image.open(frame).convert("RGB"))
    rows = count([pixels], model=crowd)
    assert rows[0]["low"] == pytest.approx(by_file.low[0], abs=1e-6)
    assert rows[0]["high"] == pytest.approx(by_file.high[0], abs=1e-6)
    (record,) = count_frames(crowd, [pixels], [parse_zone("left:0,0,0.5,0,0.5,1,0,1")])
    assert (record["low"], record["high"]) == pytest.approx((by_file.low[0], by_file.high[0]), abs=1e-6)
    prepared = [crowd.prepare_image(pixels)]
    counts, _, _, routes = crowd.count_prepared_scored(prepared, with_routes=True)
    assert list(routes) == ["mall"]
    np.testing.assert_allclose(crowd.intervals(counts, routes), (by_file.low, by_file.high), atol=1e-6)


def test_everyday_photos_get_the_detectors_or_the_general_route_interval(crowd, shared_data: Path) -> None:
    photos = sorted((shared_data / "coco-voc20" / "VOCdevkit" / "VOC2007" / "JPEGImages").glob("*.jpg"))[:8]
    result = crowd.count_paths(photos)
    probes, ok, _ = crowd.probe_paths(photos)
    people = [None if by == "density" else "boxes" for by in result.counted_by]
    routes = crowd.interval_routes(probes, people)
    assert ok.all() and "detector" in set(routes) and set(routes) <= {"general", "detector"}
    assert list(routes == "detector") == list(result.counted_by == "detector")
    for route in set(routes):
        mine = routes == route
        np.testing.assert_allclose(
            (result.low[mine], result.high[mine]), crowd.interval.by_route[route].interval(result.counts[mine])
        )
    # The detector's route is calibrated on the sparse photos the gate sent it: a photo it counts
    # 2 people gets a few people either side, not the +/- 7 of every route together.
    detector = crowd.interval.by_route["detector"]
    assert (
        np.diff(detector.interval(np.array([2.0])), axis=0)[0, 0]
        < 0.7 * np.diff(crowd.interval.interval(np.array([2.0])), axis=0)[0, 0]
    )


def test_the_general_route_is_calibrated_on_the_dense_photos_it_counts(crowd) -> None:
    """ShanghaiTech A's photos take the general route; one interval for every route covered 68 %
    of its validation photos, the general route's own 91 % (docs/density.md)."""
    general = crowd.interval.by_route["general"]
    record = crowd.training["specialists"]["intervals"]
    assert general.n_calibration == record["general"]["pictures"] > 200
    assert record["detector"]["pictures"] > 300 and record["mall"]["pictures"] == 200
    at = np.array([400.0])
    assert np.diff(general.interval(at), axis=0)[0, 0] > 1.5 * np.diff(crowd.interval.interval(at), axis=0)[0, 0]


def test_a_model_without_route_intervals_has_no_routes(crowd) -> None:
    from dataclasses import replace

    plain = replace(crowd, interval=replace(crowd.interval, by_route={}))
    assert plain.interval_routes(np.zeros((3, plain.familiarity_dim()))) is None
    assert crowd.interval_routes(None) is None
    # Without specialists every picture the head counts is on the general route.
    alone = replace(crowd, density_head=replace(crowd.density_head, specialists={}, router=None))
    routes = alone.interval_routes(np.zeros((3, alone.familiarity_dim())), [None, "boxes", None])
    assert list(routes) == ["general", "detector", "general"]


def test_video_frames_and_their_smoothed_counts_get_the_route_interval(
    crowd, shared_data: Path, tmp_path: Path
) -> None:
    import cv2

    from counting.apply.video import count_video, open_video_writer

    path = tmp_path / "mall.mp4"
    frames = [np.asarray(Image.open(frame).convert("RGB")) for frame in _mall_frames(shared_data)]
    writer = open_video_writer(path, 5.0, (frames[0].shape[1], frames[0].shape[0]))
    for frame in frames:
        writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    writer.release()
    run = count_video(crowd, str(path), smooth_window=2, keep_records=True)
    assert len(run.records) == 2
    on_route = crowd.interval.by_route["mall"]
    for record in run.records:
        low, high = on_route.interval(np.array([record["count"]]))
        assert (record["low"], record["high"]) == pytest.approx((low[0], high[0]), abs=1e-3)
        low, high = on_route.interval(np.array([record["smoothed"]]))
        assert (record["smoothed_low"], record["smoothed_high"]) == pytest.approx((low[0], high[0]), abs=1e-3)
