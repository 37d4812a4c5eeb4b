"""`compare` on per-class counts (VOC): baselines and every regressor on the same descriptors.

Every row is scored with the VOC metrics of Chattopadhyay et al. (``counting.evaluate.evaluation.
voc_metrics``: mRMSE and m-relRMSE on all test images, and their non-zero variants). The same
target transform applies to every regressor; with ``gate`` each method gets its own per-class
thresholds, chosen on out-of-fold predictions of the train images (never the test images).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from counting.core import defaults
from counting.core.errors import CountingError
from counting.core.metrics import voc_metrics
from counting.evaluate.comparison.data import ComparisonData
from counting.evaluate.comparison.methods import FIT_ERRORS, MethodResult
from counting.evaluate.comparison.output import comparison_summary, published_record, write_table_files
from counting.evaluate.peers import FEATURE_PEERS, make_peer
from counting.evaluate.peers.errors import PeerUnavailable
from counting.features.descriptors import DETECTOR_KINDS
from counting.heads.multiclass import PerClassRegressor, TransformedRegressor, apply_gate, choose_gate

BASELINES: dict[str, str] = {
    "train-mean": "Train mean per class (baseline)",
    "always-0": "Always 0 (baseline)",
}
# Multi-output fits (one regressor, every class) unless named here: these fit one model per class.
PER_CLASS_ONLY: tuple[str, ...] = ("sparse-gp",)
PER_CLASS_SUFFIX = "-per-class"
DEFAULT_VOC_METHODS: tuple[str, ...] = (
    "train-mean",
    "always-0",
    "ridge",
    "gp",
    "sparse-gp",
    "center-gp",
    "agp-univariate",
    "agp-univariate-per-class",
    "agp-diagonal",
)
# Out-of-fold predictions of the train images that choose a method's gate thresholds.
GATE_FOLDS = 3
VOC_FIGURE_KEYS: tuple[str, ...] = ("mrmse", "m_rel_rmse", "mrmse_nz", "m_rel_rmse_nz")


def known_voc_methods() -> list[str]:
    return [*BASELINES, *FEATURE_PEERS, *(f"{name}{PER_CLASS_SUFFIX}" for name in FEATURE_PEERS)]


def check_voc_methods(methods: Sequence[str]) -> None:
    known = known_voc_methods()
    unknown = [name for name in methods if name not in known]
    if unknown:
        raise CountingError(
            f"--methods: unknown method {unknown[0]!r} for per-class counts (known: {', '.join(known)})"
        )


def voc_label(name: str) -> str:
    if name in BASELINES:
        return BASELINES[name]
    base = name.removesuffix(PER_CLASS_SUFFIX)
    label = FEATURE_PEERS[base].label
    if name.endswith(PER_CLASS_SUFFIX) or base in PER_CLASS_ONLY:
        return f"{label}, one fit per class"
    return f"{label}, one multi-output fit"


class _Constant:
    """The baselines as regressors: the train mean of each class, or 0."""

    def __init__(self, zero: bool) -> None:
        self.zero = zero

    def fit(self, X: np.ndarray, y: np.ndarray) -> _Constant:
        self.value_ = np.zeros(y.shape[1]) if self.zero else np.asarray(y, float).mean(axis=0)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.tile(self.value_, (len(X), 1))


def build_voc_method(name: str, n_centers: int, seed: int, n_features: int, n_rows: int, transform: str) -> Any:
    """An unfitted regressor of counts ``(n, K)`` for a method name (baselines fit raw counts)."""
    if name in BASELINES:
        return _Constant(zero=name == "always-0")
    base = name.removesuffix(PER_CLASS_SUFFIX)

    def make() -> Any:
        return make_peer(base, n_centers=n_centers, seed=seed, n_features=n_features, n_rows=n_rows)

    per_class = name.endswith(PER_CLASS_SUFFIX) or base in PER_CLASS_ONLY
    return TransformedRegressor(PerClassRegressor(make) if per_class else make(), transform)


def out_of_fold(build: Callable[[], Any], X: np.ndarray, y: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Predictions of every row from a model that did not see it (seeded random folds)."""
    order = np.random.default_rng(seed).permutation(len(X))
    predicted = np.zeros_like(np.asarray(y, dtype=float))
    for fold in np.array_split(order, folds):
        rest = np.setdiff1d(order, fold)
        predicted[fold] = build().fit(X[rest], y[rest]).predict(X[fold])
    return predicted


