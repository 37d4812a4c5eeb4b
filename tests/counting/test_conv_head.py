"""The conv density head: its network, file section, training on generated maps, and a
``--head-kind conv`` counting model on real Mall frames."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from counting.data.datasets import load_dataset
from counting.data.imaging import load_image
from counting.features import FeatureCache
from counting.heads.density.conv import training as conv_training
from counting.heads.density.conv.fitting import ConvSettings, fit_conv_head, stride8_maps
from counting.heads.density.conv.head import ConvDensityHead, build_network, parameter_shapes
from counting.heads.density.conv.persistence import conv_head_from_document, conv_head_to_document
from counting.heads.density.maps import extract_maps
from counting.heads.density.persistence import DensityHeadError, head_from_document, head_to_document
from counting.model.counting_model import load_model
from counting.train.pipeline import TrainingConfig, TrainingError, train_model


def random_head(channels: int = 5, width: int = 4, depth: int = 2, seed: int = 0) -> ConvDensityHead:
    rng = np.random.default_rng(seed)
    return ConvDensityHead(
        layers=("block4", "block7"),
        width=width,
        depth=depth,
        x_mean=rng.normal(size=channels),
        x_scale=rng.uniform(0.5, 2.0, channels),
        weights=[rng.normal(scale=0.3, size=shape) for shape in parameter_shapes(channels, width, depth)],
        output_scale=10.0,
        settings={"grid": [2, 2]},
    )


def test_folded_standardisation_equals_standardising_the_input() -> None:
    head = random_head()
    maps = np.random.default_rng(1).normal(2.0, 3.0, size=(2, 5, 7, 9)).astype(np.float32)
    network = build_network(5, head.width, head.depth)
    with torch.no_grad():
        for parameter, value in zip(network.parameters(), head.weights, strict=True):
            parameter.copy_(torch.from_numpy(value.astype(np.float32)))
        standardised = (maps - head.x_mean[None, :, None, None]) / head.x_scale[None, :, None, None]
        expected = network(torch.from_numpy(standardised.astype(np.float32)))[:, 0].numpy() / head.output_scale
    density = head.density(maps)
    assert density.shape == (2, 7, 9) and np.all(density >= 0)
    np.testing.assert_allclose(density, expected, rtol=1e-4, atol=1e-6)
    sums = head.region_counts(maps, None, (2, 2))
    np.testing.assert_allclose(sums[:, 0], density.sum(axis=(1, 2)), rtol=1e-9)
    np.testing.assert_allclose(sums[:, 1:].sum(axis=1), sums[:, 0], rtol=1e-9)


def test_conv_head_round_trips_through_a_model_document() -> None:
    head = random_head()
    document = head_to_document(head)
    assert document["head_kind"] == "conv" and document["stride"] == 8
    loaded = head_from_document(document, "model.npz")
    assert isinstance(loaded, ConvDensityHead) and loaded.grid == (2, 2)
    for left, right in zip(loaded.weights, head.weights, strict=True):
        np.testing.assert_array_equal(left, right)
    maps = np.random.default_rng(2).normal(size=(1, 5, 6, 6))
    np.testing.assert_array_equal(loaded.density(maps), head.density(maps))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(width=0), "width must be an integer"),
        (lambda d: d.update(stride=16), "stride must be 8"),
        (lambda d: d.update(output_scale=-1.0), "output_scale must be a positive number"),
        (lambda d: d["arrays"].pop("weight3"), "missing or unknown"),
        (lambda d: d.update(depth=3), "missing or unknown"),
        (lambda d: d["arrays"].update(weight0=d["arrays"]["weight2"]), "weight0 has shape"),
    ],
)
def test_damaged_conv_sections_are_one_line_errors(edit, message: str) -> None:
    assert_refused(conv_head_to_document(random_head()), edit, message)


def assert_refused(document: dict, edit, message: str) -> None:
    """``edit`` applied to a conv head section makes reading it a one-line error saying ``message``."""
    edit(document)
    with pytest.raises(DensityHeadError, match=message) as caught:
        conv_head_from_document(document, "model.npz")
    assert str(caught.value).startswith("model.npz: conv density head:") and "\n" not in str(caught.value)


def test_training_learns_a_density_that_needs_context() -> None:
    """The density of a cell is its neighbours' channel-0 mean: a per-cell map cannot see it."""
    rng = np.random.default_rng(0)
    maps, targets = [], []
    for _ in range(40):
        x = rng.normal(size=(3, 16, 16)).astype(np.float32)
        x[0] += rng.uniform(-2, 2)  # images differ in how crowded they are
        signal = np.clip(x[0], 0, None)
        padded = np.pad(signal, 1)
        neighbours = sum(padded[1 + dy : 17 + dy, 1 + dx : 17 + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)) - signal
        targets.append(neighbours / 80.0)
        maps.append(x.astype(np.float16))
    counts = np.array([target.sum() for target in targets])
    validation = np.arange(40) >= 30
    settings = ConvSettings(width=8, depth=1, crop=12, batch=8, max_steps=300, eval_every=50, patience=8)
    fit = fit_conv_head(maps, targets, counts, ["a"], validation, settings=settings)
    error = np.abs(fit.validation_sums[:, 0] - counts[validation]).mean()
    baseline = np.abs(counts[~validation].mean() - counts[validation]).mean()
    assert fit.history and fit.best_step > 0
    assert error < 0.3 * baseline, (error, baseline)  # measured 2.0 against 10.1
    np.testing.assert_allclose(fit.head.settings["validation_mae"], error, rtol=1e-4)


