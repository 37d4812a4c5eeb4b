"""Ridge and exact GP regression on descriptors: the classical regression peers (scikit-learn)."""

from __future__ import annotations

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.linear_model import RidgeCV
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

# Wide enough for standardised 1000-d descriptors (useful alphas sit around 1e2..1e4 there).
RIDGE_ALPHAS = np.logspace(-2, 6, 33)


def build_ridge(n_features_hint: int | None = None, seed: int = 0) -> Pipeline:
    """Standardised ridge regression, alpha by efficient leave-one-out (RidgeCV)."""
    return make_pipeline(StandardScaler(), RidgeCV(alphas=RIDGE_ALPHAS))


def build_exact_gp(n_features_hint: int = 1000, seed: int = 0) -> Pipeline:
    """GP regression on all training samples: RBF + noise, hyper-parameters by marginal likelihood.

    The length scale starts at sqrt(D), the typical distance between standardised descriptors.
    """
    kernel = ConstantKernel(1.0, (1e-3, 1e3)) * RBF(
        length_scale=float(np.sqrt(n_features_hint)), length_scale_bounds=(1e-1, 1e5)
    ) + WhiteKernel(noise_level=0.1, noise_level_bounds=(1e-6, 1e1))
    regressor = GaussianProcessRegressor(kernel=kernel, normalize_y=True, n_restarts_optimizer=0, random_state=seed)
    return make_pipeline(StandardScaler(), regressor)
