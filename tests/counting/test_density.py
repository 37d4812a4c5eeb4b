"""Density head: targets from dots, the ridge / RFF fit, regions and the head's file format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from counting.data.datasets import load_dataset
from counting.heads.density import density_map, dot_sigmas, fit_density_head, region_weights
from counting.heads.density.data import TargetSettings, density_targets
from counting.heads.density.persistence import (
    DensityHeadError,
    head_from_document,
    head_to_document,
    load_head,
    save_head,
)
from counting.heads.density.regions import cell_index, roi_weights


# ---------------------------------------------------------------- targets
def test_every_dot_has_mass_one_inside_the_image_border_and_outside_dots_included() -> None:
    dots = np.array([[0.0, 0.0], [99.9, 59.9], [50.0, 30.0], [-7.0, 20.0], [130.0, 70.0]])
    density = density_map(dots, image_size=(60, 100), map_size=(4, 7), sigmas=6.0)
    assert density.shape == (4, 7)
    assert density.sum() == pytest.approx(5.0, abs=1e-9)
    assert density.min() >= 0.0
    single = density_map(dots[2:3], image_size=(60, 100), map_size=(4, 7), sigmas=6.0)
    # The dot at (50, 30) sits on the boundary between map rows 1 and 2: symmetric mass.
    assert single[1].sum() == pytest.approx(single[2].sum(), rel=1e-9)


def test_a_narrow_dot_lands_in_its_own_cell() -> None:
    density = density_map(np.array([[25.0, 5.0]]), image_size=(20, 40), map_size=(2, 4), sigmas=0.5)
    expected = np.zeros((2, 4))
    expected[0, 2] = 1.0
    np.testing.assert_allclose(density, expected, atol=1e-12)


def test_no_dots_give_an_empty_map() -> None:
    assert density_map(None, (10, 10), (3, 3)).sum() == 0.0
    assert density_map(np.zeros((0, 2)), (10, 10), (3, 3)).shape == (3, 3)


def test_perspective_sigma_shrinks_where_the_weight_is_large() -> None:
    weights = np.array([[16.0, 16.0], [1.0, 1.0]])
    sigmas = dot_sigmas(np.array([[0, 0], [1, 1]]), 4.0, weights, reference=4.0)
    np.testing.assert_allclose(sigmas, [2.0, 8.0])


def test_real_mall_targets_sum_to_the_frame_counts(mall_root: Path) -> None:
    dataset = load_dataset("mall", mall_root, split="train=1-40,test=41-50")
    samples = dataset.subset("train").samples[:12]
    for perspective in (False, True):
        targets = density_targets(
            samples,
            [(30, 40)] * len(samples),
            TargetSettings(sigma=4.0, perspective=perspective),
            dataset.perspective_map,
        )
        np.testing.assert_allclose([target.sum() for target in targets], [s.count for s in samples], atol=1e-9)
        assert all(target.shape == (30, 40) for target in targets)


# ---------------------------------------------------------------- regions
def test_regions_whole_roi_first_then_cells_that_add_up_to_it() -> None:
    roi = np.zeros((40, 60), dtype=bool)
    roi[:, :30] = True
    weights = region_weights(roi, (4, 6), (2, 2))
    assert weights.shape == (5, 24)
    np.testing.assert_allclose(weights[1:].sum(axis=0), weights[0])
    assert weights[0].sum() == pytest.approx(12.0)  # half of the 24 map cells
    assert roi_weights(None, (2, 3)).sum() == 6.0
    np.testing.assert_array_equal(cell_index((2, 4), (1, 2)), [[0, 0, 1, 1], [0, 0, 1, 1]])


# ---------------------------------------------------------------- fitting
def _synthetic(n: int = 30, channels: int = 5, size: tuple[int, int] = (6, 8), seed: int = 0):
    rng = np.random.default_rng(seed)
    maps = [rng.normal(2.0, 3.0, (channels, *size)).astype(np.float32) for _ in range(n)]
    return rng, maps


def test_ridge_head_recovers_a_known_linear_map() -> None:
    rng, maps = _synthetic()
    weights, bias = rng.normal(size=5), 0.3
    targets = [np.einsum("chw,c->hw", item.astype(float), weights) + bias for item in maps]
    counts = np.array([target.sum() for target in targets])
    folds = np.arange(len(maps)) % 3
    fit = fit_density_head(
        maps, targets, counts, ["block10"], folds=folds, penalties=(1e-9, 1e-1), count_weights=(0.0, 1.0)
    )
    head = fit.head
    assert fit.penalty == pytest.approx(1e-9)
    # In the original channel units: coef / scale are the weights, the intercept follows.
    np.testing.assert_allclose(head.coef / head.x_scale, weights, rtol=1e-3)
    density = head.density(np.stack(maps[:4]))
    np.testing.assert_allclose(density, np.stack(targets[:4]), atol=1e-3 * np.abs(targets[0]).max())
    np.testing.assert_allclose(head.region_counts(np.stack(maps[:4]))[:, 0], counts[:4], rtol=1e-4)
    # Out-of-fold counts come from heads that never saw the image, and are still exact here.
    np.testing.assert_allclose(fit.out_of_fold[:, 0], counts, rtol=1e-3)
    assert set(fit.penalty_mae) == {"1e-09/0", "0.1/0", "1e-09/1", "0.1/1"}


def test_rff_head_fits_what_a_linear_one_cannot() -> None:
    rng, maps = _synthetic(n=40, channels=2)
    targets = [np.abs(item[0].astype(float) - 2.0) for item in maps]  # |x - mean|: not linear
    counts = np.array([target.sum() for target in targets])
    folds = np.arange(len(maps)) % 4
    linear = fit_density_head(maps, targets, counts, ["block10"], folds=folds)
    random = fit_density_head(maps, targets, counts, ["block10"], folds=folds, kind="rff", n_random=256, bandwidth=0.5)
    linear_error = np.mean(np.abs(linear.out_of_fold[:, 0] - counts))
    random_error = np.mean(np.abs(random.out_of_fold[:, 0] - counts))
    assert random_error < 0.25 * linear_error


def test_fit_refuses_mismatched_inputs() -> None:
    _, maps = _synthetic(n=3)
    with pytest.raises(ValueError, match="does not match its map"):
        fit_density_head(maps, [np.zeros((2, 2))] * 3, np.zeros(3), ["block10"])
    with pytest.raises(ValueError, match="kind"):
        fit_density_head(maps, [np.zeros((6, 8))] * 3, np.zeros(3), ["block10"], kind="mlp")


def test_count_term_fits_region_counts_the_pixel_term_cannot() -> None:
    # Each pixel's target is the whole frame's mean of x0 (a crowd-level quantity). The pixel
    # loss shrinks the slope on x0 towards 0 (x0 varies far more per pixel than its mean); the
    # region-count term recovers slope 1, with which the sums are exact.
    rng, maps = _synthetic(n=24, channels=3, size=(4, 4))
    targets = [np.full((4, 4), float(item[0].mean())) for item in maps]
    counts = np.array([target.sum() for target in targets])
    folds = np.arange(len(maps)) % 4
    pixel = fit_density_head(maps, targets, counts, ["block10"], folds=folds, count_weights=(0.0,))
    both = fit_density_head(maps, targets, counts, ["block10"], folds=folds, count_weights=(0.0, 100.0))
    assert both.count_weight == 100.0
    assert np.mean(np.abs(both.out_of_fold[:, 0] - counts)) < 0.5 * np.mean(np.abs(pixel.out_of_fold[:, 0] - counts))


# ---------------------------------------------------------------- files
def _fitted(kind: str = "ridge"):
    rng, maps = _synthetic(n=6, channels=3)
    targets = [item[0].astype(float) ** 2 for item in maps]
    fit = fit_density_head(maps, targets, np.zeros(6), ["block7", "block10"], kind=kind, n_random=16)
    fit.head.settings["target"] = {"sigma": 4.0, "perspective": False}
    return fit.head, np.stack(maps)


@pytest.mark.parametrize("kind", ["ridge", "rff"])
def test_head_round_trips_through_its_file_and_a_model_document(tmp_path: Path, kind: str) -> None:
    head, maps = _fitted(kind)
    loaded = load_head(save_head(head, tmp_path / "head.npz"))
    from_document = head_from_document(json.loads(json.dumps(head_to_document(head))), "model.npz")
    for other in (loaded, from_document):
        assert other.layers == head.layers and other.kind == kind and other.settings == head.settings
        np.testing.assert_array_equal(other.density(maps), head.density(maps))
    with np.load(tmp_path / "head.npz", allow_pickle=False) as contents:
        assert "metadata" in contents.files  # plain arrays + JSON, no pickle needed


def test_damaged_head_files_are_one_line_errors(tmp_path: Path) -> None:
    head, _ = _fitted("rff")
    good = save_head(head, tmp_path / "head.npz")
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[:200])
    text = tmp_path / "text.npz"
    text.write_text("hello")
    cases = {
        truncated: "not a density head file",
        text: "not a density head file",
        tmp_path / "missing.npz": "not found",
    }
    for path, message in cases.items():
        with pytest.raises(DensityHeadError, match=message) as error:
            load_head(path)
        assert "\n" not in str(error.value) and str(path) in str(error.value)

    def rewrite(name: str, **changes) -> Path:
        with np.load(good, allow_pickle=False) as contents:
            arrays = {key: contents[key] for key in contents.files}
        document = json.loads(str(arrays.pop("metadata")))
        for key, value in changes.items():
            if key in document:
                document[key] = value
            else:
                arrays[key] = value
        target = tmp_path / name
        np.savez(target, metadata=np.array(json.dumps(document)), **{k: v for k, v in arrays.items() if v is not None})
        return target

    broken = {
        rewrite("kind.npz", kind="counting-model"): "not a density head",
        rewrite("version.npz", format_version=99): "format version 99",
        rewrite("coef.npz", coef=np.zeros(3)): "coef has 3 entries",
        rewrite("nan.npz", x_mean=np.full(3, np.nan)): "finite floats",
        rewrite("scale.npz", x_scale=-np.ones(3)): "x_scale must be positive",
        rewrite("phase.npz", phase=np.zeros(5)): "do not match",
        rewrite("layers.npz", layers=[]): "layers",
    }
    for path, message in broken.items():
        with pytest.raises(DensityHeadError, match=message):
            load_head(path)
    document = head_to_document(head)
    document["arrays"]["coef"]["float64_base64"] = "!!!"
    with pytest.raises(DensityHeadError, match="model.npz: density head array 'coef' is damaged"):
        head_from_document(document, "model.npz")
