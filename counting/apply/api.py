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
(:mod:`counting.core.columns`). Every record ends with ``familiarity`` (how much the picture
resembles the model's training pictures, in (0, 1]; :mod:`counting.heads.familiarity`) and
``unfamiliar`` (True below the model's threshold: the count is unreliable); both are None for a
model file without a familiarity section ("unknown"). A crowd model with a sparse gate adds
``counted_by`` (what counted the picture: ``density``, ``detector`` or ``density+detector``) and
``disputed`` (True where its detector evidence said sparse but the density heads' count, beyond
anything the gate saw of a sparse picture, stood: the count is unreliable;
:mod:`counting.heads.crowd.sparse_gate`, "Disputed counts").
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from counting.apply.records import count_rows, picture_record
from counting.core import defaults
from counting.core.errors import CountingError, ImageError
from counting.core.files import unique_files
from counting.model.counting_model import CountingModel, CountResult, load_model

__all__ = ["Counts", "count", "count_rows", "disputed_warning", "familiarity_warning", "load_model"]


def familiarity_warning(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The one summary line for records marked ``unfamiliar`` (None when none is)."""
    from counting.heads.familiarity import unfamiliar_summary

    scored = [row for row in rows if row.get("unfamiliar") is not None]
    return unfamiliar_summary(sum(bool(row["unfamiliar"]) for row in scored), len(scored))


def disputed_warning(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The one summary line for records marked ``disputed`` (None when none is)."""
    from counting.heads.crowd.sparse_gate import disputed_summary

    return disputed_summary(sum(bool(row.get("disputed")) for row in rows), len(rows))


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
    def unfamiliar(self) -> list[str]:
        """Pictures unlike the model's training pictures (their counts are unreliable)."""
        return [row["image"] for row in self.rows if row.get("unfamiliar")]

    @property
    def disputed(self) -> list[str]:
        """Pictures whose count a crowd model's sparse gate disputes (unreliable; module docstring)."""
        return [row["image"] for row in self.rows if row.get("disputed")]

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
    zones: str | os.PathLike[str] | Sequence[Any] | None = None,
) -> Counts:
    """Count the people (or objects) in ``images`` with ``model`` (default: the shipped model).

    ``images``: an image file, a folder (its images), a glob pattern, an RGB ``(H, W, 3)``
    uint8 array (``(H, W)`` gray, ``(H, W, 4)`` RGBA: composited on white, as RGBA files are) or
    a PIL image (turned as its EXIF orientation says, as its file would be), or a list mixing
    them; arrays are named ``array:K`` (their
    position in the list). Pictures that cannot be counted are left out of the records and
    listed in :attr:`Counts.skipped` with a one-line reason; when nothing at all can be counted
    a :class:`~counting.core.errors.CountingError` says why. ``cache``: a
    :class:`~counting.features.cache.FeatureCache` (or a folder for one) to reuse descriptors
    across calls. Arguments of a wrong type raise TypeError; ``batch_size`` < 1 ValueError.

    ``zones``: a zones file (TOML/JSON) or a list of :class:`~counting.apply.zones.Zone` and
    ``"NAME:x1,y1,..."`` texts; each record then gains ``zone_NAME`` (and ``zone_NAME_low``,
    ``zone_NAME_high``), the count inside each zone (counting.apply.zones). A model that cannot
    localise raises :class:`~counting.apply.zones.ZoneError` before anything is counted.
    """
    items = _listed(images)
    if not items:
        raise ImageError("no images given: pass image files, folders, glob patterns or arrays")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number from 1, got {batch_size!r}")
    cache = _feature_cache(cache)
    counting_model = model if isinstance(model, CountingModel) else load_model(model)
    zone_list = _zones(zones)
    if zone_list:
        from counting.apply.zones import check_localises

        check_localises(counting_model)
    counter = _InputCounter(counting_model, zone_list, {"cache": cache, "batch_size": batch_size, "progress": progress})
    paths: list[str] = []  # consecutive paths, counted together (batches, chunks, cache)
    for position, item in enumerate(items):
        if not isinstance(item, (str, os.PathLike)):
            counter.count_paths(paths)  # records stay in the order of the inputs
            paths = []
            counter.count_picture(f"array:{position}", item)
        elif os.fspath(item).strip():
            paths.append(os.fspath(item))
        else:
            counter.skipped[repr(os.fspath(item))] = "an empty path names no image (it would mean the current folder)"
    counter.count_paths(paths)
    return counter.counts()


@dataclass
class _InputCounter:
    """What :func:`count` counts, in the order of its inputs: each run of paths together (their
    batches, chunks and cache), each in-memory picture alone; the records of what was counted and
    the one-line reason for each input that was not."""

    model: CountingModel
    zones: list[Any]
    options: dict[str, Any]  # cache, batch_size, progress: for count_in_chunks
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def count_paths(self, paths: Sequence[str]) -> None:
        """The records of the pictures under ``paths`` (files, folders, globs)."""
        files = unique_files(self._files(paths))
        if not files:
            return
        zone_records = None
        if self.zones:
            from counting.apply.zones import count_paths_in_zones

            result, zone_records = count_paths_in_zones(self.model, files, self.zones, **self.options)
        else:
            from counting.apply.chunks import count_in_chunks

            result = count_in_chunks(self.model, files, **self.options)
        self.rows.extend(count_rows(self.model, result, zone_records))
        self.skipped.update(result.errors)

    def _files(self, paths: Sequence[str]) -> list[str]:
        from counting.data.paths import expand_image_paths

        files: list[str] = []
        for path in paths:  # one at a time, so each problem is keyed by the path that has it
            try:
                found, problems = expand_image_paths([path])
            except ImageError as error:  # nothing found under it
                found, problems = [], [str(error)]
            files += found
            if problems:
                self.skipped[path] = problems[0]
        return files

    def count_picture(self, source: str, item: Any) -> None:
        """The record of one RGB array or PIL image, named ``source``."""
        try:
            if not isinstance(item, np.ndarray):
                # A PIL image as opened: turned as its EXIF says, as a path to the same file is.
                from counting.data import upright

                item = upright(item)
            if self.zones:
                from counting.apply.zones import count_frames

                zoned = count_frames(self.model, [item], self.zones)[0]
            else:
                batch = self.model.count_batch([self.model.prepare_image(item)])
        except CountingError as error:
            self.skipped[source] = f"{source}: {str(error).splitlines()[0]}"
            return
        except (OSError, ValueError) as error:  # a PIL image that is truncated, closed, ...
            self.skipped[source] = (
                f"{source}: cannot decode the image ({str(error).splitlines()[0] or type(error).__name__})"
            )
            return
        if self.zones:
            self.rows.append(
                picture_record(
                    self.model, _zoned_result(self.model, source, zoned), 0, {"image": source}, zoned["zones"]
                )
            )
        else:
            self.rows.append(picture_record(self.model, batch, 0, {"image": source}))

    def counts(self) -> Counts:
        """The records, or ImageError saying why nothing at all could be counted."""
        if not self.rows:
            reasons = list(self.skipped.values())
            if len(reasons) == 1:
                raise ImageError(reasons[0])
            raise ImageError(f"nothing could be counted ({len(reasons)} inputs; first: {reasons[0]})")
        return Counts(model=self.model.name, rows=self.rows, skipped=self.skipped)


def _listed(images: Any) -> list[Any]:
    """The inputs as a list: one path, array or PIL image, or any iterable of them (a list, a
    tuple, a generator); anything else is a TypeError naming what was given."""
    if _is_image_input(images):
        return [images]
    if isinstance(images, (bytes, bytearray, Mapping, AbstractSet)) or not isinstance(images, Iterable):
        raise TypeError(_wrong_type(images))
    items = list(images)
    for item in items:
        if not _is_image_input(item):
            raise TypeError(_wrong_type(item))
    return items


def _is_image_input(value: Any) -> bool:
    if isinstance(value, (str, os.PathLike, np.ndarray)):
        return True
    from PIL import Image

    return isinstance(value, Image.Image)


def _wrong_type(value: Any) -> str:
    return (
        f"counting.count takes image paths (str or Path), folders, glob patterns, RGB arrays or PIL images, "
        f"or a list of them; got {type(value).__name__}"
    )


def _zones(zones: Any) -> list[Any]:
    """The ``zones`` argument of :func:`count` as a list of Zone (names checked)."""
    from counting.apply.zones import Zone, check_zone_names, load_zones, parse_zone

    if zones is None:
        return []
    if isinstance(zones, (str, os.PathLike)):
        return load_zones(zones)
    if isinstance(zones, (bytes, Mapping)) or not isinstance(zones, Iterable):
        raise TypeError(
            f"zones must be a zones file or a list of Zone or 'NAME:x1,y1,...' texts, got {type(zones).__name__}"
        )
    listed = []
    for zone in zones:
        if isinstance(zone, str):
            zone = parse_zone(zone)
        if not isinstance(zone, Zone):
            raise TypeError(f"zones must be Zone objects or 'NAME:x1,y1,...' texts, got {type(zone).__name__}")
        listed.append(zone)
    check_zone_names(listed)
    return listed


def _feature_cache(cache: Any) -> Any:
    """``None``, a FeatureCache, or a folder for one (str or Path)."""
    if cache is None or hasattr(cache, "content_hash"):
        return cache
    if isinstance(cache, (str, os.PathLike)):
        from counting.features.cache import FeatureCache

        return FeatureCache(cache)
    raise TypeError(f"cache must be a FeatureCache or a folder for one, got {type(cache).__name__}")


def _zoned_result(model: CountingModel, source: str, record: Mapping[str, Any]) -> CountResult:
    """A :class:`CountResult` of one in-memory picture from its record of
    :func:`counting.apply.zones.count_frames`: its interval is the record's (on the picture's
    route), or without one the model's."""
    counts = np.array([record["count"]])
    if "low" in record:
        low, high = np.array([record["low"]]), np.array([record["high"]])
    else:
        low, high = model.intervals(counts)
    return CountResult(
        sources=[source],
        counts=counts,
        low=low,
        high=high,
        ok=np.array([True]),
        errors={},
        familiarity=None if record.get("familiarity") is None else np.array([record["familiarity"]]),
        counted_by=None if "counted_by" not in record else np.array([record["counted_by"]]),
        disputed=None if "disputed" not in record else np.array([record["disputed"]]),
    )
