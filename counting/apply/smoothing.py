"""Temporal smoothing of per-frame counts on video sequences: offline (centred) and live (causal).

Neighbouring frames of a fixed camera hold nearly the same people, so combining the counts of a
few frames cancels part of the per-frame regression noise. Two kinds, never to be mixed up in a
figure:

* **Offline, centred** (``smooth_counts``): frame t is averaged with the frames before *and after*
  it, so it needs the future. Only whole sequences can use it (``counting evaluate`` / ``report``
  / ``compare``); its figures are labelled ``centred_label(N)``, "centred N-frame mean".
* **Live, causal** (``CausalSmoother``, ``counting video --smooth N``): the output at frame t
  depends on frames <= t only. It is Brown's linear (double) exponential smoothing with
  ``alpha = 2 / (N + 1)``, a steady-state constant-velocity filter: it follows a steady rise or
  fall of the count without the lag of a trailing mean (``(N - 1) / 2`` frames). Its figures are
  labelled ``causal_label(N)``. ``CHOSEN_SPAN`` was chosen by ``scripts/smoothing_study.py`` on
  out-of-fold predictions inside Mall frames 1-600 (among trailing means, exponential and linear
  exponential filters of spans 1-15); the figures are in that script's output and in docs/results.md.

``StreamingSmoother`` is the causal *trailing* mean/median that ``counting video`` used before;
it lags (docs/results.md: it scored worse than raw counts on Mall 601-800) and is kept for comparison.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from scipy.ndimage import median_filter, uniform_filter1d

METHODS = ("mean", "median")
# Span (counted frames) of the causal filter, chosen on out-of-fold predictions of Mall 1-600
# (scripts/smoothing_study.py); `counting video --smooth CHOSEN_SPAN` uses it.
CHOSEN_SPAN = 9


def centred_label(window: int) -> str:
    """How a figure from ``smooth_counts`` is named: ``"centred 5-frame mean"``."""
    return f"centred {int(window)}-frame mean"


def causal_label(span: int) -> str:
    """How a figure from ``CausalSmoother`` is named (what ``counting video --smooth N`` draws)."""
    return f"causal linear-exponential filter, span {int(span)} frames"


def smooth_counts(counts: np.ndarray, window: int, method: str = "mean") -> np.ndarray:
    """Centred moving mean/median over ``window`` frames along axis 0 (edges use nearest frames).

    Offline only: frame t's value uses frames up to t + window // 2. ``counts`` is ``(n,)`` or
    ``(n, K)``; a window of 1 (or less) returns a copy.
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


class CausalSmoother:
    """Brown's linear exponential smoothing of a count stream; output at t uses counts <= t only.

    With ``a = 2 / (span + 1)``: ``s1 = a·x + (1-a)·s1``, ``s2 = a·s1 + (1-a)·s2`` and the estimate
    of the current count is ``2·s1 - s2`` (the level of a local linear trend, so a steady change
    is followed without lag). Both states start at the first count, so the first output is the
    first count; span 1 returns every count unchanged. The estimate is a weighted sum of past
    counts whose weights add up to 1 (some are negative: the trend correction), clipped at 0
    since a count is never negative (the state itself is not clipped).
    """

    def __init__(self, span: int) -> None:
        if int(span) < 1:
            raise ValueError(f"smoothing span {span}: expected at least 1 frame")
        self.span = int(span)
        self.alpha = 2.0 / (self.span + 1.0)
        self._first: np.ndarray | None = None
        self._second: np.ndarray | None = None

    def update(self, count: float | np.ndarray) -> float | np.ndarray:
        """Add the newest count (a number or one value per class) and return the smoothed one."""
        value = np.asarray(count, dtype=float)
        if self._first is None or self._second is None:
            self._first, self._second = value.copy(), value.copy()
        else:
            a = self.alpha
            self._first = a * value + (1.0 - a) * self._first
            self._second = a * self._first + (1.0 - a) * self._second
        smoothed = np.maximum(2.0 * self._first - self._second, 0.0)
        return float(smoothed) if smoothed.ndim == 0 else smoothed


def causal_smooth(counts: np.ndarray, span: int) -> np.ndarray:
    """``CausalSmoother`` run over a whole sequence along axis 0 (what a live run would output)."""
    values = np.asarray(counts, dtype=float)
    smoother = CausalSmoother(span)
    out = np.empty_like(values)
    for t in range(values.shape[0]):
        out[t] = smoother.update(values[t])
    return out


class StreamingSmoother:
    """Causal trailing moving mean/median over the last ``window`` counts of a stream.

    It lags a changing count by about ``(window - 1) / 2`` frames; ``CausalSmoother`` replaced
    it in ``counting video``.
    """

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
