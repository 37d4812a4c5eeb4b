"""Split-conformal count intervals on generated data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from counting.core.errors import ModelFileError
from counting.heads.uncertainty import ConformalInterval, choose_scale, conformal_quantile, conformal_rank


def test_finite_sample_rank_is_ceil_n_plus_one_times_level() -> None:
    assert conformal_rank(99, 0.9) == 90  # (99+1)*0.9 = 90 exactly, despite float rounding
    assert conformal_rank(100, 0.9) == 91  # ceil(90.9)
    assert conformal_rank(9, 0.9) == 9
    assert conformal_rank(8, 0.9) == 9  # > n: infinite interval


def test_quantile_picks_that_order_statistic() -> None:
    scores = np.arange(1.0, 21.0)  # 1..20
    # n = 20, level 0.9: rank ceil(21*0.9) = ceil(18.9) = 19
    assert conformal_quantile(scores, 0.9) == 19.0
    assert conformal_quantile(scores, 0.5) == 11.0  # ceil(10.5)
    assert np.isinf(conformal_quantile(scores[:5], 0.9))


def test_interval_from_known_residuals() -> None:
    y_pred = np.full(20, 30.0)
    y_true = y_pred + np.arange(1.0, 21.0) * np.where(np.arange(20) % 2, 1, -1)
    interval = ConformalInterval.fit(y_true, y_pred, level=0.9)
    assert interval.quantile == 19.0
    low, high = interval.interval(np.array([30.0, 5.0]))
    np.testing.assert_allclose(low, [11.0, 0.0])  # lower end clipped at zero count
    np.testing.assert_allclose(high, [49.0, 24.0])
    assert interval.mean_width(np.array([30.0, 5.0])) == pytest.approx((38 + 24) / 2)


@pytest.mark.parametrize("scale", ["absolute", "sqrt", "linear"])
def test_coverage_over_many_seeds_is_nominal(scale: str) -> None:
    # Heteroscedastic counts: error sd grows with the count, as in crowds.
    level, n_cal, n_test, n_seeds = 0.9, 60, 200, 400
    coverages = []
    for seed in range(n_seeds):
        rng = np.random.default_rng(seed)
        truth = rng.uniform(5, 60, size=n_cal + n_test)
        predicted = truth + rng.normal(size=truth.shape) * (0.5 + 0.1 * truth)
        interval = ConformalInterval.fit(truth[:n_cal], predicted[:n_cal], level, scale)
        coverages.append(interval.coverage(truth[n_cal:], predicted[n_cal:]))
    mean_coverage = float(np.mean(coverages))
    # Theory: E[coverage] = rank / (n+1) = ceil(61*0.9)/61 = 55/61 = 0.9016, within Monte-Carlo noise.
    assert mean_coverage == pytest.approx(55 / 61, abs=0.006)
    assert mean_coverage >= level - 0.005


def test_too_small_calibration_gives_infinite_but_covering_interval() -> None:
    interval = ConformalInterval.fit([1.0, 2.0, 3.0], [1.5, 2.5, 2.0], level=0.9)
    assert np.isinf(interval.quantile)
    assert interval.coverage([100.0], [1.0]) == 1.0
    assert interval.to_dict()["quantile"] is None
    assert np.isinf(ConformalInterval.from_dict(interval.to_dict()).quantile)


def test_scaled_interval_is_narrower_when_errors_grow_with_the_count() -> None:
    rng = np.random.default_rng(1)
    truth = np.concatenate([rng.uniform(2, 10, 300), rng.uniform(80, 120, 100)])
    predicted = truth + rng.normal(size=truth.shape) * 0.2 * truth
    chosen, widths = choose_scale(truth, predicted, level=0.9)
    assert chosen in ("sqrt", "linear")
    assert widths[chosen] < 0.8 * widths["absolute"]


def test_choose_scale_keeps_constant_width_for_constant_errors() -> None:
    rng = np.random.default_rng(2)
    truth = rng.uniform(5, 100, 400)
    predicted = truth + rng.normal(size=truth.shape) * 3.0
    chosen, widths = choose_scale(truth, predicted, level=0.9)
    assert chosen == "absolute"
    assert widths["absolute"] <= min(widths.values())


def test_multi_output_gets_one_quantile_per_output() -> None:
    y_pred = np.zeros((10, 2))
    y_true = np.stack([np.arange(10.0), 10 * np.arange(10.0)], axis=1)
    interval = ConformalInterval.fit(y_true, y_pred, level=0.8, lower_bound=None)
    # rank ceil(11*0.8) = 9 -> 9th smallest of 0..9 is 8
    np.testing.assert_allclose(interval.quantile, [8.0, 80.0])
    low, high = interval.interval(np.zeros((1, 2)))
    np.testing.assert_allclose(low, [[-8.0, -80.0]])
    np.testing.assert_allclose(high, [[8.0, 80.0]])


def test_round_trip_through_json() -> None:
    rng = np.random.default_rng(3)
    truth = rng.uniform(10, 50, 50)
    predicted = truth + rng.normal(size=50)
    interval = ConformalInterval.fit(truth, predicted, level=0.9, scale="sqrt")
    restored = ConformalInterval.from_dict(json.loads(json.dumps(interval.to_dict())))
    assert restored.scale == "sqrt" and restored.level == 0.9 and restored.n_calibration == 50
    np.testing.assert_allclose(restored.interval(predicted), interval.interval(predicted))
    assert restored.evaluate(truth, predicted) == interval.evaluate(truth, predicted)


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="shape"):
        ConformalInterval.fit([1.0, 2.0], [1.0], level=0.9)
    with pytest.raises(ValueError, match="level"):
        ConformalInterval.fit([1.0, 2.0], [1.0, 2.0], level=1.5)
    with pytest.raises(ValueError, match="scale"):
        ConformalInterval.fit([1.0, 2.0], [1.0, 2.0], scale="cubic")
    with pytest.raises(ModelFileError, match="interval calibration"):
        ConformalInterval.from_dict({"level": 0.9})
    with pytest.raises(ModelFileError, match="scale"):
        ConformalInterval.from_dict({"level": 0.9, "quantile": 1.0, "scale": "cubic"})


def _two_routes(seed: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counts of two routes: "quiet" errs by sd 1, "noisy" by sd 8 (a specialist and the rest)."""
    rng = np.random.default_rng(seed)
    routes = np.where(rng.random(n) < 0.5, "quiet", "noisy").astype(object)
    truth = rng.uniform(10, 60, n)
    predicted = truth + rng.normal(size=n) * np.where(routes == "quiet", 1.0, 8.0)
    return truth, predicted, routes


