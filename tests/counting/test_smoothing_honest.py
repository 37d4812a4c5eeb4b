"""Issue 24, honest smoothing: a count is drawn and written only beside its own interval; the live
filter is causal and does not lag a steady change; offline figures say they use a centred window."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

import counting.apply.video as video_module
from counting.apply.smoothing import (
    CHOSEN_SPAN,
    CausalSmoother,
    StreamingSmoother,
    causal_label,
    causal_smooth,
    centred_label,
    smooth_counts,
)
from counting.apply.video import count_video, overlay_label, overlay_note
from counting.evaluate.evaluation import EvaluationResult, score_predictions
from counting.evaluate.report import figure_rows
from counting.heads.results import CountBatch
from counting.heads.uncertainty import ConformalInterval
from counting.model.counting_model import default_model_path, load_model

LABEL = re.compile(r"(count|smoothed) (-?\d+\.\d) \[(\d+)-(\d+)\]")


def drawn_pair(label: str) -> tuple[str, float, int, int]:
    match = LABEL.fullmatch(label)
    assert match, label
    return match[1], float(match[2]), int(match[3]), int(match[4])


# -- the live filter ---------------------------------------------------------------------------


@pytest.mark.parametrize("span", [2, 5, CHOSEN_SPAN])
def test_causal_filter_output_at_t_depends_only_on_frames_up_to_t(span: int) -> None:
    rng = np.random.default_rng(0)
    counts = 30 + rng.normal(0, 4, 60)
    smoothed = causal_smooth(counts, span)
    for t in (0, 1, 7, 30, 58):
        changed = counts.copy()
        changed[t + 1 :] = rng.uniform(0, 100, len(counts) - t - 1)  # another future
        assert causal_smooth(changed, span)[: t + 1] == pytest.approx(smoothed[: t + 1], abs=1e-12)
    # the streaming object gives the same values, one frame at a time
    smoother = CausalSmoother(span)
    assert [smoother.update(value) for value in counts] == pytest.approx(smoothed)
    # the offline centred mean is not causal: that is why it is never used live
    changed = counts.copy()
    changed[31:] += 50
    assert smooth_counts(changed, 5)[30] != pytest.approx(smooth_counts(counts, 5)[30])


def test_causal_filter_follows_a_steady_change_where_a_trailing_mean_lags() -> None:
    ramp = np.arange(80, dtype=float) * 0.5  # people arriving at a steady rate
    brown = causal_smooth(ramp, CHOSEN_SPAN)
    trailing = StreamingSmoother(CHOSEN_SPAN)
    lagged = np.array([trailing.update(value) for value in ramp])
    assert abs(brown[-1] - ramp[-1]) < 0.01
    assert ramp[-1] - lagged[-1] == pytest.approx(0.5 * (CHOSEN_SPAN - 1) / 2)  # (N-1)/2 frames late
    assert causal_smooth(np.full(10, 17.0), CHOSEN_SPAN) == pytest.approx(np.full(10, 17.0))
    assert causal_smooth(ramp, 1) == pytest.approx(ramp)  # span 1: off
    # never a negative count, even when the trend overshoots a fall to zero
    assert causal_smooth(np.r_[np.full(10, 40.0), np.zeros(10)], 3).min() >= 0.0
    # one value per class
    per_class = causal_smooth(np.column_stack([ramp, 2 * ramp]), 4)
    assert per_class[:, 1] == pytest.approx(2 * per_class[:, 0])
    with pytest.raises(ValueError, match="span"):
        CausalSmoother(0)


# -- the overlay and the rows ------------------------------------------------------------------


def test_overlay_label_draws_a_count_with_its_own_interval_rounded_outwards() -> None:
    raw = {"count": 34.9, "low": 29.6, "high": 40.2}
    assert overlay_label(raw) == "count 34.9 [29-41]"
    # the old overlay drew "count 25.3 [29-40]": the smoothed count beside the raw interval
    smoothed = raw | {"smoothed": 25.3, "smoothed_low": 20.1, "smoothed_high": 30.6}
    assert overlay_label(smoothed) == "smoothed 25.3 [20-31]"
    # rounding the ends to the nearest person could push the count out; outwards never does
    assert overlay_label({"count": 29.52, "low": 29.5, "high": 35.5}) == "count 29.5 [29-36]"
    assert overlay_label({"count": 31.0}) == "count 31.0"  # uncalibrated model: no interval
    # A count its record marks unreliable says so under it, as count's table does.
    marked = {"count": 834.44, "low": 0.0, "high": 1115.0, "unfamiliar": False, "disputed": True}
    assert overlay_label(marked) == "count 834.4 [0-1115]" and overlay_note(marked) == "disputed"
    assert overlay_note(marked | {"unfamiliar": True}) == "unlike training, disputed"
    assert overlay_note({"count": 31.0, "unfamiliar": None, "disputed": False}) is None
    per_class = {"count_person": 2.0, "count_dog": 1.0, "smoothed_person": 1.5, "smoothed_dog": 0.5}
    assert overlay_label(per_class, ["person", "dog"]) == "smoothed 2.0"


class JumpingModel:
    """Counts 10 on dark frames and 40 on bright ones, with a calibrated interval of ±2."""

    class_names = None
    density_head = None
    sparse_gate = None

    def __init__(self) -> None:
        self.interval = ConformalInterval(level=0.9, quantile=np.asarray(2.0), scale="absolute")

    def get_backbone(self, weights=None):
        return SimpleNamespace(runtime="torch")

    def prepare_image(self, image, source=None, bgr=True):
        return float(np.mean(image))

    def count_batch(self, prepared, weights=None, with_density=False):
        counts = np.array([40.0 if value > 127 else 10.0 for value in prepared])
        return CountBatch(counts, *self.intervals(counts))

    def intervals(self, counts):
        return self.interval.interval(counts)


@pytest.fixture
def jumping_video(tmp_path: Path) -> Path:
    path = tmp_path / "jump.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (64, 48))
    for value in [0] * 5 + [255] * 5 + [0] * 4:
        writer.write(np.full((48, 64, 3), value, np.uint8))
    writer.release()
    return path


def test_video_rows_and_overlay_never_put_a_smoothed_count_beside_a_raw_interval(
    jumping_video: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[str] = []
    real_annotate = video_module.annotate
    monkeypatch.setattr(
        video_module, "annotate", lambda image, text, note=None: drawn.append(text) or real_annotate(image, text, note)
    )
    out = tmp_path / "counts.csv"
    run = count_video(
        JumpingModel(), str(jumping_video), smooth_window=3, records_path=out, output_video=tmp_path / "a.avi"
    )
    assert run.frames == 14 and len(drawn) == 14
    with open(out, newline="") as handle:
        rows = [{key: float(value) for key, value in row.items() if value != ""} for row in csv.DictReader(handle)]
    assert list(rows[0]) == ["frame", "time_s", "count", "low", "high", "smoothed", "smoothed_low", "smoothed_high"]
    with open(out, newline="") as handle:  # a model without familiarity: its columns are there, empty
        assert next(csv.reader(handle))[-2:] == ["familiarity", "unfamiliar"]
    counts = np.array([row["count"] for row in rows])
    assert counts.tolist() == [10.0] * 5 + [40.0] * 5 + [10.0] * 4
    smoothed = np.array([row["smoothed"] for row in rows])
    assert smoothed == pytest.approx(causal_smooth(counts, 3), abs=1e-3)
    # the old overlay drew e.g. "count 25.0 [38-42]": a smoothed count beside the raw interval
    assert [label for label in drawn if not drawn_pair(label)[2] <= drawn_pair(label)[1] <= drawn_pair(label)[3]] == []
    stepping = 0
    for row, label in zip(rows, drawn):
        assert row["low"] <= row["count"] <= row["high"]
        assert row["smoothed_low"] <= row["smoothed"] <= row["smoothed_high"]
        assert row["smoothed_high"] - row["smoothed_low"] == pytest.approx(4.0, abs=1e-3)  # its own interval
        kind, value, low, high = drawn_pair(label)
        assert low <= value <= high, label
        assert kind == "smoothed" and value == pytest.approx(row["smoothed"], abs=0.05)
        stepping += not row["low"] <= row["smoothed"] <= row["high"]
    assert stepping >= 2  # frames where the smoothed count lies outside the raw interval do occur


@pytest.mark.parametrize("smooth", [1, CHOSEN_SPAN])
def test_default_model_on_real_mall_frames_draws_every_count_inside_its_own_interval(
    mall_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, smooth: int
) -> None:
    path = tmp_path / "mall.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (640, 480))
    for frame in sorted((mall_root / "frames").glob("*.jpg"))[600:624]:  # frames 601-624
        writer.write(cv2.imread(str(frame)))
    writer.release()
    drawn: list[str] = []
    monkeypatch.setattr(video_module, "annotate", lambda image, text, note=None: drawn.append(text) or image)
    model = load_model(default_model_path().parent / "default.npz")  # the Mall model (fast)
    run = count_video(model, str(path), smooth_window=smooth, output_video=tmp_path / "a.avi", keep_records=True)
    assert run.frames == 24
    key = "smoothed" if smooth > 1 else "count"
    low_key, high_key = ("smoothed_low", "smoothed_high") if smooth > 1 else ("low", "high")
    for record, label in zip(run.records, drawn, strict=True):
        assert record[low_key] <= record[key] <= record[high_key]
        kind, value, low, high = drawn_pair(label)
        assert kind == key and low <= value <= high


# -- labels of the offline figures -------------------------------------------------------------


def test_offline_figures_are_labelled_as_a_centred_window() -> None:
    assert centred_label(5) == "centred 5-frame mean"
    assert "causal" in causal_label(CHOSEN_SPAN) and str(CHOSEN_SPAN) in causal_label(CHOSEN_SPAN)
    truth = np.linspace(20, 40, 30)
    predicted = truth + np.random.default_rng(1).normal(0, 2, 30)
    indices = np.arange(601, 631)
    model = SimpleNamespace(is_multi_output=False, class_names=None, interval=None)
    figures, sequence, interval, smoothed = score_predictions(model, truth, predicted, indices, True, 5)
    evaluation = EvaluationResult(
        "mall", "train=1-600,test=601-630", "m", figures, sequence, interval, [], indices, truth, predicted,
        y_smoothed=smoothed, smoothing_window=5,
    )  # fmt: skip
    assert evaluation.to_dict()["smoothing"] == "centred 5-frame mean"
    rows, _ = figure_rows(SimpleNamespace(), evaluation)
    assert [label for label, _ in rows] == ["this model, per frame", "this model, centred 5-frame mean (offline)"]
    stored = SimpleNamespace(
        test_metrics=evaluation.to_dict(), dataset={"split": evaluation.split}, validation_metrics={}
    )
    rows, _ = figure_rows(stored, None)
    assert rows[1][0] == "this model, centred 5-frame mean (offline)"
    # a model file written before the label existed still gets it from its window
    older = SimpleNamespace(
        test_metrics={"per_frame": figures, "sequence": sequence, "smoothing_window": 3}, dataset={"split": "s"}
    )
    assert figure_rows(older, None)[0][1][0] == "this model, centred 3-frame mean (offline)"
