"""The onnxruntime layer: export, reuse, damaged or stale files, fallback to torch, same descriptors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from agp import AGPRegressor
from counting.core.errors import BackboneError
from counting.data.imaging import image_size, load_image
from counting.features import FeatureCache, extract_features
from counting.features.backbones import (
    Backbone,
    Preprocessing,
    configure_runtime,
    default_runtime,
    get_backbone,
    onnx_export,
)
from counting.features.backbones.base import adaptive_average_pool
from counting.features.backbones.runtime import default_threads
from counting.features.extract import batches_by_shape, extraction_settings
from counting.model.counting_model import CountingModel, load_model

TOLERANCE = 1e-4  # the bound between runtimes


@pytest.fixture(scope="session")
def export_dir() -> Path:
    """The test session's export folder (tests/conftest.py): one real export for all tests."""
    return onnx_export.default_export_dir()


@pytest.fixture
def cheap_exports(onnx_net: Backbone, monkeypatch) -> list[int]:
    """Exports return the session export's bytes (the probe check still runs): a rebuild costs
    a second, not a trace. Returns a list that grows by one per export."""
    data = _export_file(onnx_net).read_bytes()
    calls: list[int] = []

    def export_bytes(backbone, outputs):
        calls.append(1)
        return data

    monkeypatch.setattr(onnx_export, "export_bytes", export_bytes)
    return calls


@pytest.fixture(scope="session")
def onnx_net(export_dir: Path) -> Backbone:
    return get_backbone("efficientnet-lite0", runtime="onnxruntime", export_dir=export_dir)


@pytest.fixture(scope="session")
def torch_net() -> Backbone:
    backbone = get_backbone("efficientnet-lite0", runtime="torch")
    backbone.trace_after = 1_000_000  # eager: the reference
    return backbone


@pytest.fixture(scope="session")
def china() -> Image.Image:
    from sklearn.datasets import load_sample_image

    return Image.fromarray(load_sample_image("china.jpg"))


def _export_file(backbone: Backbone) -> Path:
    return backbone._onnx[("final",)].path


# -- export and reuse ----------------------------------------------------------------------
def test_export_is_written_with_its_description(onnx_net: Backbone, export_dir: Path) -> None:
    assert onnx_net.runtime == "onnxruntime"
    path = _export_file(onnx_net)
    assert path.parent == export_dir and path.name.startswith(f"efficientnet-lite0-{onnx_net.weights_sha256[:12]}-")
    description = json.loads(path.with_suffix(".json").read_text())
    assert description["backbone"] == "efficientnet-lite0"
    assert description["weights_sha256"] == onnx_net.weights_sha256
    assert description["outputs"] == ["final"]
    assert description["onnx_sha256"] == onnx_export.hashlib.sha256(path.read_bytes()).hexdigest()
    assert 0 < description["max_abs_diff"] <= onnx_export.TOLERANCE
    assert not list(export_dir.glob(".*.tmp"))  # written under temporary names, then renamed


