"""Comparison baselines, run live on the same features and split as our AGP models.

Feature peers are scikit-learn regressors on the 1000-d descriptors (``make_peer``); the HOG
people detector works on the images themselves (``counting.evaluate.peers.hog``).
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

# Lazy: the registry's names and labels (`counting compare --help`) need neither OpenCV's HOG nor
# scikit-learn.
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".hog": "CalibratedHOGCounter HOGPeopleCounter",
        ".registry": "DEFAULT_METHODS DEFAULT_TILED_METHODS FEATURE_PEERS IMAGE_PEERS PeerSpec check_methods make_peer peer_label",
        ".errors": "PeerUnavailable",
    },
)
