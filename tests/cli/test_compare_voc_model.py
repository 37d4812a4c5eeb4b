"""`counting compare -d voc --model FILE`: a trained per-class model adds its row to the VOC table.

The row is scored like the methods' rows (mRMSE, m-relRMSE and the -nz variants, on the same
test photos) and gets the crowd path's checks: refused when the model was trained on a test
photo, or when it counts other things than the dataset's 20 classes. Small on purpose: a
synthetic VOC tree of 40 photos at 32 pixels, models with 3 centres and 2 epochs (seconds).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from fixtures.voc import make_voc_fixture
from typer.testing import CliRunner

from counting.cli.app import app
from counting.data.datasets import load_dataset
from counting.evaluate.evaluation import evaluate_model
from counting.model.counting_model import load_model

REPO = Path(__file__).resolve().parents[2]
SIZE = "32"
runner = CliRunner()


def _invoke(*arguments: object):
    return runner.invoke(app, [str(argument) for argument in arguments], env={"COLUMNS": "250"})


def _train(devkit: Path, split: str, out: Path, cache: Path) -> Path:
    result = _invoke(
        "train", "-d", "voc", "-r", devkit, "--split", split, "--input-size", SIZE, "--centers", 3, "--epochs", 2,
        "--calibration", "none", "--no-evaluate", "--cache-dir", cache, "-o", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def _compare(devkit: Path, out: Path, cache: Path, *models: Path, split: str = "standard"):
    arguments = ["compare", "-d", "voc", "-r", devkit, "--split", split, "--input-size", SIZE]
    arguments += ["--methods", "train-mean,always-0,ridge", "--centers", 3, "--out", out, "--cache-dir", cache]
    for model in models:
        arguments += ["--model", model]
    return _invoke(*arguments)


def _rows(out: Path) -> list[dict]:
    with (out / "compare-voc.csv").open(newline="") as handle:
        return [row for row in csv.DictReader(handle) if row["source"] == "measured here"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("voc-model")
    devkit = base / "VOCdevkit"
    make_voc_fixture(devkit, n_trainval=30, n_test=10, size=(48, 64))
    cache = base / "cache"
    models = base / "models"
    models.mkdir()
    # trainval (30 photos) only: none of the 10 test photos.
    held_out = _train(devkit, "standard", models / "held-out.npz", cache)
    # a random half of all 40 photos: some test photos among them.
    leaky = _train(devkit, "random:0.5:0", models / "leaky.npz", cache)
    out = base / "out"
    result = _compare(devkit, out, cache, held_out, leaky)
    return {"devkit": devkit, "cache": cache, "held_out": held_out, "leaky": leaky, "out": out, "result": result}


def test_a_per_class_model_adds_its_row_scored_on_the_same_test_photos(setup: dict) -> None:
    result = setup["result"]
    assert result.exit_code == 0, result.output  # was: "per-class comparisons take no --model rows"
    rows = _rows(setup["out"])
    assert [row["method"] for row in rows] == ["train-mean", "always-0", "ridge", "model", "model"]
    row = next(row for row in rows if row["label"] == "model held-out.npz")
    assert row["status"] == "ok" and row["note"] == ""
    assert row["n_test"] == "10" and all(other["n_test"] == "10" for other in rows)
    assert row["n_train"] == "30" and row["features"] == f"class scores @{SIZE}"
    # The same figures as `counting evaluate` of that file on the same test photos.
    test = load_dataset("voc", setup["devkit"], split="standard").subset("test")
    expected = evaluate_model(load_model(setup["held_out"]), test, cache=None).metrics
    for key in ("mrmse", "m_rel_rmse", "mrmse_nz", "m_rel_rmse_nz"):
        assert float(row[key]) == pytest.approx(expected[key], abs=1e-4), key
    assert float(row["predict_seconds"]) > 0 and row["fit_seconds"] == ""
    # Sanity: the row is a real measurement, between perfect and far off.
    assert 0.0 < float(row["mrmse"]) < 5.0


def test_a_model_trained_on_test_photos_is_a_refused_row(setup: dict) -> None:
    assert setup["result"].exit_code == 0, setup["result"].output
    row = next(row for row in _rows(setup["out"]) if row["label"] == "model leaky.npz")
    everything = load_dataset("voc", setup["devkit"], split="random:0.5:0")
    trained = {path.name for path in everything.subset("train").paths}
    tests = [path.name for path in load_dataset("voc", setup["devkit"], split="standard").subset("test").paths]
    overlap = sum(name in trained for name in tests)
    assert overlap > 0
    assert row["status"] == "failed" and row["mrmse"] == "" and row["m_rel_rmse"] == ""
    assert row["note"] == f"trained on {overlap} of the 10 test images (split 'random:0.5:0')"


def test_model_rows_in_the_json_markdown_and_on_screen(setup: dict) -> None:
    result, out = setup["result"], setup["out"]
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "compare-voc.json").read_text())
    per_class = summary["per_class"]
    assert set(per_class) == {"train-mean", "always-0", "ridge", "model held-out.npz"}
    assert set(per_class["model held-out.npz"]["per_class_rmse"]) >= {"person", "car"}
    markdown = (out / "compare-voc.md").read_text()
    assert "| model held-out.npz |" in markdown and "failed: trained on" in markdown
    assert "counting the 10 test images with" in result.output
    assert "model leaky.npz: failed (trained on" in result.output
    # Its reason is cut to fit the table's cell ("…") and given whole below the table.
    note = next(row for row in _rows(out) if row["label"] == "model leaky.npz")["note"]
    assert len(note) > 50 and f"│ {note[:49]}…" in result.stdout
    assert f"\nmodel leaky.npz: {note}\n" in result.stdout


def _one_line_error(result, *parts: str) -> None:
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    assert all(part in result.output for part in parts), result.output


def test_a_single_count_model_is_refused_before_any_work(setup: dict, tmp_path: Path) -> None:
    mall_model = REPO / "models" / "default.npz"  # counts one number per image
    out = tmp_path / "out"
    result = _compare(setup["devkit"], out, setup["cache"], mall_model)
    _one_line_error(result, "default.npz", "counts one number per image; this comparison counts 20 classes")
    assert "Ridge" not in result.output and not out.exists()


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        (lambda names: ["people" if name == "person" else name for name in names], "lacks person; has people"),
        (lambda names: names[::-1], "the same names in another order"),
    ],
)
def test_a_model_of_other_classes_is_refused(setup: dict, tmp_path: Path, change, detail: str) -> None:
    model = load_model(setup["held_out"])
    model.class_names = change(list(model.class_names))
    other = model.save(tmp_path / "other-classes.npz")
    out = tmp_path / "out"
    result = _compare(setup["devkit"], out, setup["cache"], other)
    _one_line_error(result, "other-classes.npz", detail)
    assert "Ridge" not in result.output and not out.exists()


def test_the_shipped_voc20_model_on_coco_voc20_is_refused_as_trained_on_the_test_photos(
    coco_voc20_root: Path, tmp_path: Path
) -> None:
    """The issue's command: models/voc20.npz was trained on all 559 photos (split 'standard').
    A range of COCO ids keeps it small: photos 9-94 train (13), 110-196 test (15)."""
    out = tmp_path / "out"
    result = _invoke(
        "compare", "-d", "voc", "-r", coco_voc20_root, "--split", "train=1-99,test=100-199", "--input-size", SIZE,
        "--methods", "always-0", "--model", REPO / "models" / "voc20.npz", "--out", out,
        "--cache-dir", tmp_path / "cache",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = {row["label"]: row for row in _rows(out)}
    assert rows["model voc20.npz"]["status"] == "failed"
    assert rows["model voc20.npz"]["note"] == "trained on 15 of the 15 test images (split 'standard')"
    assert rows["model voc20.npz"]["n_train"] == "559"
    assert np.isfinite(float(rows["Always 0 (baseline)"]["mrmse"]))
