"""Zones: named polygons in a camera's picture, and the people counted inside each one.

A zone is given in pixels or as fractions of the frame's width and height (``relative``).
``--zone NAME:x1,y1,x2,y2,...`` on the command line (:func:`parse_zone`), or a TOML/JSON file of
them (:func:`load_zones`). A density-head model counts a zone from its density map: each map
cell's mass times the fraction of the cell's area inside the polygon (exact polygon-cell
intersection areas from shapely, :func:`zone_weights`), times the cell's share of the model's ROI.

How a zone's count relates to the frame's. The frame count is the AGP-corrected head sum (the
regressor sees the head's sums, and a ``head_sum`` model adds a correction), not the map's mass.
A zone gets the frame count times its share of the map's mass (negative density clipped to 0,
as the heat map shows it). The zone counts of a partition of the frame therefore add up to the
frame count (their shares add up to 1), and a zone covering the frame counts what the frame
does. A frame whose map holds no mass at all shares its count by ROI area.

A zone's interval (:func:`zone_intervals`) is the frame's interval scaled by the same share,
widened by the error of where the map puts the people: scaled alone, a 90 % interval held the
people of a quarter of the frame 44-76 % of the time, of a sixteenth 26-63 % (the crowd model's
validation parts and `models/mall-accurate.npz`'s, ``scripts/zone_intervals_study.py``).

Models that cannot localise (plain descriptor models, tiles of a descriptor grid, per-class
heads) refuse zones with one line (:func:`check_localises`). A detector-based model would count
the detections whose centre lies in the zone (:func:`detections_in_zones`; the detector lands on
another branch, and :func:`check_localises` and :func:`count_frames` are where it plugs in).

```python
from counting.apply.zones import parse_zone, load_zones, count_frames

zones = [parse_zone("door:0,0,0.5,0,0.5,1,0,1"), *load_zones("zones.toml")]
for record in count_frames(model, [rgb_frame], zones):
    record["count"], record["zones"]["door"]["count"]
```
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np
import shapely

from counting.apply.records import count_fields, zone_fields  # zone_fields: the zones' columns of every record
from counting.apply.zone_specs import (
    Zone,
    ZoneError,
    check_zone_names,
    combined_zones,
    load_zones,
    parse_zone,
    zones_from_entries,
)
from counting.core.errors import CountingError

if TYPE_CHECKING:  # annotations only: the model is imported where it counts
    from counting.model.counting_model import CountingModel

__all__ = [
    "Zone",
    "ZoneError",
    "check_localises",
    "check_zone_names",
    "combined_zones",
    "count_frames",
    "count_frames_with_density",
    "count_paths_in_zones",
    "density_records",
    "detections_in_zones",
    "frame_zone_records",
    "map_size",
    "load_zones",
    "parse_zone",
    "zone_fields",
    "zone_intervals",
    "zone_shares",
    "zone_weights",
    "zones_from_entries",
]

# A map with less mass than this (people) shares its count by area: the shares would be noise.
_NO_MASS = 1e-9


def map_size(model: CountingModel, frame_size: tuple[int, int]) -> tuple[int, int]:
    """``(h, w)`` of the density map the model makes of a ``(height, width)`` frame."""
    from counting.heads.density.maps import head_grid

    height, width = frame_size
    input_width, input_height = model.preprocessing().target_size(width, height)
    return head_grid((input_height, input_width), model.density_head.stride)


@lru_cache(maxsize=64)
def _coverage(zones: tuple[Zone, ...], frame_size: tuple[int, int], cells: tuple[int, int]) -> np.ndarray:
    """``(Z, h, w)``: the fraction of each map cell's area inside each zone.

    Map cells tile the frame evenly, as the heat map and the ROI weights place them
    (:func:`counting.heads.density.regions.roi_weights`). The cells a polygon touches come from
    an STR tree; those wholly inside weigh 1 and only the ones its edges cut are intersected with
    it (vectorised shapely calls: 3 zones on Mall's 90x120 map in 0.06 s against 0.35 s for
    intersecting every cell, the same weights to 1e-13).
    """
    height, width = frame_size
    rows, cols = cells
    ys = np.linspace(0.0, height, rows + 1)
    xs = np.linspace(0.0, width, cols + 1)
    x0, y0 = np.meshgrid(xs[:-1], ys[:-1])
    x1, y1 = np.meshgrid(xs[1:], ys[1:])
    boxes = shapely.box(x0.ravel(), y0.ravel(), x1.ravel(), y1.ravel())
    cell_area = (width / cols) * (height / rows)
    tree = shapely.STRtree(boxes)
    coverage = np.zeros((len(zones), rows * cols))
    for index, zone in enumerate(zones):  # a few zones; the cells are vectorised
        polygon = zone.polygon(frame_size)
        shapely.prepare(polygon)
        touched = tree.query(polygon, predicate="intersects")
        inside = shapely.contains_properly(polygon, boxes[touched])
        coverage[index, touched[inside]] = 1.0
        cut = touched[~inside]
        coverage[index, cut] = shapely.area(shapely.intersection(boxes[cut], polygon)) / cell_area
    coverage = np.clip(coverage, 0.0, 1.0)
    coverage.setflags(write=False)  # shared by every frame of that size
    return coverage.reshape(len(zones), rows, cols)


def zone_weights(zones: Sequence[Zone], frame_size: tuple[int, int], model: CountingModel) -> np.ndarray:
    """``(Z, h, w)`` weights on the model's density map of a ``(height, width)`` frame: the part
    of each cell inside each zone (exact area fraction) times the cell's share of the model's
    ROI (cells outside the ROI weigh 0). Cached per zones, frame size and map size."""
    from counting.heads.density.regions import roi_weights

    check_localises(model)
    cells = map_size(model, frame_size)
    coverage = _coverage(tuple(zones), (int(frame_size[0]), int(frame_size[1])), cells)
    return coverage * roi_weights(model.roi_mask, cells)[None]


def zone_shares(density: np.ndarray, weights: np.ndarray, roi: np.ndarray) -> np.ndarray:
    """``(n, Z)`` share of each frame's count that each zone holds.

    ``density`` ``(n, h, w)``, ``weights`` ``(Z, h, w)`` from :func:`zone_weights`, ``roi``
    ``(h, w)`` ROI weights: a zone's share is its mass over the ROI's mass (density clipped at 0);
    a frame without mass shares by ROI area. A detector-based model would give the share of its
    detections whose centre lies in each zone instead.
    """
    mass = np.clip(np.asarray(density, dtype=float), 0.0, None).reshape(len(density), -1)
    zone_matrix = weights.reshape(len(weights), mass.shape[1])  # explicit: no zones is (0, cells)
    inside = mass @ zone_matrix.T
    total = mass @ roi.ravel()
    by_area = zone_matrix.sum(axis=1) / max(float(roi.sum()), _NO_MASS)
    empty = total <= _NO_MASS
    shares = inside / np.where(empty, 1.0, total)[:, None]
    shares[empty] = by_area
    return shares


def detections_in_zones(
    centres: np.ndarray, zones: Sequence[Zone], frame_size: tuple[int, int], weights: np.ndarray | None = None
) -> np.ndarray:
    """``(Z,)`` count of detections inside each zone: the extension point for detector-based
    models (issue 22), which count a zone by the detections whose centre lies in it (a centre on
    an edge counts in both zones it touches) rather than by a density map's share.

    ``centres``: ``(n, 2)`` box centres ``(x, y)`` in pixels of a ``(height, width)`` frame;
    ``weights``: ``(n,)`` per detection (e.g. 1 for kept boxes, or scores), default 1.
    """
    points = np.asarray(centres, dtype=float).reshape(-1, 2)
    each = np.ones(len(points)) if weights is None else np.asarray(weights, dtype=float)
    counts = np.zeros(len(zones))
    for index, zone in enumerate(zones):  # a few zones; the points are vectorised
        polygon = zone.polygon(frame_size)
        inside = shapely.intersects_xy(polygon, points[:, 0], points[:, 1])
        counts[index] = float(each[inside].sum())
    return counts


def check_localises(model: CountingModel) -> None:
    """ZoneError unless ``model`` can say where in the frame it counts (a density head)."""
    if model.density_head is not None:
        return
    name = model.name
    if model.class_density_head is not None:
        raise ZoneError(
            f"{name}: per-class density models do not count zones yet; use a single-count density model "
            "(e.g. models/mall-accurate.npz)"
        )
    raise ZoneError(
        f"{name}: counts whole frames from descriptors and cannot say where the people are, so it cannot count "
        "zones; use a density-head model (train --density-head, e.g. models/mall-accurate.npz)"
    )


# How far a zone's people stray from its share of the frame's interval, at the 90 % level: each
# bound moves out by ZONE_SCATTER * sqrt((c + 1) (1 - s) (1 + c r^2)), c the zone's count, s its
# share of the frame, r the frame interval's half-width over the frame's count. A count
# overdispersed as the frame's own relative error says (a negative binomial's variance
# c + c^2 r^2), of the people the map could have put elsewhere (1 - s: a zone covering the frame
# keeps the frame's interval). One scale for every model: fitted to cover 90 % of the zones (the
# cells of 1x2 to 4x4 grids) of the crowd model's validation pictures the density heads count
# (Mall 601-800, ShanghaiTech A and B: 0.515; fitted on half the pictures, 0.50-0.53 and 89-91 %
# on the other half), it covers 86-96 % per set and grid there and 91-99 % of
# models/mall-accurate.npz's Mall zones (scripts/zone_intervals_study.py, docs/commands.md "Zones").
ZONE_SCATTER = 0.515
_SCATTER_LEVEL = 0.9
_WHOLE_SHARE = 1e-9  # a share this close to 1 is the whole frame


def zone_intervals(
    counts: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    shares: np.ndarray,
    level: float = _SCATTER_LEVEL,
    scatter_scale: float = ZONE_SCATTER,
) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` ``(n, zones)``: the intervals of zones holding ``shares`` ``(n, zones)`` of
    frames counted ``counts`` ``(n,)`` with intervals ``[low, high]`` at ``level`` (module
    docstring): the frame's interval times the share, each bound moved out by the zone's own
    scatter (``scatter_scale``, :data:`ZONE_SCATTER`, rescaled from 90 % to ``level`` as a normal
    quantile), the low one kept at 0 or above and the high one at the frame's or below."""
    counts, low, high = (np.asarray(values, dtype=float)[:, None] for values in (counts, low, high))
    shares = np.clip(np.asarray(shares, dtype=float), 0.0, 1.0)
    zone_counts = counts * shares
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(counts > 0, (high - low) / (2 * counts), 0.0)
    relative = np.where(np.isnan(relative), 0.0, relative)
    scale = scatter_scale * NormalDist().inv_cdf((1 + level) / 2) / NormalDist().inv_cdf((1 + _SCATTER_LEVEL) / 2)
    with np.errstate(invalid="ignore", over="ignore"):
        scatter = scale * np.sqrt((zone_counts + 1) * (1 - shares) * (1 + zone_counts * relative**2))
    # A zone holds no more people than the frame: its high bound stops at the frame's (a frame
    # counted 0 [0, 0] gave every zone a high of 0.4). The whole frame (a share of 1 to rounding:
    # polygon areas give 0.9999999999999999) keeps the frame's interval exactly.
    lower = np.maximum(low * shares - scatter, 0.0)
    upper = np.minimum(high * shares + scatter, np.maximum(high, 0.0))
    whole = shares >= 1.0 - _WHOLE_SHARE
    return np.where(whole, low, lower), np.where(whole, high, upper)


