"""`counting compare -d voc`: per-class counts, the VOC metrics on every row, published rows beside."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from fixtures.voc import make_voc_fixture
from typer.testing import CliRunner

from counting.cli.app import app
from counting.core.metrics import voc_metrics

runner = CliRunner()


@pytest.fixture(scope="module")
def compared(tmp_path_factory) -> tuple:
    devkit = tmp_path_factory.mktemp("voc") / "VOCdevkit"
    truth = make_voc_fixture(devkit, n_trainval=30, n_test=10, size=(48, 64))
    out = tmp_path_factory.mktemp("compare-voc")
    methods = "train-mean,always-0,ridge,agp-univariate,ridge-per-class"
    arguments = ["compare", "-d", "voc", "-r", str(devkit), "--split", "standard", "--input-size", "32"]
    arguments += ["--methods", methods, "--centers", "3", "--target-transform", "sqrt", "--gate"]
    arguments += ["--out", str(out), "--cache-dir", str(tmp_path_factory.mktemp("cache"))]
    result = runner.invoke(app, arguments, catch_exceptions=False, env={"COLUMNS": "250"})
    return result, out, truth


def test_every_row_has_both_metrics_and_the_baselines_are_exact(compared) -> None:
    result, out, truth = compared
    assert result.exit_code == 0, result.output
    with open(out / "compare-voc.csv", newline="") as handle:
        records = list(csv.DictReader(handle))
    ours = [row for row in records if row["source"] == "measured here"]
    published = {row["method"]: row for row in records if row["status"] == "published"}
    rows = {row["method"]: row for row in ours}
    assert [row["method"] for row in ours] == [
        "train-mean",
        "always-0",
        "ridge",
        "agp-univariate",
        "ridge-per-class",
    ]
    for row in ours:
        assert row["status"] == "ok" and float(row["mrmse"]) >= 0 and float(row["m_rel_rmse"]) >= 0
    test_counts, train_counts = truth["easy"][30:], truth["easy"][:30]
    zero = voc_metrics(test_counts, np.zeros_like(test_counts))
    mean = voc_metrics(test_counts, np.tile(train_counts.mean(axis=0), (10, 1)))
    assert float(rows["always-0"]["mrmse"]) == pytest.approx(zero["mrmse"], abs=1e-4)
    assert float(rows["always-0"]["m_rel_rmse"]) == pytest.approx(zero["m_rel_rmse"], abs=1e-4)
    assert float(rows["train-mean"]["mrmse"]) == pytest.approx(mean["mrmse"], abs=1e-4)
    assert "gate" in rows["ridge"]["note"]  # thresholds chosen on out-of-fold train predictions
    # Published VOC-2007 rows beside ours, flagged as other images.
    assert published["seq-sub-ft-3x3"]["mrmse"] == "0.42" and published["seq-sub-ft-3x3"]["m_rel_rmse"] == "0.21"
    assert published["always-0"]["mrmse"] == "0.66" and "different images" in published["always-0"]["note"]


def test_json_and_markdown_and_screen(compared) -> None:
    result, out, _ = compared
    summary = json.loads((out / "compare-voc.json").read_text())
    assert summary["settings"]["target_transform"] == "sqrt" and summary["settings"]["gate"] is True
    assert set(summary["per_class"]["always-0"]["per_class_rmse"]) >= {"person", "car"}
    markdown = (out / "compare-voc.md").read_text()
    assert "| method | mRMSE | m-relRMSE | mRMSE-nz | m-relRMSE-nz |" in markdown
    assert "Always 0 (baseline)" in result.output and "m-relRMSE" in result.output


def test_unknown_per_class_method_is_one_line(tmp_path: Path) -> None:
    devkit = tmp_path / "VOCdevkit"
    make_voc_fixture(devkit, n_trainval=6, n_test=4)
    result = runner.invoke(app, ["compare", "-d", "voc", "-r", str(devkit), "--methods", "hog"])
    assert result.exit_code == 1
    assert "unknown method 'hog' for per-class counts" in result.output
