"""Point 8 (and 17's model messages): every field of a model file is checked when it loads."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from robust_helpers import (
    DEFAULT_MODEL,
    assert_one_error,
    make_image,
    model_parts,
    write_model,
)

from counting.core.errors import ModelFileError
from counting.model.counting_model import load_model


def _meta(document: dict) -> dict:
    return document["user_metadata"]


CASES = {
    "alpha rows != centres": (
        lambda a, d: a.update(alpha=a["alpha"][:-3]),
        "centers_standardised",
    ),
    "alpha with NaN": (
        lambda a, d: a["alpha"].__setitem__((0, 0), np.nan),
        "alpha: contains NaN",
    ),
    "string input_size": (
        lambda a, d: _meta(d)["preprocessing"].update(input_size="224"),
        "preprocessing.input_size",
    ),
    "negative input_size": (
        lambda a, d: _meta(d)["preprocessing"].update(input_size=-224),
        "preprocessing.input_size",
    ),
    "huge input_size": (
        lambda a, d: _meta(d)["preprocessing"].update(input_size=100_000),
        "preprocessing.input_size",
    ),
    "grid 0x0": (lambda a, d: _meta(d).update(grid=[0, 0]), "grid rows"),
    "grid 10^6 x 10^6": (
        lambda a, d: _meta(d).update(grid=[10**6, 10**6]),
        "grid rows",
    ),
    "grid as text": (lambda a, d: _meta(d).update(grid="3x3"), "grid"),
    "class names of the wrong length": (
        lambda a, d: _meta(d).update(class_names=["person", "car"]),
        "class_names",
    ),
    "class names not strings": (
        lambda a, d: _meta(d).update(class_names=[7]),
        "class_names",
    ),
    "unknown kernel": (
        lambda a, d: d["hyper_parameters"].update(kernel="bogus"),
        "kernel",
    ),
    "zero x_scale": (lambda a, d: a["x_scale"].__setitem__(3, 0.0), "x_scale"),
    "NaN lengthscale": (
        lambda a, d: a["param__log_lengthscale"].__setitem__(0, np.nan),
        "log_lengthscale",
    ),
    "lengthscale per centre of the wrong length": (
        lambda a, d: a.update(param__log_lengthscale=a["param__log_lengthscale"][:3]),
        "log_lengthscale",
    ),
    "strings array": (
        lambda a, d: a.update(x_mean=np.array(["a"] * 1000)),
        "x_mean: expected numbers",
    ),
    "negative interval quantile": (
        lambda a, d: _meta(d)["interval"].update(quantile=-1.0),
        "interval.quantile",
    ),
    "interval level 1.5": (
        lambda a, d: _meta(d)["interval"].update(level=1.5),
        "interval.level",
    ),
    "quantile as text": (
        lambda a, d: _meta(d)["interval"].update(quantile="wide"),
        "interval.quantile",
    ),
    "route interval with a negative quantile": (
        lambda a, d: _meta(d)["interval"].update(by_route={"mall": dict(_meta(d)["interval"], quantile=-2.0)}),
        "interval.by_route.mall.quantile",
    ),
    "route intervals as a list": (
        lambda a, d: _meta(d)["interval"].update(by_route=[1, 2]),
        "interval.by_route",
    ),
    "route interval with routes of its own": (
        lambda a, d: _meta(d)["interval"].update(
            by_route={"mall": dict(_meta(d)["interval"], by_route={"x": dict(_meta(d)["interval"])})}
        ),
        "interval.by_route.mall",
    ),
    "route interval at another level": (
        lambda a, d: _meta(d)["interval"].update(by_route={"mall": dict(_meta(d)["interval"], level=0.5)}),
        "by_route['mall'] is at level 0.5",
    ),
    "ROI mask runs that do not cover it": (
        lambda a, d: _meta(d)["preprocessing"].update(roi_mask={"shape": [4, 4], "first": True, "runs": [3, -1]}),
        "roi_mask.runs",
    ),
    "oversize ROI mask": (
        lambda a, d: _meta(d)["preprocessing"].update(
            roi_mask={"shape": [100_000, 100_000], "first": True, "runs": [10**10]}
        ),
        "roi_mask",
    ),
    "unknown backbone": (
        lambda a, d: _meta(d)["backbone"].update(name="vgg-nonexistent"),
        "backbone.name",
    ),
    "n_features text": (
        lambda a, d: d.update(n_features_in="many"),
        "not a counting model file",
    ),
    "n_features disagreeing with the arrays": (
        lambda a, d: d.update(n_features_in=999),
        "shape",
    ),
    "metrics not an object": (
        lambda a, d: _meta(d).update(test_metrics=[1, 2]),
        "test_metrics",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_model_field_is_one_line_naming_file_and_field(cli, mutated_model, features_file: Path, case: str) -> None:
    change, field = CASES[case]
    model = mutated_model(change)
    before = model.read_bytes()
    line = assert_one_error(cli("count", "--features", features_file, "--model", model), str(model))
    assert field in line
    assert "nan" not in line.lower() or "NaN" in field or "contains NaN" in line or "predicts" in line
    assert model.read_bytes() == before


def test_bad_model_for_images_fails_before_the_backbone(cli, mutated_model, tmp_path: Path) -> None:
    model = mutated_model(lambda a, d: _meta(d)["backbone"].update(name="vgg-nonexistent"))
    line = assert_one_error(cli("count", make_image(tmp_path / "a.png"), "--model", model), str(model))
    assert line.split(": ")[1].endswith(str(model))  # named by the model file, not the backbone


def test_good_model_still_loads_and_predicts_finite(features_file: Path) -> None:
    model = load_model(DEFAULT_MODEL)
    counts = model.predict_features(np.load(features_file))
    low, high = model.intervals(counts)
    assert np.isfinite(counts).all() and (low <= high).all()


def test_round_trip_of_a_resaved_model(tmp_path: Path) -> None:
    arrays, document = model_parts()
    copy = write_model(tmp_path / "copy.npz", arrays, document)
    assert load_model(copy).summary() == load_model(DEFAULT_MODEL).summary()


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda p: p.mkdir(), "is a folder, not a model file"),
        (lambda p: p.write_text("hello"), "not a counting model file"),
        (lambda p: p.write_bytes(b""), "not a counting model file"),
        (lambda p: None, "model file not found"),
    ],
)
def test_model_path_problems(cli, tmp_path: Path, features_file: Path, make, problem: str) -> None:
    path = tmp_path / "model.npz"
    make(path)
    assert_one_error(cli("count", "--features", features_file, "--model", path), str(path), problem)


def test_metadata_json_with_nan_literal(tmp_path: Path) -> None:
    arrays, document = model_parts()
    document["user_metadata"]["interval"]["quantile"] = math.nan  # json writes NaN
    path = write_model(tmp_path / "nan.npz", arrays, document)
    assert "NaN" in json.dumps(document)
    with pytest.raises(ModelFileError, match="interval.quantile"):
        load_model(path)
