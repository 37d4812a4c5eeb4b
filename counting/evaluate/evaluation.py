"""Figures of a counting model on a dataset's test split.

Crowd datasets: MAE, MSE (squared) and RMSE of per-frame counts. VOC: mRMSE and m-relRMSE over
the classes with predictions clipped at 0 and rounded (Chattopadhyay et al. 2017). Calibrated
models add the interval's empirical coverage and mean width; sequences (UCSD, Mall) add the
same figures after offline temporal smoothing with a *centred* window (frames before and after
each frame, so no live video run can give them), reported separately from the per-frame ones and
labelled ``counting.apply.smoothing.centred_label``. Live figures (``counting video --smooth N``, a
causal filter) come from ``scripts/smoothing_study.py``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from counting.apply.smoothing import centred_label, smooth_counts
from counting.core import defaults
from counting.core.metrics import crowd_metrics, voc_metrics
from counting.evaluate.overlap import TrainingOverlap, training_overlap


def contiguous_runs(indices: np.ndarray) -> list[np.ndarray]:
    """Positions (into ``indices``, sorted by index) of each run of consecutive frame numbers."""
    order = np.argsort(indices, kind="stable")
    breaks = np.flatnonzero(np.diff(np.asarray(indices)[order]) != 1) + 1
    return np.split(order, breaks)


def smooth_sequence(counts: np.ndarray, indices: np.ndarray, window: int) -> np.ndarray:
    """Centred moving mean within each run of consecutive frames (never across a gap in the split).

    Offline only: each frame's value uses ``window // 2`` later frames."""
    smoothed = np.array(counts, dtype=float, copy=True)
    for run in contiguous_runs(np.asarray(indices)):
        smoothed[run] = smooth_counts(smoothed[run], window)
    return smoothed


@dataclass
class EvaluationResult:
    """Figures and per-image predictions of one evaluation."""

    dataset: str
    split: str
    model: str
    metrics: dict
    sequence_metrics: dict | None
    interval_metrics: dict | None
    sources: list[str]
    indices: np.ndarray
    y_true: np.ndarray
    y_pred: np.ndarray
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    y_smoothed: np.ndarray | None = None
    class_names: list[str] | None = None
    errors: dict[str, str] = field(default_factory=dict)
    smoothing_window: int | None = None  # of the centred (offline) mean behind sequence_metrics
    # Which of ``sources`` the model was trained on (None: not looked at, e.g. a result built by hand).
    overlap: TrainingOverlap | None = None

    @property
    def overlap_note(self) -> str | None:
        """Why the figures are not held-out ones ("trained on 200 of the 400 test pictures ..."), or None."""
        return None if self.overlap is None else self.overlap.note()

    @property
    def marks_training_pictures(self) -> bool:
        """Whether the predictions CSV gets an ``in_training`` column (some test pictures were
        trained on)."""
        return self.overlap is not None and self.overlap.count > 0

    @property
    def is_voc_like(self) -> bool:
        return self.class_names is not None

    @property
    def smoothing(self) -> str | None:
        """What ``sequence_metrics`` were measured on, e.g. "centred 5-frame mean"; None without."""
        return centred_label(self.smoothing_window) if self.smoothing_window else None

    def to_dict(self) -> dict:
        """Figures only (no per-image rows), JSON-ready."""
        return {
            "dataset": self.dataset,
            "split": self.split,
            "model": self.model,
            "per_frame": self.metrics,
            "sequence": self.sequence_metrics,
            "smoothing_window": self.smoothing_window,
            "smoothing": self.smoothing,
            "interval": self.interval_metrics,
            "skipped_images": self.errors,
        } | (self.overlap.to_dict() if self.overlap is not None else {})

    def write_json(self, path: str | Path) -> None:
        from counting.core.files import atomic_write_text, dumps_json

        atomic_write_text(path, dumps_json(self.to_dict()) + "\n")

    def write_predictions_csv(self, path: str | Path) -> None:
        """One row per image: source, index, true and predicted counts (+ interval, smoothed)."""
        from counting.core.files import atomic_write

        with atomic_write(path, newline="") as handle:
            writer = csv.writer(handle)
            if self.is_voc_like:
                names = self.class_names or []
                header = ["source", "index"] + [f"true_{n}" for n in names] + [f"pred_{n}" for n in names]
                writer.writerow(header + self._training_header())
                for k, source in enumerate(self.sources):
                    writer.writerow(
                        [source, int(self.indices[k])]
                        + [f"{v:g}" for v in self.y_true[k]]
                        + [f"{v:.3f}" for v in self.y_pred[k]]
                        + self._training_cell(k)
                    )
                return
            header = ["source", "index", "true", "pred"]
            header += ["low", "high"] if self.low is not None else []
            header += ["smoothed"] if self.y_smoothed is not None else []
            writer.writerow(header + self._training_header())
            for k, source in enumerate(self.sources):
                row = [source, int(self.indices[k]), f"{self.y_true[k]:g}", f"{self.y_pred[k]:.3f}"]
                if self.low is not None and self.high is not None:
                    row += [f"{self.low[k]:.3f}", f"{self.high[k]:.3f}"]
                if self.y_smoothed is not None:
                    row.append(f"{self.y_smoothed[k]:.3f}")
                writer.writerow(row + self._training_cell(k))

    def _training_header(self) -> list[str]:
        return ["in_training"] if self.marks_training_pictures else []

    def _training_cell(self, k: int) -> list[str]:
        """1 where the model was trained on picture ``k`` (its figure is not held-out), else 0."""
        if not self.marks_training_pictures or self.overlap is None:
            return []
        return [str(int(self.overlap.in_training[k]))]


