"""Per-class density heads (counting.heads.density.classes.head) on real coco-voc20 photos and boxes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from counting.core.errors import ModelFileError
from counting.heads.density.classes.head import (
    annotation_path,
    class_density_targets,
    class_head_from_document,
    class_head_to_document,
    extract_class_maps,
    fit_class_head,
    read_boxes,
)


def _photos(root: Path, split: str = "random:0.25:0"):
    from counting.data.datasets import load_dataset

    data = load_dataset("voc", root, split=split)
    return data, list(data.class_names)


@pytest.mark.parametrize("spread", ["dot", "gauss", "box"])
def test_targets_of_real_boxes_sum_to_the_counts(coco_voc20_root: Path, spread: str) -> None:
    from counting.data.imaging import image_size

    data, classes = _photos(coco_voc20_root)
    for sample in data.samples[:40]:
        boxes, labels = read_boxes(annotation_path(sample.path), classes)
        target = class_density_targets(boxes, labels, image_size(sample.path), (7, 9), len(classes), spread)
        assert target.shape == (20, 7, 9) and target.min() >= 0
        assert target.sum(axis=(1, 2)) == pytest.approx(np.asarray(sample.count, float), abs=1e-9)


def test_a_dot_lands_in_the_cell_of_its_box_centre() -> None:
    # Centres (16, 16) and (336, 208): the middle of 32-px cells (0, 0) and (6, 10).
    boxes = np.array([[6.0, 6.0, 26.0, 26.0], [286.0, 108.0, 386.0, 308.0]])
    target = class_density_targets(boxes, np.array([3, 3]), (320, 480), (10, 15), 20, "dot")
    assert target[3, 0, 0] == pytest.approx(1.0, abs=1e-6)
    assert target[3, 6, 10] == pytest.approx(1.0, abs=1e-6)
    assert target.sum() == pytest.approx(2.0)


def test_head_fitted_on_real_photos_counts_their_boxes(coco_voc20_root: Path, session_cache_dir: Path) -> None:
    from counting.data.imaging import image_size
    from counting.features import FeatureCache
    from counting.features.backbones import Preprocessing, get_backbone

    data, classes = _photos(coco_voc20_root)
    samples = [sample for sample in data.samples if sample.split == "train"][:40]
    paths = [str(sample.path) for sample in samples]
    backbone = get_backbone("efficientnet-lite0")
    maps = extract_class_maps(
        paths, backbone, Preprocessing(input_size=128), ["block14"], FeatureCache(session_cache_dir)
    )
    assert all(item.shape[0] == 192 and min(item.shape[1:]) == 4 for item in maps)  # short side 128 / 32
    targets = []
    for path, item in zip(paths, maps, strict=True):
        boxes, labels = read_boxes(annotation_path(path), classes)
        targets.append(class_density_targets(boxes, labels, image_size(path), item.shape[1:], 20, "gauss"))
    counts = np.array([sample.count for sample in samples], dtype=float)
    fold_of = np.arange(len(samples)) % 5
    head, out_of_fold = fit_class_head(maps, targets, counts, ["block14"], fold_of, grid=(2, 2))
    assert out_of_fold.shape == (40, 20 * 5)
    sums = np.stack([head.region_counts(item) for item in maps]).reshape(40, 20, 5)
    # The intercept is not shrunk, so over the training photos each class's head sums add up to
    # its number of boxes; and the cells of the 2x2 grid add up to the whole photo.
    assert sums[:, :, 0].sum(axis=0) == pytest.approx(counts.sum(axis=0), abs=1e-3)
    assert sums[:, :, 1:].sum(axis=2) == pytest.approx(sums[:, :, 0], abs=1e-6)
    # In sample the head counts the photos better than their mean does.
    assert np.abs(sums[:, :, 0] - counts).mean() < np.abs(counts.mean(axis=0) - counts).mean()

    document = class_head_to_document(head)
    again = class_head_from_document(document, "model.npz")
    assert np.stack([again.region_counts(item) for item in maps]) == pytest.approx(sums.reshape(40, -1))
    document["arrays"]["coef"]["shape"] = [192, 19]
    with pytest.raises(ModelFileError, match="model.npz: class density head: array 'coef' is damaged"):
        class_head_from_document(document, "model.npz")


@pytest.mark.slow
def test_voc_model_with_a_class_density_head_saves_loads_and_counts(
    coco_voc20_root: Path, session_cache_dir: Path, tmp_path: Path
) -> None:
    from counting.data.imaging import load_image
    from counting.features import FeatureCache
    from counting.heads.multiclass import apply_gate, inverse_transform
    from counting.model.counting_model import CountingModel
    from counting.train.pipeline import TrainingConfig, train_model

    data, _classes = _photos(coco_voc20_root)
    data.samples = [s for s in data.samples if s.split == "train"][:40] + [
        s for s in data.samples if s.split == "test"
    ][:4]
    config = TrainingConfig(
        input_size=128, n_centers=4, max_epochs=3, target_transform="log", gate=True, density_head=True
    )
    cache = FeatureCache(session_cache_dir)
    model = train_model(data, config, cache=cache, split="random:0.25:0 (first 40 train)")
    head = model.class_density_head
    assert head is not None and head.n_classes == 20 and head.layers == ("final", "block14")
    assert model.feature_dim == 20 and model.gate is not None
    loaded = CountingModel.load(model.save(tmp_path / "voc-head.npz"))
    assert loaded.class_density_head is not None and loaded.summary()["density_head"] == "per class: final,block14"

    paths = [str(path) for path in data.subset("test").paths]
    counts = loaded.count_paths(paths, cache=cache).counts
    assert counts == pytest.approx(model.count_paths(paths, cache=cache).counts, abs=1e-9)
    # Files and in-memory images (video frames) agree.
    in_memory = np.concatenate([loaded.count_images([load_image(path)]) for path in paths])
    assert counts == pytest.approx(in_memory, abs=1e-3)
    # Counts are the regressor's output on the head's class sums, back-transformed and gated.
    from counting.heads.density.classes.head import class_head_features

    features, ok, errors = class_head_features(head, paths, loaded.get_backbone(), loaded.preprocessing(), cache)
    assert ok.all() and not errors
    raw = inverse_transform(loaded.regressor.predict(features), "log")
    assert counts == pytest.approx(apply_gate(raw, loaded.gate), abs=1e-6)

    # An edited head section is refused with one line naming the file, before any photo is read.
    import json

    with np.load(tmp_path / "voc-head.npz") as archive:
        arrays = {name: archive[name] for name in archive.files}
    document = json.loads(str(arrays.pop("metadata")))
    document["user_metadata"]["class_density_head"]["layers"] = ["final"]
    edited = tmp_path / "edited.npz"
    with open(edited, "wb") as handle:
        np.savez(handle, metadata=np.array(json.dumps(document)), **arrays)
    with pytest.raises(ModelFileError, match="edited.npz: class density head layers final give 1280 channels"):
        CountingModel.load(edited).count_paths(paths, cache=cache)


def test_unreadable_photo_is_reported_not_raised(tmp_path: Path) -> None:
    from counting.features.backbones import Preprocessing, get_backbone

    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"not a jpeg")
    errors: dict[str, str] = {}
    maps = extract_class_maps(
        [bad], get_backbone("efficientnet-lite0"), Preprocessing(input_size=64), ["final"], errors=errors
    )
    assert maps == [None] and str(bad) in errors


def test_head_kind_options_are_refused_for_the_per_class_head(coco_voc20_root: Path, session_cache_dir: Path) -> None:
    from counting.features import FeatureCache
    from counting.train.pipeline import TrainingConfig, TrainingError, train_model

    data, _classes = _photos(coco_voc20_root)
    data.samples = [s for s in data.samples if s.split == "train"][:6]
    for choice in ({"density_kind": "conv"}, {"density_layers": ("block4",)}):
        config = TrainingConfig(input_size=128, n_centers=2, max_epochs=1, density_head=True, **choice)
        with pytest.raises(TrainingError, match="VOC per-class head"):
            train_model(data, config, cache=FeatureCache(session_cache_dir), split="first 6")
