"""Comparison baselines, run live on the same features and split as our AGP models.

Feature peers are scikit-learn regressors on the 1000-d descriptors (``make_peer``); the HOG
people detector works on the images themselves (``counting.evaluate.peers.hog``).
"""

from __future__ import annotations

from counting.evaluate.peers.hog import CalibratedHOGCounter, HOGPeopleCounter
from counting.evaluate.peers.registry import (
    FEATURE_PEERS,
    IMAGE_PEERS,
    PeerSpec,
    PeerUnavailable,
    make_peer,
    peer_label,
)

__all__ = [
    "FEATURE_PEERS",
    "IMAGE_PEERS",
    "CalibratedHOGCounter",
    "HOGPeopleCounter",
    "PeerSpec",
    "PeerUnavailable",
    "make_peer",
    "peer_label",
]
