"""Counting from Python in one call: ``counting.count(...)`` and ``counting.load_model(...)``.

```python
import counting

counts = counting.count("photos/")              # the shipped default model
counts = counting.count(["a.jpg", frame_rgb], model="models/mall-sums.npz")
for row in counts:                              # one record per counted picture
    print(row["image"], row["count"], row.get("low"), row.get("high"))
counts.skipped                                  # {source: one-line reason} of pictures not counted
counts.as_dict()                                # what ``counting count --json`` writes
```

The records are the ones ``counting count`` prints and writes to ``--csv``/``--json``
(:func:`count_rows`): ``image``, ``count`` and, for calibrated models, ``low``/``high``; a
per-class model gives ``total`` and ``count_CLASS``/``low_CLASS``/``high_CLASS``
(:mod:`counting.core.columns`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from counting.core import defaults
from counting.core.columns import class_column
from counting.core.errors import CountingError, ImageError
from counting.model.counting_model import CountingModel, CountResult, load_model

__all__ = ["Counts", "count", "count_rows", "load_model"]


def count_rows(model: CountingModel, result: CountResult) -> list[dict[str, Any]]:
    """One record per counted picture (failed ones are left out: they are in ``result.errors``)."""
    rows: list[dict[str, Any]] = []
    low, high = result.low, result.high
    for k, source in enumerate(result.sources):
        if not result.ok[k]:
            continue
        if model.class_names:
            row: dict[str, Any] = {"image": source, "total": float(np.sum(result.counts[k]))}
            for c, name in enumerate(model.class_names):
                row[class_column("count", name)] = float(result.counts[k, c])
                if low is not None and high is not None:
                    row[class_column("low", name)] = float(low[k, c])
                    row[class_column("high", name)] = float(high[k, c])
        else:
            row = {"image": source, "count": float(result.counts[k])}
            if low is not None and high is not None:
                row["low"], row["high"] = float(low[k]), float(high[k])
        rows.append(row)
    return rows


@dataclass
class Counts:
    """The counts of one :func:`count` call: a list of records, plus what could not be counted."""

    model: str
    rows: list[dict[str, Any]]
    skipped: dict[str, str] = field(default_factory=dict)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.rows[index]

    @property
    def counts(self) -> np.ndarray:
        """``(n,)`` counts (the ``total`` of a per-class model), in the order of :attr:`rows`."""
        key = "total" if self.rows and "total" in self.rows[0] else "count"
        return np.array([row[key] for row in self.rows], dtype=float)

    def as_dict(self) -> dict[str, Any]:
        """The document ``counting count --json`` writes."""
        return {"model": self.model, "images": self.rows, "skipped": list(self.skipped.values())}


ImageInput = str | os.PathLike[str] | np.ndarray | Any  # a path, folder, glob, RGB array or PIL image


def count(
    images: ImageInput | Sequence[ImageInput],
    model: str | os.PathLike[str] | CountingModel | None = None,
    *,
    batch_size: int = defaults.BATCH_SIZE,
    cache: Any = None,
    progress: bool = False,
) -> Counts:
    """Count the people (or objects) in ``images`` with ``model`` (default: the shipped model).

    ``images``: an image file, a folder (its images), a glob pattern, an RGB ``(H, W, 3)``
    uint8 array or a PIL image, or a list mixing them; arrays are named ``array:K`` (their
    position in the list). Pictures that cannot be counted are left out of the records and
    listed in :attr:`Counts.skipped` with a one-line reason; when nothing at all can be counted
    a :class:`~counting.core.errors.CountingError` says why. ``cache``: a
    :class:`~counting.features.cache.FeatureCache` to reuse descriptors across calls.
    """
    from counting.apply.chunks import count_in_chunks
    from counting.data.paths import expand_image_paths

    counting_model = model if isinstance(model, CountingModel) else load_model(model)
    items = list(images) if isinstance(images, (list, tuple)) else [images]
    if not items:
        raise ImageError("no images given: pass image files, folders, glob patterns or arrays")
    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    run: list[str] = []  # consecutive paths, counted together (batches, chunks, cache)

    def count_run() -> None:
        if not run:
            return
        try:
            files, problems = expand_image_paths(run)
        except ImageError as error:  # nothing found under any of them
            files, problems = [], [str(error)]
        skipped.update({problem: problem for problem in problems})
        if files:
            result = count_in_chunks(counting_model, files, cache=cache, batch_size=batch_size, progress=progress)
            rows.extend(count_rows(counting_model, result))
            skipped.update(result.errors)
        run.clear()

    for position, item in enumerate(items):
        if isinstance(item, (str, os.PathLike)):
            run.append(os.fspath(item))
            continue
        count_run()  # records stay in the order of the inputs
        source = f"array:{position}"
        try:
            counts = np.asarray(counting_model.count_images([item]))
        except CountingError as error:
            skipped[source] = f"{source}: {str(error).splitlines()[0]}"
            continue
        rows.extend(count_rows(counting_model, _one_result(counting_model, source, counts)))
    count_run()
    if not rows:
        reasons = list(skipped.values())
        raise ImageError(reasons[0] if len(reasons) == 1 else f"nothing could be counted ({len(reasons)} inputs)")
    return Counts(model=counting_model.name, rows=rows, skipped=skipped)


def _one_result(model: CountingModel, source: str, counts: np.ndarray) -> CountResult:
    """A :class:`CountResult` for one in-memory picture, with the model's interval."""
    low, high = model.intervals(counts)
    return CountResult(sources=[source], counts=counts, low=low, high=high, ok=np.array([True]), errors={})
