"""The comparison methods by name: how to build each and how its table row is labelled."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from counting.core.errors import CountingError
from counting.evaluate.peers.errors import PeerUnavailable


@dataclass(frozen=True)
class PeerSpec:
    """A feature method: ``build(n_centers, seed, n_features, n_rows)`` returns an unfitted regressor."""

    name: str
    label: str
    build: Callable[[int, int, int, int], Any]
    family: str  # "regression" | "gp" | "agp"


# Each builder imports its library when it builds: the registry is read for names and labels by
# `counting compare --help`, which should not wait for scikit-learn (scripts/bench_cli_startup.py).
def _ridge(n_centers: int, seed: int, n_features: int, n_rows: int) -> Any:
    from counting.evaluate.peers.regression import build_ridge

    return build_ridge(n_features, seed)


def _exact_gp(n_centers: int, seed: int, n_features: int, n_rows: int) -> Any:
    from counting.evaluate.peers.regression import build_exact_gp

    return build_exact_gp(n_features, seed)


def _sparse_gp(n_centers: int, seed: int, n_features: int, n_rows: int) -> Any:
    from counting.evaluate.peers.sparse_gp import SparseGPRegressor

    return SparseGPRegressor(n_inducing=n_centers, seed=seed)


def _agp(kernel: str) -> Callable[[int, int, int, int], Any]:
    def build(n_centers: int, seed: int, n_features: int, n_rows: int) -> Any:
        # The same constructor `counting train` uses, so AGP rows match trained models exactly.
        from counting.train.pipeline import TrainingConfig, make_regressor

        return make_regressor(TrainingConfig(kernel=kernel, n_centers=n_centers, seed=seed), n_rows=n_rows)

    return build


FEATURE_PEERS: dict[str, PeerSpec] = {
    spec.name: spec
    for spec in [
        PeerSpec("ridge", "Ridge regression (RidgeCV)", _ridge, "regression"),
        PeerSpec("gp", "GP regression, exact (scikit-learn, all samples)", _exact_gp, "gp"),
        PeerSpec("sparse-gp", "Sparse GP (GPyTorch SGPR, inducing points = centres)", _sparse_gp, "gp"),
        PeerSpec("center-gp", "Center-GP (paper variant i)", _agp("center"), "agp"),
        PeerSpec("agp-univariate", "Univariate AGP (paper variant ii)", _agp("univariate"), "agp"),
        PeerSpec("agp-diagonal", "Multivariate AGP, diagonal precision (paper variant iii)", _agp("diagonal"), "agp"),
        PeerSpec("agp-lowrank", "Multivariate AGP, diagonal + low rank (paper variant iii)", _agp("lowrank"), "agp"),
    ]
}

IMAGE_PEERS: dict[str, str] = {
    "hog": "HOG people detector (Dalal & Triggs), detections in the ROI",
    "hog-calibrated": "HOG detector + linear calibration on the training split",
}

# What `counting compare` runs without --methods (counting.evaluate.comparison.methods).
DEFAULT_METHODS: tuple[str, ...] = (
    "ridge",
    "gp",
    "sparse-gp",
    "center-gp",
    "agp-univariate",
    "agp-diagonal",
    "hog",
    "hog-calibrated",
)
# Methods that also run on grid tiles (the tiled rows of the table).
DEFAULT_TILED_METHODS: tuple[str, ...] = ("ridge", "gp", "agp-univariate")


def peer_label(name: str) -> str:
    """Table label of a method name."""
    if name in FEATURE_PEERS:
        return FEATURE_PEERS[name].label
    if name in IMAGE_PEERS:
        return IMAGE_PEERS[name]
    raise KeyError(name)


def check_methods(methods: Sequence[str], tiled_methods: Sequence[str] = ()) -> None:
    """Fail early, naming the first unknown method (here, beside the names: `counting compare`
    checks them before it imports the methods' libraries)."""
    unknown = [name for name in [*methods, *tiled_methods] if name not in FEATURE_PEERS and name not in IMAGE_PEERS]
    if unknown:
        known = ", ".join([*FEATURE_PEERS, *IMAGE_PEERS])
        raise CountingError(f"--methods: unknown method {unknown[0]!r} (known: {known})")
    image_tiled = [name for name in tiled_methods if name in IMAGE_PEERS]
    if image_tiled:
        raise CountingError(f"--tiled-methods: {image_tiled[0]!r} works on images, not on tile descriptors")


def make_peer(name: str, n_centers: int = 25, seed: int = 0, n_features: int = 1000, n_rows: int = 1000) -> Any:
    """An unfitted scikit-learn-style regressor for a feature peer.

    Raises ``PeerUnavailable`` (optional dependency missing, possibly only at fit) or ``KeyError``.
    """
    if name not in FEATURE_PEERS:
        raise KeyError(f"unknown method {name!r}; known: {', '.join(FEATURE_PEERS)}")
    return FEATURE_PEERS[name].build(n_centers, seed, n_features, n_rows)


__all__ = [
    "DEFAULT_METHODS",
    "DEFAULT_TILED_METHODS",
    "FEATURE_PEERS",
    "IMAGE_PEERS",
    "PeerSpec",
    "PeerUnavailable",
    "check_methods",
    "make_peer",
    "peer_label",
]
