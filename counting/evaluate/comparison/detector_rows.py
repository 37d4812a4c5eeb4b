"""`compare -d voc --descriptor detector`: the detector's own count beside the regressors on its descriptors.

- ``detector-direct``: the detector's count (top-100 detections above a score threshold), one
  threshold for all classes chosen on the train images (mRMSE + m-relRMSE of their counts);
  a threshold per class (each class's train RMSE) was measured worse on the test part of
  coco-voc20 `random:0.25:0` (0.583 / 0.308 against 0.549 / 0.280: the rare classes' thresholds
  fit a handful of train photos);
- every regression method of the table, fitted on the detector descriptors of the train images
  (rows labelled with the descriptor), with the same target transform and gate as the others.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from counting.core.metrics import voc_metrics
from counting.evaluate.comparison.data import ComparisonData
from counting.evaluate.comparison.methods import MethodResult

__all__ = ["DIRECT_METHOD", "choose_direct_threshold", "detector_direct_row"]

DIRECT_METHOD = "detector-direct"


def choose_direct_threshold(features: np.ndarray, counts: np.ndarray) -> int:
    """Index into ``THRESHOLDS`` whose direct count has the lowest mRMSE + m-relRMSE on these images."""
    from counting.features.detector.descriptor import THRESHOLDS, threshold_counts

    scores = []
    for index in range(len(THRESHOLDS)):
        figures = voc_metrics(counts, threshold_counts(features, np.full(counts.shape[1], index)))
        scores.append(figures["mrmse"] + figures["m_rel_rmse"])
    return int(np.argmin(scores))


def detector_direct_row(
    train: np.ndarray, test: np.ndarray, data: ComparisonData, class_names: Sequence[str], spec: str = "detector"
) -> MethodResult:
    """The detector's direct count on the test images, its threshold chosen on the train images."""
    from counting.features.detector.descriptor import THRESHOLDS, threshold_counts

    result = MethodResult(
        method=DIRECT_METHOD,
        # The stretched input's row keeps its old label; another input names itself.
        label="Detector's own count (MB3-CenterNet, score threshold chosen on train)"
        + ("" if spec == "detector" else f" · {spec}"),
        features=f"descriptor {spec}",
        n_train=len(train),
        n_test=len(test),
    )
    started = time.perf_counter()
    index = choose_direct_threshold(train, data.train_counts)
    result.fit_seconds = time.perf_counter() - started
    predictions = threshold_counts(test, np.full(len(class_names), index))
    result.predict_seconds = 0.0
    result.predictions = predictions
    result.metrics = voc_metrics(data.test_counts, predictions, list(class_names))
    result.note = f"threshold {THRESHOLDS[index]:g}"
    return result
