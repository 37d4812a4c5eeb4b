"""The record of a counted picture or frame: one builder for every command.

``count`` (its table, ``--csv``, ``--json``), ``counting.count``, ``serve``'s uploads and
``video``'s rows all take their records from :func:`picture_record`, so a picture gets the same
fields whichever way it comes in: its count, its interval (``low``, ``high``: calibrated models
only), a per-class model's ``count_CLASS``/``low_CLASS``/``high_CLASS``
(:mod:`counting.core.columns`), the zones' ``zone_NAME``/``zone_NAME_low``/``zone_NAME_high``,
``familiarity`` and ``unfamiliar`` (:mod:`counting.heads.familiarity`; None and None for a model
file without that section), and a gated crowd model's ``counted_by`` and ``disputed``
(:mod:`counting.heads.crowd.sparse_gate`). A command adds its own fields around them: ``image``
before them for a picture; ``frame`` and ``time_s`` before them and the smoothed count after the
count for a video frame.

A record is built from one row ``k`` of a :class:`~counting.heads.results.CountResult` (picture
files) or a :class:`~counting.heads.results.CountBatch` (frames, arrays, uploads): both carry the
counts, intervals, familiarity, route and disputed marks under the same names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from counting.core.columns import class_column, zone_column
from counting.heads.familiarity import familiarity_fields

if TYPE_CHECKING:  # annotations only: the model is imported where it counts
    from counting.apply.zone_specs import Zone
    from counting.heads.results import CountBatch, CountResult
    from counting.model.counting_model import CountingModel

__all__ = [
    "FRAME_COLUMNS",
    "PICTURE_COLUMNS",
    "ClassColumns",
    "count_fields",
    "count_rows",
    "frame_columns",
    "mark_fields",
    "picture_record",
    "zone_fields",
]

ZoneRecord = Mapping[str, Mapping[str, float]]  # {zone name: {"count", "low", "high"}}


@dataclass(frozen=True)
class ClassColumns:
    """Where a per-class model's columns go in a record (a single-count model's are ``count``,
    ``low``, ``high`` either way). The two layouts are those the commands have always written,
    kept so that a file's columns do not move under the scripts that read them."""

    total: bool  # a ``total`` column (the sum over the classes) before the classes' own
    by_class: bool  # count_A, low_A, high_A, count_B, ...; else count_A, count_B, ..., low_A, ..., high_A, ...


# count's records: the total, then each class's count beside its interval.
PICTURE_COLUMNS = ClassColumns(total=True, by_class=True)
# video's rows: the counts, then the lows, then the highs, as its smoothed columns follow them.
FRAME_COLUMNS = ClassColumns(total=False, by_class=False)


def zone_fields(zone_record: ZoneRecord) -> dict[str, float]:
    """A frame's zones as flat columns (``zone_NAME``, ``zone_NAME_low``, ``zone_NAME_high``),
    as the table, CSV, JSON and JSONL outputs write them."""
    return {zone_column(kind, name): value for name, entry in zone_record.items() for kind, value in entry.items()}


def count_fields(
    class_names: Sequence[str] | None,
    counts: Any,
    low: Any = None,
    high: Any = None,
    layout: ClassColumns = PICTURE_COLUMNS,
) -> dict[str, float]:
    """One picture's count and interval as columns: ``counts``, ``low``, ``high`` are its row of
    the batch (a number, or one per class for a per-class model); the interval only when both
    bounds are given."""
    bounded = low is not None and high is not None
    if not class_names:
        fields = {"count": float(counts)}
        if bounded:
            fields["low"], fields["high"] = float(low), float(high)
        return fields
    kinds = [("count", counts)] + ([("low", low), ("high", high)] if bounded else [])
    fields = {"total": float(np.sum(counts))} if layout.total else {}
    if layout.by_class:
        for c, name in enumerate(class_names):
            fields.update({class_column(kind, name): float(values[c]) for kind, values in kinds})
    else:
        for kind, values in kinds:
            fields.update({class_column(kind, name): float(values[c]) for c, name in enumerate(class_names)})
    return fields


def mark_fields(model: CountingModel, counted: CountResult | CountBatch, k: int) -> dict[str, Any]:
    """What says how far picture ``k``'s count can be trusted: ``familiarity``, ``unfamiliar``,
    and for a gated crowd model ``counted_by`` and ``disputed`` (module docstring)."""
    fields = familiarity_fields(model, counted.familiarity, k)
    counted_by, disputed = counted.counted_by, counted.disputed
    if counted_by is not None:
        fields["counted_by"] = str(counted_by[k])
    if disputed is not None:
        fields["disputed"] = bool(disputed[k])
    return fields


def picture_record(
    model: CountingModel,
    counted: CountResult | CountBatch,
    k: int,
    leading: Mapping[str, Any],
    zone_record: ZoneRecord | None = None,
    after_count: Mapping[str, Any] | None = None,
    layout: ClassColumns = PICTURE_COLUMNS,
) -> dict[str, Any]:
    """The record of picture ``k`` of ``counted``: ``leading`` (what names it: ``image``, or
    ``frame`` and ``time_s``), its count and interval (:func:`count_fields`), ``after_count``
    (video's smoothed count), its zones (:func:`zone_fields`), then :func:`mark_fields`."""
    low = None if counted.low is None else counted.low[k]
    high = None if counted.high is None else counted.high[k]
    record = dict(leading)
    record.update(count_fields(model.class_names, counted.counts[k], low, high, layout))
    record.update(after_count or {})
    if zone_record is not None:
        record.update(zone_fields(zone_record))
    record.update(mark_fields(model, counted, k))
    return record


def count_rows(
    model: CountingModel, result: CountResult, zone_records: Mapping[str, ZoneRecord] | None = None
) -> list[dict[str, Any]]:
    """One record per counted picture (failed ones are left out: they are in ``result.errors``).

    ``zone_records`` (``{source: {zone: {"count", "low", "high"}}}``, counting.apply.zones) adds
    the columns ``zone_NAME``, ``zone_NAME_low``, ``zone_NAME_high`` after the frame's.
    """
    return [
        picture_record(model, result, k, {"image": source}, None if zone_records is None else zone_records[source])
        for k, source in enumerate(result.sources)
        if result.ok[k]
    ]


def frame_columns(model: CountingModel, zones: Sequence[Zone], smoothed: bool) -> list[str]:
    """The columns of video's rows (its CSV header), in the order :func:`picture_record` with
    :data:`FRAME_COLUMNS` puts them: every column a row of ``model`` can hold, so that a row
    without one (no familiarity score) leaves its cell empty."""
    names = model.class_names
    calibrated = model.interval is not None

    def per_class(kinds: list[str]) -> list[str]:
        return [class_column(kind, name) for kind in kinds for name in names] if names else kinds

    columns = ["frame", "time_s"] + per_class(["count"] + (["low", "high"] if calibrated else []))
    if smoothed:
        columns += per_class(["smoothed"] + (["smoothed_low", "smoothed_high"] if calibrated else []))
    zone_kinds = ["count"] + (["low", "high"] if calibrated else [])
    columns += [zone_column(kind, zone.name) for zone in zones for kind in zone_kinds]
    columns += ["familiarity", "unfamiliar"]  # empty for a model file without a familiarity section
    if model.sparse_gate is not None:  # which route counted each frame (count's columns)
        columns += ["counted_by", "disputed"]
    return columns
