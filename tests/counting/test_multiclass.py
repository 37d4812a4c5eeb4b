"""Per-class counts: target transforms, the presence gate, flip-averaged descriptors, and a model
trained on real coco-voc20 photos that keeps all of it through its file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from counting.heads.multiclass import (
    PerClassRegressor,
    TransformedRegressor,
    apply_gate,
    choose_gate,
    forward_transform,
    inverse_transform,
)


@pytest.mark.parametrize("name", ["none", "sqrt", "log"])
def test_transforms_invert_and_clip_at_zero(name: str) -> None:
    counts = np.array([[0.0, 1.0, 4.0], [9.0, 2.0, 0.0]])
    assert inverse_transform(forward_transform(counts, name), name) == pytest.approx(counts)
    assert (inverse_transform(np.array([[-0.4, np.nan]]), name)[0, 0]) == 0.0
    assert np.isnan(inverse_transform(np.array([[-0.4, np.nan]]), name)[0, 1])


def test_unknown_transform_is_refused() -> None:
    with pytest.raises(ValueError, match="target transform 'cube'"):
        forward_transform(np.zeros((1, 1)), "cube")


def test_gate_thresholds_by_hand() -> None:
    # Class 0: absent everywhere, predicted 0.75 on two images: rounding counts 1 object that is
    # not there; any threshold above 0.75 removes both errors -> the smallest such, 0.8.
    # Class 1: one object predicted 0.6: plain rounding (0.5) is right, a gate above 0.6 would lose it.
    truth = np.array([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 2.0]])
    predicted = np.array([[0.75, 0.6], [0.75, 0.0], [0.1, 0.2], [0.0, 2.2]])
    thresholds = choose_gate(truth, predicted)
    assert thresholds.tolist() == [0.8, 0.5]
    gated = apply_gate(predicted, thresholds)
    assert gated[:, 0].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert np.round(gated[:, 1]).tolist() == np.round(predicted[:, 1]).tolist()  # 0.5: plain rounding
    assert apply_gate(predicted, None) is not None and (apply_gate(predicted, None) == predicted).all()


def test_per_class_and_transformed_regressors_shape_and_values() -> None:
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y = np.stack([np.abs(X[:, 0]) * 3, np.abs(X[:, 1])], axis=1) ** 2
    per_class = PerClassRegressor(LinearRegression).fit(X, y)
    joint = LinearRegression().fit(X, y)
    # Least squares is separable over outputs: one fit per class equals the joint fit.
    assert per_class.predict(X) == pytest.approx(joint.predict(X))
    wrapped = TransformedRegressor(LinearRegression(), "sqrt").fit(X, y)
    assert wrapped.predict(X).shape == y.shape and (wrapped.predict(X) >= 0).all()


def test_flipped_preparation_is_the_mirrored_view(coco_voc20_root: Path) -> None:
    from counting.data.imaging import load_image
    from counting.features.backbones import Preprocessing, get_backbone

    photo = sorted((coco_voc20_root / "JPEGImages").glob("*.jpg"))[0]
    backbone = get_backbone("efficientnet-lite0")
    plain = backbone.prepare(load_image(photo), Preprocessing(input_size=96))
    mirrored = backbone.prepare(load_image(photo), Preprocessing(input_size=96, flip=True))
    assert torch.equal(mirrored, plain.flip(-1))
    assert Preprocessing(input_size=96).fingerprint() != Preprocessing(input_size=96, flip=True).fingerprint()
    assert "flip" not in Preprocessing(input_size=96).fingerprint()  # earlier cache keys unchanged


def test_voc_model_on_real_photos_keeps_transform_gate_and_flip(
    coco_voc20_root: Path, session_cache_dir: Path, tmp_path: Path
) -> None:
    from counting.data.datasets import load_dataset
    from counting.features import FeatureCache
    from counting.model.counting_model import CountingModel
    from counting.train.pipeline import TrainingConfig, train_model

    data = load_dataset("voc", coco_voc20_root, split="random:0.25:0")
    # A few photos keep it fast: the first 40 train and 4 test photos of the split.
    data.samples = [s for s in data.samples if s.split == "train"][:40] + [
        s for s in data.samples if s.split == "test"
    ][:4]
    config = TrainingConfig(
        input_size=64, n_centers=4, max_epochs=3, target_transform="sqrt", gate=True, flip_average=True
    )
    cache = FeatureCache(session_cache_dir)
    model = train_model(data, config, cache=cache, split="random:0.25:0 (first 40 train)")
    assert model.target_transform == "sqrt" and model.flip_average
    assert model.gate is not None and len(model.gate) == 20 and min(model.gate) >= 0.5
    assert {"mrmse", "m_rel_rmse", "mrmse_nz"} <= set(model.validation_metrics)
    loaded = CountingModel.load(model.save(tmp_path / "voc.npz"))
    assert (loaded.target_transform, loaded.gate, loaded.flip_average) == ("sqrt", model.gate, True)

    test = data.subset("test")
    paths = [str(path) for path in test.paths]
    counts = loaded.count_paths(paths, cache=cache).counts
    # The file path (cached flip-averaged descriptors) and the in-memory path (video frames) agree.
    from counting.data.imaging import load_image

    in_memory = np.concatenate([loaded.count_images([load_image(path)]) for path in paths])
    assert counts == pytest.approx(in_memory, abs=1e-3)
    # Counts are the inverse transform of the regressor's output, gated per class.
    from counting.features import extract_features
    from counting.features.flip import flip_averaging

    features = flip_averaging(extract_features)(
        paths, loaded.get_backbone(), loaded.preprocessing(), cache=cache, progress=False
    ).features
    raw = np.clip(loaded.regressor.predict(features.astype(float)), 0, None) ** 2
    assert counts == pytest.approx(apply_gate(raw, loaded.gate), abs=1e-6)


def test_a_cluster_refuses_flip_averaged_extraction() -> None:
    from counting.apply.distributed import extract_features_distributed
    from counting.apply.distributed.cluster import ClusterError
    from counting.features.backbones import Preprocessing, get_backbone

    # Checked before any task is sent: the workers would not mirror the photos.
    with pytest.raises(ClusterError, match="--flip-average"):
        extract_features_distributed(
            ["a.jpg"], get_backbone("efficientnet-lite0"), Preprocessing(input_size=64, flip=True), client=None
        )
