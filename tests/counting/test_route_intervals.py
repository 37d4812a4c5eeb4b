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
    batch = crowd.count_batch(prepared)
    assert list(batch.routes) == ["mall"]
    np.testing.assert_allclose(crowd.intervals(batch.counts, batch.routes), (by_file.low, by_file.high), atol=1e-6)
    np.testing.assert_allclose((batch.low, batch.high), (by_file.low, by_file.high), atol=1e-6)


def test_everyday_photos_get_the_detectors_or_the_general_route_interval(crowd, shared_data: Path) -> None:
    photos = sorted((shared_data / "coco-voc20" / "VOCdevkit" / "VOC2007" / "JPEGImages").glob("*.jpg"))[:8]
    result = crowd.count_paths(photos)
    probes, ok, _ = crowd.probe_paths(photos)
    people = [None if by == "density" else "boxes" for by in result.counted_by]
    routes = crowd.interval_routes(probes, people, result.counts)
    by_detector = np.isin(routes, ["detector", "detector-none"])
    assert ok.all() and by_detector.any() and set(routes) <= {"general", "detector", "detector-none"}
    assert list(by_detector) == list(result.counted_by == "detector")
    assert list(routes == "detector-none") == list(by_detector & (result.counts == 0))
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
    assert record["detector"]["pictures"] + record["detector-none"]["pictures"] > 300
    assert record["mall"]["pictures"] == 200
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


def test_pictures_the_detector_found_no_one_in_are_calibrated_apart(crowd) -> None:
    """Of the pictures the gate sent to the detector, those it found no one in make the
    ``detector-none`` route (docs/density.md, "No one found"), calibrated on them alone; a model
    without that route keeps them on ``detector``."""
    from dataclasses import replace

    from counting.train.crowd import route_intervals

    n = 80
    paths = [f"photo-{k}.jpg" for k in range(n)]
    probes = {path: np.zeros(crowd.familiarity_dim()) for path in paths}
    counts = np.where(np.arange(n) < 40, 0.0, 1.0 + np.arange(n) % 5)
    truth = counts + np.where(np.arange(n) % 2 == 0, 1.0, -1.0) * (counts > 0)  # one off where found
    truth[:2] = 3.0  # two of the 40 "no one found" pictures hold three people
    found, facts = route_intervals(crowd, {}, probes, None, (paths, truth, counts, np.ones(n, dtype=bool)))
    assert facts["detector-none"]["pictures"] == found["detector-none"].n_calibration == 40
    assert facts["detector"]["pictures"] == found["detector"].n_calibration == 40
    # 38 of 40 found no one truly hold no one: the 90 % interval at no one is [0, 0] ...
    np.testing.assert_allclose(found["detector-none"].interval(np.array([0.0])), [[0.0], [0.0]])
    # ... and the pictures it found people in, all one off, get one either side.
    low, high = found["detector"].interval(np.array([3.0]))
    assert low[0] <= 2.0 and high[0] >= 4.0 and high[0] - low[0] < 3.0
    # Too few pictures found no one: they stay on the detector's route, calibrated with the rest.
    few, few_facts = route_intervals(crowd, {}, probes, None, (paths[38:], truth[38:], counts[38:], np.ones(42, bool)))
    assert "detector-none" not in few and few["detector"].n_calibration == 42
    assert few_facts["detector-none"]["kept"].startswith("the detector route's interval")

    # Counting: a picture handed to the detector with a count of 0 takes the route where the model has it.
    split = replace(crowd, interval=replace(crowd.interval, by_route=dict(crowd.interval.by_route) | found))
    unsplit = replace(crowd, interval=replace(crowd.interval, by_route={"detector": found["detector"]}))
    statistics = np.zeros((3, crowd.familiarity_dim()))
    people, counted = [np.zeros((0, 5)), np.zeros((2, 5)), None], np.array([0.0, 2.0, 0.0])
    assert list(split.interval_routes(statistics, people, counted)[:2]) == ["detector-none", "detector"]
    assert split.interval_routes(statistics, people, counted)[2] not in ("detector", "detector-none")
    assert list(unsplit.interval_routes(statistics, people, counted)[:2]) == ["detector", "detector"]
    assert list(split.interval_routes(statistics, people)[:2]) == ["detector", "detector"]  # no counts given
    # The intervals split the detector's route by the counts they are given: a smoothed count of a
    # video is 0 only where every frame's was.
    detector = np.array(["detector", "detector", "detector-none"], dtype=object)
    low, high = split.intervals(np.array([0.0, 2.0, 0.4]), detector)
    np.testing.assert_allclose([low[0], high[0]], [0.0, 0.0])
    np.testing.assert_allclose(
        np.array([low[1:], high[1:]]), np.array(found["detector"].interval(np.array([2.0, 0.4])))
    )
    np.testing.assert_allclose(
        np.array(unsplit.intervals(np.array([0.0]), detector[:1])), found["detector"].interval(np.array([0.0]))
    )