def frame_zone_records(
    zones: Sequence[Zone],
    shares: np.ndarray,
    counts: np.ndarray,
    low: np.ndarray | None,
    high: np.ndarray | None,
    level: float = _SCATTER_LEVEL,
    counted: np.ndarray | None = None,
) -> list[dict[str, dict[str, float]]]:
    """Per frame, ``{zone name: {"count", "low", "high"}}``: the frame's count times the zone's
    share, and the zone's interval at ``level`` (:func:`zone_intervals`; ``low``/``high`` only
    for calibrated models). ``counted``: :func:`counted_zones`; a zone the model counts nobody in
    (all of it outside its ROI) gets no scatter: its interval is [0, 0], as its count is 0."""
    shares = np.asarray(shares, dtype=float).reshape(len(counts), len(zones))
    bounds = None if low is None or high is None else zone_intervals(counts, low, high, shares, level)
    if bounds is not None and counted is not None:
        bounds[0][:, ~counted], bounds[1][:, ~counted] = 0.0, 0.0
    records = []
    for k in range(len(counts)):
        record: dict[str, dict[str, float]] = {}
        for z, zone in enumerate(zones):
            entry = {"count": float(counts[k]) * float(shares[k, z])}
            if bounds is not None:
                entry["low"], entry["high"] = float(bounds[0][k, z]), float(bounds[1][k, z])
            record[zone.name] = entry
        records.append(record)
    return records