def ensemble_head(members: int = 3) -> ConvDensityHead:
    heads = [random_head(seed=seed) for seed in range(members)]
    head = random_head(seed=0)
    head.more_weights = [other.weights for other in heads[1:]]
    return head


def test_an_ensemble_counts_the_mean_of_its_members() -> None:
    maps = np.random.default_rng(3).normal(size=(2, 5, 6, 7))
    single = [random_head(seed=seed) for seed in range(3)]
    # Members share the standardisation: give the others the first member's.
    for head in single[1:]:
        head.x_mean, head.x_scale = single[0].x_mean, single[0].x_scale
    ensemble = ensemble_head(3)
    expected = np.mean([head.density(maps) for head in single], axis=0)
    np.testing.assert_allclose(ensemble.density(maps), expected, rtol=1e-6, atol=1e-9)
    assert len(ensemble.members) == 3 and len(ensemble.networks()) == 3
    assert not np.allclose(ensemble.density(maps), single[0].density(maps))


def test_an_ensemble_round_trips_and_a_single_head_stays_version_1() -> None:
    assert conv_head_to_document(random_head())["format_version"] == 1
    assert "members" not in conv_head_to_document(random_head())
    head = ensemble_head(3)
    document = conv_head_to_document(head)
    assert document["format_version"] == 2 and document["members"] == 3
    loaded = conv_head_from_document(document, "model.npz")
    assert len(loaded.members) == 3
    for mine, theirs in zip(loaded.members, head.members, strict=True):
        for left, right in zip(mine, theirs, strict=True):
            np.testing.assert_array_equal(left, right)
    maps = np.random.default_rng(4).normal(size=(1, 5, 6, 6))
    np.testing.assert_array_equal(loaded.density(maps), head.density(maps))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["arrays"].pop("member2_weight1"), "missing or unknown"),
        (lambda d: d.update(members=4), "missing or unknown"),
        (lambda d: d.update(members=0), "members must be an integer"),
        (lambda d: d["arrays"].update(member1_weight0=d["arrays"]["weight2"]), "member1_weight0 has shape"),
    ],
)
def test_damaged_ensemble_sections_are_one_line_errors(edit, message: str) -> None:
    assert_refused(conv_head_to_document(ensemble_head(3)), edit, message)