def test_export_is_reused_not_rebuilt(onnx_net: Backbone, export_dir: Path, monkeypatch) -> None:
    path = _export_file(onnx_net)
    before = path.stat().st_mtime_ns

    def no_export(*args, **kwargs):
        raise AssertionError("exported again")

    monkeypatch.setattr(onnx_export, "export_bytes", no_export)
    again = get_backbone("efficientnet-lite0", runtime="onnxruntime", export_dir=export_dir)
    assert again.runtime == "onnxruntime" and _export_file(again) == path
    assert path.stat().st_mtime_ns == before


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "stale description", "no description"])
def test_damaged_or_stale_export_is_rebuilt(
    onnx_net: Backbone, tmp_path: Path, damage: str, cheap_exports: list[int]
) -> None:
    original = _export_file(onnx_net)
    target = tmp_path / original.name
    shutil.copy(original, target)
    shutil.copy(original.with_suffix(".json"), target.with_suffix(".json"))
    data = target.read_bytes()
    if damage == "truncated":
        target.write_bytes(data[: len(data) // 2])
    elif damage == "flipped byte":  # still a loadable model, with one wrong weight
        position = len(data) - 1000
        target.write_bytes(data[:position] + bytes([data[position] ^ 0xFF]) + data[position + 1 :])
    elif damage == "stale description":
        description = json.loads(target.with_suffix(".json").read_text())
        description["export_version"] = onnx_export.EXPORT_VERSION - 1
        target.with_suffix(".json").write_text(json.dumps(description))
    else:
        target.with_suffix(".json").unlink()
    rebuilt = onnx_export.load_or_export(onnx_net, ("final",), tmp_path, threads=1)
    assert rebuilt.path == target and len(cheap_exports) == 1
    description = json.loads(target.with_suffix(".json").read_text())
    assert description["onnx_sha256"] == onnx_export.hashlib.sha256(target.read_bytes()).hexdigest()
    assert description["export_version"] == onnx_export.EXPORT_VERSION
    batch = onnx_export.probe_batches()[1]
    np.testing.assert_allclose(rebuilt.run(batch)[0], onnx_net._onnx[("final",)].run(batch)[0], atol=1e-5)


def test_export_that_differs_from_torch_falls_back_with_one_warning(
    tmp_path: Path, monkeypatch, cheap_exports: list[int]
) -> None:
    monkeypatch.setattr(onnx_export, "TOLERANCE", 0.0)  # the real difference (~2e-5) now fails the check
    with pytest.warns(RuntimeWarning) as caught:
        backbone = get_backbone("efficientnet-lite0", runtime="onnxruntime", export_dir=tmp_path)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "\n" not in messages[0]
    assert messages[0].startswith("efficientnet-lite0: ONNX export differs from torch by ")
    assert messages[0].endswith("running efficientnet-lite0 on torch instead")
    assert backbone.runtime == "torch" and len(cheap_exports) == 1
    assert not list(tmp_path.glob("*.onnx"))  # a rejected export is not kept
    assert backbone.forward(onnx_export.probe_batches()[1]).shape == (1, 1000)


def test_export_that_fails_falls_back_to_torch(tmp_path: Path, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("unsupported operator\nsecond line")

    monkeypatch.setattr(onnx_export, "export_bytes", broken)
    with pytest.warns(RuntimeWarning, match=r"^efficientnet-lite0: ONNX export failed \(unsupported operator\)"):
        backbone = get_backbone("efficientnet-lite0", runtime="onnxruntime", export_dir=tmp_path)
    assert backbone.runtime == "torch"


def test_unknown_runtime_and_output_names_are_one_line_errors(onnx_net: Backbone) -> None:
    with pytest.raises(BackboneError, match="tensorrt: unknown runtime"):
        get_backbone("efficientnet-lite0", runtime="tensorrt")
    with pytest.raises(BackboneError, match="no feature map named 'block99'"):
        onnx_net.feature_maps(onnx_export.probe_batches()[1], ["block99"])


# -- same descriptors ----------------------------------------------------------------------
def test_china_descriptors_agree_with_torch(onnx_net: Backbone, torch_net: Backbone, china: Image.Image) -> None:
    for size in (224, 97):  # 224x320 and an odd 97x139: dynamic shapes with "same" padding
        batch = onnx_net.prepare(china, Preprocessing(input_size=size))[None]
        scores = onnx_net.forward(batch)
        reference = torch_net.eager_forward(batch)
        assert np.abs(scores - reference).max() <= TOLERANCE
        assert int(scores.argmax()) == int(reference.argmax())
        assert np.abs(onnx_net.forward_pooled(batch) - torch_net.forward_pooled(batch)).max() <= TOLERANCE


def test_mall_descriptors_agree_with_torch(onnx_net: Backbone, torch_net: Backbone, mall_root: Path) -> None:
    frames = [load_image(mall_root / "frames" / f"seq_{i:06d}.jpg") for i in (1, 400, 800)]
    batch = [onnx_net.prepare(frame, Preprocessing(input_size=224)) for frame in frames]
    assert np.abs(onnx_net.forward(batch) - torch_net.forward(batch)).max() <= TOLERANCE
    for grid in ((3, 4), (7, 10)):
        assert np.abs(onnx_net.forward_grid(batch, grid) - torch_net.forward_grid(batch, grid)).max() <= TOLERANCE
        pooled = onnx_net.forward_grid_pooled(batch, grid)
        assert np.abs(pooled - torch_net.forward_grid_pooled(batch, grid)).max() <= TOLERANCE


def test_intermediate_feature_maps_come_from_one_export(
    onnx_net: Backbone, torch_net: Backbone, mall_root: Path
) -> None:
    batch = onnx_net.prepare(load_image(mall_root / "frames" / "seq_000001.jpg"), Preprocessing(input_size=224))[None]
    maps = onnx_net.feature_maps(batch, ["block10", "final"])
    reference = torch_net.feature_maps(batch, ["block10", "final"])
    assert maps["block10"].shape == (1, 112, 14, 19) and maps["final"].shape == (1, 1280, 7, 10)
    for name in maps:
        assert np.abs(maps[name] - reference[name]).max() <= TOLERANCE
    assert ("block10", "final") in onnx_net._onnx  # its own export, beside the final-map one


def test_intermediate_maps_fall_back_to_torch_when_their_export_fails(
    onnx_net: Backbone, torch_net: Backbone, cheap_exports: list[int]
) -> None:
    batch = onnx_export.probe_batches()[1]  # the cheap export lacks "block3": its probe fails
    with pytest.warns(RuntimeWarning, match="computing block3, final on torch instead"):
        maps = onnx_net.feature_maps(batch, ["block3", "final"])
    assert onnx_net.runtime == "onnxruntime" and len(cheap_exports) == 1
    reference = torch_net.feature_maps(batch, ["block3", "final"])
    np.testing.assert_allclose(maps["block3"], reference["block3"], atol=1e-6)
    onnx_net.feature_maps(batch, ["block3", "final"])  # remembered: no second export attempt
    assert len(cheap_exports) == 1


def test_numpy_cell_pooling_equals_torch_adaptive_pooling() -> None:
    fmap = np.random.default_rng(0).standard_normal((2, 5, 7, 10)).astype(np.float32)
    for grid in ((1, 1), (3, 4), (4, 3), (7, 10), (2, 7)):
        expected = torch.nn.functional.adaptive_avg_pool2d(torch.from_numpy(fmap), grid)
        expected = expected.permute(0, 2, 3, 1).reshape(2, grid[0] * grid[1], 5).numpy()
        np.testing.assert_allclose(adaptive_average_pool(fmap, grid), expected, rtol=1e-6, atol=1e-6)


# -- mixed sizes, cache key, model file, threads ------------------------------------------
def test_photos_of_mixed_sizes_batch_by_shape_with_unchanged_descriptors(
    onnx_net: Backbone, china: Image.Image, tmp_path: Path
) -> None:
    sizes = [(320, 240), (200, 300), (320, 240), (257, 171), (200, 300), (320, 240)]
    paths = []
    for index, size in enumerate(sizes):
        path = tmp_path / f"photo{index}.jpg"
        china.resize(size).save(path, quality=92)
        paths.append(str(path))
    prep = Preprocessing(input_size=96)
    chunks = batches_by_shape(list(range(len(paths))), paths, prep, batch_size=4)
    assert sorted(index for chunk in chunks for index in chunk) == list(range(len(paths)))
    for chunk in chunks:
        assert len({prep.target_size(*image_size(paths[index])[::-1]) for index in chunk}) == 1
    assert sorted(map(len, chunks)) == [1, 2, 3]  # three shapes, one batch each
    together = extract_features(paths, onnx_net, prep, batch_size=4, progress=False).features
    one_by_one = np.stack([extract_features([path], onnx_net, prep, progress=False).features[0] for path in paths])
    # The fc head's float32 product sums in another order for another batch size (AVX2 OpenBLAS:
    # 1.3e-5 on a score of 20.8): equal to float32 rounding, well inside the 1e-4 the runtimes keep.
    np.testing.assert_allclose(together, one_by_one, rtol=2e-6, atol=1e-5)
    assert np.abs(together[0] - together[1]).max() > 0.1  # rows stay with their own image


def test_cache_key_records_the_runtime(
    onnx_net: Backbone, torch_net: Backbone, mall_root: Path, tmp_path: Path
) -> None:
    paths = [mall_root / "frames" / f"seq_{i:06d}.jpg" for i in (1, 2)]
    prep = Preprocessing(input_size=64)
    cache = FeatureCache(tmp_path)
    results = {
        net.runtime: extract_features(paths, net, prep, cache=cache, progress=False) for net in (onnx_net, torch_net)
    }
    assert all(result.n_computed == 2 for result in results.values())  # not served from the other's entries
    recorded = sorted(json.loads(path.read_text())["runtime"] for path in tmp_path.glob("*/settings.json"))
    assert recorded == ["onnxruntime", "torch"]
    assert extraction_settings(onnx_net, prep, None, False) != extraction_settings(torch_net, prep, None, False)
    assert np.abs(results["onnxruntime"].features - results["torch"].features).max() <= TOLERANCE


def test_model_trained_on_one_runtime_predicts_with_the_other(
    onnx_net: Backbone, torch_net: Backbone, mall_root: Path, tmp_path: Path
) -> None:
    paths = [str(mall_root / "frames" / f"seq_{i:06d}.jpg") for i in range(1, 25)]
    prep = Preprocessing(input_size=64)
    features = extract_features(paths, torch_net, prep, progress=False).features
    counts = np.linspace(10, 40, len(paths))
    regressor = AGPRegressor(n_centers=4, max_epochs=3, validation_fraction=6, random_state=0).fit(features, counts)
    model = CountingModel(regressor=regressor, backbone="efficientnet-lite0", runtime="torch", input_size=64)
    loaded = CountingModel.load(model.save(tmp_path / "model.npz"))
    assert loaded.runtime == "torch" and loaded.metadata()["backbone"]["runtime"] == "torch"
    try:
        configure_runtime("onnxruntime")
        on_onnx = loaded.count_paths(paths[:8])
        configure_runtime("torch")
        on_torch = loaded.count_paths(paths[:8])
    finally:
        configure_runtime(None)
    assert loaded.get_backbone().runtime == "onnxruntime"  # the default again
    assert on_onnx.ok.all() and on_torch.ok.all()
    np.testing.assert_allclose(on_onnx.counts, on_torch.counts, atol=0.01)


def test_shipped_model_counts_the_same_on_both_runtimes(mall_root: Path) -> None:
    from counting.model.counting_model import default_model_path

    model = load_model(default_model_path().parent / "default.npz")  # the Mall class-score model
    assert model.runtime is None  # trained before runtimes were recorded (torch)
    paths = [mall_root / "frames" / f"seq_{i:06d}.jpg" for i in (601, 650, 700, 750, 800)]
    counts = {}
    try:
        for runtime in ("onnxruntime", "torch"):
            configure_runtime(runtime)
            counts[runtime] = model.count_paths(paths).counts
    finally:
        configure_runtime(None)
    np.testing.assert_allclose(counts["onnxruntime"], counts["torch"], atol=0.01)


def test_threads_follow_the_setting(monkeypatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    try:
        configure_runtime(None, 3)
        assert default_threads() == 3 and default_runtime() == "onnxruntime"
        configure_runtime("torch", None)
        assert default_runtime() == "torch" and default_threads() >= 1
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        assert default_threads() == 1
    finally:
        configure_runtime(None)
    with pytest.raises(ValueError, match="threads must be 1 to"):
        configure_runtime(None, 0)


def test_batches_split_over_threads_give_the_same_maps_bit_for_bit(export_dir: Path, mall_root: Path) -> None:
    two = get_backbone("efficientnet-lite0", runtime="onnxruntime", export_dir=export_dir, threads=2)
    one = get_backbone("efficientnet-lite0", runtime="onnxruntime", export_dir=export_dir, threads=1)
    prep = Preprocessing(input_size=160)
    frames = sorted((mall_root / "frames").glob("seq_*.jpg"))[:5]
    batch = np.stack([two.prepare(load_image(path), prep).numpy() for path in frames])
    split = two._onnx[("final",)]
    assert split.parallel is not None and one._onnx[("final",)].parallel is None
    calls: list[int] = []
    original = split.parallel.run
    split.parallel = _CountingSession(original, calls)
    maps = two.feature_maps(batch, ["block10", "final"])
    split_final = split.run(batch)[0]
    assert sorted(calls) == [2, 3]  # the 5 frames ran as two parts, one per thread
    assert np.array_equal(split_final, one._onnx[("final",)].run(batch)[0])
    np.testing.assert_array_equal(maps["block10"], one.feature_maps(batch, ["block10"])["block10"])
    # A single image has nothing to split: it runs on the multi-threaded session.
    calls.clear()
    assert np.array_equal(split.run(batch[:1])[0], split_final[:1]) and calls == []


class _CountingSession:
    def __init__(self, run, calls: list[int]) -> None:
        self._run, self._calls = run, calls

    def run(self, names, feeds):
        self._calls.append(len(next(iter(feeds.values()))))
        return self._run(names, feeds)


def test_exported_files_follow_the_umask_like_any_new_file(
    onnx_net: Backbone, tmp_path: Path, cheap_exports: list[int]
) -> None:
    import os

    previous = os.umask(0o022)
    try:
        onnx_export.load_or_export(onnx_net, ("final",), tmp_path, threads=1)
    finally:
        os.umask(previous)
    exported = next(tmp_path.glob("*.onnx"))
    # readable by the other users of a shared cache (mkstemp alone gives 0600)
    assert (exported.stat().st_mode & 0o777) == 0o644
    assert (exported.with_suffix(".json").stat().st_mode & 0o777) == 0o644


def test_cpu_description_names_the_cpu_and_its_vector_extensions() -> None:
    from counting.features.backbones.runtime import cpu_description

    text = cpu_description()
    with open("/proc/cpuinfo", encoding="utf-8") as handle:
        info = handle.read()
    model = next(line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name"))
    assert text.startswith(model + " (") and text.endswith(")")
    assert ("avx2" in text) == (" avx2" in info)
