"""A multi-class model's interval recalibrated per class group, its counts unchanged.

``train`` now calibrates a per-class model's intervals per group of classes on the out-of-fold
pairs with objects (counting.heads.uncertainty.fit_class_group_interval). A model trained before
that keeps its regressor: :func:`recalibrate_class_intervals` makes its train images' rows again
(the feature cache makes this cheap), refits the AGP once per fold exactly as ``train`` did
(same folds, seed and settings: the recorded out-of-fold figures come out again, which is
checked), and replaces the interval section alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from counting.core import defaults
from counting.core.errors import TrainingError
from counting.core.metrics import voc_metrics
from counting.data.datasets.splits import cv_folds
from counting.features.layouts import model_features
from counting.heads.multiclass import apply_gate, forward_transform
from counting.heads.registry import head_kind_for
from counting.heads.uncertainty import fit_class_group_interval
from counting.model.counting_model import CountingModel
from counting.train.pipeline import (
    CV_BLOCK,
    FittedRows,
    TrainingConfig,
    class_interval_record,
    held_out_predictions,
    plan_training,
)

# The recomputed out-of-fold mRMSE may differ from the recorded one by BLAS sum order alone.
REPRODUCED = 1e-4


@dataclass
class OutOfFoldCounts:
    """The train images' true counts and out-of-fold counts ``(n, K)``, as ``train`` calibrated on."""

    names: list[str]  # image file names
    truth: np.ndarray
    predicted: np.ndarray
    where: str
    in_sample: np.ndarray  # the model's own counts of the same images (it trained on them)


def config_of(model: CountingModel) -> TrainingConfig:
    """The TrainingConfig a model file records (its ``training`` section)."""
    known = {item.name for item in dataclasses.fields(TrainingConfig)}
    record = {key: value for key, value in (model.training or {}).items() if key in known}
    if record.get("grid") is not None:
        record["grid"] = tuple(record["grid"])
    if record.get("density_layers") is not None:
        record["density_layers"] = tuple(record["density_layers"])
    return TrainingConfig(**record)


def out_of_fold_counts(
    model: CountingModel,
    dataset: Any,
    *,
    cache: Any = None,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> OutOfFoldCounts:
    """The out-of-fold counts ``train`` calibrated ``model`` on (cross-validated models only),
    checked against the figures it recorded from them."""
    config = config_of(model)
    recorded = model.dataset or {}
    if not str(recorded.get("calibration", "")).startswith("cv"):
        raise TrainingError(f"{model.name}: calibrated on {recorded.get('calibration')!r}, not out of fold")
    plan = plan_training(dataset, config, cache=cache, progress=progress, log=log)
    rows = head_kind_for(config, plan.inputs.multi_output).rows(plan.inputs)
    if len(rows.samples) != recorded.get("n_train"):
        raise TrainingError(
            f"{dataset.root}: {len(rows.samples)} train images, the model learnt {recorded.get('n_train')}"
        )
    everything = np.arange(len(rows.samples))
    folds = cv_folds(rows.indices, defaults.CALIBRATION_FOLDS, plan.inputs.is_sequence, config.seed, CV_BLOCK)
    fitted = FittedRows(
        model.regressor, forward_transform(rows.counts, config.target_transform), everything, everything, folds, "cv", 0
    )
    predicted, where = held_out_predictions(model, plan, rows, fitted)
    in_sample = model.predict_features(model_features(plan.inputs.layout, rows.frame, rows.cells))
    if model.gate is not None:
        predicted = apply_gate(predicted, model.gate)
        where += ", gate thresholds chosen on them"
    _check_reproduced(model, rows.counts, predicted)
    names = [sample.path.name for sample in rows.samples]
    return OutOfFoldCounts(names, rows.counts, predicted, where, in_sample)


def _check_reproduced(model: CountingModel, truth: np.ndarray, predicted: np.ndarray) -> None:
    """The folds' refits must give the out-of-fold figures the model recorded: otherwise they are
    not the counts its interval was (and will be) calibrated on."""
    recorded = (model.validation_metrics or {}).get("mrmse")
    found = voc_metrics(truth, predicted, model.class_names)["mrmse"]
    if recorded is None or abs(found - float(recorded)) > REPRODUCED:
        raise TrainingError(
            f"{model.name}: the refitted folds give an out-of-fold mRMSE of {found:.6f}, "
            f"the model recorded {recorded} (another dataset, split or version of the code?)"
        )


def recalibrate_class_intervals(model: CountingModel, found: OutOfFoldCounts) -> CountingModel:
    """``model`` with its interval calibrated per class group on ``found`` (its out-of-fold
    counts), and what it was calibrated on in ``training.interval_calibration``; counts unchanged."""
    if not model.class_names:
        raise TrainingError(f"{model.name}: one count per picture, not per class")
    level = model.interval.level if model.interval is not None else defaults.INTERVAL_LEVEL
    interval = fit_class_group_interval(found.truth, found.predicted, level=level)
    training = dict(model.training or {})
    training.pop("interval_scale_widths", None)  # the old interval's choice of scale
    training["interval_calibration"] = class_interval_record(interval, found.truth, found.predicted, found.where)
    return replace(model, interval=interval, training=training)