def run_voc_method(
    data: ComparisonData,
    name: str,
    class_names: list[str],
    n_centers: int = defaults.N_CENTERS,
    seed: int = defaults.SEED,
    transform: str = "none",
    gate: bool = False,
    features: tuple[np.ndarray, np.ndarray] | None = None,
    features_label: str = "whole frame",
) -> MethodResult:
    """Fit one method on the train descriptors, score it on the test descriptors
    (``features``: other (train, test) descriptors than the backbone's whole-frame ones)."""
    X, y = data.train_features, data.train_counts
    X_test = data.test_features
    if features is not None:
        X, X_test = features
    result = MethodResult(
        method=name, label=voc_label(name), features=features_label, n_train=len(X), n_test=len(data.test_counts)
    )

    def build() -> Any:
        return build_voc_method(name, n_centers, seed, X.shape[1], len(X), transform)

    started = time.perf_counter()
    try:
        model = build().fit(X, y)
        thresholds = None
        if gate and name not in BASELINES:
            thresholds = choose_gate(y, out_of_fold(build, X, y, GATE_FOLDS, seed))
        result.fit_seconds = time.perf_counter() - started
        started = time.perf_counter()
        predictions = apply_gate(np.clip(model.predict(X_test), 0.0, None), thresholds)
        result.predict_seconds = time.perf_counter() - started
    except (PeerUnavailable, *FIT_ERRORS) as error:
        return result.mark_failed(error)
    result.predictions = predictions
    result.metrics = voc_metrics(data.test_counts, predictions, class_names)
    if thresholds is not None:
        result.note = "gate " + ", ".join(f"{t:g}" for t in thresholds)
    return result


def run_voc_comparison(
    data: ComparisonData,
    class_names: list[str],
    methods: Sequence[str] = DEFAULT_VOC_METHODS,
    n_centers: int = defaults.N_CENTERS,
    seed: int = defaults.SEED,
    transform: str = "none",
    gate: bool = False,
    on_result: Callable[[MethodResult], None] | None = None,
) -> list[MethodResult]:
    """Every requested method on ``data`` (per-class counts), in order."""
    check_voc_methods(methods)
    results = []
    for name in methods:
        result = run_voc_method(data, name, class_names, n_centers, seed, transform, gate)
        results.append(result)
        if on_result is not None:
            on_result(result)
    # Further descriptors (--descriptor): the same methods on them, and the detector's own count.
    for spec, (train, test) in data.descriptor_features.items():
        if spec in DETECTOR_KINDS:
            from counting.evaluate.comparison.detector_rows import detector_direct_row

            results.append(detector_direct_row(train, test, data, class_names, spec))
            if on_result is not None:
                on_result(results[-1])
        for name in methods:
            if name in BASELINES:
                continue  # the same figures as above: they do not read descriptors
            result = run_voc_method(
                data, name, class_names, n_centers, seed, transform, gate, (train, test), f"descriptor {spec}"
            )
            result.label = f"{result.label} · {spec}"
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results


def voc_row(result: MethodResult) -> dict:
    """Flat CSV/JSON record of one row: the four VOC figures instead of MAE/MSE/RMSE."""
    record = {key: value for key, value in result.row().items() if key not in ("mae", "mse", "rmse")}
    record = {k: v for k, v in record.items() if not k.startswith("smoothed_")}
    for key in VOC_FIGURE_KEYS:
        value = result.metrics.get(key)
        record[key] = None if value is None else round(float(value), 4)
    return record


