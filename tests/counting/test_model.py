"""CountingModel: file format, wrong-file errors, features -> counts (tiles summed, clipped)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agp import AGPRegressor
from counting.core.errors import ModelFileError
from counting.heads.uncertainty import ConformalInterval
from counting.model.counting_model import CountingModel
from counting.model.file import FORMAT_VERSION
from counting.model.regression import FeatureDimensionError
from counting.model.sections import decode_mask, encode_mask

D = 12


@pytest.fixture(scope="module")
def regressor() -> AGPRegressor:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, D))
    y = 3 * X[:, 0] + X[:, 1] ** 2  # negative where x0 << 0: tests clipping
    return AGPRegressor(n_centers=6, max_epochs=3, validation_fraction=20, random_state=0).fit(X, y)


def _model(regressor: AGPRegressor, **changes) -> CountingModel:
    mask = np.zeros((6, 8), dtype=bool)
    mask[1:5, 2:7] = True
    settings = dict(
        regressor=regressor,
        input_size=96,
        roi_mask=mask,
        grid=None,
        interval=ConformalInterval.fit(np.arange(30.0), np.arange(30.0) + np.linspace(-2, 2, 30), 0.9),
        dataset={"name": "mall", "split": "train=1-60,test=61-80", "n_train": 60},
        training={"kernel": "univariate", "n_centers": 6},
        history={"train_loss": [3.0, 2.0], "val_loss": [3.5, 2.5]},
        validation_metrics={"mae": 1.25},
        test_metrics={"per_frame": {"mae": 1.5}},
    )
    settings.update(changes)
    return CountingModel(**settings)


def test_mask_run_length_code_round_trips() -> None:
    rng = np.random.default_rng(1)
    for shape in [(1, 1), (5, 7), (48, 64)]:
        mask = rng.random(shape) > 0.5
        assert np.array_equal(decode_mask(encode_mask(mask)), mask)
    block = np.zeros((480, 640), dtype=bool)
    block[100:400, 50:600] = True
    code = encode_mask(block)
    assert len(code["runs"]) == 2 * 300 + 1  # one off/on pair per masked row, plus the tail
    assert np.array_equal(decode_mask(code), block)


def test_save_load_round_trip(regressor: AGPRegressor, tmp_path: Path) -> None:
    model = _model(regressor)
    path = model.save(tmp_path / "m.npz")
    loaded = CountingModel.load(path)
    X = np.random.default_rng(2).normal(size=(9, D))
    assert np.allclose(loaded.predict_features(X), model.predict_features(X))
    assert np.array_equal(loaded.roi_mask, model.roi_mask)
    assert loaded.input_size == 96 and loaded.grid is None and loaded.class_names is None
    assert loaded.interval.to_dict() == model.interval.to_dict()
    assert loaded.dataset == model.dataset and loaded.history == model.history
    assert loaded.validation_metrics == {"mae": 1.25} and loaded.test_metrics == {"per_frame": {"mae": 1.5}}
    assert loaded.backbone == "efficientnet-lite0"
    # Class-score models keep format version 1 (descriptor records need FORMAT_VERSION).
    assert loaded.metadata()["format_version"] == 1 < FORMAT_VERSION


def test_grid_model_sums_tile_predictions_then_clips(regressor: AGPRegressor, tmp_path: Path) -> None:
    model = CountingModel.load(_model(regressor, grid=(2, 2)).save(tmp_path / "grid.npz"))
    assert model.grid == (2, 2)
    tiles = np.random.default_rng(3).normal(size=(5, 4, D))
    expected = regressor.predict(tiles.reshape(-1, D)).reshape(5, 4).sum(axis=1)
    assert model.predict_features(tiles) == pytest.approx(np.clip(expected, 0, None))
    negative = np.zeros((1, 4, D))
    negative[..., 0] = -2.0  # target about -6 per tile
    assert regressor.predict(negative[0]).sum() < 0
    assert model.predict_features(negative)[0] == 0.0


def test_failed_images_give_nan_counts(regressor: AGPRegressor) -> None:
    X = np.random.default_rng(4).normal(size=(3, D))
    X[1] = np.nan
    counts = _model(regressor).predict_features(X)
    assert np.isnan(counts[1]) and np.isfinite(counts[[0, 2]]).all()


def test_features_of_the_wrong_dimension_are_one_line(regressor: AGPRegressor) -> None:
    model = _model(regressor)
    with pytest.raises(FeatureDimensionError, match=f"features.npy: features have 7 dimensions but .* expects {D}"):
        model.predict_features(np.zeros((2, 7)), source="features.npy")
    with pytest.raises(FeatureDimensionError, match="tiles"):
        _model(regressor, grid=(2, 2)).predict_features(np.zeros((2, 9, D)))
    with pytest.raises(FeatureDimensionError, match="whole-frame features"):
        _model(regressor, grid=(2, 2)).predict_features(np.zeros((2, D)))


def test_multi_output_counts_per_class(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(100, D))
    Y = np.column_stack([2 + X[:, 0], 3 + X[:, 1], np.full(100, 1.0)])
    reg = AGPRegressor(n_centers=5, max_epochs=2, validation_fraction=10, random_state=0).fit(X, Y)
    model = CountingModel.load(
        CountingModel(regressor=reg, class_names=["cat", "dog", "cow"]).save(tmp_path / "voc.npz")
    )
    counts = model.predict_features(X[:4])
    assert counts.shape == (4, 3) and (counts >= 0).all()
    assert model.class_names == ["cat", "dog", "cow"]


@pytest.mark.parametrize("kind", ["missing", "text", "other-npz", "agp-only", "newer", "empty"])
def test_files_that_are_not_counting_models(kind: str, regressor: AGPRegressor, tmp_path: Path) -> None:
    path = tmp_path / f"{kind}.npz"
    if kind == "text":
        path.write_text("this is not a model\n")
    elif kind == "other-npz":
        np.savez(path, weights=np.ones(3))
    elif kind == "agp-only":
        regressor.save(path)
    elif kind == "newer":
        metadata = _model(regressor).metadata() | {"format_version": FORMAT_VERSION + 1}
        regressor.save(path, metadata=json.loads(json.dumps(metadata)))
    elif kind == "empty":
        path.write_bytes(b"")
    with pytest.raises(ModelFileError) as caught:
        CountingModel.load(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and "\n" not in message
    expected = {
        "missing": "not found",
        "text": "not a counting model",
        "other-npz": "not a counting model",
        "agp-only": "without counting metadata",
        "newer": "newer",
        "empty": "not a counting model",
    }[kind]
    assert expected in message
