"""Familiarity (issue 21 item 3): the score, its model-file section, and its acceptance figures
on real pictures (Mall frames held out of training, the 559 coco-voc20 photos, ShanghaiTech B)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from counting.apply.api import count_rows, familiarity_warning
from counting.core.errors import ModelFileError
from counting.heads.familiarity import (
    Familiarity,
    FamiliarityError,
    fit_familiarity,
    map_statistics,
    unfamiliar_summary,
)
from counting.model.counting_model import load_model

ROOT = Path(__file__).resolve().parents[2]


def _cluster(rng: np.random.Generator, n: int, shift: float = 0.0) -> np.ndarray:
    """Probes on a 6-dimensional subspace of 40 dimensions (descriptors are correlated), plus noise."""
    basis = np.random.default_rng(7).normal(size=(6, 40))
    return rng.normal(size=(n, 6)) @ basis + 0.1 * rng.normal(size=(n, 40)) + shift


def test_scores_are_calibrated_on_pictures_like_the_training_ones_and_small_on_others() -> None:
    rng = np.random.default_rng(0)
    score = fit_familiarity(_cluster(rng, 600), flag_rate=0.05)
    alike = score.scores(_cluster(rng, 2000))
    # Out-of-fold calibration: a picture drawn like the training ones has a roughly uniform score.
    assert 0.02 <= np.mean(alike < 0.05) <= 0.08
    assert 0.4 <= np.median(alike) <= 0.65
    far = score.scores(_cluster(rng, 200, shift=3.0))
    assert np.all(far == 1.0 / (1.0 + 600))  # beyond every calibration distance: the smallest score
    assert score.unfamiliar(far).all() and np.mean(score.unfamiliar(alike)) < 0.08
    # A picture that failed (NaN probe) has no score and is not marked.
    nan_row = np.full((1, 40), np.nan)
    assert np.isnan(score.scores(nan_row)).all() and not score.unfamiliar(score.scores(nan_row)).any()


def test_the_section_round_trips_through_json_and_bad_sections_are_refused() -> None:
    import json

    rng = np.random.default_rng(1)
    score = fit_familiarity(_cluster(rng, 100), probe="map-statistics", n_components=4)
    document = json.loads(json.dumps(score.to_document()))
    again = Familiarity.from_document(document)
    queries = _cluster(rng, 50, shift=0.5)
    np.testing.assert_allclose(again.scores(queries), score.scores(queries), atol=1.0 / 101)
    assert again.probe == "map-statistics" and again.settings["n_components"] == 4
    for field, value, message in [
        ("version", 99, "version"),
        ("threshold", 1.5, "threshold"),
        ("probe", "pixels", "probe"),
        ("neighbours", 0, "neighbours"),
    ]:
        with pytest.raises(FamiliarityError, match=message):
            Familiarity.from_document(document | {field: value})
    broken = dict(document["components"], data="***")
    with pytest.raises(FamiliarityError, match="components"):
        Familiarity.from_document(document | {"components": broken})
    short = dict(document["mean"], shape=[3])
    with pytest.raises(FamiliarityError, match="mean"):
        Familiarity.from_document(document | {"mean": short})


def test_too_few_pictures_give_no_score() -> None:
    with pytest.raises(ValueError, match="too few"):
        fit_familiarity(np.ones((6, 3)))


def test_map_statistics_are_each_channels_mean_then_standard_deviation() -> None:
    maps = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    stats = map_statistics(maps)
    assert stats.shape == (2, 6)
    np.testing.assert_allclose(stats[1, :3], maps[1].reshape(3, -1).mean(axis=1), rtol=1e-6)
    np.testing.assert_allclose(stats[0, 3:], maps[0].reshape(3, -1).std(axis=1), rtol=1e-6)
    np.testing.assert_allclose(map_statistics(maps[1]), stats[1:])


def test_summary_line() -> None:
    assert unfamiliar_summary(0, 50) is None
    assert unfamiliar_summary(12, 50) == (
        "12 of 50 pictures are unlike this model's training pictures; their counts are unreliable"
    )
    assert unfamiliar_summary(1, 3, "frames").startswith("1 of 3 frames is unlike")


def test_a_model_file_without_familiarity_reports_unknown(tmp_path: Path, mall_root: Path) -> None:
    """Older model files have no section: counting works and every picture's familiarity is None."""
    model = load_model(ROOT / "models" / "default.npz")
    model.familiarity = None
    old = model.save(tmp_path / "old.npz")
    frames = [str(path) for path in sorted((mall_root / "frames").glob("*.jpg"))[:3]]
    result = load_model(old).count_paths(frames)
    assert result.familiarity is None and result.ok.all()
    rows = count_rows(load_model(old), result)
    assert [(row["familiarity"], row["unfamiliar"]) for row in rows] == [(None, None)] * 3
    assert familiarity_warning(rows) is None


def test_a_section_that_does_not_fit_the_model_is_refused(tmp_path: Path) -> None:
    model = load_model(ROOT / "models" / "default.npz")
    model.familiarity = fit_familiarity(np.random.default_rng(2).normal(size=(40, 12)))  # 12, not 1000 numbers
    model.save(tmp_path / "bad.npz")
    with pytest.raises(ModelFileError, match="bad.npz: familiarity takes 12 numbers"):
        load_model(tmp_path / "bad.npz")