VOC_CSV_COLUMNS: tuple[str, ...] = (
    "source",
    "method",
    "label",
    "features",
    "status",
    *VOC_FIGURE_KEYS,
    "fit_seconds",
    "predict_seconds",
    "n_train",
    "n_test",
    "note",
)
VOC_TITLES = {
    "label": "method",
    "mrmse": "mRMSE",
    "m_rel_rmse": "m-relRMSE",
    "mrmse_nz": "mRMSE-nz",
    "m_rel_rmse_nz": "m-relRMSE-nz",
    "fit_seconds": "fit s",
    "predict_seconds": "predict s",
}
PUBLISHED_NOTE = "published on the VOC-2007 test images (different images from this split)"


def voc_published_rows(dataset: str = "voc") -> list[dict]:
    """Published VOC rows, one per method, with whichever of mRMSE / m-relRMSE the paper gives."""
    from counting.evaluate.published import load_published

    by_method: dict[str, dict] = {}
    keys = {"mRMSE": "mrmse", "m-relRMSE": "m_rel_rmse", "mRMSE-nz": "mrmse_nz", "m-relRMSE-nz": "m_rel_rmse_nz"}
    for entry in load_published(dataset):
        if entry["metric"] not in keys:
            continue
        row = by_method.setdefault(entry["method"], {"method": entry["method"], "source": entry["source"]})
        row[keys[entry["metric"]]] = float(entry["value"])
    return list(by_method.values())


def voc_table_records(results: Sequence[MethodResult], published: Sequence[dict]) -> list[dict]:
    records = [{"source": "measured here", **voc_row(result)} for result in results]
    records += [
        published_record(row, PUBLISHED_NOTE, {key: row.get(key) for key in VOC_FIGURE_KEYS}) for row in published
    ]
    return [{column: record.get(column) for column in VOC_CSV_COLUMNS} for record in records]


def voc_markdown_table(records: Sequence[dict]) -> str:
    columns = ["label", *VOC_FIGURE_KEYS, "fit_seconds", "predict_seconds", "source"]
    lines = ["| " + " | ".join(VOC_TITLES.get(c, c) for c in columns) + " |", "|" + "---|" * len(columns)]
    for record in records:
        cells = [
            "—" if record[c] is None else (f"{record[c]:.3f}" if isinstance(record[c], float) else str(record[c]))
            for c in columns
        ]
        if record["status"] not in ("ok", "published"):
            cells[1] = f"{record['status']}: {record['note']}"
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


def write_voc_comparison(
    data: ComparisonData, results: Sequence[MethodResult], out_dir: str | Path, settings: dict
) -> dict[str, Path]:
    """``compare-voc.csv`` / ``.json`` / ``.md`` in ``out_dir`` (our rows, then the published ones)."""
    records = voc_table_records(results, voc_published_rows(data.dataset))
    summary = comparison_summary(data, records, data.settings | settings) | {
        # Model rows (method "model") are keyed by their label, unique among the rows.
        "per_class": {
            result.label if result.method == "model" else result.method: result.metrics
            for result in results
            if result.status == "ok"
        },
    }
    header = (
        f"# {data.dataset}: methods compared on split `{data.split}`\n\n"
        f"{len(data.train_counts)} train / {len(data.test_counts)} test images; descriptors: "
        f"{data.settings.get('backbone')} {data.settings.get('descriptor', 'class scores')} at input size "
        f"{data.settings.get('input_size') or 'native'}; target transform {settings.get('target_transform')}, "
        f"gate {'on' if settings.get('gate') else 'off'}. VOC metrics (Chattopadhyay et al. 2017): predictions "
        "clipped at 0 and rounded; -nz: over the images holding each class only. Published rows were measured "
        "on the VOC-2007 test images, not on this split.\n\n"
    )
    markdown = header + voc_markdown_table(records)
    return write_table_files(out_dir, f"compare-{data.dataset}", VOC_CSV_COLUMNS, records, summary, markdown)
