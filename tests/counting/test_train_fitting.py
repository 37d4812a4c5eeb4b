"""The AGP `train` fits, on rows a study already has (counting/train/fitting.py)."""

from __future__ import annotations

import numpy as np
import pytest

from counting.heads.density.conv.training import CORRECTION_WEIGHT
from counting.train import agp_counts, conv_ensemble_counts, fit_agp
from counting.train.pipeline import TrainingConfig, make_regressor


@pytest.fixture(scope="module")
def rows() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    generator = np.random.default_rng(3)
    sums = generator.uniform(5, 40, size=(70, 3))  # column 0: a head's whole-ROI sum
    counts = 1.1 * sums[:, 0] + generator.normal(0, 1.0, size=70)
    new = generator.uniform(0, 45, size=(12, 3))
    new[0, 0] = 0.0  # a sum near 0 may give a negative count, which is clipped
    return sums, counts, new


def test_fit_agp_is_the_regressor_train_makes(rows) -> None:
    sums, counts, new = rows
    config = TrainingConfig(seed=4, max_epochs=30)
    expected = make_regressor(config, len(sums)).fit(sums, counts).predict(new)
    np.testing.assert_array_equal(fit_agp(sums, counts, config=config).predict(new), expected)


def test_agp_counts_clip_like_a_model(rows) -> None:
    sums, counts, new = rows
    raw = np.asarray(fit_agp(sums, counts, seed=1).predict(new), float)
    counted = agp_counts(sums, counts, new, seed=1)
    np.testing.assert_array_equal(counted, np.clip(raw, 0.0, None))
    assert np.all(counted >= 0) and np.mean(np.abs(counted - 1.1 * new[:, 0])) < 5.0


def test_conv_ensemble_counts_add_the_weighted_correction_to_the_head_sum(rows) -> None:
    sums, counts, new = rows
    correction = np.asarray(fit_agp(sums, counts - sums[:, 0], seed=2).predict(new), float)
    for weight in (0.0, CORRECTION_WEIGHT, 1.0):
        expected = np.clip(new[:, 0] + weight * correction, 0.0, None)
        np.testing.assert_allclose(conv_ensemble_counts(sums, counts, new, seed=2, weight=weight), expected)
    # weight 0: the heads' sum alone
    np.testing.assert_array_equal(conv_ensemble_counts(sums, counts, new, seed=2, weight=0.0), new[:, 0])
