"""Choosing a setting without looking at the test part: candidates scored on a validation
hold-out of the train part, the chosen ones scored once on the test part, interval figures, and
the study's files. The accuracy studies in ``scripts/`` are built on this."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from counting.apply.smoothing import smooth_counts
from counting.evaluate.comparison.data import ComparisonData, holdout, load_comparison_data
from counting.evaluate.comparison.methods import MethodResult, feature_rows, run_feature_method, score
from counting.evaluate.peers import make_peer
from counting.heads.uncertainty import SCALES, ConformalInterval, choose_scale


def size_text(size: int | None) -> str:
    return "native" if size is None else str(size)


@dataclass(frozen=True)
class Candidate:
    """One configuration: descriptors (input size, grid, ROI), layout and regressor."""

    method: str
    layout: str  # frame | tiles | tiles+frame | pyramid
    input_size: int | None
    grid: tuple[int, int] | None = None
    roi: bool = True
    n_centers: int = 25

    @property
    def name(self) -> str:
        size = self.input_size or "native"
        grid = "" if self.grid is None or self.layout == "frame" else f" {self.grid[0]}x{self.grid[1]}"
        roi = "" if self.roi else " no-ROI"
        centres = f" N={self.n_centers}" if self.method.startswith(("agp", "center", "sparse")) else ""
        return f"{self.method}{centres} · {self.layout}{grid} · {size}{roi}"


class Study:
    """Loads (cached) descriptors once per setting and scores candidates on a split."""

    def __init__(self, dataset: str, root: Path, split: str, cache: Any, holdout_fraction: float, seed: int):
        self.dataset, self.root, self.split, self.cache = dataset, root, split, cache
        self.holdout_fraction, self.seed = holdout_fraction, seed
        self._data: dict[tuple, ComparisonData] = {}

    def data(self, candidate: Candidate) -> ComparisonData:
        """The candidate's descriptors (loaded once per input size, grid and ROI)."""
        key = (candidate.input_size, candidate.grid if candidate.layout != "frame" else None, candidate.roi)
        if key not in self._data:
            self._data[key] = load_comparison_data(
                self.dataset,
                self.root,
                split=self.split,
                input_size=key[0],
                grid=key[1],
                use_roi=key[2],
                cache=self.cache,
            )
        return self._data[key]

    def run(self, candidate: Candidate, validation: bool, window: int = 0) -> tuple[MethodResult, ComparisonData]:
        """Fit and score ``candidate`` on the validation hold-out or on the test part."""
        data = self.data(candidate)
        if validation:
            data = holdout(data, self.holdout_fraction, self.seed)
        return run_feature_method(
            data, candidate.method, candidate.layout, candidate.n_centers, self.seed, window
        ), data


def print_row(tag: str, candidate: Candidate, result) -> None:
    if result.status != "ok":
        print(f"{tag:10s} {candidate.name:55s} {result.status}: {result.note}", flush=True)
        return
    m = result.metrics
    smoothed = f" smoothed MAE {m['smoothed_mae']:.3f}" if "smoothed_mae" in m else ""
    print(
        f"{tag:10s} {candidate.name:55s} MAE {m['mae']:.3f} RMSE {m['rmse']:.3f}{smoothed} "
        f"fit {result.fit_seconds:.1f}s",
        flush=True,
    )


def select(study: Study, candidates: list[Candidate], log: list[dict]) -> tuple[Candidate, float]:
    """Score every candidate on the validation hold-out; return the lowest MAE."""
    best, best_mae = None, np.inf
    for candidate in candidates:
        result, _ = study.run(candidate, validation=True)
        print_row("validation", candidate, result)
        log.append({"stage": "validation", "candidate": candidate.name, **result.row()})
        if result.status == "ok" and result.metrics["mae"] < best_mae:
            best, best_mae = candidate, result.metrics["mae"]
    print(f"chosen on validation: {best.name} (MAE {best_mae:.3f})", flush=True)
    return best, best_mae


