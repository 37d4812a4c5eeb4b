"""One frame -> its count, interval and zone counts (counting.apply.zones), and the annotated
picture the dashboard shows (zones and, for density models, the heat map).

This is the one place the service calls the zones API; a model without a density head counts
whole frames only (zones are refused at start-up by ``check_localises``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from counting.apply.video import annotate, overlay_label, overlay_note
from counting.apply.zone_drawing import draw_zones
from counting.apply.zone_specs import Zone, check_zone_names, load_zones, parse_zone, zones_from_entries
from counting.apply.zones import check_localises, count_frames, count_frames_with_density

if TYPE_CHECKING:  # annotations only: the model is imported where it counts
    from counting.model.counting_model import CountingModel


def camera_zones(zones_file: Any, zones_inline: Sequence[Any], where: str) -> list[Zone]:
    """The zones of a camera's config: a zones file and/or inline zones, each a
    ``NAME:x1,y1,...`` string or a ``{name, points, relative}`` table."""
    zones = [] if zones_file is None else load_zones(zones_file)
    zones += [parse_zone(item) for item in zones_inline if isinstance(item, str)]
    tables = [item for item in zones_inline if not isinstance(item, str)]
    if tables:
        zones += zones_from_entries(tables, where)
    check_zone_names(zones, where)
    return zones


class FrameCounter:
    """Counts frames with a shared model (one lock per model: its backbone is not re-entrant
    for the first call, and on 2 cores serial passes are as fast as parallel ones)."""

    def __init__(self, model: CountingModel, lock: threading.Lock, zones: Sequence[Zone] = ()) -> None:
        self.model = model
        self.lock = lock
        self.zones = list(zones)
        if self.zones:
            check_localises(model)
        head = model.density_head
        self.has_density = head is not None
        # The heat map's highest level the model allows (people a map cell), None: a frame's own peak.
        self.model_top: float | None = head.settings.get("display_max") if head is not None else None

    def count(self, rgb: np.ndarray) -> tuple[dict[str, Any], np.ndarray | None]:
        """``(record, density map or None)`` of one RGB frame: counting.apply.zones's record
        ``{"count", "low"?, "high"?, "zones": {name: {"count", "low"?, "high"?}}}`` (a per-class
        model's ``count`` is the total) and, for a density model, its map to draw."""
        with self.lock:
            if self.has_density:
                (record,), density = count_frames_with_density(self.model, [rgb], self.zones)
                return record, density[0]
            (record,) = count_frames(self.model, [rgb], self.zones)
            return record, None


def annotated_jpeg(
    bgr: np.ndarray,
    record: dict[str, Any],
    zones: Sequence[Zone],
    density: np.ndarray | None,
    display_max: float | None = None,
    quality: int = 80,
) -> bytes:
    """The frame as a JPEG with the heat map (density models; the people a crowd model's detector
    counted, for a frame its sparse gate handed over), each zone's outline and count,
    and the frame's count with its interval in the corner (video --annotated's label)."""
    from counting.heads.crowd.sparse_gate import BY_BOTH

    image = np.ascontiguousarray(bgr)
    whole = "people" in record and record.get("counted_by") != BY_BOTH
    if density is not None and not whole:
        # (A wide frame the detector counted in part: the head's heat where the head counted.)
        from counting.heads.density.heatmap import overlay_density

        image = overlay_density(image, density, display_max)
    else:
        image = image.copy()
    if "people" in record:
        # Counted by a crowd model's detector (its sparse gate): its people, not a heat map.
        from counting.apply.people_drawing import draw_people

        draw_people(image, record["people"])
    draw_zones(image, zones, record.get("zones"))
    # A per-class model's total has no interval of its own (overlay_label's rule for classes).
    label = f"count {record['count']:.1f}" if "classes" in record else overlay_label(record)
    annotate(image, label, overlay_note(record))
    ok, encoded = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:  # pragma: no cover - OpenCV encodes any uint8 BGR array
        raise ValueError("cannot encode the annotated frame")
    return encoded.tobytes()
