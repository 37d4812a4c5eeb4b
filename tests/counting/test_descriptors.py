"""Descriptor kinds: spec strings, feature-map sums over the ROI, perspective weighting, cache keys,
model files, and the same sums on both runtimes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from counting.features.backbones import Preprocessing, get_backbone
from counting.features.cache import settings_key
from counting.features.descriptors import (
    Descriptor,
    DescriptorError,
    DescriptorSpec,
    compact_map,
    expand_map,
    parse_descriptor,
    region_sums,
)
from counting.features.extract import extraction_settings

LAYER = "block10"  # one map list in every test below: one ONNX export per test session


# -- spec strings ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("scores", DescriptorSpec()),
        ("pooled", DescriptorSpec(kind="pooled")),
        ("sum:block10", DescriptorSpec(kind="sum", layers=("block10",))),
        (
            " SUM:block10+final , perspective, levels=1+2",
            DescriptorSpec(kind="sum", layers=("block10", "final"), perspective=True, levels=(1, 2)),
        ),
        ("mean:final,levels=2", DescriptorSpec(kind="mean", layers=("final",), levels=(2,))),
    ],
)
def test_spec_strings_parse_and_print_back(text: str, spec: DescriptorSpec) -> None:
    parsed = parse_descriptor(text)
    assert parsed == spec
    assert parse_descriptor(parsed.text) == parsed


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("histogram", "unknown kind 'histogram'"),
        ("sum", "name the feature maps"),
        ("sum:block10+", "name the feature maps"),
        ("sum:block10+block10", "named twice"),
        ("sum:block10,tilted", "unknown option 'tilted'"),
        ("sum:block10,levels=0", "from 1 to 8"),
        ("sum:block10,levels=1+1", "distinct"),
        ("sum:block10,levels=a", "joined by '+'"),
        ("scores:block10", "takes no layers"),
        ("pooled,perspective", "takes no layers"),
    ],
)
def test_bad_specs_give_one_line_errors(text: str, problem: str) -> None:
    with pytest.raises(DescriptorError) as error:
        parse_descriptor(text)
    message = str(error.value)
    assert problem in message and text.strip() in message and "\n" not in message


def test_perspective_needs_a_map_and_unknown_maps_are_named() -> None:
    with pytest.raises(DescriptorError, match="has no perspective map"):
        Descriptor.build("sum:block10,perspective", None, source="photos")
    backbone = SimpleNamespace(name="net", taps={"block10": "x"})
    with pytest.raises(DescriptorError, match="net has no feature map 'block99'"):
        Descriptor.build("sum:block99").check(backbone)


# -- sums -----------------------------------------------------------------------------------
def test_region_sums_equal_hand_computed_sums() -> None:
    fmap = np.arange(2 * 3 * 4 * 6, dtype=np.float32).reshape(2, 3, 4, 6)
    weight = np.zeros((4, 6), np.float32)
    weight[1:, 2:] = 0.5  # an ROI covering part of the map, half weight
    weight[0, 0] = 2.0
    out = region_sums(fmap, weight, (1, 2))
    assert out.shape == (2, (1 + 4) * 3)
    for b in range(2):
        for c in range(3):
            total = sum(fmap[b, c, y, x] * weight[y, x] for y in range(4) for x in range(6))
            assert out[b, c] == pytest.approx(total)
            # 2x2 cells, row-major: rows [0,2) [2,4), columns [0,3) [3,6)
            for cell, (ys, xs) in enumerate([((0, 2), (0, 3)), ((0, 2), (3, 6)), ((2, 4), (0, 3)), ((2, 4), (3, 6))]):
                part = sum(fmap[b, c, y, x] * weight[y, x] for y in range(*ys) for x in range(*xs))
                assert out[b, 3 + cell * 3 + c] == pytest.approx(part)
    means = region_sums(fmap, weight, (1, 2), mean=True)
    assert means[0, 0] == pytest.approx(out[0, 0] / weight.sum())
    # The top-left cell holds two weighted pixels: (0, 0) with 2 and (1, 2) with 0.5.
    assert means[1, 3 + 0 * 3 + 2] == pytest.approx((2 * fmap[1, 2, 0, 0] + 0.5 * fmap[1, 2, 1, 2]) / 2.5)


def test_odd_sides_cells_partition_the_map() -> None:
    fmap = np.random.default_rng(0).normal(size=(1, 2, 5, 7)).astype(np.float32)
    weight = np.ones((5, 7), np.float32)
    out = region_sums(fmap, weight, (1, 3))
    cells = out[0, 2:].reshape(9, 2)
    assert np.allclose(cells.sum(axis=0), out[0, :2], atol=1e-4)


def test_perspective_and_roi_weights() -> None:
    rows = np.repeat(np.arange(1.0, 9.0)[:, None], 6, axis=1)  # (8, 6): weight grows with the row
    descriptor = Descriptor.build("sum:final,perspective", rows)
    ones = {"final": np.ones((1, 1, 8, 6), np.float32)}
    assert descriptor.from_maps(ones, None)[0, 0] == pytest.approx(6 * 36)
    # At half resolution each map pixel carries the mean weight of the 2x2 pixels it covers.
    half = {"final": np.ones((1, 1, 4, 3), np.float32)}
    assert descriptor.from_maps(half, None)[0, 0] == pytest.approx(3 * (1.5 + 3.5 + 5.5 + 7.5))
    roi = np.zeros((8, 6), bool)
    roi[:, :3] = True  # left half
    assert descriptor.from_maps(ones, roi)[0, 0] == pytest.approx(3 * 36)
    plain = Descriptor.build("sum:final")
    assert plain.from_maps(half, roi)[0, 0] == pytest.approx(6.0)  # 4 rows x 1.5 columns inside


def test_compact_perspective_map_is_small_and_close(mall_root: Path) -> None:
    from counting.data.datasets import load_dataset

    perspective = load_dataset("mall", mall_root, split="train=1-2,test=3-4").perspective_map
    code = compact_map(perspective)
    assert code["shape"] == [480, 640] and len(code["values"]) == 480 and len(code["values"][0]) == 1
    restored = expand_map(code)
    assert restored.shape == perspective.shape
    assert np.max(np.abs(restored - perspective) / perspective) < 1e-5
    varying = np.outer(np.linspace(1, 2, 300), np.linspace(1, 3, 400))  # smooth, varying both ways
    small = compact_map(varying)
    assert np.shape(small["values"]) == (96, 96)
    assert np.max(np.abs(expand_map(small) - varying) / varying) < 0.02


# -- cache keys -----------------------------------------------------------------------------
def test_cache_keys_separate_every_descriptor_and_keep_the_old_ones() -> None:
    backbone = SimpleNamespace(name="efficientnet-lite0", weights_sha256="ab" * 32, runtime="onnxruntime")
    prep = Preprocessing(input_size=224)
    rows = np.repeat(np.arange(1.0, 9.0)[:, None], 6, axis=1)

    def key(descriptor: Descriptor | None, pooled: bool = False) -> str:
        return settings_key(extraction_settings(backbone, prep, None, pooled, descriptor))

    keys = [
        key(None),
        key(None, pooled=True),
        key(Descriptor.build("sum:block10")),
        key(Descriptor.build("mean:block10")),
        key(Descriptor.build("sum:block10,levels=1+2")),
        key(Descriptor.build("sum:block10+final")),
        key(Descriptor.build("sum:block10,perspective", rows)),
        key(Descriptor.build("sum:block10,perspective", rows * 2)),
    ]
    assert len(set(keys)) == len(keys)
    # Class scores and pooled features keep the keys caches were filled with before descriptors.
    assert key(Descriptor.build("scores")) == keys[0] and key(Descriptor.build("pooled"), pooled=True) == keys[1]


# -- real frames ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mall_small(mall_root: Path):
    from counting.data.datasets import load_dataset

    return load_dataset("mall", mall_root, split="train=1-30,test=31-36")


def test_model_round_trip_and_count_with_a_sum_model(mall_small, tmp_path: Path, session_cache_dir: Path) -> None:
    from counting.data.imaging import load_image
    from counting.features import FeatureCache
    from counting.model.counting_model import CountingModel
    from counting.train.pipeline import TrainingConfig, train_model

    config = TrainingConfig(
        input_size=160, descriptor=f"sum:{LAYER},perspective", n_centers=5, calibration="none", max_epochs=5
    )
    model = train_model(mall_small, config, cache=FeatureCache(session_cache_dir))
    path = model.save(tmp_path / "sum.npz")
    loaded = CountingModel.load(path)
    assert loaded.descriptor.text == f"sum:{LAYER},perspective"
    assert loaded.metadata()["format_version"] == 2 and loaded.training["descriptor"] == loaded.descriptor.text
    test = mall_small.subset("test")
    counted = loaded.count_paths(test.paths)
    assert counted.ok.all() and counted.counts.shape == (6,)
    # The same counts from images in memory (the video path) and from the model before saving.
    frames = [load_image(p) for p in test.paths]
    assert np.allclose(loaded.count_images(frames), counted.counts, atol=1e-6)
    assert np.allclose(model.count_paths(test.paths).counts, counted.counts, atol=1e-6)
    # Counts of people, near the truth (20-40 per frame): the sums carry the count.
    assert np.all(np.abs(counted.counts - test.counts) < 15)


def test_default_model_still_counts_with_class_scores() -> None:
    from counting.model.counting_model import default_model_path, load_model

    model = load_model(default_model_path().parent / "default.npz")  # the Mall class-score model
    assert model.descriptor is None and "descriptor" not in model.metadata()
    assert model.metadata()["format_version"] == 1


def test_both_runtimes_give_the_same_sums(mall_small) -> None:
    onnx = get_backbone("efficientnet-lite0", runtime="onnxruntime")
    torch_net = get_backbone("efficientnet-lite0", runtime="torch")
    assert onnx.runtime == "onnxruntime" and torch_net.runtime == "torch"
    descriptor = Descriptor.build(f"sum:{LAYER},perspective,levels=1+2", mall_small.perspective_map)
    prep = Preprocessing(input_size=160, roi_mask=mall_small.roi_mask)
    from counting.data.imaging import load_image

    batch = np.stack([onnx.prepare(load_image(p), prep).numpy() for p in mall_small.paths[:2]])
    a = descriptor.compute(onnx, batch, prep.roi_mask)
    b = descriptor.compute(torch_net, batch, prep.roi_mask)
    assert a.shape == b.shape == (2, 5 * 112)
    scale = np.abs(b).max()
    assert np.max(np.abs(a - b)) / scale < 1e-4


def test_compare_runs_the_methods_on_each_descriptor(mall_root: Path, session_cache_dir: Path, tmp_path: Path) -> None:
    import csv

    from typer.testing import CliRunner

    from counting.cli.app import app

    arguments = ["compare", "-d", "mall", "-r", str(mall_root), "--split", "train=1-40,test=41-52"]
    arguments += ["--input-size", "64", "--grid", "none", "--methods", "ridge", "--tiled-methods", ""]
    arguments += ["--descriptor", f"sum:{LAYER},perspective", "--descriptor", "SUM:block10 , levels=1+2"]
    arguments += ["--out", str(tmp_path), "--cache-dir", str(session_cache_dir)]
    result = CliRunner().invoke(app, arguments, catch_exceptions=False, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    with open(tmp_path / "compare-mall.csv", newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["source"] == "measured here"]
    features = [row["features"] for row in rows if row["method"].lower().startswith("ridge")]
    assert features == ["whole frame", f"sum:{LAYER},perspective", f"sum:{LAYER},levels=1+2"]
    maes = [float(row["mae"]) for row in rows if row["method"].lower().startswith("ridge")]
    assert all(np.isfinite(maes))
    assert maes[1] < maes[0]  # 40 frames at 64 px: the weighted sums already beat the class scores
    assert "sum:block10,perspective" in result.output and "published" in result.output
    published = CliRunner().invoke(app, [*arguments[:-4], "--descriptor", "sum:block10,tilted"])
    assert published.exit_code != 0 and "unknown option 'tilted'" in published.output


def test_pooled_pyramid_model_counts_the_same_from_files_and_frames(mall_small, tmp_path: Path) -> None:
    from counting.data.imaging import load_image
    from counting.model.counting_model import CountingModel
    from counting.train.pipeline import TrainingConfig, train_model

    config = TrainingConfig(
        input_size=96, descriptor="pooled", grid=(2, 2), layout="pyramid", n_centers=5, calibration="none", max_epochs=3
    )
    model = CountingModel.load(train_model(mall_small, config).save(tmp_path / "pooled.npz"))
    assert model.descriptor.text == "pooled" and model.feature_dim == 1280
    test = mall_small.subset("test")
    counted = model.count_paths(test.paths)
    assert counted.ok.all()
    assert np.allclose(model.count_images([load_image(p) for p in test.paths]), counted.counts, atol=1e-6)
