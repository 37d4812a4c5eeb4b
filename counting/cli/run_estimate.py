"""How long a large `count` run will take, said once near its start (issue 49).

Every picture is one forward pass at the model's input size, whatever its own size: a 16x16
picture is enlarged to a 576-pixel pass for the crowd model (about as long as a Mall frame's), so
ten thousand of them took over 15 minutes with no word. The model cannot count it at its own size
(its maps have a cell per 8 to 32 pixels and its heads learnt people at the enlarged scale), so
the run says instead how long it will take, from the rate measured on its own pictures.

The rate is that of the parts counted after the first: the first part (one batch) also loads the
network and its runtime, and would make the estimate seconds a picture too long.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

# A run says its estimate only with at least this many pictures and this long left: a short run
# is done before the line is read (and test runs, on small folders, print nothing more).
ESTIMATE_MIN_PICTURES = 1000
ESTIMATE_MIN_SECONDS = 60.0


def duration_text(seconds: float) -> str:
    """``45 s``, ``16 min``, ``2 h 5 min``: as precise as an estimate is."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def rate_text(rate: float) -> str:
    """Pictures a second: whole from 10 up, else two significant digits (``0.74``, ``3.2``)."""
    return f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"


def estimate_line(total: int, rate: float) -> str:
    """``counting 10,000 pictures: about 16 min at 10 a second``."""
    return f"counting {total:,} pictures: about {duration_text(total / rate)} at {rate_text(rate)} a second"


class RunEstimate:
    """Says :func:`estimate_line` once, after the second part of a run is counted, when the run
    has at least :data:`ESTIMATE_MIN_PICTURES` pictures and :data:`ESTIMATE_MIN_SECONDS` left.

    ``wrap(on_part)`` gives the ``on_part`` callback of the counting call (each part's result as
    it is counted) that also feeds the estimate.
    """

    def __init__(self, total: int, say: Callable[[str], None], clock: Callable[[], float] = time.perf_counter) -> None:
        self.total = total
        self.say = say
        self.clock = clock
        self.done = 0
        self.first_done_at: float | None = None  # when the first part (network loading included) ended
        self.after_first = 0  # pictures counted since then
        self.said = False

    def wrap(self, on_part: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
        def counted(result: Any, records: Any) -> None:
            on_part(result, records)
            self.add(len(result.sources))

        return counted

    def add(self, pictures: int) -> None:
        """``pictures`` more were counted (one part)."""
        self.done += pictures
        now = self.clock()
        if self.first_done_at is None:
            self.first_done_at = now
            return
        self.after_first += pictures
        if self.said or self.total < ESTIMATE_MIN_PICTURES:
            return
        seconds = now - self.first_done_at
        if seconds <= 0 or not self.after_first:
            return
        rate = self.after_first / seconds
        self.said = True  # one estimate a run, right or wrong: a second one would be noise
        if (self.total - self.done) / rate >= ESTIMATE_MIN_SECONDS:
            self.say(estimate_line(self.total, rate))