def score_predictions(
    model: Any,
    y_true: np.ndarray,
    y_pred: np.ndarray,
    indices: np.ndarray,
    is_sequence: bool,
    smoothing_window: int = defaults.SMOOTHING_WINDOW,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[dict, dict | None, dict | None, np.ndarray | None]:
    """(per-frame figures, sequence figures, interval figures, smoothed counts).

    The sequence figures are of the centred ``smoothing_window``-frame mean (offline). The
    interval figures are of ``bounds`` (``(low, high)`` as counting gave them: a model with
    per-route intervals gives each picture its route's), else of the model's interval."""
    if model.is_multi_output:
        return voc_metrics(y_true, y_pred, model.class_names), None, None, None
    figures = crowd_metrics(y_true, y_pred)
    interval = None
    if model.interval is not None and bounds is not None:
        interval = model.interval.figures(y_true, *bounds)
    elif model.interval is not None:
        interval = model.interval.evaluate(y_true, y_pred)
    sequence, smoothed = None, None
    if is_sequence and smoothing_window > 1 and len(y_true) > 1:
        smoothed = smooth_sequence(y_pred, indices, smoothing_window)
        sequence = crowd_metrics(y_true, smoothed)
    return figures, sequence, interval, smoothed


def evaluate_model(
    model: Any,
    dataset: Any,
    cache: Any = None,
    smoothing_window: int = defaults.SMOOTHING_WINDOW,
    weights: str | Path | None = None,
    batch_size: int = defaults.BATCH_SIZE,
    progress: bool = False,
    split: str | None = None,
    extract: Any = None,
    cluster: str | None = None,
) -> EvaluationResult:
    """Count the images of ``dataset`` (already the test subset) and score them.

    ``split`` is the split string the dataset was loaded with (for the record). ``cluster``
    (``local:N`` or a scheduler's address) counts the pictures on a Dask cluster, any model kind
    (counting.apply.pictures); ``extract`` replaces ``extract_features`` for a descriptor model
    that is not saved yet (``train --evaluate``).
    """
    from counting.core.errors import DatasetError

    samples = list(dataset.samples)
    if not samples:
        raise DatasetError(
            f"{dataset.root}: the test split of {dataset.name} is empty; choose a split with test images (--split)"
        )
    if model.is_multi_output != (dataset.class_names is not None):
        kind = "per-class" if model.is_multi_output else "single"
        raise DatasetError(f"{dataset.root}: {model.name} predicts {kind} counts, which {dataset.name} does not have")
    # Looked at before counting: cheap (paths, sizes, a few hashes) beside counting the pictures.
    overlap = training_overlap(model, dataset.name, [sample.path for sample in samples], dataset.root)
    options = {"cache": cache, "weights": weights, "batch_size": batch_size, "progress": progress}
    if cluster is not None:
        from counting.apply.pictures import count_pictures

        result, _ = count_pictures(model, [str(sample.path) for sample in samples], cluster=cluster, **options)
    else:
        result = model.count_paths([sample.path for sample in samples], extract=extract, **options)
    ok = result.ok
    if not np.any(ok):  # every image failed alike (e.g. a model's ROI mask of another size)
        first = next(iter(result.errors.values()), "no image could be counted")
        raise DatasetError(f"{dataset.root}: none of the {len(samples)} test images could be counted ({first})")
    y_true = np.asarray(dataset.counts, dtype=float)[ok]
    y_pred = result.counts[ok]
    indices = np.array([sample.index for sample in samples])[ok]
    is_sequence = dataset.name in defaults.SEQUENCE_DATASETS
    bounds = None if result.low is None or result.high is None else (result.low[ok], result.high[ok])
    figures, sequence, interval, smoothed = score_predictions(
        model, y_true, y_pred, indices, is_sequence, smoothing_window, bounds
    )
    return EvaluationResult(
        dataset=dataset.name,
        split=split or dataset.split,
        model=model.name,
        metrics=figures,
        sequence_metrics=sequence,
        interval_metrics=interval,
        sources=[str(sample.path) for sample, good in zip(samples, ok) if good],
        indices=indices,
        y_true=y_true,
        y_pred=y_pred,
        low=None if result.low is None else result.low[ok],
        high=None if result.high is None else result.high[ok],
        y_smoothed=smoothed,
        class_names=model.class_names,
        errors=result.errors,
        smoothing_window=smoothing_window if sequence is not None else None,
        overlap=overlap.kept(ok),
    )
