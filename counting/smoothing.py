"""Temporal smoothing of per-frame counts on video sequences.

Neighbouring frames of a fixed camera hold nearly the same people, so averaging counts over a
short window cancels part of the per-frame regression noise. ``smooth_counts`` is the offline,
centred version (evaluation of a whole sequence); ``StreamingSmoother`` the causal version for
live video, where only past frames are known.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from scipy.ndimage import median_filter, uniform_filter1d

METHODS = ("mean", "median")


def smooth_counts(counts: np.ndarray, window: int, method: str = "mean") -> np.ndarray:
    """Centred moving mean/median over ``window`` frames along axis 0 (edges use nearest frames).

    ``counts`` is ``(n,)`` or ``(n, K)``; a window of 1 (or less) returns a copy.
    """
    values = np.asarray(counts, dtype=float)
    if window <= 1 or values.shape[0] == 0:
        return values.copy()
    if method == "mean":
        return uniform_filter1d(values, size=int(window), axis=0, mode="nearest")
    if method == "median":
        size = (int(window),) + (1,) * (values.ndim - 1)
        return median_filter(values, size=size, mode="nearest")
    raise ValueError(f"smoothing method {method!r}: expected one of {', '.join(METHODS)}")


class StreamingSmoother:
    """Causal moving mean/median over the last ``window`` counts of a stream."""

    def __init__(self, window: int, method: str = "mean") -> None:
        if method not in METHODS:
            raise ValueError(f"smoothing method {method!r}: expected one of {', '.join(METHODS)}")
        self.window = max(1, int(window))
        self.method = method
        self._recent: deque[np.ndarray] = deque(maxlen=self.window)

    def update(self, count: float | np.ndarray) -> float | np.ndarray:
        """Add the newest count and return the smoothed value."""
        self._recent.append(np.asarray(count, dtype=float))
        stacked = np.stack(self._recent)
        smoothed = stacked.mean(axis=0) if self.method == "mean" else np.median(stacked, axis=0)
        return float(smoothed) if smoothed.ndim == 0 else smoothed
