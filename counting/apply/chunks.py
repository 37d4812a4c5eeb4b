"""Counting a long list of images in chunks of bounded size, so memory stays flat."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

# Images counted per call of CountingModel.count_paths: what a call holds grows with its images
# (descriptors, 4 KB an image, and the regressor's working copies of them, about 30 KB an
# image), so a run counts its images in chunks and keeps only the counts. 512 images cost
# about 20 MB; the pipeline drains once per chunk (one batch's decode, under 1 % of the time).
COUNT_CHUNK = 512


def count_in_chunks(
    model: Any,
    paths: Sequence[str | os.PathLike[str]],
    *,
    progress: bool = False,
    chunk: int | None = None,
    console: Any = None,
    **options: Any,
) -> Any:
    """``model.count_paths(paths, progress=progress, **options)``, ``chunk`` images at a time
    (default :data:`COUNT_CHUNK`):
    the memory a run needs is flat in the number of images (each image keeps its name, counts
    and error message only). One chunk is one plain call.

    A chunk size that is a multiple of the batch size keeps every batch of a run of same-size
    images as one call would make it. With ``progress`` and several chunks, one bar counts the
    images chunk by chunk (a chunk's own bars would restart at zero).
    """
    from counting.features.extract import chunk_slices, whole_batches
    from counting.model.counting_model import CountResult

    size = whole_batches(COUNT_CHUNK if chunk is None else chunk, int(options.get("batch_size") or 1))
    if len(paths) <= size:
        return model.count_paths(list(paths), progress=progress, **options)
    parts = [
        model.count_paths(list(paths[piece]), progress=False, **options)
        for piece in chunk_slices(len(paths), size, progress, console)
    ]

    def joined(name: str) -> np.ndarray | None:
        values = [getattr(part, name) for part in parts]
        return None if any(value is None for value in values) else np.concatenate(values)

    errors: dict[str, str] = {}
    for part in parts:
        errors.update(part.errors)
    return CountResult(
        sources=[source for part in parts for source in part.sources],
        counts=np.concatenate([part.counts for part in parts]),
        low=joined("low"),
        high=joined("high"),
        ok=np.concatenate([part.ok for part in parts]),
        errors=errors,
        familiarity=joined("familiarity"),
        counted_by=joined("counted_by"),
        disputed=joined("disputed"),
    )
