"""Counting a long list of images in chunks of bounded size, so memory stays flat.

A run that must keep what it counted when it is interrupted (``counting count --csv``) asks
for each chunk's result as it is done (``on_part``); its chunks are then also bounded in time
(:data:`CHUNK_SECONDS`), so a Ctrl-C loses seconds of counting, not the whole run.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # annotations only: the model is imported where it counts
    from counting.model.counting_model import CountingModel

# Images counted per call of CountingModel.count_paths: what a call holds grows with its images
# (descriptors, 4 KB an image, and the regressor's working copies of them, about 30 KB an
# image), so a run counts its images in chunks and keeps only the counts. 512 images cost
# about 20 MB; the pipeline drains once per chunk (one batch's decode, under 1 % of the time).
COUNT_CHUNK = 512

# How long a chunk of a run with ``on_part`` takes, about: what an interrupt loses at most.
# A call costs little beyond its images: 256 pictures of 16x16 counted in chunks of 16, 64 and
# 256 took 8.2-10.0, 10.0-10.9 and 8.8-9.7 s (models/default.npz, batches of 16, three runs
# each on a 2-core EPYC under load), so short chunks are cheap; a chunk of 512 Mall frames
# took minutes there, and a Ctrl-C before its end lost every count of the run.
CHUNK_SECONDS = 5.0
# A chunk is at most this many times as long as the previous one (the first, which loads the
# network, is slow; a rate measured on it alone would make the next chunk too short, not long).
CHUNK_GROWTH = 4

CountParts = list[Any]  # CountResult of each chunk, in order


def count_in_chunks(
    model: CountingModel,
    paths: Sequence[str | os.PathLike[str]],
    *,
    progress: bool = False,
    chunk: int | None = None,
    console: Any = None,
    on_part: Callable[[Any, None], None] | None = None,
    **options: Any,
) -> Any:
    """``model.count_paths(paths, progress=progress, **options)``, ``chunk`` images at a time
    (default :data:`COUNT_CHUNK`):
    the memory a run needs is flat in the number of images (each image keeps its name, counts
    and error message only). One chunk is one plain call.

    A chunk size that is a multiple of the batch size keeps every batch of a run of same-size
    images as one call would make it. With ``progress`` and several chunks, one bar counts the
    images chunk by chunk (a chunk's own bars would restart at zero).

    ``on_part(result, None)`` is called with each chunk's :class:`CountResult` as soon as it is
    counted (a caller interrupted later keeps those: :func:`join_results`; the ``None`` is the
    zone records that :func:`counting.apply.zones.count_paths_in_zones` and ``count --cluster``
    give with theirs, for one callback of every way of counting pictures). The chunks are then
    sized to take about :data:`CHUNK_SECONDS` each (whole :func:`_chunk_unit`, at most ``chunk``),
    starting from one unit, even when every image would fit one call.
    """
    from counting.features.extract import chunk_slices, whole_batches

    batch = int(options.get("batch_size") or 1)
    size = whole_batches(COUNT_CHUNK if chunk is None else chunk, batch)
    if on_part is None and len(paths) <= size:
        return model.count_paths(list(paths), progress=progress, **options)
    sizes = _TimedChunks(_chunk_unit(batch), size) if on_part is not None else None
    parts = []
    for piece in chunk_slices(len(paths), sizes.next_size if sizes else size, progress, console):
        started = time.perf_counter()
        part = model.count_paths(list(paths[piece]), progress=False, **options)
        parts.append(part)
        if sizes is not None:
            sizes.took(len(part.sources), time.perf_counter() - started)
        if on_part is not None:
            on_part(part, None)
    return join_results(parts)


def _chunk_unit(batch: int) -> int:
    """The pictures every timed chunk is a whole number of: whole batches, and whole chunks of a
    density-head model's maps (``DENSITY_CHUNK`` pictures at a time from the start of each
    call, read now: tests change it). Each picture then goes through the network and the heads
    in the company one call gives it (their last bits depend on it), whatever the chunks' sizes."""
    from counting.model import counting_model

    return math.lcm(max(1, batch), max(1, counting_model.DENSITY_CHUNK))


class _TimedChunks:
    """The size of each next chunk: whole ``unit`` pictures, about :data:`CHUNK_SECONDS` at the
    rate the previous chunk was counted, at most ``largest`` and :data:`CHUNK_GROWTH` times the
    previous."""

    def __init__(self, unit: int, largest: int) -> None:
        self.unit = max(1, unit)
        self.largest = max(self.unit, largest // self.unit * self.unit)
        self.size = self.unit
        self.rate: float | None = None  # images a second, of the last chunk

    def took(self, images: int, seconds: float) -> None:
        self.rate = images / max(seconds, 1e-6)

    def next_size(self) -> int:
        if self.rate is not None:
            wanted = int(self.rate * CHUNK_SECONDS) // self.unit * self.unit
            self.size = max(self.unit, min(wanted, self.size * CHUNK_GROWTH, self.largest))
        return self.size


def join_results(parts: Sequence[Any]) -> Any:
    """One :class:`CountResult` of the chunks' results, in order (an empty one for none)."""
    from counting.model.counting_model import CountResult

    def joined(name: str) -> np.ndarray | None:
        values = [getattr(part, name) for part in parts]
        return None if not values or any(value is None for value in values) else np.concatenate(values)

    errors: dict[str, str] = {}
    for part in parts:
        errors.update(part.errors)
    return CountResult(
        sources=[source for part in parts for source in part.sources],
        counts=np.concatenate([part.counts for part in parts]) if parts else np.zeros(0),
        low=joined("low"),
        high=joined("high"),
        ok=np.concatenate([part.ok for part in parts]) if parts else np.zeros(0, dtype=bool),
        errors=errors,
        familiarity=joined("familiarity"),
        counted_by=joined("counted_by"),
        disputed=joined("disputed"),
    )
