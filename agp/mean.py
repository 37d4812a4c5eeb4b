"""Explicit mean functions of the GP (Rasmussen & Williams 2006, Section 2.7, explicit basis functions).

The GP prior is zero-mean, so the estimator subtracts a mean function m(x) from the targets and
the AGP models what is left: f(x) = m(x) + AGP(x).

* ``zero``: m(x) = 0, the GP on the raw targets (a prior that decays to 0 far from the data,
  as for an image's dark background).
* ``constant``: m(x) = ȳ, the mean target of the non-validation rows (the paper's setting).
* ``linear``: m(x) = ȳ + x_sᵀ b, a ridge regression on the standardised inputs x_s, its penalty
  chosen by generalised cross-validation (scikit-learn ``RidgeCV``).  A handful of RBF centers
  cannot represent a linear trend in 1000 dimensions, while counts are close to linear in
  ImageNet class scores; the AGP then spends its centers on the non-linear rest.

Because the inputs are standardised with the same rows, their column means are 0 there and the
ridge intercept equals ȳ (up to rounding), so the constant and linear kinds share ``y_mean_`` and differ only in ``b``.

The AGP is trained on the ridge's in-sample residuals.  Leave-one-out residuals (r_i / (1 - h_ii))
would describe unseen rows better in principle, but measured worse for every kernel on Mall
(docs/agp.md, "Accuracy on Mall"), so the simpler choice stays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import RidgeCV

MEAN_FUNCTIONS = ("zero", "constant", "linear")
# Ridge penalties searched by GCV, for standardised inputs: wide enough for D from 1 to 1000s.
RIDGE_ALPHAS = np.logspace(-3, 7, 41)


@dataclass(frozen=True)
class MeanFunction:
    """m(x_s) = intercept + x_s @ coef, with x_s standardised inputs."""

    intercept: np.ndarray  # (K,)
    coef: np.ndarray  # (D, K), zeros for the zero and constant means
    penalty: float | None  # the ridge penalty GCV chose (None for the zero and constant means)

    def __call__(self, Xs: np.ndarray) -> np.ndarray:
        """(n, K) mean of standardised rows ``Xs``."""
        return Xs @ self.coef + self.intercept


def fit_mean(kind: str, Xs: np.ndarray, Y: np.ndarray, weights: np.ndarray | None = None) -> MeanFunction:
    """The mean function of ``kind`` fitted on standardised rows ``Xs`` (n, D) with targets ``Y`` (n, K),
    each row counted with its weight (``None``: all 1)."""
    if kind == "zero":
        return MeanFunction(np.zeros(Y.shape[1]), np.zeros((Xs.shape[1], Y.shape[1])), None)
    if kind == "constant":
        return MeanFunction(np.average(Y, axis=0, weights=weights), np.zeros((Xs.shape[1], Y.shape[1])), None)
    if kind == "linear":
        ridge = RidgeCV(alphas=RIDGE_ALPHAS, fit_intercept=True).fit(Xs, Y, sample_weight=weights)
        return MeanFunction(
            np.atleast_1d(ridge.intercept_).astype(float),
            np.asarray(ridge.coef_, dtype=float).reshape(Y.shape[1], Xs.shape[1]).T.copy(),
            float(ridge.alpha_),
        )
    raise ValueError(f"unknown mean {kind!r}; choose one of {', '.join(MEAN_FUNCTIONS)}")