def _routed(truth: np.ndarray, predicted: np.ndarray, routes: np.ndarray) -> ConformalInterval:
    whole = ConformalInterval.fit(truth, predicted, level=0.9)
    whole.by_route = {
        name: ConformalInterval.fit(truth[routes == name], predicted[routes == name], level=0.9)
        for name in ("quiet", "noisy")
    }
    return whole


def test_route_intervals_cover_each_route_where_one_interval_covers_only_on_average() -> None:
    per_route: dict[str, list[float]] = {"quiet": [], "noisy": []}
    pooled: dict[str, list[float]] = {"quiet": [], "noisy": []}
    for seed in range(200):
        truth, predicted, routes = _two_routes(seed, 300)
        interval = _routed(truth[:150], predicted[:150], routes[:150])
        test = slice(150, None)
        for name in per_route:
            mine = routes[test] == name
            per_route[name].append(interval.coverage(truth[test][mine], predicted[test][mine], routes[test][mine]))
            pooled[name].append(interval.coverage(truth[test][mine], predicted[test][mine]))
    for name in per_route:
        assert np.mean(per_route[name]) == pytest.approx(0.9, abs=0.02)
    # One interval for both: the quiet route's intervals are far too wide, the noisy one's too narrow.
    assert np.mean(pooled["quiet"]) > 0.99 and np.mean(pooled["noisy"]) < 0.85


def test_routes_choose_the_interval_and_unknown_routes_keep_the_whole() -> None:
    truth, predicted, routes = _two_routes(0, 400)
    interval = _routed(truth, predicted, routes)
    at = np.array([30.0, 30.0, 30.0, 30.0])
    low, high = interval.interval(at, np.array(["quiet", "noisy", "general", None], dtype=object))
    widths = high - low
    assert widths[0] < widths[2] < widths[1]  # the whole's width lies between the routes'
    assert widths[3] == widths[2]
    np.testing.assert_allclose(interval.interval(at), interval.interval(at, np.array(["x"] * 4, dtype=object)))
    assert interval.mean_width(at[:1], np.array(["quiet"])) == pytest.approx(widths[0])
    with pytest.raises(ValueError, match="3 routes for 4 predictions"):
        interval.interval(at, np.array(["quiet"] * 3))


def test_route_intervals_round_trip_through_json() -> None:
    truth, predicted, routes = _two_routes(1, 200)
    interval = _routed(truth, predicted, routes)
    record = json.loads(json.dumps(interval.to_dict()))
    assert set(record["by_route"]) == {"quiet", "noisy"}
    restored = ConformalInterval.from_dict(record)
    np.testing.assert_allclose(restored.interval(predicted, routes), interval.interval(predicted, routes))
    assert restored.by_route["noisy"].n_calibration == int(np.sum(routes == "noisy"))
    assert "by_route" not in ConformalInterval.fit(truth, predicted).to_dict()  # files without routes unchanged
    with pytest.raises(ModelFileError, match="by_route"):
        ConformalInterval.from_dict(record | {"by_route": {"quiet": 3}})
