"""Grid search of the shared lengthscale and the noise on the validation rows.

Its winner is the center-GP of the paper and the starting point of every asymmetric kernel.
For each lengthscale all noises are solved at once with a batched SVD; one lengthscale at a time
keeps the temporaries at (evaluation rows × N) instead of (L × rows × N).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agp.solve import SVDSolver

# Multipliers of the median row-to-center distance, 2^-4 .. 2^6 in half-octave steps: nearly
# linear targets in high D want lengthscales several times the typical distance.
DEFAULT_LENGTHSCALE_FACTORS = 2.0 ** np.arange(-4.0, 6.5, 0.5)


@dataclass(frozen=True)
class GridResult:
    lengthscale: float
    noise: float
    scores: np.ndarray  # (L, S) validation MSE
    lengthscales: np.ndarray
    noises: np.ndarray


def default_lengthscales(sq_dist_rows_to_centers: np.ndarray) -> np.ndarray:
    """The median row-to-center distance times ``DEFAULT_LENGTHSCALE_FACTORS``.

    The caller passes the squared distances of a row subsample (the estimator uses at most
    ``GRID_ROWS`` rows), so this never needs the n × N matrix of a large training set.
    """
    typical = float(np.sqrt(np.median(sq_dist_rows_to_centers)))
    if not np.isfinite(typical) or typical <= 0.0:
        typical = 1.0
    return typical * DEFAULT_LENGTHSCALE_FACTORS


def grid_search(
    sq_dist_centers: np.ndarray,
    center_targets: np.ndarray,
    sq_dist_eval: np.ndarray,
    eval_targets: np.ndarray,
    lengthscales: np.ndarray,
    noises: np.ndarray,
    eval_weights: np.ndarray | None = None,
) -> GridResult:
    """Pick the (l, σ²) with the lowest MSE of the center-GP on the evaluation rows.

    ``sq_dist_centers`` is (N, N) between centers, ``sq_dist_eval`` (m, N) from the evaluation
    rows to the centers; targets are (N, K) and (m, K); ``eval_weights`` (m,) weigh the rows'
    squared errors (``None``: all 1).
    """
    n = len(sq_dist_centers)
    row_weights = _normalised(eval_weights, len(sq_dist_eval))
    scores = np.full((len(lengthscales), len(noises)), np.inf)
    for index, lengthscale in enumerate(lengthscales):
        inv_two_l2 = 0.5 / lengthscale**2
        systems = np.exp(-sq_dist_centers * inv_two_l2)[None] + noises[:, None, None] * np.eye(n)  # (S, N, N)
        try:
            alpha = SVDSolver.factor(systems).solve(center_targets)  # (S, N, K)
        except np.linalg.LinAlgError:
            continue  # this lengthscale cannot be solved at all: it is not a candidate
        predictions = np.exp(-sq_dist_eval * inv_two_l2)[None] @ alpha  # (S, m, K)
        scores[index] = ((predictions - eval_targets) ** 2).mean(axis=-1) @ row_weights
    scores = np.where(np.isfinite(scores), scores, np.inf)
    best_l, best_s = np.unravel_index(int(np.argmin(scores)), scores.shape)
    return GridResult(float(lengthscales[best_l]), float(noises[best_s]), scores, lengthscales, noises)


def _normalised(weights: np.ndarray | None, n: int) -> np.ndarray:
    """Row weights summing to 1 (uniform when none are given or all are 0)."""
    if weights is None or not np.sum(weights) > 0:
        return np.full(n, 1.0 / max(n, 1))
    return np.asarray(weights, dtype=float) / np.sum(weights)