def counted_zones(weights: np.ndarray) -> np.ndarray:
    """``(zones,)`` bool: which zones of :func:`zone_weights` ``(zones, h, w)`` hold some of the
    model's ROI (a zone without any counts nobody)."""
    weights = np.asarray(weights, dtype=float)
    return weights.sum(axis=tuple(range(1, weights.ndim))) > 0  # no zones: (0,)


def interval_level(model: CountingModel) -> float:
    """The nominal coverage of ``model``'s intervals (:data:`_SCATTER_LEVEL` where it says none)."""
    level = None if model.interval is None else model.interval.level
    return float(level) if level is not None and 0 < float(level) < 1 else _SCATTER_LEVEL


def count_frames(model: CountingModel, frames: Sequence[Any], zones: Sequence[Zone]) -> list[dict[str, Any]]:
    """Count RGB frames ``(H, W, 3)`` uint8 (or PIL images) of one size, in the frame and in each zone.

    One record per frame: ``{"count", "low", "high", "zones": {name: {"count", "low", "high"}}}``
    (``low``/``high`` only for calibrated models). Raises ZoneError when there are zones and the
    model cannot localise (checked before any frame is counted) or a zone lies outside the frames.
    Without zones any model counts (``"zones": {}``); a per-class model's record then also holds
    ``"classes": {name: {"count", "low", "high"}}`` and its ``count`` is the total.
    """
    if not zones and model.density_head is None:
        return _whole_frame_records(model, frames)
    # A detector-based model (issue 22) would branch here: its boxes' centres through
    # detections_in_zones, after check_localises lets it through.
    return count_frames_with_density(model, frames, zones)[0]


