"""Evaluation figures and temporal smoothing, against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from counting.apply.smoothing import StreamingSmoother, smooth_counts
from counting.core.metrics import crowd_metrics, voc_metrics
from counting.evaluate.evaluation import contiguous_runs, smooth_sequence


def test_crowd_metrics_by_hand() -> None:
    figures = crowd_metrics(np.array([10.0, 20.0, 30.0, 40.0]), np.array([12.0, 17.0, 30.0, 41.0]))
    # errors 2, -3, 0, 1 -> MAE 6/4, MSE 14/4
    assert figures == pytest.approx({"n": 4, "mae": 1.5, "mse": 3.5, "rmse": np.sqrt(3.5)})


def test_voc_metrics_clip_and_round_like_chattopadhyay() -> None:
    truth = np.array([[0.0, 2.0], [1.0, 0.0], [3.0, 1.0]])
    predicted = np.array([[-0.7, 2.4], [0.6, 0.2], [1.4, 1.6]])
    # clipped+rounded: [[0, 2], [1, 0], [1, 2]] -> class errors [0, 0, -2] and [0, 0, 1]
    figures = voc_metrics(truth, predicted, ["a", "b"])
    rmse_a, rmse_b = np.sqrt(4 / 3), np.sqrt(1 / 3)
    assert figures["per_class_rmse"] == pytest.approx({"a": rmse_a, "b": rmse_b})
    assert figures["mrmse"] == pytest.approx((rmse_a + rmse_b) / 2)
    # relative: each squared error divided by (true + 1): a: 4/4 at true 3; b: 1/2 at true 1
    assert figures["m_rel_rmse"] == pytest.approx((np.sqrt(1 / 3) + np.sqrt(0.5 / 3)) / 2)


def test_centred_smoothing_mean_and_median() -> None:
    counts = np.array([10.0, 10.0, 40.0, 10.0, 10.0])
    assert smooth_counts(counts, 3, "median") == pytest.approx([10, 10, 10, 10, 10])
    assert smooth_counts(counts, 3, "mean") == pytest.approx([10, 20, 20, 20, 10])
    assert smooth_counts(counts, 1) == pytest.approx(counts)
    multi = smooth_counts(np.column_stack([counts, 2 * counts]), 3, "mean")
    assert multi[:, 1] == pytest.approx(2 * multi[:, 0])
    with pytest.raises(ValueError, match="smoothing method"):
        smooth_counts(counts, 3, "gaussian")


def test_smoothing_never_crosses_a_gap_in_the_frame_numbers() -> None:
    indices = np.array([5, 3, 4, 100, 101, 102])
    counts = np.array([30.0, 10.0, 20.0, 50.0, 50.0, 80.0])
    runs = contiguous_runs(indices)
    assert [sorted(indices[run].tolist()) for run in runs] == [[3, 4, 5], [100, 101, 102]]
    smoothed = smooth_sequence(counts, indices, 3)
    # run 3,4,5 has counts 10,20,30 -> 40/3, 20, 80/3 (edges repeat the nearest frame)
    assert smoothed[[1, 2, 0]] == pytest.approx([40 / 3, 20, 80 / 3])
    assert smoothed[3:] == pytest.approx([50, 60, 70])


def test_streaming_smoother_is_causal() -> None:
    smoother = StreamingSmoother(3)
    assert [smoother.update(v) for v in (3.0, 6.0, 9.0, 30.0)] == pytest.approx([3, 4.5, 6, 15])
    median = StreamingSmoother(3, "median")
    assert [median.update(v) for v in (1.0, 100.0, 2.0, 3.0)] == pytest.approx([1, 50.5, 2, 3])


def test_voc_metrics_relative_and_nonzero_variants_by_hand() -> None:
    truth = np.array([[1.0, 0, 0], [2, 1, 0], [0, 0, 1], [3, 2, 0]])
    # Rounded: [1,0,0] [1,1,0] [0,1,1] [3,2,0]: one person missed (true 2), one car added (true 0).
    predicted = truth + np.array([[0.4, 0.2, -0.3], [-0.6, 0.1, 0.2], [0.2, 0.7, -0.2], [0.1, -0.2, 0.1]])
    figures = voc_metrics(truth, predicted, ["person", "car", "dog"])
    person = {"rmse": np.sqrt(1 / 4), "rel": np.sqrt((1 / 3) / 4), "nz": np.sqrt(1 / 3), "rel_nz": np.sqrt(1 / 9)}
    car = {"rmse": 0.5, "rel": 0.5, "nz": 0.0, "rel_nz": 0.0}
    assert figures["mrmse"] == pytest.approx((person["rmse"] + car["rmse"]) / 3)
    assert figures["m_rel_rmse"] == pytest.approx((person["rel"] + car["rel"]) / 3)
    # Non-zero variant: each class over the images that hold it (person 3, car 2, dog 1 images).
    assert figures["mrmse_nz"] == pytest.approx((person["nz"] + car["nz"]) / 3)
    assert figures["m_rel_rmse_nz"] == pytest.approx((person["rel_nz"] + car["rel_nz"]) / 3)
    assert figures["per_class_images"] == {"person": 3, "car": 2, "dog": 1}
    assert figures["per_class_rel_rmse"]["person"] == pytest.approx(person["rel"])
    assert figures["per_class_rmse_nz"]["car"] == 0.0


def test_voc_nonzero_figures_leave_out_classes_no_image_holds() -> None:
    truth = np.array([[2.0, 0], [0, 0]])
    figures = voc_metrics(truth, np.array([[1.0, 1.0], [0.0, 0.0]]), ["a", "b"])
    assert figures["per_class_rmse_nz"] == {"a": 1.0, "b": None}
    assert figures["mrmse_nz"] == pytest.approx(1.0)  # b has no image with it: not averaged in
    assert figures["mrmse"] == pytest.approx((np.sqrt(0.5) + np.sqrt(0.5)) / 2)
