"""Report: Markdown + HTML with our figures beside the published ones, and real PNG plots."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from counting.evaluate.evaluation import EvaluationResult, score_predictions
from counting.evaluate.report import render_markdown, write_report
from counting.heads.uncertainty import ConformalInterval
from counting.model.counting_model import CountingModel

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _crowd_model(interval: ConformalInterval | None) -> CountingModel:
    return CountingModel(
        regressor=None,
        input_size=224,
        interval=interval,
        dataset={"name": "mall", "split": "train=1-600,test=601-800", "n_train": 600},
        training={"kernel": "univariate", "n_centers": 25, "best_epoch": 4},
        history={"train_loss": [9.0, 5.0, 4.0, 3.5, 3.2], "val_loss": [9.5, 6.0, 4.5, 4.4, 4.6]},
        validation_metrics={"mae": 2.0, "mse": 6.0, "rmse": 2.45},
    )


def _crowd_evaluation(model: CountingModel) -> EvaluationResult:
    rng = np.random.default_rng(0)
    indices = np.arange(601, 801)
    truth = 30 + 8 * np.sin(indices / 15.0)
    predicted = truth + rng.normal(0, 2, truth.size)
    figures, sequence, interval, smoothed = score_predictions(model, truth, predicted, indices, True, 5)
    low, high = model.intervals(predicted)
    return EvaluationResult(
        "mall",
        "train=1-600,test=601-800",
        "m.npz",
        figures,
        sequence,
        interval,
        [f"seq_{i:06d}.jpg" for i in indices],
        indices,
        truth,
        predicted,
        low,
        high,
        smoothed,
        smoothing_window=5,
    )


def test_crowd_report_beside_published_figures(tmp_path: Path) -> None:
    interval = ConformalInterval.fit(np.zeros(50), np.linspace(-3, 3, 50), 0.9)
    model = _crowd_model(interval)
    evaluation = _crowd_evaluation(model)
    files = write_report(model, evaluation, tmp_path / "out")
    markdown = files.markdown.read_text()
    # our per-frame and smoothed rows, with the measured values
    assert f"| **this model, per frame** | {evaluation.metrics['mae']:.2f} |" in markdown
    assert f"{evaluation.sequence_metrics['mae']:.2f}" in markdown
    assert evaluation.sequence_metrics["mae"] < evaluation.metrics["mae"]  # smoothing helps on noise
    # every published Mall method with its figures and source
    for method, mae, mse in [
        ("COUNT Forest", "2.50", "10.00"),
        ("Bi-ConvLSTM", "2.10", "7.60"),
        ("GPR", "3.72", "20.10"),
    ]:
        line = next(row for row in markdown.splitlines() if row.startswith(f"| {method} |"))
        assert mae in line and mse in line
    assert "Pham, Kozakaya" in markdown and "801-2000" in markdown  # source and definition
    assert "coverage" in markdown and f"{evaluation.interval_metrics['coverage']:.1%}" in markdown
    html = files.html.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<table>" in html and "<strong>this model, per frame</strong>" in html
    names = sorted(p.name for p in files.images)
    assert names == ["loss.png", "scatter.png", "sequence.png"]
    for image in files.images:
        assert image.read_bytes()[:8] == PNG_MAGIC and image.stat().st_size > 5000
        assert f'src="{image.name}"' in html and f"]({image.name})" in markdown


def test_voc_report_has_class_bars_and_mrmse(tmp_path: Path) -> None:
    names = ["person", "car", "dog"]
    model = CountingModel(regressor=None, class_names=names, dataset={"name": "voc", "split": "standard"})
    truth = np.array([[1.0, 0, 0], [2, 1, 0], [0, 0, 1], [3, 2, 0]])
    predicted = truth + np.array([[0.4, 0.2, -0.3], [-0.6, 0.1, 0.2], [0.2, 0.7, -0.2], [0.1, -0.2, 0.1]])
    figures, *_ = score_predictions(model, truth, predicted, np.arange(4), False)
    evaluation = EvaluationResult(
        "voc",
        "standard",
        "voc.npz",
        figures,
        None,
        None,
        list("abcd"),
        np.arange(4),
        truth,
        predicted,
        class_names=names,
    )
    files = write_report(model, evaluation, tmp_path)
    markdown = files.markdown.read_text()
    assert "| method | mRMSE | m-relRMSE | mRMSE-nz | m-relRMSE-nz | source |" in markdown
    assert f"{figures['mrmse']:.2f}" in markdown and "seq-sub-ft-3x3 | 0.42 | 0.21" in markdown
    # Rounded predictions miss one person (of 2) and add one car: hand-computed per-class figures.
    assert "| person | 3 | 0.50 | 0.29 | 0.58 | 0.33 |" in markdown
    assert "| car | 2 | 0.50 | 0.50 | 0.00 | 0.00 |" in markdown
    assert "| dog | 1 | 0.00 | 0.00 | 0.00 | 0.00 |" in markdown
    assert "not on these photos" in markdown
    assert sorted(p.name for p in files.images) == ["classes.png", "scatter.png"]


def test_report_without_evaluation_uses_the_model_figures(tmp_path: Path) -> None:
    model = _crowd_model(None)
    model.history = {}
    files = write_report(model, None, tmp_path)
    markdown = files.markdown.read_text()
    assert "held-out part of the training split" in markdown
    assert "| **this model, held-out train images** | 2.00 | 6.00 |" in markdown
    assert files.images == []


def test_markdown_escapes_pipes_in_cells() -> None:
    from counting.evaluate.report import Block

    text = render_markdown([Block("table", header=["a"], rows=[["x|y"]])])
    assert "x\\|y" in text
