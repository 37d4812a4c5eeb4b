"""The AGP that `counting train` fits, on rows a caller already has: plain counts, or a conv
ensemble's correction (the count minus the heads' sum).

`train_model` fits through :func:`counting.train.pipeline.fit_rows` (sample weights, calibration
split, log); the studies in ``scripts/`` fit the same regressor on out-of-fold rows here instead
of each writing the fit again (scripts/density_study.py, conv_density_study.py, conv_agp_study.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from counting.heads.density.conv.training import CORRECTION_WEIGHT, corrected_counts, correction_targets
from counting.train.pipeline import TrainingConfig, make_regressor


def fit_agp(rows: np.ndarray, targets: np.ndarray, seed: int = 0, config: TrainingConfig | None = None) -> Any:
    """The AGP with `train`'s settings (``config``, default ``TrainingConfig(seed=seed)``) fitted on
    ``rows`` -> ``targets``."""
    config = TrainingConfig(seed=seed) if config is None else config
    return make_regressor(config, len(rows)).fit(rows, targets)


def agp_counts(rows: np.ndarray, counts: np.ndarray, new_rows: np.ndarray, seed: int = 0) -> np.ndarray:
    """Counts of ``new_rows`` by the AGP fitted on ``rows`` -> ``counts``, clipped at 0 as a model clips."""
    return np.clip(np.asarray(fit_agp(rows, counts, seed).predict(new_rows), float), 0.0, None)


def conv_ensemble_counts(
    rows: np.ndarray, counts: np.ndarray, new_rows: np.ndarray, seed: int = 0, weight: float = CORRECTION_WEIGHT
) -> np.ndarray:
    """Counts of ``new_rows`` as a conv-ensemble model counts them: the heads' whole-ROI sum (column 0)
    plus ``weight`` times an AGP fitted on ``rows`` to the count minus that sum, clipped at 0."""
    correction = fit_agp(rows, correction_targets(rows, counts), seed).predict(new_rows)
    return np.clip(corrected_counts(new_rows, correction, weight), 0.0, None)
