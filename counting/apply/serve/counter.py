"""One frame -> its count, interval and zone counts (counting.apply.zones), and the annotated
picture the dashboard shows (zones and, for density models, the heat map).

This is the one place the service calls the zones API; a model without a density head counts
whole frames only (zones are refused at start-up by ``check_localises``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from counting.apply.video import annotate, overlay_label
from counting.apply.zones import Zone, check_localises, check_zone_names, density_records, load_zones, parse_zone


def camera_zones(zones_file: Any, zones_inline: Sequence[str], where: str) -> list[Zone]:
    """The zones of a camera's config (a file and/or inline NAME:x1,y1,... strings)."""
    zones = [] if zones_file is None else load_zones(zones_file)
    zones += [parse_zone(text) for text in zones_inline]
    check_zone_names(zones, where)
    return zones


class FrameCounter:
    """Counts frames with a shared model (one lock per model: its backbone is not re-entrant
    for the first call, and on 2 cores serial passes are as fast as parallel ones)."""

    def __init__(self, model: Any, lock: threading.Lock, zones: Sequence[Zone] = ()) -> None:
        self.model = model
        self.lock = lock
        self.zones = list(zones)
        if self.zones:
            check_localises(model)
        self.has_density = getattr(model, "density_head", None) is not None

    def count(self, rgb: np.ndarray) -> tuple[dict[str, Any], np.ndarray | None]:
        """``(record, density map or None)`` of one RGB frame; the record is
        ``{"count", "low"?, "high"?, "zones": {name: {"count", "low"?, "high"?}}}``."""
        model = self.model
        with self.lock:
            prepared = model.prepare_image(rgb)
            if self.has_density:
                density = model.density_maps([prepared])
                counts = np.asarray(model.count_density(density), dtype=float)
            else:
                density = None
                counts = np.asarray(model.count_prepared([prepared]), dtype=float)
        if model.class_names:
            counts = counts.sum(axis=-1)  # a per-class model: the service shows the total
            record: dict[str, Any] = {"count": float(counts[0]), "zones": {}}
            return record, None
        if density is not None and self.zones:
            record = density_records(model, self.zones, tuple(rgb.shape[:2]), density, counts)[0]
        else:
            low, high = model.intervals(counts)
            record = {"count": float(counts[0]), "zones": {}}
            if low is not None and high is not None:
                record["low"], record["high"] = float(low[0]), float(high[0])
        return record, (density[0] if density is not None else None)


def annotated_jpeg(
    bgr: np.ndarray,
    record: dict[str, Any],
    zones: Sequence[Zone],
    density: np.ndarray | None,
    display_max: float | None = None,
    quality: int = 80,
) -> bytes:
    """The frame as a JPEG with the heat map (density models), each zone's outline and count,
    and the frame's count with its interval in the corner (video --annotated's label)."""
    image = np.ascontiguousarray(bgr)
    if density is not None:
        from counting.heads.density.heatmap import overlay_density

        image = overlay_density(image, density, display_max)
    else:
        image = image.copy()
    height, width = image.shape[:2]
    scale = max(0.5, height / 480.0)
    thickness = max(1, int(round(2 * scale)))
    for zone in zones:
        polygon = zone.polygon((height, width))
        points = np.asarray(polygon.exterior.coords, dtype=np.float64)
        cv2.polylines(image, [np.round(points).astype(np.int32)], True, (255, 255, 255), thickness + 2, cv2.LINE_AA)
        cv2.polylines(image, [np.round(points).astype(np.int32)], True, (0, 200, 0), thickness, cv2.LINE_AA)
        entry = record.get("zones", {}).get(zone.name)
        label = zone.name if entry is None else f"{zone.name} {entry['count']:.1f}"
        x, y = polygon.representative_point().coords[0]
        (text_w, text_h), baseline = cv2.getTextSize(label, cv2.FONT_HERSHEY_SIMPLEX, 0.8 * scale, thickness)
        origin = (int(x - text_w / 2), int(y + text_h / 2))
        pad = int(5 * scale)
        corner = (origin[0] - pad, origin[1] - text_h - pad)
        cv2.rectangle(image, corner, (origin[0] + text_w + pad, origin[1] + baseline + pad), (0, 90, 0), -1)
        cv2.putText(
            image, label, origin, cv2.FONT_HERSHEY_SIMPLEX, 0.8 * scale, (255, 255, 255), thickness, cv2.LINE_AA
        )
    annotate(image, overlay_label(record))
    ok, encoded = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:  # pragma: no cover - OpenCV encodes any uint8 BGR array
        raise ValueError("cannot encode the annotated frame")
    return encoded.tobytes()
