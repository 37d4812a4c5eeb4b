"""Center selection (Section 5.2 of the paper): k-means, random sampling, spectral, GMM, explicit.

A center's target is the mean target of its members; for sampling it is the sample's own
target, and the sampled rows are then left out of the training loss (the paper trains on
X \\ X̄).  Clustering is delegated to scikit-learn.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.cluster import KMeans, MiniBatchKMeans, SpectralClustering
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

from agp.kernels import squared_distances

CENTER_METHODS = ("kmeans", "sampling", "spectral", "gmm")
# Above this many rows k-means runs as mini-batch k-means (Sculley 2010): Lloyd's full passes
# over millions of rows cost minutes, mini-batches reach nearly the same centers in seconds.
MINIBATCH_KMEANS_ROWS = 100_000
# Rows per block when assigning rows to their nearest center (bounds an (rows, N) temporary).
ASSIGN_BLOCK_ROWS = 65_536


@dataclass(frozen=True)
class Centers:
    points: np.ndarray  # (N, D)
    targets: np.ndarray  # (N, K)
    sample_rows: np.ndarray  # rows of X that became centers (only for sampling), else empty


def _cluster_sums(labels: np.ndarray, n_clusters: int, values: np.ndarray) -> np.ndarray:
    """(n_clusters, K) sums of the (n, K) ``values`` per label, in O(n·K) memory (no one-hot)."""
    return np.stack([np.bincount(labels, weights=column, minlength=n_clusters) for column in values.T], axis=1)


def _member_means(
    labels: np.ndarray, n_clusters: int, y: np.ndarray, X: np.ndarray, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster (weighted) mean of X and y; clusters without weight are dropped."""
    w = np.ones(len(labels)) if weights is None else weights
    counts = np.bincount(labels, weights=w, minlength=n_clusters)
    keep = counts > 0
    means_x = _cluster_sums(labels, n_clusters, X * w[:, None])[keep] / counts[keep, None]
    return means_x, _cluster_sums(labels, n_clusters, y * w[:, None])[keep] / counts[keep, None]


def nearest_center(X: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Index of the nearest of ``points`` for every row of ``X``, in row blocks."""
    return np.concatenate(
        [
            np.argmin(squared_distances(X[start : start + ASSIGN_BLOCK_ROWS], points), axis=1)
            for start in range(0, len(X), ASSIGN_BLOCK_ROWS)
        ]
    )


def select_centers(
    X: np.ndarray,
    y: np.ndarray,
    n_centers: int,
    method: str,
    rng: np.random.Generator,
    weights: np.ndarray | None = None,
) -> Centers:
    """Pick ``n_centers`` centers from standardised rows ``X`` with (n, K) targets ``y``.

    ``weights`` (n,) count each row that many times in k-means, in the members' mean targets
    and in the draw of ``sampling`` (``None``: all 1); spectral clustering and the GMM fit
    ignore them (their members' mean targets use them).
    """
    seed = int(rng.integers(2**31 - 1))
    empty = np.zeros(0, dtype=int)
    if method == "kmeans":
        with warnings.catch_warnings():
            # Fewer distinct points than clusters gives duplicate centers; the SVD solve copes.
            warnings.simplefilter("ignore", ConvergenceWarning)
            if len(X) > MINIBATCH_KMEANS_ROWS:
                kmeans = MiniBatchKMeans(n_clusters=n_centers, batch_size=4096, n_init=3, random_state=seed)
            else:
                kmeans = KMeans(n_clusters=n_centers, n_init=1, random_state=seed)
            kmeans.fit(X, sample_weight=weights)
        points = kmeans.cluster_centers_
        onehot_targets = _member_means(np.asarray(kmeans.labels_), n_centers, y, X, weights)[1]
        if len(onehot_targets) < n_centers:  # an empty cluster: give it its nearest member's target
            targets = _nearest_targets(points, X, y)
        else:
            targets = onehot_targets
        return Centers(points, targets, empty)
    if method == "sampling":
        draw = None
        if weights is not None and np.count_nonzero(weights) >= n_centers:
            draw = weights / weights.sum()
        rows = np.sort(rng.choice(len(X), size=n_centers, replace=False, p=draw))
        return Centers(X[rows].copy(), y[rows].copy(), rows)
    if method == "spectral":
        labels = SpectralClustering(
            n_clusters=n_centers, affinity="nearest_neighbors", n_neighbors=min(10, len(X) - 1), random_state=seed
        ).fit_predict(X)
        points, targets = _member_means(labels, n_centers, y, X, weights)
        if weights is not None and len(points) < len(np.unique(labels)):
            # a cluster of weight-0 rows only: keep its centroid, with its nearest row's target
            points = _member_means(labels, n_centers, y, X)[0]
            targets = _nearest_targets(points, X, y)
        return Centers(points, targets, empty)
    if method == "gmm":
        gmm = GaussianMixture(n_components=n_centers, covariance_type="diag", random_state=seed).fit(X)
        # Responsibility-weighted means: no component is ever left without a target.
        resp = gmm.predict_proba(X)
        if weights is not None:
            resp = resp * weights[:, None]
        mass = resp.sum(axis=0)
        return Centers(gmm.means_.copy(), (resp.T @ y) / np.maximum(mass, 1e-12)[:, None], empty)
    raise ValueError(f"unknown center_method {method!r}; choose one of {', '.join(CENTER_METHODS)}")


def _nearest_targets(points: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Target of the row nearest to each point, scanning X in blocks (no (N, n) matrix)."""
    best = np.full(len(points), np.inf)
    best_row = np.zeros(len(points), dtype=int)
    for start in range(0, len(X), ASSIGN_BLOCK_ROWS):
        sq = squared_distances(points, X[start : start + ASSIGN_BLOCK_ROWS])
        row = np.argmin(sq, axis=1)
        value = sq[np.arange(len(points)), row]
        better = value < best
        best[better], best_row[better] = value[better], row[better] + start
    return y[best_row]


def explicit_centers(
    points: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    targets: np.ndarray | None = None,
    weights: np.ndarray | None = None,
) -> Centers:
    """Centers given by the caller; without targets each takes the target of the row nearest to
    it (of positive weight, when ``weights`` are given), as the paper's own code does.

    A point put somewhere on purpose (a blob's centre, a peak) must carry the data *at* that
    point. The mean target of its Voronoi cell, right for k-means centers (which are cell means
    themselves), washes that out: two centers on a whole image both get about the image mean.
    """
    empty = np.zeros(0, dtype=int)
    if targets is not None:
        return Centers(points, targets, empty)
    if weights is not None and np.any(weights > 0):
        positive = weights > 0
        return Centers(points, _nearest_targets(points, X[positive], y[positive]), empty)
    return Centers(points, _nearest_targets(points, X, y), empty)
