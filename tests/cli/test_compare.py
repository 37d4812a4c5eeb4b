"""`counting compare` end to end on a small real Mall subset at a small input size."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from counting.cli.app import app as counting_app
from counting.evaluate.peers.hog import hog_available

runner = CliRunner()


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return counting_app


def _invoke(app: typer.Typer, *arguments: str, cache: Path):
    return runner.invoke(
        app, ["compare", *arguments, "--cache-dir", str(cache)], catch_exceptions=False, env={"COLUMNS": "250"}
    )


@pytest.fixture(scope="module")
def compared(app, mall_root: Path, session_cache_dir: Path, tmp_path_factory) -> tuple:
    out = tmp_path_factory.mktemp("compare")
    methods = "ridge,gp,sparse-gp,agp-univariate" + (",hog,hog-calibrated" if hog_available() else "")
    result = _invoke(
        app,
        "--dataset",
        "mall",
        "--root",
        str(mall_root),
        "--split",
        "train=1-40,test=41-52",
        "--input-size",
        "64",
        "--grid",
        "2x2",
        "--methods",
        methods,
        "--tiled-methods",
        "ridge",
        "--centers",
        "6",
        "--hog-train-images",
        "4",
        "--out",
        str(out),
        cache=session_cache_dir,
    )
    return result, out, methods.split(",")


def test_compare_prints_one_table_and_writes_three_files(compared) -> None:
    result, out, methods = compared
    assert result.exit_code == 0, result.output
    assert "split train=1-40,test=41-52" in result.output
    assert "40 train / 12 test" in result.output
    assert "COUNT Forest" in result.output and "Ridge regression (RidgeCV)" in result.output
    # Each published row's citation whole (the table cut it at 48 characters: "...(Feature mini").
    from counting.evaluate.comparison.output import published_rows

    sources = {row["source"] for row in published_rows("mall")}
    assert sources and max(map(len, sources)) > 48
    words = set(result.stdout.split())  # at 250 columns the source column folds, at its spaces
    assert all(set(source.split()) <= words for source in sources)
    assert sorted(path.name for path in out.iterdir()) == ["compare-mall.csv", "compare-mall.json", "compare-mall.md"]


def test_written_rows_hold_every_method_and_the_published_figures(compared) -> None:
    _, out, methods = compared
    with (out / "compare-mall.csv").open() as handle:
        records = list(csv.DictReader(handle))
    ours = [r for r in records if r["source"] == "measured here"]
    whole = [r["method"] for r in ours if r["features"] in ("whole frame", "images")]
    assert whole == methods
    tiled = {r["features"] for r in ours if r["method"] == "ridge"}
    assert {"whole frame", "tiles 2x2", "tiles 2x2 + frame", "frame + 2x2 cells concatenated"} <= tiled
    for record in ours:
        assert record["status"] in ("ok", "unavailable"), record
        if record["status"] == "ok":
            assert float(record["mae"]) >= 0 and float(record["fit_seconds"]) >= 0
            assert float(record["rmse"]) ** 2 == pytest.approx(float(record["mse"]), rel=1e-3)
            assert record["smoothed_mae"] != ""  # Mall is a sequence: smoothed figures too
    published = {r["method"]: r for r in records if r["status"] == "published"}
    assert float(published["COUNT Forest"]["mae"]) == 2.50 and float(published["GPR"]["mse"]) == 20.1


def test_json_predictions_reproduce_the_table(compared) -> None:
    _, out, _ = compared
    summary = json.loads((out / "compare-mall.json").read_text())
    assert summary["n_train"] == 40 and summary["n_test"] == 12
    assert summary["settings"]["input_size"] == 64 and summary["settings"]["roi"] is True
    truth = np.array(summary["y_true"])
    assert truth.shape == (12,) and truth.min() >= 13  # Mall counts are 13-53
    rows = {f"{r['method']}|{r['features']}": r for r in summary["rows"] if r["status"] == "ok"}
    assert rows
    for key, row in rows.items():
        predicted = np.array(summary["predictions"][key])
        assert np.mean(np.abs(predicted - truth)) == pytest.approx(row["mae"], abs=2e-3)


def test_missing_dataset_folder_is_one_line_and_exit_1(app, tmp_path: Path) -> None:
    result = _invoke(
        app, "--dataset", "mall", "--root", str(tmp_path / "nowhere"), "--out", str(tmp_path), cache=tmp_path / "cache"
    )
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "nowhere" in lines[0]


def test_unknown_method_is_one_line_and_exit_1(app, mall_root: Path, session_cache_dir: Path, tmp_path: Path) -> None:
    result = _invoke(
        app,
        "--dataset",
        "mall",
        "--root",
        str(mall_root),
        "--split",
        "train=1-40,test=41-52",
        "--input-size",
        "64",
        "--methods",
        "ridge,lasso",
        "--out",
        str(tmp_path),
        cache=session_cache_dir,
    )
    assert result.exit_code == 1
    assert "lasso" in result.output and "Traceback" not in result.output