def test_weight_averaging_keeping_the_last_weights_learns_too() -> None:
    """EMA weights, kept at the last step: the validation part is only measured."""
    rng = np.random.default_rng(0)
    maps, targets = [], []
    for _ in range(40):
        x = rng.normal(size=(3, 16, 16)).astype(np.float32)
        x[0] += rng.uniform(-2, 2)
        targets.append(np.clip(x[0], 0, None) / 10.0)
        maps.append(x.astype(np.float16))
    counts = np.array([target.sum() for target in targets])
    validation = np.arange(40) >= 30
    settings = ConvSettings(
        width=8,
        depth=1,
        crop=12,
        batch=8,
        max_steps=200,
        eval_every=50,
        patience=1,
        ema=0.9,
        keep="last",
        learning_rate=3e-3,
    )
    fit = fit_conv_head(maps, targets, counts, ["a"], validation, settings=settings)
    error = np.abs(fit.validation_sums[:, 0] - counts[validation]).mean()
    baseline = np.abs(counts[~validation].mean() - counts[validation]).mean()
    # patience 1 would stop a "best" run early; "last" runs to the end and keeps the last weights
    assert fit.best_step == 200 and [step for step, _ in fit.history] == [50, 100, 150, 200]
    assert error < 0.1 * baseline, (error, baseline)  # measured 0.72 against 11.0
    np.testing.assert_allclose(fit.history[-1][1], error, rtol=1e-4)
    with pytest.raises(ValueError, match="keep must be"):
        fit_conv_head(maps, targets, counts, ["a"], validation, settings=replace(settings, keep="first"))
    with pytest.raises(ValueError, match="ema must be"):
        fit_conv_head(maps, targets, counts, ["a"], validation, settings=replace(settings, ema=1.0))


def test_with_the_last_weights_kept_evaluations_only_report() -> None:
    """`train` evaluates its heads 3 times, not 10: the heads must not depend on it."""
    rng = np.random.default_rng(1)
    maps = [rng.normal(size=(3, 12, 12)).astype(np.float16) for _ in range(12)]
    targets = [np.clip(item[0].astype(np.float32), 0, None) / 10 for item in maps]
    counts = np.array([target.sum() for target in targets])
    validation = np.arange(12) >= 9
    base = ConvSettings(width=4, depth=1, crop=8, batch=4, max_steps=60, ema=0.9, keep="last")
    often = fit_conv_head(maps, targets, counts, ["a"], validation, settings=replace(base, eval_every=10))
    rarely = fit_conv_head(maps, targets, counts, ["a"], validation, settings=replace(base, eval_every=60))
    assert len(often.history) == 6 and len(rarely.history) == 1
    for left, right in zip(often.head.weights, rarely.head.weights, strict=True):
        np.testing.assert_array_equal(left, right)
    assert conv_training.DEFAULT_SETTINGS.keep == "last"


@pytest.fixture(scope="module")
def mall_conv(mall_root: Path):
    return load_dataset("mall", mall_root, split="train=1-48,test=49-56")


@pytest.fixture(scope="module")
def conv_model(mall_conv, session_cache_dir: Path):
    quick = ConvSettings(width=8, depth=1, batch=4, max_steps=60, eval_every=20, patience=3)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(conv_training, "DEFAULT_SETTINGS", quick)
        config = TrainingConfig(
            input_size=160,
            grid=(2, 2),
            density_head=True,
            density_kind="conv",
            n_centers=4,
            max_epochs=3,
            calibration="none",
        )
        messages: list[str] = []
        model = train_model(mall_conv, config, cache=FeatureCache(session_cache_dir), log=messages.append)
    model.log_lines = messages  # type: ignore[attr-defined]
    return model


def test_conv_model_trains_on_its_validation_quarter(conv_model) -> None:
    head = conv_model.density_head
    assert isinstance(head, ConvDensityHead) and head.layers == ("block4", "block7", "block10")
    assert head.grid == (2, 2) and conv_model.regressor.n_features_in_ == 5
    # Frames 37-48 are the validation quarter of 1-48: the AGP learns from their 12 rows.
    assert conv_model.dataset["n_train"] == 12
    assert conv_model.training["density_kind"] == "conv"
    assert conv_model.training["density_layers"] is None
    assert any("conv density head: kept step" in line for line in conv_model.log_lines)