def test_shipped_models_carry_familiarity_fitted_on_their_training_frames() -> None:
    for name, pictures, probe in [
        ("default", 600, "descriptor"),
        ("mall-sums", 800, "descriptor"),
        ("mall-accurate", 600, "map-statistics"),
    ]:
        model = load_model(ROOT / "models" / f"{name}.npz")
        assert model.familiarity is not None, name
        assert model.familiarity.probe == probe
        assert model.familiarity.settings["n_pictures"] == pictures == model.dataset["n_train"]
        assert model.familiarity.threshold == pytest.approx(0.01)


def _frames(mall_root: Path, first: int, last: int) -> list[str]:
    return [str(mall_root / "frames" / f"seq_{k:06d}.jpg") for k in range(first, last + 1)]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["default", "mall-accurate"])
def test_mall_models_mark_few_of_their_held_out_frames(name: str, mall_root: Path) -> None:
    """Trained on frames 1-600: frames 601-800 (same camera, later) are at most 5 % marked.
    Every fourth frame (50): neighbouring frames are near twins, and the conv head's maps of all
    200 took 40 s of CI (of 100, 31 s on an AVX2-only EPYC)."""
    model = load_model(ROOT / "models" / f"{name}.npz")
    assert model.dataset["train_indices"] == [1, 600]
    result = model.count_paths(_frames(mall_root, 601, 800)[::4], batch_size=8)
    assert result.ok.all()
    marked = model.familiarity.unfamiliar(result.familiarity)
    assert marked.mean() <= 0.05, marked.mean()
    assert np.median(result.familiarity) > 0.2


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mall-sums", "default"])
def test_mall_models_mark_nine_in_ten_coco_photos(name: str, coco_voc20_root: Path) -> None:
    """Of the 559 everyday photos, at least 90 % are marked or not counted at all: mall-sums
    (its ROI is Mall's 640x480 frame; the issue's test) refuses the 438 photos of other sizes with
    an error and marks the 121 it counts; the default model (no ROI) counts all of every third
    photo (187: the 559 took 21 s of CI)."""
    photos = sorted(str(path) for path in (coco_voc20_root / "JPEGImages").glob("*.jpg"))
    assert len(photos) == 559
    if name != "mall-sums":
        photos = photos[::3]
    model = load_model(ROOT / "models" / f"{name}.npz")
    result = model.count_paths(photos, batch_size=8)
    marked = model.familiarity.unfamiliar(result.familiarity)
    assert np.isnan(result.familiarity[~result.ok]).all() and not marked[~result.ok].any()
    assert result.ok.sum() >= (100 if name == "mall-sums" else 187)
    assert (marked.sum() + (~result.ok).sum()) / len(photos) >= 0.9
    assert marked[result.ok].mean() >= 0.9, marked[result.ok].mean()
    rows = count_rows(model, result)
    assert familiarity_warning(rows).startswith(f"{marked.sum()} of {result.ok.sum()} pictures are unlike")


@pytest.mark.slow
def test_a_shanghaitech_b_model_trained_here_marks_few_held_out_photos(shanghaitech_root: Path, tmp_path: Path) -> None:
    """Training fits the score (the pipeline's familiarity stage); half the photos held out."""
    from counting.data.datasets import load_dataset
    from counting.features.cache import FeatureCache
    from counting.train.pipeline import TrainingConfig, train_model

    data = load_dataset("shanghaitech", shanghaitech_root, split="random:0.5:0")
    cache = FeatureCache(tmp_path / "cache")
    config = TrainingConfig(n_centers=8, max_epochs=3, calibration="none")
    model = train_model(data, config, cache=cache)
    assert model.familiarity is not None and model.familiarity.settings["n_pictures"] == len(data.subset("train").paths)
    model = load_model(model.save(tmp_path / "shb.npz"))
    held = data.subset("test").paths
    result = model.count_paths(held, cache=cache)
    marked = model.familiarity.unfamiliar(result.familiarity[result.ok])
    assert len(held) >= 150 and marked.mean() <= 0.05, marked.mean()


def test_pictures_of_several_datasets_are_calibrated_within_each() -> None:
    """Each dataset is cut into its own contiguous runs: with runs over the whole list, the first
    fold holds every picture of a small dataset, whose out-of-fold neighbours are then all in
    the other dataset: 60 inflated calibration distances, a threshold that marks nothing."""
    rng = np.random.default_rng(3)
    small, large = rng.normal(scale=0.05, size=(60, 2)), rng.normal(size=(540, 2)) + 10
    probes, groups = np.vstack([small, large]), np.array(["small"] * 60 + ["large"] * 540)
    within = fit_familiarity(probes, groups=groups, n_components=2)
    across = fit_familiarity(probes, n_components=2)
    assert across.calibration[-60:].min() > within.calibration.max()
    one_group = fit_familiarity(probes, groups=np.zeros(600), n_components=2)
    np.testing.assert_array_equal(one_group.calibration, across.calibration)


@pytest.mark.slow
def test_the_crowd_model_marks_few_of_its_own_validation_pictures(shared_data: Path) -> None:
    # models/crowd.npz, the default: the held-out part of each of its four sets (crowd.py's fixed
    # validation parts), 12 pictures of each. All 509 of them: 1.0 % marked (scripts in the
    # closing note of issue 21); the bound is 5 %.
    from counting.data.datasets.crowd import read_crowd

    model = load_model(ROOT / "models" / "crowd.npz")
    assert model.familiarity is not None
    held_out = read_crowd(shared_data).subset("test")
    names = held_out.source_names()
    paths = [str(path) for name in dict.fromkeys(names) for path in np.asarray(held_out.paths)[names == name][:12]]
    result = model.count_paths(paths)
    assert result.ok.all() and np.isfinite(result.familiarity).all()
    assert model.familiarity.unfamiliar(result.familiarity).mean() <= 0.05