def count_frames_with_density(
    model: CountingModel, frames: Sequence[Any], zones: Sequence[Zone]
) -> tuple[list[dict[str, Any]], np.ndarray]:
    """:func:`count_frames` of a density-head model, with the ``(n, h, w)`` density maps (to draw)."""
    check_localises(model)
    if len(frames) == 0:
        return [], np.zeros((0, 0, 0))
    sizes = {_frame_size(frame) for frame in frames}
    if len(sizes) != 1:
        raise ValueError(f"count_frames takes frames of one size, got {sorted(sizes)}")
    frame_size = sizes.pop()
    weights = zone_weights(zones, frame_size, model)  # before the forward pass: a bad zone costs nothing
    prepared = [model.prepare_image(frame) for frame in frames]
    batch = model.count_batch(prepared, with_density=True)
    counts = np.asarray(batch.counts, dtype=float)
    records = density_records(model, zones, frame_size, batch.density, counts, weights, batch.routes, batch.readings)
    if batch.people is not None:
        _with_route(records, batch.people, batch.disputed, frame_size)
    return _with_familiarity(records, batch.familiarity, model), batch.density


def _with_route(
    records: list[dict[str, Any]], people: Sequence[Any], disputed: np.ndarray, frame_size: tuple[int, int]
) -> None:
    """A gated crowd model's records say what counted each frame: ``counted_by`` "detector" (with
    the ``people`` it counted: boxes ``[x1, y1, x2, y2, score]`` in the frame's pixels),
    "density" (the density head), or "density+detector" (a wide frame, the head in some tiles and
    the detector, with its ``people``, in the others); and ``disputed`` (counting.heads.crowd.sparse_gate,
    "Disputed counts")."""
    from counting.heads.crowd.sparse_gate import people_in_pixels, routes

    for record, route, boxes, doubted in zip(records, routes(people), people, disputed, strict=True):
        record["counted_by"] = route
        record["disputed"] = bool(doubted)
        if boxes is not None:
            record["people"] = [
                [round(float(value), 1) for value in box[:4]] + [round(float(box[4]), 3)]
                for box in people_in_pixels(boxes, frame_size)
            ]