def choose_window(study: Study, candidate: Candidate, windows: list[int], log: list[dict]) -> int:
    """Smoothing window with the lowest validation MAE of the chosen candidate (sequences only)."""
    result, data = study.run(candidate, validation=True)
    best_window, best_mae = 1, np.inf
    for window in windows:
        figures = score(data.test_counts, smooth_counts(result.predictions, window), data.test_indices)
        print(f"validation smoothing window {window:3d}: MAE {figures['mae']:.3f}", flush=True)
        log.append({"stage": "smoothing", "candidate": candidate.name, "window": window, **figures})
        if figures["mae"] < best_mae - 1e-9:
            best_window, best_mae = window, figures["mae"]
    return best_window


def final(study: Study, candidates: list[Candidate], window: int, log: list[dict]) -> None:
    for candidate in candidates:
        result, _ = study.run(candidate, validation=False, window=window)
        print_row("test", candidate, result)
        log.append({"stage": "test", "candidate": candidate.name, "window": window, **result.row()})


def intervals(study: Study, candidate: Candidate, level: float, calibration_fraction: float, log: list[dict]) -> None:
    """Split conformal: fit on the train part less a calibration hold-out, cover the test part."""
    data = study.data(candidate)
    calibration = holdout(data, calibration_fraction, study.seed)
    X, y, predict_calibration = feature_rows(calibration, candidate.layout)
    model = make_peer(candidate.method, candidate.n_centers, study.seed, X.shape[1], len(X)).fit(X, y)
    calibration_pred = predict_calibration(model)
    test_pred = feature_rows(data, candidate.layout)[2](model)
    chosen_scale, widths = choose_scale(calibration.test_counts, calibration_pred, level=level, seed=study.seed)
    print(
        f"interval scale chosen on the calibration frames: {chosen_scale} (half-split widths "
        + ", ".join(f"{k} {v:.2f}" for k, v in widths.items())
        + ")",
        flush=True,
    )
    for scale in SCALES:
        interval = ConformalInterval.fit(calibration.test_counts, calibration_pred, level=level, scale=scale)
        figures = interval.evaluate(data.test_counts, test_pred)
        print(
            f"interval {scale:8s} level {level:.2f} on {len(calibration.test_counts)} calibration images: "
            f"test coverage {figures['coverage']:.3f}, mean width {figures['mean_width']:.2f}, "
            f"test MAE {np.mean(np.abs(test_pred - data.test_counts)):.3f}",
            flush=True,
        )
        log.append(
            {
                "stage": "interval",
                "candidate": candidate.name,
                "n_calibration": len(calibration.test_counts),
                "chosen_scale": chosen_scale,
                **figures,
            }
        )


def write_study(out: Path, log: list[dict], header: str) -> None:
    """``study.json`` (every logged row) and ``study.md`` (one table) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.json").write_text(json.dumps(log, indent=2) + "\n", encoding="utf-8")
    lines = [
        header,
        "",
        "| stage | candidate | MAE | RMSE | smoothed MAE | coverage | width | fit s | frames/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def cell(entry: dict, key: str, digits: int = 3) -> str:
        value = entry.get(key)
        return "" if value is None else (f"{value:.{digits}f}" if isinstance(value, float) else str(value))

    for entry in log:
        name = entry.get("candidate", "") + (f" (window {entry['window']})" if entry["stage"] == "smoothing" else "")
        name += f" ({entry['scale']})" if entry["stage"] == "interval" else ""
        lines.append(
            f"| {entry['stage']} | {name} | {cell(entry, 'mae')} | {cell(entry, 'rmse')} | {cell(entry, 'smoothed_mae')} | "
            f"{cell(entry, 'coverage')} | {cell(entry, 'mean_width', 2)} | {cell(entry, 'fit_seconds', 1)} | {cell(entry, 'fps', 1)} |"
        )
    (out / "study.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
