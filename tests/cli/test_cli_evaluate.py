"""`counting evaluate` and `counting report` end to end on real Mall frames."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from counting.cli.app import app


@pytest.fixture(scope="module")
def evaluated(
    trained, runner, mall_root: Path, mall_split: str, session_cache_dir: Path, tmp_path_factory
) -> tuple[dict, list[dict], str]:
    model_path, _ = trained
    folder = tmp_path_factory.mktemp("evaluate")
    figures_file, predictions = folder / "figures.json", folder / "predictions.csv"
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--model",
            str(model_path),
            "--dataset",
            "mall",
            "--root",
            str(mall_root),
            "--split",
            mall_split,
            "--json",
            str(figures_file),
            "--csv",
            str(predictions),
            "--cache-dir",
            str(session_cache_dir),
            "--smooth",
            "5",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    with open(predictions, newline="") as handle:
        rows = list(csv.DictReader(handle))
    return json.loads(figures_file.read_text()), rows, result.output


def test_evaluate_figures_match_the_predictions(evaluated) -> None:
    figures, rows, output = evaluated
    assert [int(r["index"]) for r in rows] == list(range(101, 121))
    truth = np.array([float(r["true"]) for r in rows])
    predicted = np.array([float(r["pred"]) for r in rows])
    errors = predicted - truth
    per_frame = figures["per_frame"]
    assert per_frame["n"] == 20
    assert per_frame["mae"] == pytest.approx(np.abs(errors).mean(), abs=2e-3)
    assert per_frame["mse"] == pytest.approx((errors**2).mean(), rel=1e-3)
    assert per_frame["rmse"] == pytest.approx(np.sqrt(per_frame["mse"]))
    assert (predicted >= 0).all()
    # sequence figures come from the smoothed counts, reported separately
    smoothed = np.array([float(r["smoothed"]) for r in rows])
    assert figures["smoothing_window"] == 5
    assert figures["sequence"]["mae"] == pytest.approx(np.abs(smoothed - truth).mean(), abs=2e-3)
    assert np.std(np.diff(smoothed)) < np.std(np.diff(predicted))
    # calibrated interval: coverage and width measured on the same rows
    low, high = np.array([float(r["low"]) for r in rows]), np.array([float(r["high"]) for r in rows])
    assert figures["interval"]["coverage"] == pytest.approx(np.mean((truth >= low) & (truth <= high)), abs=1e-9)
    assert figures["interval"]["mean_width"] == pytest.approx(np.mean(high - low), abs=2e-3)
    assert "MAE" in output and "smoothed (centred 5-frame mean)" in output and "coverage" in output


def test_report_sets_our_figures_beside_the_published_ones(
    trained, runner, mall_root: Path, mall_split: str, session_cache_dir: Path, tmp_path: Path, evaluated
) -> None:
    model_path, _ = trained
    figures, _, _ = evaluated
    result = runner.invoke(
        app,
        [
            "report",
            "--model",
            str(model_path),
            "--dataset",
            "mall",
            "--root",
            str(mall_root),
            "--split",
            mall_split,
            "--out",
            str(tmp_path),
            "--cache-dir",
            str(session_cache_dir),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "report.md").read_text()
    assert f"| **this model, per frame** | {figures['per_frame']['mae']:.2f} |" in markdown
    assert "| COUNT Forest | 2.50 | 10.00 |" in markdown and "ICCV 2015" in markdown
    assert "mean squared error of per-frame counts" in markdown
    html = (tmp_path / "report.html").read_text()
    for image in ("sequence.png", "scatter.png", "loss.png"):
        assert (tmp_path / image).read_bytes()[:4] == b"\x89PNG" and f'src="{image}"' in html


def test_report_from_the_model_file_alone(trained, runner, tmp_path: Path) -> None:
    model_path, _ = trained
    result = runner.invoke(app, ["report", "--model", str(model_path), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "test figures stored in the model file" in (tmp_path / "report.md").read_text()


def test_model_file_of_the_wrong_kind(runner, mall_root: Path, tmp_path: Path, one_error_line) -> None:
    fake = tmp_path / "notes.npz"
    fake.write_text("not a model")
    result = runner.invoke(app, ["evaluate", "--model", str(fake), "--dataset", "mall", "--root", str(mall_root)])
    line = " ".join(one_error_line(result).split())
    assert f"{fake}: not a counting model file" in line


def test_empty_test_split_one_line(trained, runner, mall_root: Path, one_error_line) -> None:
    model_path, _ = trained
    # frames 1-800 here: the standard Mall test split (801-2000) is absent
    result = runner.invoke(app, ["evaluate", "--model", str(model_path), "--dataset", "mall", "--root", str(mall_root)])
    assert "test split of mall is empty" in one_error_line(result)
