"""The paper's Section 4 blob experiment (scripts/blob_experiment.py) at a small size."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "blob_experiment.py"


@pytest.fixture(scope="module")
def blob():
    spec = importlib.util.spec_from_file_location("blob_experiment", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_blob_image_has_two_peaks_at_the_centres(blob) -> None:
    image, coords = blob.blob_image(48)
    assert image.shape == (48, 48) and coords.shape == (48 * 48, 2)
    centres = np.array([[cx, cy] for cx, cy, *_ in blob.BLOBS])
    # Each centre carries its own peak plus at most a trace of the other blob's tail.
    np.testing.assert_allclose(blob.blob_intensity(centres), [peak for *_, peak in blob.BLOBS], atol=5e-3)
    assert coords.min() == 0.0 and coords.max() == 1.0


def test_paper_ordering_multivariate_beats_univariate_beats_center_gp(blob) -> None:
    results = blob.run(size=48, epochs=15, seed=0, mean="constant")
    center, univariate, multivariate = (results[k][1] for k in ("center-GP", "univariate-AGP", "multivariate-AGP"))
    assert multivariate < univariate < center, (center, univariate, multivariate)
    # The asymmetric kernels give each blob its own size: the large blob gets the longer lengthscale.
    model = results["univariate-AGP"][0]
    lengthscales = model.lengthscales_
    assert lengthscales[0] > 1.5 * lengthscales[1]


def test_zero_mean_agps_improve_clearly_on_their_center_gp_start(blob) -> None:
    # Issue 13: with centred targets the univariate AGP did not leave its center-GP start; with the
    # zero-mean GP both asymmetric kernels train well past it (96 px, 40 epochs: 65.5 / 48.6 / 7.4 %).
    results = blob.run(size=48, epochs=15, seed=0, mean="zero")
    center, univariate, full = (results[k][1] for k in ("center-GP", "univariate-AGP", "multivariate-AGP"))
    assert univariate < 0.85 * center, (center, univariate)
    assert full < 0.3 * center, (center, full)
    for label in ("univariate-AGP", "multivariate-AGP"):
        model = results[label][0]
        assert model.best_epoch_ > 0 and min(model.history_["val_loss"]) < 0.8 * model.history_["val_loss"][0]


def _sampled_blob_scores(blob, seed: int, mean: str) -> tuple[float, float, float, np.ndarray]:
    """The issue-26 protocol: 1100 pixels sampled from the 96x96 image, two given centres at the
    blob centres and NO center_targets; NRMSE over every pixel."""
    from agp import AGPRegressor, metrics

    image, coords = blob.blob_image(96)
    y = image.ravel()
    rows = np.random.default_rng(seed).choice(len(y), 1100, replace=False)
    centres = np.array([[cx, cy] for cx, cy, *_ in blob.BLOBS])
    scores, targets = [], None
    for kernel in ("center", "univariate", "full"):
        model = AGPRegressor(kernel=kernel, centers=centres, mean=mean, random_state=0).fit(coords[rows], y[rows])
        scores.append(metrics.nrmse(y, model.predict(coords), y_train=y[rows]))
        targets = model.center_targets_.ravel()
    return (*scores, targets)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_given_centres_without_targets_learn_the_blobs(blob, seed: int) -> None:
    """A given centre carries the data at it (its nearest sample), not the mean of its Voronoi
    cell (two cells split the image: both targets were the image mean, ~0.1, and every model
    was at NRMSE 0.92-0.98, barely better than the mean)."""
    center, univariate, full, targets = _sampled_blob_scores(blob, seed, "zero")
    peaks = np.array([peak for *_, peak in blob.BLOBS])
    assert np.all(targets > 0.8 * peaks), targets  # each centre sees its peak
    assert center <= 0.70, (center, univariate, full)
    assert univariate < center, (center, univariate, full)
    assert full <= 0.40, (center, univariate, full)


def test_given_centres_without_targets_constant_mean(blob) -> None:
    """With the mean target subtracted the background is no longer the prior's 0: the ordering
    holds and the full AGP stays below 0.40 (the center-GP sits near 0.70, docs/agp.md)."""
    center, univariate, full, _ = _sampled_blob_scores(blob, 0, "constant")
    assert full < univariate < center <= 0.75, (center, univariate, full)
    assert full <= 0.40
