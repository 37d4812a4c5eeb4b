"""Zones drawn on a frame: each polygon's outline and a label with its count (and interval).

Used by ``video --annotated`` over the density heat map, and by anything else that shows an
annotated frame (``counting serve``'s latest frame); OpenCV's BGR uint8 images.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np

from counting.apply.zones import Zone

__all__ = ["ZONE_COLOURS", "draw_zones", "zone_label"]

# Distinct BGR colours that stay readable over the JET heat map (no pure blue, red or yellow).
ZONE_COLOURS = ((255, 255, 255), (255, 0, 255), (0, 255, 0), (255, 255, 0), (0, 128, 255), (200, 200, 200))


def zone_label(name: str, entry: dict[str, float] | None) -> str:
    """``door 12.3 [10-15]``: the zone's count, and its interval rounded outwards (the drawn
    interval holds the drawn count whenever the record's does)."""
    if entry is None:
        return name
    text = f"{name} {entry['count']:.1f}"
    if "low" in entry and "high" in entry:
        text += f" [{math.floor(entry['low']):d}-{math.ceil(entry['high']):d}]"
    return text


def draw_zones(
    image: np.ndarray, zones: Sequence[Zone], counts: dict[str, dict[str, float]] | None = None
) -> np.ndarray:
    """Draw ``zones`` on ``image`` (``(H, W, 3)`` uint8 BGR, drawn in place and returned), each
    with the label of its entry in ``counts`` (``{name: {"count", "low", "high"}}``, a record's
    ``"zones"``) inside it."""
    height, width = image.shape[:2]
    scale = max(0.4, height / 800.0)
    thickness = max(1, int(round(2 * scale)))
    for index, zone in enumerate(zones):
        colour = ZONE_COLOURS[index % len(ZONE_COLOURS)]
        polygon = zone.polygon((height, width))
        for part in getattr(polygon, "geoms", [polygon]):  # clipping can split a zone in pieces
            outline = np.round(np.asarray(part.exterior.coords)).astype(np.int32)
            cv2.polylines(image, [outline], isClosed=True, color=colour, thickness=thickness, lineType=cv2.LINE_AA)
        text = zone_label(zone.name, None if counts is None else counts.get(zone.name))
        (text_width, text_height), baseline = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, 0.6 * scale, thickness)
        # Centred on a point inside the zone (the centroid when it is inside): away from the
        # frame's corner, where the frame's own count is drawn.
        centre = polygon.centroid if polygon.contains(polygon.centroid) else polygon.representative_point()
        pad = int(4 * scale)
        box_width, box_height = text_width + 2 * pad, text_height + baseline + 2 * pad
        x = int(min(max(centre.x - box_width / 2, 0), max(width - box_width, 0)))
        y = int(min(max(centre.y - box_height / 2, 0), max(height - box_height, 0)))
        cv2.rectangle(image, (x, y), (x + box_width, y + box_height), (0, 0, 0), -1)
        cv2.putText(
            image,
            text,
            (x + pad, y + pad + text_height),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.6 * scale,
            colour,
            thickness,
            cv2.LINE_AA,
        )
    return image