def test_conv_model_counts_real_frames_after_a_round_trip(
    conv_model, mall_conv, session_cache_dir: Path, tmp_path: Path
) -> None:
    loaded = load_model(conv_model.save(tmp_path / "conv.npz"))
    head = loaded.density_head
    assert isinstance(head, ConvDensityHead)
    test = mall_conv.subset("test")
    cache = FeatureCache(session_cache_dir)
    result = loaded.count_paths(test.paths, cache=cache)
    # float32 networks: the same counts to float32 rounding
    np.testing.assert_allclose(result.counts, conv_model.count_paths(test.paths, cache=cache).counts, rtol=1e-6)
    from_images = loaded.count_images([load_image(path) for path in test.paths])
    np.testing.assert_allclose(result.counts, from_images, rtol=1e-3, atol=1e-3)
    # The maps the model counts from (one pass, stride 8) are the ones it was trained on
    # (each layer at its own stride, upsampled): the same density either way.
    prep = loaded.preprocessing()
    direct = extract_maps(test.paths, loaded.get_backbone(), prep, head.layers, stride=8).stacked()
    trained = np.stack(stride8_maps(test.paths, loaded.get_backbone(), prep, head.layers, dtype=np.float32))
    np.testing.assert_allclose(direct, trained, rtol=1e-4, atol=1e-4)
    density = head.density(direct)
    assert density.shape == (len(test), 20, 27) and np.all(density >= 0)  # 160 x 213 input at stride 8
    sums = head.region_counts(direct, loaded.roi_mask, head.grid)
    np.testing.assert_allclose(sums[:, 1:].sum(axis=1), sums[:, 0], rtol=1e-9)
    np.testing.assert_allclose(loaded.predict_features(sums), result.counts, rtol=1e-5)


def test_a_folded_conv_model_learns_from_every_train_frame(mall_conv, session_cache_dir: Path, tmp_path: Path) -> None:
    """folds=3: three heads, each validated on one block of frames 1-48; the AGP gets all 48 rows."""
    quick = ConvSettings(width=8, depth=1, batch=4, max_steps=40, eval_every=20, ema=0.9, keep="last", folds=3)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(conv_training, "DEFAULT_SETTINGS", quick)
        config = TrainingConfig(
            input_size=160, density_head=True, density_kind="conv", n_centers=4, max_epochs=3, calibration="none"
        )
        messages: list[str] = []
        model = train_model(mall_conv, config, cache=FeatureCache(session_cache_dir), log=messages.append)
    head = model.density_head
    assert isinstance(head, ConvDensityHead) and len(head.members) == 3 and head.settings["members"] == 3
    assert model.dataset["n_train"] == 48 and model.regressor.n_features_in_ == 1
    assert sum("validated on 16" in line for line in messages) == 3
    assert any("3 heads, out-of-fold count MAE" in line for line in messages)
    # The members differ (each fitted on other frames) and the model file keeps all three.
    assert not np.allclose(head.weights[0], head.more_weights[0][0])
    loaded = load_model(model.save(tmp_path / "folded.npz"))
    assert len(loaded.density_head.members) == 3
    test = mall_conv.subset("test")
    cache = FeatureCache(session_cache_dir)
    np.testing.assert_allclose(
        loaded.count_paths(test.paths, cache=cache).counts, model.count_paths(test.paths, cache=cache).counts, rtol=1e-6
    )
    maps = extract_maps(test.paths, loaded.get_backbone(), loaded.preprocessing(), head.layers, stride=8).stacked()
    members = [
        ConvDensityHead(
            layers=head.layers,
            width=head.width,
            depth=head.depth,
            x_mean=head.x_mean,
            x_scale=head.x_scale,
            weights=weights,
            output_scale=head.output_scale,
        ).density(maps)
        for weights in head.members
    ]
    np.testing.assert_allclose(loaded.density_head.density(maps), np.mean(members, axis=0), rtol=1e-6, atol=1e-9)


def test_conv_validation_parts_are_blocks_of_frames_or_a_random_partition() -> None:
    frames = np.arange(1, 601)
    parts = conv_training.validation_parts(frames, True, 0, 4)
    assert [(frames[part].min(), frames[part].max()) for part in parts] == [
        (1, 150),
        (151, 300),
        (301, 450),
        (451, 600),
    ]
    (tail,) = conv_training.validation_parts(frames, True, 0, 1)
    assert frames[tail].min() == 451 and tail.sum() == 150
    photos = conv_training.validation_parts(np.arange(300), False, 0, 3)
    assert sorted(int(part.sum()) for part in photos) == [100, 100, 100]
    assert np.array_equal(np.sum(photos, axis=0), np.ones(300))


def test_head_kind_needs_density_head(mall_conv) -> None:
    with pytest.raises(TrainingError, match="add --density-head"):
        train_model(mall_conv, replace(TrainingConfig(), density_kind="conv"))