def _with_familiarity(
    records: list[dict[str, Any]], familiarity: np.ndarray | None, model: CountingModel
) -> list[dict[str, Any]]:
    """Each record's ``familiarity`` and ``unfamiliar`` (counting.heads.familiarity; None for a
    model file without it), as count's rows have them."""
    from counting.heads.familiarity import familiarity_fields

    for k, record in enumerate(records):
        record.update(familiarity_fields(model, familiarity, k))
    return records


def _whole_frame_records(model: CountingModel, frames: Sequence[Any]) -> list[dict[str, Any]]:
    """Records of a model without a density map (no zones): the frame's count and interval."""
    if len(frames) == 0:
        return []
    batch = model.count_batch([model.prepare_image(frame) for frame in frames])
    counts, familiarity, low, high = np.asarray(batch.counts, dtype=float), batch.familiarity, batch.low, batch.high
    names = model.class_names
    records = []
    for k in range(len(counts)):
        if names:
            classes = {}
            for c, name in enumerate(names):
                classes[name] = {"count": float(counts[k, c])}
                if low is not None and high is not None:
                    classes[name] |= {"low": float(low[k, c]), "high": float(high[k, c])}
            records.append({"count": float(counts[k].sum()), "classes": classes, "zones": {}})
            continue
        records.append(count_fields(None, *_row(k, counts, low, high)) | {"zones": {}})
    return _with_familiarity(records, familiarity, model)


def _frame_size(frame: Any) -> tuple[int, int]:
    """``(height, width)`` of an array ``(H, W[, 3])`` or a PIL image."""
    if isinstance(frame, np.ndarray):
        return int(frame.shape[0]), int(frame.shape[1])
    width, height = frame.size  # PIL
    return int(height), int(width)


def density_records(
    model: CountingModel,
    zones: Sequence[Zone],
    frame_size: tuple[int, int],
    density: np.ndarray,
    counts: np.ndarray,
    weights: np.ndarray | None = None,
    routes: np.ndarray | None = None,
    readings: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    """The records of :func:`count_frames` from density maps the caller already has (the video
    loop draws them too) and the frame counts the model made of them (``routes``: their
    intervals' routes, ``CountingModel.interval_routes``; ``readings``: a crowd model's
    disputed counts' other reading, :func:`routed_intervals`)."""
    from counting.heads.density.regions import roi_weights

    if weights is None:
        weights = zone_weights(zones, frame_size, model)
    low, high = routed_intervals(model, counts, routes, readings)
    shares = zone_shares(density, weights, roi_weights(model.roi_mask, density.shape[1:]))
    records = []
    records_of_zones = frame_zone_records(
        zones, shares, counts, low, high, interval_level(model), counted_zones(weights)
    )
    for k, zone_record in enumerate(records_of_zones):
        records.append(count_fields(None, *_row(k, counts, low, high)) | {"zones": zone_record})
    return records


def _row(k: int, counts: np.ndarray, low: np.ndarray | None, high: np.ndarray | None) -> tuple[Any, Any, Any]:
    """Picture ``k``'s count and interval bounds (None for a model without intervals)."""
    return counts[k], None if low is None else low[k], None if high is None else high[k]


def routed_intervals(
    model: CountingModel, counts: np.ndarray, routes: np.ndarray | None, readings: np.ndarray | None = None
) -> tuple:
    """``model.intervals(counts, routes, readings)`` (``readings``: where a crowd model's count is
    disputed, the reading its interval also covers; ``CountingModel.intervals``); without them,
    ``model.intervals(counts)`` (a model-like object may take the counts alone)."""
    if routes is None and readings is None:
        return model.intervals(counts)
    return model.intervals(counts, routes) if readings is None else model.intervals(counts, routes, readings)


def frame_sizes(zones: Sequence[Zone], paths: Sequence[str]) -> dict[str, tuple[int, int]]:
    """``(height, width)`` of each readable picture, from its header; ZoneError naming a picture
    that a pixel zone misses entirely (checked before any counting: no work is wasted on it).
    Unreadable pictures are left out: counting reports them as it does without zones."""
    from counting.core.files import printable
    from counting.data.imaging import image_size

    sizes: dict[str, tuple[int, int]] = {}
    checked: set[tuple[int, int]] = set()
    for path in paths:
        try:
            size = image_size(path)
        except CountingError:
            continue
        sizes[path] = size
        if size not in checked and not all(zone.relative for zone in zones):
            for zone in zones:
                try:
                    zone.polygon(size)
                except ZoneError as error:
                    raise ZoneError(f"{printable(path)}: {error}") from None
            checked.add(size)
    return sizes


def count_paths_in_zones(
    model: CountingModel, paths: Sequence[str], zones: Sequence[Zone], **options: Any
) -> tuple[Any, dict[str, dict[str, dict[str, float]]]]:
    """Count image files in the frame and in each zone: ``(CountResult, {source: zone record})``.

    ``options`` go to :func:`counting.apply.chunks.count_in_chunks` (cache, batch_size, progress,
    weights; ``on_part`` is called with each chunk's result and its zone records). Each picture's density map is reduced to its zone shares as it is made, so memory
    stays flat in the number of pictures; pictures of different sizes each get their own weights.
    """
    from counting.apply.chunks import count_in_chunks
    from counting.heads.density.regions import roi_weights

    check_localises(model)
    paths = [str(path) for path in paths]
    sizes = frame_sizes(zones, paths)
    shares: dict[str, np.ndarray] = {}
    counted: dict[str, np.ndarray] = {}  # (zones,) bool a picture: its weights are not kept (memory flat)

    def keep_shares(source: str, density: np.ndarray) -> None:
        if source not in sizes:  # decoded although its header could not be read: refuse to guess
            raise ZoneError(f"{source}: cannot read the picture's size for its zones")
        weights = zone_weights(zones, sizes[source], model)
        shares[source] = zone_shares(density[None], weights, roi_weights(model.roi_mask, density.shape))[0]
        counted[source] = counted_zones(weights)

    def records_of(result: Any) -> dict[str, dict[str, dict[str, float]]]:
        records: dict[str, dict[str, dict[str, float]]] = {}
        for k, source in enumerate(result.sources):
            if result.ok[k]:
                low = None if result.low is None else result.low[k : k + 1]
                high = None if result.high is None else result.high[k : k + 1]
                records[source] = frame_zone_records(
                    zones,
                    shares[source][None],
                    result.counts[k : k + 1],
                    low,
                    high,
                    interval_level(model),
                    counted[source],
                )[0]
        return records

    # on_part(result, records): each chunk with its zone records as it is counted (count_in_chunks).
    on_part = options.pop("on_part", None)
    part_counted = None if on_part is None else lambda part, _: on_part(part, records_of(part))
    result = count_in_chunks(model, paths, on_density=keep_shares, on_part=part_counted, **options)
    return result, records_of(result)
